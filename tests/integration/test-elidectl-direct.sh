#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test-elidectl-direct.sh - elidectl list/show reading segments directly.
#
# Runs tests/integration/workload-contended under libelide with a private
# runtime directory and checks what elidectl reports about it: the process
# in `list`, its locks named from the symbol tables in `show --json`, abort
# or commit counts, --sort, --max, the exit statuses, and that a segment
# disappears (and the process from the list) when the process exits.
#
# ELIDE_SIM_ABORT=0x6 is always set: libelide honours it only without
# usable RTM, where it makes every transaction abort as a conflict; with
# RTM the workload commits for real.  The JSON's rtm_usable says which.
#
# Environment (from AM_TESTS_ENVIRONMENT): top_builddir, ELIDE_SANITIZERS, CC.
# Exit status: 0 pass, 1 fail, 77 skip.

if [ -z "${top_builddir:-}" ]; then
	echo "test-elidectl-direct.sh: top_builddir is not set (run me through make check)" >&2
	exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 is not installed (needed to parse elidectl's JSON)" >&2
	exit 77
fi

elidectl=$top_builddir/elidectl/elidectl
workload=$top_builddir/tests/integration/workload-contended
lib=$top_builddir/libelide/.libs/libelide.so
for f in "$elidectl" "$workload" "$lib"; do
	if [ ! -x "$f" ] && [ ! -f "$f" ]; then
		echo "FAIL: $f not built" >&2
		exit 1
	fi
done

preload=$lib
if [ "${ELIDE_SANITIZERS:-no}" = yes ]; then
	asan=$(${CC:-cc} -print-file-name=libasan.so)
	case "$asan" in
	/*) preload="$asan $lib" ;;
	*) echo "FAIL: cannot locate libasan.so with '${CC:-cc}'" >&2; exit 1 ;;
	esac
	ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	export ASAN_OPTIONS
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test-elidectl.XXXXXX") || exit 1
rundir=$work/run
mkdir "$rundir" || exit 1
pid=
pid2=
spid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	[ -n "$pid2" ] && kill -KILL "$pid2" 2>/dev/null
	[ -n "$spid" ] && kill -KILL "$spid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

ELIDE_RUNTIME_DIR=$rundir
export ELIDE_RUNTIME_DIR
unset ELIDE

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
ok() {
	echo "ok: $*"
}

# Starts the workload in the background: sets $started to its pid once it
# printed "ready" and its segment exists.
start_workload() {
	out=$1
	env LD_PRELOAD="$preload" ELIDE_SIM_ABORT=0x6 "$workload" --seconds 60 >"$out" 2>"$out.err" &
	started=$!
	i=0
	while [ $i -lt 200 ]; do
		if grep -q '^ready$' "$out" 2>/dev/null && ls "$rundir/$started"-*.seg >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$started" 2>/dev/null; then
			echo "FAIL: workload exited early:" >&2
			cat "$out" "$out.err" >&2
			exit 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	echo "FAIL: no 'ready' and segment from workload pid $started after 10s" >&2
	exit 1
}

start_workload "$work/out"
pid=$started
sleep 1 # let statistics accumulate

# A hostile neighbour: a garbage file named after a live process of ours.
# It must be reported on stderr, naming the file, without hiding the rest.
self_start=$(python3 -c 'import sys; print(open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split()[19])' $$)
junk=$$-$self_start.seg
head -c 10000 /dev/urandom >"$rundir/$junk"

# --- list ---------------------------------------------------------------
"$elidectl" list >"$work/list" 2>"$work/list.err"
rc=$?
[ $rc -eq 0 ] || fail "list exited $rc"
if awk -v p="$pid" '$1 == p { found = 1 } END { exit !found }' "$work/list"; then
	ok "list shows pid $pid"
else
	fail "list does not show pid $pid:"; cat "$work/list" >&2
fi
head -n 1 "$work/list" | grep -q '^ *PID  *USER  *EXE  *STATE  *LOCKS  *COMMITS/s  *ABORT%  *CYCLES-LOST$' \
	&& ok "list legend" || fail "list legend: $(head -n 1 "$work/list")"
if grep -q "$junk" "$work/list.err" && [ "$(grep -c "$junk" "$work/list.err")" -eq 1 ]; then
	ok "list warns once about the garbage segment: $(cat "$work/list.err")"
else
	fail "list stderr does not name $junk exactly once:"; cat "$work/list.err" >&2
fi
"$elidectl" list --no-legend 2>/dev/null | awk -v p="$pid" 'NR == 1 && $1 == p { ok = 1 } END { exit !ok }' \
	&& ok "list --no-legend" || fail "list --no-legend does not start with the process"
"$elidectl" list --json 2>/dev/null >"$work/list.json"
python3 - "$work/list.json" "$pid" <<'PYEOF' && ok "list --json" || fail "list --json"
import json, sys
procs = json.load(open(sys.argv[1]))
p = [x for x in procs if x["pid"] == int(sys.argv[2])]
assert len(p) == 1, procs
assert p[0]["locks"] >= 2 and p[0]["acquired"] > 0, p[0]
PYEOF
rm -f "$rundir/$junk"

# --- show ---------------------------------------------------------------
"$elidectl" show "$pid" --json >"$work/show.json" 2>"$work/show.err"
rc=$?
[ $rc -eq 0 ] || { fail "show --json exited $rc"; cat "$work/show.err" >&2; }
python3 -m json.tool "$work/show.json" >/dev/null && ok "show --json is well-formed JSON" \
	|| fail "show --json is not JSON: $(cat "$work/show.json")"
python3 - "$work/show.json" "$pid" <<'PYEOF' && ok "show --json names the locks and counts" || fail "show --json content"
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    if not cond:
        print("  " + what, file=sys.stderr)
        print(json.dumps(d, indent=1), file=sys.stderr)
        sys.exit(1)
check(d["pid"] == int(sys.argv[2]), "pid")
check(d["exe"].endswith("workload-contended"), "exe")
check(d["elision"] == "on", "elision on: " + d["reason"])
check(d["sample"] >= 1, "sample")
for key in ("comm", "reason", "mode", "locks"):
    check(key in d, key)
by = {}
for l in d["locks"]:
    for key in ("index", "name", "symbol", "address", "kind", "callsite", "acquired", "attempts",
                "commits", "aborts", "fallbacks", "contended", "cycles_lost", "state", "reason"):
        check(key in l, "lock key " + key)
    check(set(l["aborts"]) == {"conflict", "capacity", "busy", "explicit", "retry", "debug",
                               "nested", "other"}, "abort causes")
    check(l["address"] is None or l["address"].startswith("0x"), "address")
    if l["symbol"]:
        by.setdefault(l["symbol"], []).append(l)
check("cache_lock" in by, "no lock with symbol cache_lock")
check("table_lock" in by, "no lock with symbol table_lock")
check([l["kind"] for l in by["cache_lock"]] == ["mutex"], "cache_lock kind")
check(set(l["kind"] for l in by["table_lock"]) <= {"rw-read", "rw-write"}, "table_lock kinds")
check(all(l["name"] == l["symbol"] for l in by["cache_lock"] + by["table_lock"]), "name = symbol")
check(all("worker_loop" in (l["callsite"] or "") for l in by["cache_lock"]), "cache_lock call site")
ours = by["cache_lock"] + by["table_lock"]
check(all(l["acquired"] > 0 for l in by["cache_lock"]), "cache_lock acquired > 0")
check(sum(l["acquired"] for l in by["table_lock"]) > 0, "table_lock acquired > 0")
if d["rtm_usable"]:
    check(sum(l["commits"] for l in ours) > 0, "real RTM: commits > 0")
else:
    check(d["reason"].startswith("simulated"), "simulated aborts expected: " + d["reason"])
    check(sum(l["aborts"]["conflict"] for l in ours) > 0, "simulated: conflict aborts > 0")
    check(sum(l["commits"] for l in ours) == 0, "simulated: no commits")
PYEOF

"$elidectl" show "$pid" >"$work/show.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^LOCK  *KIND  *ACQUIRED  *ELIDED%  *ABORTS  *CYCLES-LOST  *STATE$' "$work/show.txt" \
   && grep -q '^cache_lock  *mutex  ' "$work/show.txt" \
   && grep -q 'sampled 1 in [0-9]' "$work/show.txt"; then
	ok "show table"
else
	fail "show table (exit $rc):"; cat "$work/show.txt" >&2
fi
# The call site and the abort causes are columns -o adds.
"$elidectl" show "$pid" -o LOCK,KIND,CALL-SITE,ACQUIRED,ELIDED%,COMMIT%,CONFLICT >"$work/show-o.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^LOCK  *KIND  *CALL-SITE  *ACQUIRED  *ELIDED%  *COMMIT%  *CONFLICT$' "$work/show-o.txt" \
   && grep -q '^cache_lock  *mutex  *worker_loop+0x' "$work/show-o.txt"; then
	ok "show -o with the call site"
else
	fail "show -o (exit $rc):"; cat "$work/show-o.txt" >&2
fi

# A segment with garbage entries: shown, the garbage counted and the first
# bad entry explained (seg-forge --corrupt kinds: out-of-range kinds).
sleep 60 &
spid=$!
if bad=$("$top_builddir/tests/integration/seg-forge" --dir "$rundir" --pid "$spid" --locks 8 --corrupt kinds); then
	"$elidectl" show "$spid" >"$work/bad.txt" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q "malformed entries skipped (first entry [0-9]*: " "$work/bad.txt"; then
		ok "show explains malformed entries: $(grep -o "[0-9]* malformed.*" "$work/bad.txt")"
	else
		fail "show with malformed entries (exit $rc):"; cat "$work/bad.txt" >&2
	fi
else
	fail "seg-forge --corrupt kinds"
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
[ -n "${bad:-}" ] && rm -f "$rundir/$bad"

# --sort and --max
for key in name acquired commits aborts conflict capacity cycles; do
	"$elidectl" show "$pid" --json --sort "$key" >"$work/sort.json" 2>&1 || fail "--sort $key exited $?"
	python3 - "$work/sort.json" "$key" <<'PYEOF' || fail "--sort $key order"
import json, sys
locks = json.load(open(sys.argv[1]))["locks"]
key = sys.argv[2]
def k(l):
    if key == "name": return l["name"]
    if key == "aborts": return sum(l["aborts"].values())
    if key in ("conflict", "capacity"): return l["aborts"][key]
    if key == "cycles": return l["cycles_lost"]
    return l[key]
vals = [k(l) for l in locks]
want = sorted(vals) if key == "name" else sorted(vals, reverse=True)
# Counters move between the reads: only the order within one snapshot counts.
assert vals == want, (key, vals)
PYEOF
done
ok "--sort keys order the locks"
"$elidectl" show "$pid" --json --sort name --max 1 >"$work/max.json" 2>&1
python3 - "$work/max.json" <<'PYEOF' && ok "--max 1 (json)" || fail "--max 1 (json): $(cat "$work/max.json")"
import json, sys
locks = json.load(open(sys.argv[1]))["locks"]
assert len(locks) == 1 and locks[0]["name"] == "cache_lock", locks
PYEOF
n=$("$elidectl" show "$pid" --max 1 --no-legend 2>/dev/null | wc -l)
[ "$n" -eq 1 ] && ok "--max 1 --no-legend prints one line" || fail "--max 1 --no-legend printed $n lines"

# --- errors and exit statuses ---------------------------------------------
expect() {
	want=$1 pattern=$2
	shift 2
	"$@" >"$work/err.out" 2>"$work/err.err"
	rc=$?
	if [ $rc -ne "$want" ]; then
		fail "'$*' exited $rc, expected $want: $(cat "$work/err.err")"
	elif [ -n "$pattern" ] && ! grep -q "$pattern" "$work/err.err"; then
		fail "'$*' stderr lacks '$pattern': $(cat "$work/err.err")"
	else
		ok "'$*' exits $want"
	fi
}
expect 3 "^elidectl: no libelide segment for pid $$ in $rundir\$" "$elidectl" show $$
expect 3 "^elidectl: no libelide segment for pid 2147483646 in $rundir\$" "$elidectl" show 2147483646
expect 3 "^elidectl: no libelide segment for pid $pid in $work/none\$" "$elidectl" --runtime-dir "$work/none" show "$pid"
expect 2 "^elidectl: " "$elidectl" --bogus-option
expect 2 "^elidectl: " "$elidectl" show "$pid" --sort bogus
expect 2 "^elidectl: " "$elidectl" show "$pid" --max 0
expect 2 "^elidectl: " "$elidectl" show
expect 2 "^elidectl: " "$elidectl" show 12x
expect 2 "^elidectl: unknown command" "$elidectl" frobnicate
expect 2 "^elidectl: " "$elidectl" list --sort name
expect 0 "" "$elidectl" --help
expect 0 "" "$elidectl" --version
"$elidectl" --help | grep -q 'averages' && ok "--help says rates are averages" || fail "--help lacks the rates note"

# --- exit: the segment goes, and the process leaves the list ---------------
start_workload "$work/out2"
pid2=$started
kill -KILL "$pid2"
wait "$pid2" 2>/dev/null
seg2=$(ls "$rundir/$pid2"-*.seg 2>/dev/null)
[ -n "$seg2" ] && ok "a killed process leaves its segment" || fail "no leftover segment for killed pid $pid2"
pid2=

kill -TERM "$pid"
wait "$pid"
rc=$?
[ $rc -eq 0 ] && ok "workload exited cleanly" || fail "workload exited $rc: $(cat "$work/out.err")"
if ls "$rundir/$pid"-*.seg >/dev/null 2>&1; then
	fail "segment of pid $pid still exists after exit"
else
	ok "segment removed at exit"
fi
"$elidectl" list --verbose >"$work/list2" 2>"$work/list2.err"
rc=$?
[ $rc -eq 0 ] || fail "list after exit exited $rc"
if awk -v p="$pid" '$1 == p { found = 1 } END { exit found }' "$work/list2"; then
	ok "list no longer shows pid $pid"
else
	fail "list still shows pid $pid"; cat "$work/list2" >&2
fi
grep -q "1 stale segment" "$work/list2.err" && ok "list --verbose counts the stale segment" \
	|| fail "list --verbose: no stale note: $(cat "$work/list2.err")"
grep -q "0 processes listed" "$work/list2" && ok "empty list" || fail "list after exit: $(cat "$work/list2")"
pid=

if [ $failures -gt 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all checks passed"
exit 0
