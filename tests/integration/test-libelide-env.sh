#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# libelide's start-up decisions and its one environment variable: a bad
# ELIDE pair is reported once and ignored while the program runs on; glibc's
# own elision enabled in GLIBC_TUNABLES makes libelide stand aside (no double
# elision); no usable RTM, mode=off and a bad ELIDE_SIM_ABORT each say why.
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
run ELIDE=verbose=1,report=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.malloc.check=0:glibc.elision.enable=1 ||
	fail "program failed with glibc elision enabled"
has "passing all locks through to glibc: GLIBC_TUNABLES enables glibc's own elision" &&
	ok "glibc's elision enabled: libelide stands aside and says why" || fail "no double-elision refusal: $(cat "$tmp/err")"
run ELIDE=verbose=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=0 || fail "program failed"
has "eliding with RTM" && ok "glibc.elision.enable=0: libelide elides" || fail "elision off with enable=0: $(cat "$tmp/err")"
# glibc reads the value with strtoul's base rules (_dl_strtoul): octal and
# hex spellings of 1 enable its elision too, and of 0 do not.
for v in 01 0x1 0X1; do
	run ELIDE=verbose=1 ELIDE_SIM_ABORT=0x6 GLIBC_TUNABLES=glibc.elision.enable=$v || fail "program failed with enable=$v"
	has "passing all locks through to glibc: GLIBC_TUNABLES enables glibc's own elision" &&
		ok "glibc.elision.enable=$v is glibc's 1: libelide stands aside" ||
		fail "glibc.elision.enable=$v not recognised as enabled: $(cat "$tmp/err")"
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

run ELIDE=verbose=1 ELIDE_SIM_ABORT=lots || fail "program failed with a bad ELIDE_SIM_ABORT"
has "ELIDE_SIM_ABORT: invalid abort status 'lots'; ignored" && ok "bad ELIDE_SIM_ABORT reported and ignored" ||
	fail "bad ELIDE_SIM_ABORT: $(cat "$tmp/err")"

tl_finish libelide-environment
