#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The bash completion of elidectl (completion/elidectl): it registers with
# `complete -p`, completes commands, options, --json=MODE (with and
# without '=' in COMP_WORDBREAKS), -o's columns (top PID's its locks'),
# sort keys, modes, and the
# pids and lock names of a live libelide process, read through elidectl
# itself (here from segments, with --runtime-dir passed on by the script).
# The zsh completion (completion/_elidectl) must load: compinit registers
# it for elidectl and its function parses; the fish one (elidectl.fish)
# must parse (fish -n) and complete commands, --json= and columns through
# `complete -C`.  Without zsh or fish those parts skip, loudly.
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
check "learned list" elidectl l
check "forget" elidectl f
check "AGE" elidectl learned -o AG
check "--no-color --no-legend --no-pager" elidectl --no-
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
# --json=<Tab>: one word when '=' does not break words, three when it does.
# complete_wb BREAKS WORD...: as complete_words, with COMP_WORDBREAKS=BREAKS.
complete_wb() {
	bash --norc -c 'COMP_WORDBREAKS=$1; source "$2"; shift 2; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _elidectl; printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$@" | sort | tr '\n' ' ' | sed 's/ $//'
}
got=$(complete_wb " " "$comp" elidectl --json=)
[ "$got" = "--json=pretty --json=short" ] && echo "ok: --json=<Tab> as one word -> $got" ||
	{ echo "FAIL: --json=<Tab> as one word -> '$got'" >&2; failures=$((failures + 1)); }
got=$(complete_wb " =" "$comp" elidectl --json=)
[ "$got" = "pretty short" ] && echo "ok: --json=<Tab>, '=' a word break -> $got" ||
	{ echo "FAIL: --json=<Tab> with '=' breaking -> '$got'" >&2; failures=$((failures + 1)); }
got=$(complete_wb " =" "$comp" elidectl --json = p)
[ "$got" = "pretty" ] && echo "ok: --json=p<Tab> split at '=' -> $got" ||
	{ echo "FAIL: --json=p<Tab> split -> '$got'" >&2; failures=$((failures + 1)); }
check "show" elidectl --json = short sh
check "--no-color" elidectl --no-c
check "--full" elidectl --fu
check "LOCK" elidectl show 1 -o LO
check "LOCK,CYCLES-LOST" elidectl show 1 -o LOCK,CY
check "EXE/UNIT" elidectl top -o EXE
# top PID: its pid, its locks' columns and sort keys; show --history.
check "$sp" elidectl --runtime-dir "$tmp/run" top ""
check "TREND" elidectl top "$sp" -o TR
check "WAIT/s" elidectl top "$sp" -o WA
check "wait" elidectl top "$sp" --sort w
check "wait" elidectl show "$sp" --sort w
check "--history" elidectl show "$sp" --hi
check "--force" elidectl enable --fo

# ---- zsh ----------------------------------------------------------------------
zcomp="$srcdir/completion/_elidectl"
if command -v zsh >/dev/null; then
	# -D: no dump file (compinit's -d would replace the file it names).
	got=$(HOME=$tmp ZDOTDIR=$tmp zsh -fc 'fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -D; print -r -- $_comps[elidectl]; autoload +X _elidectl && whence -w _elidectl' _ "$srcdir/completion" 2>&1)
	if [ "$got" = "$(printf '_elidectl
_elidectl: function')" ]; then
		echo "ok: zsh: compinit registers _elidectl for elidectl, and it loads"
	else
		echo "FAIL: zsh: $got" >&2
		failures=$((failures + 1))
	fi
else
	echo "SKIP (loudly): zsh is not installed: $zcomp is NOT tested" >&2
fi

# ---- fish ---------------------------------------------------------------------
fcomp="$srcdir/completion/elidectl.fish"
fcheck() {
	local want=$1 got
	got=$(HOME=$tmp XDG_CONFIG_HOME=$tmp/config XDG_DATA_HOME=$tmp/data fish --no-config -c "source '$fcomp'; complete -C'$2'" 2>&1 |
		cut -f1 | sort | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$want" ]; then echo "ok: fish '$2' -> $got"; else echo "FAIL: fish '$2' -> '$got', want '$want'" >&2; failures=$((failures + 1)); fi
}
if command -v fish >/dev/null; then
	HOME=$tmp fish -n "$fcomp" && echo "ok: fish -n $fcomp" || { echo "FAIL: fish -n $fcomp" >&2; failures=$((failures + 1)); }
	fcheck "set show status" "elidectl s"
	fcheck "learned list" "elidectl l"
	fcheck "--json=pretty --json=short" "elidectl --json="
	fcheck "LOCK,CYCLES-LOST" "elidectl show -o LOCK,CY"
	fcheck "$sp" "elidectl --runtime-dir $tmp/run show "
	fcheck "TREND" "elidectl top $sp -o TR"
	fcheck "--history" "elidectl show $sp --hist"
else
	echo "SKIP (loudly): fish is not installed: $fcomp is NOT tested" >&2
fi

[ $failures -eq 0 ] || exit 1
echo "all completion checks passed"
