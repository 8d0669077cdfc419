# Benchmarks: built by `make` so they never rot, but never installed and never
# run by `make check` (timings on a shared machine are not pass/fail).
noinst_PROGRAMS += bench/elide-bench
bench_elide_bench_SOURCES = bench/elide-bench.c
bench_elide_bench_CFLAGS = $(AM_CFLAGS) -O2
bench_elide_bench_LDFLAGS = $(AM_LDFLAGS) -pthread
# The interposition floor for compare.sh: a preload that only forwards.
# A shared module that is never installed needs an -rpath to be built.
noinst_LTLIBRARIES += bench/elide-forward.la
bench_elide_forward_la_SOURCES = bench/elide-forward.c
bench_elide_forward_la_CFLAGS = $(AM_CFLAGS) -O2
bench_elide_forward_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere -Wl,-z,now
EXTRA_DIST += bench/bus-flood.sh bench/compare.sh bench/observer.sh bench/RESULTS.md bench/results/2026-12-07-history.md bench/results/2026-12-07-rwlock-handover.md bench/README.md bench/daemon-scale.sh bench/sysbench.sh bench/lib.sh \
	bench/results/README.md

# bench/fork.sh: what fork() costs under libelide.
noinst_PROGRAMS += bench/fork-bench
bench_fork_bench_SOURCES = bench/fork-bench.c
bench_fork_bench_CFLAGS = $(AM_CFLAGS) -O2
EXTRA_DIST += bench/fork.sh bench/learned-short.sh

# bench/churn.sh: processes started at a fixed rate, and its multi-threaded one.
noinst_PROGRAMS += bench/elide-churn bench/churn-worker
bench_elide_churn_SOURCES = bench/elide-churn.c
bench_churn_worker_SOURCES = bench/churn-worker.c
bench_churn_worker_CFLAGS = $(AM_CFLAGS) -O2
bench_churn_worker_LDFLAGS = $(AM_LDFLAGS) -pthread
EXTRA_DIST += bench/churn.sh
EXTRA_DIST += bench/apps/run.sh bench/apps/common.sh bench/apps/instructions.sh bench/apps/gil.py \
	bench/apps/README.md bench/apps/last-run.md bench/apps/runs \
	bench/apps/waits.awk
