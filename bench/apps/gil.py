#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# gil.py: a CPU-bound, multi-threaded CPython program for bench/apps/run.sh.
#
# THREADS threads each run OPS pure-Python operations (a short arithmetic
# loop, no I/O, no sleeping).  Only one thread runs Python code at a time:
# CPython 3's GIL is a pthread mutex plus condition variables, and a thread
# that wants it waits on the condition variable and asks the holder to let
# go every sys.getswitchinterval() (5 ms), so the GIL is a real, heavily
# contended lock.  Each operation is timed on its own (time.perf_counter_ns),
# so its latency includes any wait for the GIL in the middle of it.
#
# Prints ONE line of key=value pairs:
#   gil threads=T ops=N seconds=S ops_per_sec=R p50_us=.. p99_us=.. p999_us=..
#       cpu_s=C preload=yes|no max_us=..
# max_us is the longest single operation (timed like the others), i.e. the
# longest any one thread waited for the GIL in the middle of an operation.
# cpu_s is the process's user+system time (all threads, getrusage) over the
# measured window, from the start barrier to the last thread's end; preload
# says whether libelide.so is mapped into this process (/proc/self/maps).
#
# --calibrate S runs one thread for about S seconds and prints
#   calibrate ops_per_sec=R
# so that a caller can size OPS for a run of a given length.

import argparse
import os
import resource
import sys
import threading
import time

WORK = 200  # loop iterations per operation: some 10-20 us on a current CPU


def op():
    x = 0
    for i in range(WORK):
        x = (x + i * i) ^ (x >> 3)
    return x


def percentile(sorted_values, p):
    """The nearest-rank percentile p (0-100) of a sorted list."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def preloaded():
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
            return any("libelide.so" in line for line in f)
    except OSError:
        return False


def calibrate(seconds):
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(100):
            op()
        n += 100
        t = time.perf_counter()
        if t >= end:
            break
    print(f"calibrate ops_per_sec={n / (t - t0):.1f}")


def run(threads, ops):
    lat = [None] * threads
    barrier = threading.Barrier(threads + 1)
    clock = time.perf_counter_ns

    def worker(idx):
        mine = [0] * ops
        barrier.wait()
        for j in range(ops):
            t0 = clock()
            op()
            mine[j] = clock() - t0
        lat[idx] = mine

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    barrier.wait()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0

    allv = sorted(v for per in lat for v in per)
    total = threads * ops
    print(
        f"gil threads={threads} ops={total} seconds={wall:.4f} "
        f"ops_per_sec={total / wall:.1f} "
        f"p50_us={percentile(allv, 50) / 1000:.2f} "
        f"p99_us={percentile(allv, 99) / 1000:.2f} "
        f"p999_us={percentile(allv, 99.9) / 1000:.2f} "
        f"cpu_s={cpu:.4f} preload={'yes' if preloaded() else 'no'} "
        f"max_us={(allv[-1] if allv else 0) / 1000:.2f} pid={os.getpid()}"
    )


def main():
    ap = argparse.ArgumentParser(description="GIL-bound CPython threads (bench/apps/run.sh)")
    ap.add_argument("--threads", type=int, default=2, help="worker threads (default 2)")
    ap.add_argument("--ops", type=int, default=20000, help="operations per thread (default 20000)")
    ap.add_argument("--calibrate", type=float, metavar="S",
                    help="run one thread for about S seconds and print its ops/s")
    a = ap.parse_args()
    if a.calibrate is not None:
        calibrate(a.calibrate)
        return 0
    if a.threads < 1 or a.ops < 1:
        ap.error("--threads and --ops must be positive")
    run(a.threads, a.ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
