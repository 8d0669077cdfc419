#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The bash completion of elidectl (completion/elidectl): it registers with
# `complete -p`, completes commands, options, sort keys, modes, and the
# pids and lock names of a live libelide process, read through elidectl
# itself (here from segments, with --runtime-dir passed on by the script).
set -u

: "${top_builddir:?run me through make check}"
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
comp="$srcdir/completion/elidectl"
mkseg="$top_builddir/tests/integration/make-segment"
[ -f "$comp" ] || { echo "FAIL: $comp missing" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elidectl-comp.XXXXXX") || exit 1
sleep 300 &
sp=$!
trap 'kill $sp 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
"$mkseg" "$tmp/run" "$sp" >/dev/null || { echo "FAIL: make-segment" >&2; exit 1; }
# No daemon for this test: nothing answers on this bus.
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$tmp/no-bus
export PATH="$top_builddir/elidectl:$PATH"

failures=0
# complete WORD...: the completions of the last word.
complete_words() {
	bash --norc -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _elidectl; printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$comp" "$@" | sort
}
check() {
	local want=$1 got
	shift
	got=$(complete_words "$@" | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$want" ]; then echo "ok: '$*' -> $got"; else echo "FAIL: '$*' -> '$got', want '$want'" >&2; failures=$((failures + 1)); fi
}

reg=$(bash --norc -c 'source "$1"; complete -p elidectl' _ "$comp")
[ "$reg" = "complete -F _elidectl elidectl" ] && echo "ok: complete -p: $reg" || { echo "FAIL: complete -p: $reg" >&2; failures=$((failures + 1)); }

check "set show status" elidectl s
check "check-config" elidectl ch
check "reload reset run" elidectl r
check "--no-legend --no-pager" elidectl --no-
check "--json --json=pretty --json=short" elidectl list --js
check "capacity commits conflict cycles" elidectl show 1 --sort c
check "aborts acquired" elidectl top --sort a
check "$sp" elidectl --runtime-dir "$tmp/run" show ""
check "$sp" elidectl --runtime-dir "$tmp/run" set ""
check "adaptive" elidectl set "$sp" a
check "cache_lock table_lock" elidectl --runtime-dir "$tmp/run" set "$sp" --lock ""
check "table_lock" elidectl --runtime-dir "$tmp/run" reset "$sp" --lock t
check "off on" elidectl run --mode o
check "-- --mode" elidectl run --

[ $failures -eq 0 ] || exit 1
echo "all completion checks passed"
