#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# libelide's start-up decisions and its one environment variable: a bad
# ELIDE pair is reported once and ignored while the program runs on; glibc's
# own elision enabled in GLIBC_TUNABLES makes libelide stand aside (no double
# elision; up to glibc 2.42, 2.43 has none); no usable RTM, mode=off and a bad ELIDE_SIM_ABORT each say why.
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup libelide-env
export ELIDE_RUNTIME_DIR="$tmp"

# run ENV... : the workload for 1 s under libelide; stderr in $tmp/err.
run() {
	env -u ELIDE -u ELIDE_SIM_ABORT -u ELIDE_FAKE_NO_RTM -u GLIBC_TUNABLES \
		"$@" LD_PRELOAD="$preload" "$workload" --seconds 1 >/dev/null 2>"$tmp/err"
}
has() { grep -q -- "$1" "$tmp/err"; }
count() { grep -c -- "$1" "$tmp/err"; }

run ELIDE="bogus=1,retries=99,report=1,sample=3" || fail "the program did not run on after bad options"
n=$(count "^libelide: ELIDE: invalid option")
[ "$n" = 3 ] && ok "three bad pairs, three messages" || fail "want 3 'invalid option' lines, got $n: $(cat "$tmp/err")"
has "invalid option 'bogus=1': unknown option" && has "'retries=99': value out of range 0..64" &&
	has "'sample=3'" && ok "each message names the pair and why" || fail "messages: $(cat "$tmp/err")"
has "^libelide: report for pid" && ok "the good pair (report=1) still applied" || fail "report=1 lost among bad pairs"

# Simulated aborts stand in for working RTM, so the next check is reached.
# glibc 2.43 removed its elision: the tunable left in GLIBC_TUNABLES does
# nothing there, and libelide elides.
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
if [ -n "$glibc" ] && [ "$(printf '%s\n' 2.43 "$glibc" | sort -V | head -n1)" = 2.43 ]; then
	glibc_elides=no
	note "glibc $glibc has no elision of its own: glibc.elision.enable=1 does nothing, libelide elides"
else
	glibc_elides=yes
fi
# glibc_elision_on WHAT: the checks for a GLIBC_TUNABLES that enables it.
glibc_elision_on() {
	if [ "$glibc_elides" = yes ]; then
		has "passing all locks through to glibc: GLIBC_TUNABLES enables glibc's own elision" &&
			ok "$1: libelide stands aside and says why" || fail "$1: no double-elision refusal: $(cat "$tmp/err")"
	else
		has "eliding with RTM" && ! has "GLIBC_TUNABLES enables glibc's own elision" &&
			ok "$1 on glibc $glibc: libelide elides" || fail "$1 on glibc $glibc: $(cat "$tmp/err")"
	fi
}
run ELIDE=verbose=1,report=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.malloc.check=0:glibc.elision.enable=1 ||
	fail "program failed with glibc elision enabled"
glibc_elision_on "glibc's elision enabled"
run ELIDE=verbose=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=0 || fail "program failed"
has "eliding with RTM" && ok "glibc.elision.enable=0: libelide elides" || fail "elision off with enable=0: $(cat "$tmp/err")"
# glibc reads the value with strtoul's base rules (_dl_strtoul): octal and
# hex spellings of 1 enable its elision too, and of 0 do not.
for v in 01 0x1 0X1; do
	run ELIDE=verbose=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=$v || fail "program failed with enable=$v"
	glibc_elision_on "glibc.elision.enable=$v (glibc's 1)"
done
for v in 00 0x0; do
	run ELIDE=verbose=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=$v || fail "program failed with enable=$v"
	has "eliding with RTM" && ok "glibc.elision.enable=$v is glibc's 0: libelide elides" ||
		fail "glibc.elision.enable=$v taken for enabled: $(cat "$tmp/err")"
done

run ELIDE=verbose=1,report=1 ELIDE_FAKE_NO_RTM=1 || fail "program failed without RTM"
has "no usable RTM: disabled by ELIDE_FAKE_NO_RTM" && has "elision: off: no usable RTM" &&
	ok "no RTM: pass-through, reason in the start-up line and the report" || fail "no-RTM reason: $(cat "$tmp/err")"

run ELIDE=mode=off,report=1 || fail "program failed with mode=off"
has "elision: off: mode=off" && ok "mode=off: the report says so" || fail "mode=off report: $(cat "$tmp/err")"

# mode=off is the kill switch: the own paths too, and the start-up lines say so.
run ELIDE=mode=off,verbose=1 || fail "program failed with mode=off"
# (The reason may be an earlier one: a sanitizer's interceptors come first.)
has "default mutexes are locked by glibc's functions: " &&
	has "rwlocks are read-locked by glibc's functions: " && ! has "by libelide with glibc's protocol" &&
	ok "mode=off: every call goes to glibc, the own paths included, and verbose=1 says so" ||
	fail "mode=off verbose lines: $(cat "$tmp/err")"

# report=PATH: for programs that close stderr before exit (xz, sort).
env -u ELIDE -u ELIDE_SIM_ABORT -u ELIDE_FAKE_NO_RTM -u GLIBC_TUNABLES ELIDE="report=$tmp/report" \
	LD_PRELOAD="$preload" "$workload" --seconds 1 >/dev/null 2>&- || fail "program failed with report=PATH"
grep -q "^libelide: report for pid" "$tmp/report" 2>/dev/null &&
	ok "report=PATH: the report reaches the file with stderr closed" || fail "report=PATH: no report in $tmp/report"
env -u ELIDE -u ELIDE_SIM_ABORT -u ELIDE_FAKE_NO_RTM -u GLIBC_TUNABLES ELIDE="report=$tmp/report" \
	LD_PRELOAD="$preload" "$workload" --seconds 1 >/dev/null 2>&- || fail "program failed with report=PATH"
n=$(grep -c "^libelide: report for pid" "$tmp/report")
[ "$n" = 2 ] && ok "report=PATH appends" || fail "report=PATH: want 2 reports in the file, got $n"
run ELIDE=report=relative/path || fail "program failed with a relative report path"
has "invalid option 'report=relative/path': must be 0, 1 or an absolute path" &&
	ok "report=relative/path refused with the reason" || fail "relative report path: $(cat "$tmp/err")"
run ELIDE="report=$tmp/no-such-dir/report" || fail "program failed with an unwritable report path"
has "report=$tmp/no-such-dir/report: cannot open" && ok "an unwritable report path is said at exit" ||
	fail "unwritable report path: $(cat "$tmp/err")"

run ELIDE=verbose=1 ELIDE_SIM_ABORT=lots || fail "program failed with a bad ELIDE_SIM_ABORT"
has "ELIDE_SIM_ABORT: invalid abort status 'lots'; ignored" && ok "bad ELIDE_SIM_ABORT reported and ignored" ||
	fail "bad ELIDE_SIM_ABORT: $(cat "$tmp/err")"

tl_finish libelide-environment
