#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/apps/run.sh's judgement of the goals (issue 35), on made-up runs
# read back with --from: the median of the rounds' ratios, its 95% interval
# (order statistics k and n+1-k), and met / missed / not resolved.  What
# bench/RESULTS.md concludes about real programs rests on this arithmetic;
# nothing here is timed or run under libelide.
# ok() only prints: "A && ok ... || fail ..." is an if-then-else here.
# shellcheck disable=SC2015
set -u

. "${top_srcdir:-$(dirname "$0")/../..}/tests/integration/testlib.sh"
tl_setup bench-judge
run_sh="$top_srcdir/bench/apps/run.sh"

# row PROGRAM THREADS ROUND CONFIG OPS_PER_SEC P99 CPU_US_PER_OP MAX
row() {
	printf '%s\tw\t%s\t%s\t%s\t1000\t1.0\t%s\t10\t%s\t20\t0.01\t%s\t%s\n' "$@"
}
header() {
	printf 'program\tworkload\tthreads\tround\tconfig\tops\tseconds\tops_per_sec\tp50_us\tp99_us\tp999_us\tcpu_s\tcpu_us_per_op\tmax_us\n'
}

# 21 rounds.  2 threads: the default equals plain in every round (every goal
# met).  8 threads: throughput 0.9x in every round (missed), p99 spread
# over 0.90-1.20 (not resolved), max and CPU equal (met).  off at 8
# threads: throughput ratios 0.1, 0.2 ... 2.1 in a shuffled order, whose
# median is 1.1 and whose interval runs from the 6th to the 16th: 0.6-1.6.
{
	header
	for r in $(seq 1 21); do
		row memcached 2 "$r" plain 1000 100 10 500
		row memcached 2 "$r" default 1000 100 10 500
		row memcached 8 "$r" plain 1000 100 10 500
		row memcached 8 "$r" default 900 "$((90 + (r * 7) % 31))" 10 500
		row memcached 8 "$r" off "$(((r * 8) % 21 + 1))00" 100 10 500
	done
} >"$tmp/runs.tsv"

out=$("$run_sh" --from "$tmp/runs.tsv" 2>"$tmp/err") || fail "--from exited with $?: $(cat "$tmp/err")"
line() { grep -F -- "$1" <<<"$out" | head -n 1; }

r=$(line "| w | 2 | default |")
[[ $r == *"| 1.000 (1.00-1.00) | 1.000 (1.00-1.00) | 1.000 (1.00-1.00) | 1.000 (1.00-1.00) |" ]] &&
	ok "equal to plain in every round: every goal met, unmarked" || fail "2 threads, default: '$r'"
r=$(line "| w | 8 | default |")
[[ $r == *"| **0.900 (0.90-0.90)** |"* ]] && ok "0.9x in every round: throughput missed (bold)" ||
	fail "8 threads, default throughput: '$r'"
[[ $r =~ \|\ \*1\.[0-9]{3}\ \(0\.9[0-9]-1\.1[0-9]\)\*\ \| ]] &&
	ok "p99 spread across the goal: not resolved (italics)" || fail "8 threads, default p99: '$r'"
r=$(line "| w | 8 | off |")
[[ $r == *"| 1.100 (0.60-1.60) |"* ]] && ok "21 rounds: median 11th, interval 6th-16th" ||
	fail "8 threads, off (wanted 1.100 (0.60-1.60)): '$r'"

missed=$(sed -n '/^Missed:/,/^Not resolved/p' <<<"$out")
unresolved=$(sed -n '/^Not resolved/,$p' <<<"$out")
grep -q "memcached w, 8 threads: default throughput 0.900x plain, 95% interval 0.900-0.900 (goal >= 0.98)" <<<"$missed" &&
	ok "the miss is listed with its interval" || fail "no miss listed: $missed"
grep -q "8 threads: default p99 .* (goal <= 1.05)" <<<"$unresolved" && ok "the unresolved p99 is listed" ||
	fail "no unresolved p99 listed: $unresolved"
[[ $(grep -c '^- ' <<<"$missed$unresolved") -eq 2 ]] && ok "nothing else is listed (off is never judged)" ||
	fail "listed: $missed $unresolved"

# Fewer than 6 rounds: no interval, the median decides.
head -n $((1 + 5 * 5)) "$tmp/runs.tsv" >"$tmp/few.tsv"
out=$("$run_sh" --from "$tmp/few.tsv" --configs "plain default" 2>"$tmp/err") || fail "--from (5 rounds) exited with $?: $(cat "$tmp/err")"
r=$(line "| w | 8 | default |")
[[ $r == *"| **0.900** | 1."*" | 1.000 | 1.000 |" ]] && ok "5 rounds: medians without intervals" ||
	fail "5 rounds, 8 threads: '$r'"
grep -q "default throughput 0.900x plain, the median of 5 rounds (goal >= 0.98)" <<<"$out" &&
	ok "5 rounds: the miss says it is a median" || fail "5 rounds: $(sed -n '/^Missed:/,$p' <<<"$out")"
[[ $out != *"| off |"* ]] && ok "--configs selects from the file" || fail "off shown though not selected"

# Two files pooled: 5 + 5 rounds, an interval (2nd to 9th of 10).
out=$("$run_sh" --from "$tmp/few.tsv" --from "$tmp/few.tsv" --configs "plain default" 2>"$tmp/err") ||
	fail "--from twice exited with $?: $(cat "$tmp/err")"
r=$(line "| w | 8 | default |")
[[ $r == *"| **0.900 (0.90-0.90)** |"* ]] && ok "two files of 5 rounds pooled: 10 rounds, an interval" ||
	fail "pooled, 8 threads: '$r'"

# A configuration that ran two builds of libelide: its rounds are not one sample.
{
	header | sed 's/$/\tlibelide/'
	for r in 1 2 3; do
		row memcached 2 "$r" plain 1000 100 10 500 | sed 's/$/\t-/'
		row memcached 2 "$r" default 1000 100 10 500 | sed 's/$/\taaaaaaaaaaaa/'
	done
} >"$tmp/build-a.tsv"
sed 's/aaaaaaaaaaaa$/bbbbbbbbbbbb/' "$tmp/build-a.tsv" >"$tmp/build-b.tsv"
"$run_sh" --from "$tmp/build-a.tsv" --from "$tmp/build-a.tsv" >/dev/null 2>"$tmp/err" &&
	ok "one build in both files: pooled" || fail "one build refused: $(cat "$tmp/err")"
if "$run_sh" --from "$tmp/build-a.tsv" --from "$tmp/build-b.tsv" >/dev/null 2>"$tmp/err"; then
	fail "two builds of libelide were pooled"
else
	grep -q "default: aaaaaaaaaaaa bbbbbbbbbbbb" "$tmp/err" && ok "two builds refused: $(cat "$tmp/err")" ||
		fail "two builds refused without naming them: $(cat "$tmp/err")"
fi

# Every goal met.
grep -v $'\t8\t' "$tmp/runs.tsv" >"$tmp/met.tsv"
out=$("$run_sh" --from "$tmp/met.tsv" 2>"$tmp/err") || fail "--from (all met) exited with $?: $(cat "$tmp/err")"
grep -q '^Every goal is met\.$' <<<"$out" && ok "all met: said so" || fail "all met: $(tail -n 5 <<<"$out")"

# Not a runs.tsv: refused, with the reason.
echo "hello" >"$tmp/bad.tsv"
if "$run_sh" --from "$tmp/bad.tsv" >/dev/null 2>"$tmp/err"; then
	fail "a file without the header was accepted"
else
	grep -q "is not a runs.tsv of this script" "$tmp/err" && ok "a foreign file is refused: $(cat "$tmp/err")" ||
		fail "refusal without a reason: $(cat "$tmp/err")"
fi

# --trace: waits.awk reads a tracefs trace (record-tgid), here made up:
# process 100 (threads 100 and 101, one named with spaces and dashes)
# beside process 200, whose events must not count.
cat >"$tmp/trace.txt" <<'TRACE'
# tracer: nop
#
       db_bench-100     (    100) [000] ..... 1.000000: sys_futex(uaddr: 0x7f00000010, op: 0x80, val: 0x2, utime: 0, uaddr2: 0, val3: 0)
  my-thread x-101     (    100) [001] ..... 1.000100: sys_futex(uaddr: 0x7f00000010, op: 0x81, val: 0x1, utime: 0, uaddr2: 0, val3: 0)
  my-thread x-101     (    100) [001] ..... 1.000101: sys_futex -> 0x1
       db_bench-100     (    100) [000] ..... 1.000500: sys_futex -> 0x0
       db_bench-100     (    100) [000] ..... 1.100000: sys_futex(uaddr: 0x7f00000020, op: 0x0, val: 0x2, utime: 0, uaddr2: 0, val3: 0)
          other-200     (    200) [001] ..... 1.100001: sys_futex(uaddr: 0x5500000020, op: 0x80, val: 0x2, utime: 0, uaddr2: 0, val3: 0)
          other-200     (    200) [001] ..... 1.190001: sys_futex -> 0x0
       db_bench-100     (    100) [000] ..... 1.102000: sys_futex -> 0x0
  my-thread x-101     (    100) [001] ..... 1.200000: sys_futex(uaddr: 0x7f00000030, op: 0x89, val: 0x2, utime: 0, uaddr2: 0, val3: 0xffffffff)
  my-thread x-101     (    100) [001] ..... 1.300000: sys_futex -> 0x0
  my-thread x-101     (    100) [001] ..... 1.400000: sys_futex(uaddr: 0x7f00000040, op: 0x80, val: 0x3, utime: 0, uaddr2: 0, val3: 0)
  my-thread x-101     (    100) [001] ..... 1.500000: sys_futex -> 0x0
  my-thread x-101     (    100) [001] d..2. 2.000000: sched_switch: prev_comm=my-thread x prev_pid=101 prev_prio=120 prev_state=R+ ==> next_comm=other next_pid=200 next_prio=120
          other-200     (    200) [001] d..2. 2.001000: sched_switch: prev_comm=other prev_pid=200 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
         <idle>-0       (      0) [001] d..2. 2.004000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my-thread x next_pid=101 next_prio=120
       db_bench-100     (    100) [000] d..2. 3.000000: sched_switch: prev_comm=db_bench prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
         <idle>-0       (      0) [000] d..2. 3.900000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=db_bench next_pid=100 next_prio=120
          other-200     (    200) [001] d..2. 4.000000: sched_switch: prev_comm=other prev_pid=200 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
         <idle>-0       (      0) [001] d..2. 4.500000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=other next_pid=200 next_prio=120
TRACE
# Two mutex waits (private 0.5 ms, shared 2 ms); not the wake, the
# FUTEX_WAIT_BITSET or the word of 3; the 4 ms preemption of thread 101,
# not its sleep nor process 200's preemptions.
for awk_bin in awk mawk gawk; do
	command -v "$awk_bin" >/dev/null || continue
	r=$("$awk_bin" -v tgid=100 -f "$top_srcdir/bench/apps/waits.awk" "$tmp/trace.txt")
	[[ $r == "2 2500 2000 4000" ]] && ok "waits.awk ($awk_bin): 2 mutex waits, 2500 us, longest 2000 us, preemption 4000 us" ||
		fail "waits.awk ($awk_bin): '$r' (wanted '2 2500 2000 4000')"
done
awk -v tgid=300 -f "$top_srcdir/bench/apps/waits.awk" "$tmp/trace.txt" >/dev/null &&
	fail "waits.awk: a process with no event in the trace succeeded" || ok "waits.awk: no event of the process: exit 1"

# A traced run's table of waits: medians and ratios to plain, not judged;
# pooled with an untraced file (15 columns or fewer), which adds none.
{
	header | sed 's/$/\tlibelide\tlock_sleeps\tlock_sleep_us\tlock_sleep_max_us\tpreempt_max_us/'
	for r in $(seq 1 7); do
		row rocksdb 8 "$r" plain 1000 100 10 500 | sed 's/$/\t-\t100\t5000\t20000\t24000/'
		row rocksdb 8 "$r" default 1000 100 10 500 | sed 's/$/\taaaaaaaaaaaa\t10\t4000\t30000\t24000/'
	done
} >"$tmp/traced.tsv"
out=$("$run_sh" --from "$tmp/traced.tsv" --from "$tmp/build-a.tsv" 2>"$tmp/err") ||
	fail "--from (traced and untraced) exited with $?: $(cat "$tmp/err")"
r=$(line "| w | 8 | default | 10 |")
[[ $r == "| w | 8 | default | 10 | 30.0 | 1.500 (1.50-1.50) | 24.0 | 1.000 (1.00-1.00) |" ]] &&
	ok "--trace table: sleeps/s, longest sleep and its ratio, preemption" || fail "--trace table: '$r'"
[[ $(line "| w | 8 | plain | 100 |") == "| w | 8 | plain | 100 | 20.0 | - | 24.0 | - |" ]] &&
	ok "--trace table: plain's row" || fail "--trace table, plain: '$(line "| w | 8 | plain | 100 |")'"
[[ $(grep -c '^Waits of' <<<"$out") -eq 1 ]] && ok "--trace table: none for the untraced program" ||
	fail "waits tables: $(grep -c '^Waits of' <<<"$out") (wanted 1, rocksdb's): $out"
grep -q "longest mutex wait" <<<"$(sed -n '/^Missed:/,$p' <<<"$out")" &&
	fail "the waits were judged" || ok "the waits are shown, not judged"
tl_finish bench-judge
