# Integration tests: C programs run under LD_PRELOAD=libelide.so, once per
# configuration (adaptive, on, off, on with ELIDE_FAKE_NO_RTM=1), by
# tests/integration/preload.sh.
#
# LOG_COMPILER applies to every test without an extension, the Check unit
# suites in tests/unit/ included: preload.sh recognises those by their path
# and execs them unchanged, without libelide.
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/integration/preload.sh

INTEGRATION_TESTS = \
	tests/integration/test-trylock-nested \
	tests/integration/test-condwait \
	tests/integration/test-unlock-unlocked \
	tests/integration/test-types \
	tests/integration/test-destroy \
	tests/integration/test-fork \
	tests/integration/test-exit-held \
	tests/integration/test-stress-bank \
	tests/integration/test-stress-list \
	tests/integration/test-annotate \
	tests/integration/test-segment-lifecycle \
	tests/integration/test-segment-fork \
	tests/integration/test-registry-signal \
	tests/integration/test-normal-type

check_PROGRAMS += $(INTEGRATION_TESTS)
TESTS += $(INTEGRATION_TESTS)
EXTRA_DIST += tests/integration/preload.sh

# The tests need libelide.so built, which `make check` does (lib_LTLIBRARIES).
INTEGRATION_CFLAGS = $(AM_CFLAGS)
INTEGRATION_LDADD =

tests_integration_test_trylock_nested_SOURCES = tests/integration/test-trylock-nested.c tests/integration/testutil.h
tests_integration_test_trylock_nested_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_trylock_nested_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_condwait_SOURCES = tests/integration/test-condwait.c tests/integration/testutil.h
tests_integration_test_condwait_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_condwait_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_unlock_unlocked_SOURCES = tests/integration/test-unlock-unlocked.c tests/integration/testutil.h
tests_integration_test_unlock_unlocked_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_unlock_unlocked_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_types_SOURCES = tests/integration/test-types.c tests/integration/testutil.h
tests_integration_test_types_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_types_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_destroy_SOURCES = tests/integration/test-destroy.c tests/integration/testutil.h
tests_integration_test_destroy_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_destroy_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_fork_SOURCES = tests/integration/test-fork.c tests/integration/testutil.h
tests_integration_test_fork_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_fork_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_exit_held_SOURCES = tests/integration/test-exit-held.c tests/integration/testutil.h
tests_integration_test_exit_held_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_exit_held_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_stress_bank_SOURCES = tests/integration/test-stress-bank.c tests/integration/testutil.h
tests_integration_test_stress_bank_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_stress_bank_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_stress_list_SOURCES = tests/integration/test-stress-list.c tests/integration/testutil.h
tests_integration_test_stress_list_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_stress_list_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_annotate_SOURCES = tests/integration/test-annotate.c tests/integration/testutil.h
tests_integration_test_annotate_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_annotate_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_registry_signal_SOURCES = tests/integration/test-registry-signal.c tests/integration/testutil.h
tests_integration_test_registry_signal_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_registry_signal_LDADD = $(INTEGRATION_LDADD)

tests_integration_test_normal_type_SOURCES = tests/integration/test-normal-type.c tests/integration/testutil.h
tests_integration_test_normal_type_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_normal_type_LDADD = common/libelide-tools.la

tests_integration_test_segment_lifecycle_SOURCES = tests/integration/test-segment-lifecycle.c
tests_integration_test_segment_lifecycle_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_segment_lifecycle_LDADD = common/libelide-tools.la

tests_integration_test_segment_fork_SOURCES = tests/integration/test-segment-fork.c tests/integration/testutil.h
tests_integration_test_segment_fork_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_test_segment_fork_LDADD = common/libelide-tools.la

# A contended workload for the elidectl and elided tests (not a test itself).
check_PROGRAMS += tests/integration/workload-contended
tests_integration_workload_contended_SOURCES = tests/integration/workload-contended.c
tests_integration_workload_contended_CFLAGS = $(AM_CFLAGS)

TESTS += tests/integration/test-elidectl-direct.sh
EXTRA_DIST += tests/integration/test-elidectl-direct.sh

# Forked children without exec, each on contended locks until told to stop
# (not a test itself), and elided's view of them.
check_PROGRAMS += tests/integration/fork-workload
tests_integration_fork_workload_SOURCES = tests/integration/fork-workload.c
tests_integration_fork_workload_CFLAGS = $(AM_CFLAGS)
TESTS += tests/integration/test-elided-fork.sh
EXTRA_DIST += tests/integration/test-elided-fork.sh

# Watch mode: a mutex with known waits and holds (not a test itself).
check_PROGRAMS += tests/integration/watch-measure
tests_integration_watch_measure_SOURCES = tests/integration/watch-measure.c
tests_integration_watch_measure_CFLAGS = $(AM_CFLAGS)
TESTS += tests/integration/test-watch.sh tests/integration/test-elided-observe.sh
EXTRA_DIST += tests/integration/test-watch.sh tests/integration/test-elided-observe.sh

# Per-lock history: top PID off a terminal, show --history through elided.
TESTS += tests/integration/test-elidectl-trend.sh
EXTRA_DIST += tests/integration/test-elidectl-trend.sh

TESTS += tests/integration/test-elided.sh
EXTRA_DIST += tests/integration/test-elided.sh

# A process's mode off is the kill switch: its lock rules wait (issue 32).
TESTS += tests/integration/test-elided-process-off.sh
EXTRA_DIST += tests/integration/test-elided-process-off.sh

# elided's Prometheus textfile output, checked with promtool.
TESTS += tests/integration/test-elided-metrics.sh
EXTRA_DIST += tests/integration/test-elided-metrics.sh

# elided as a Type=notify service (a stand-in notification socket).
check_PROGRAMS += tests/integration/notify-listen
tests_integration_notify_listen_SOURCES = tests/integration/notify-listen.c
TESTS += tests/integration/test-elided-service.sh
EXTRA_DIST += tests/integration/test-elided-service.sh

# elidectl against a real elided; golden files from a synthetic segment;
# completion (bash, zsh, fish); the terminal (top at 80x24, pager, colours).
check_PROGRAMS += tests/integration/make-segment
tests_integration_make_segment_SOURCES = tests/integration/make-segment.c
tests_integration_make_segment_LDADD = common/libelide-tools.la
TESTS += tests/integration/test-elidectl.sh tests/integration/test-elidectl-golden.sh \
	tests/integration/test-elidectl-completion.sh tests/integration/test-elidectl-terminal.sh
# golden/: the directory, every file in it.
EXTRA_DIST += tests/integration/test-elidectl.sh tests/integration/test-elidectl-golden.sh \
	tests/integration/test-elidectl-completion.sh tests/integration/test-elidectl-terminal.sh \
	tests/integration/golden

# Hostile segments thrown at the daemon (seg-forge writes them).
check_PROGRAMS += tests/integration/seg-forge
tests_integration_seg_forge_SOURCES = tests/integration/seg-forge.c
tests_integration_seg_forge_CFLAGS = $(AM_CFLAGS)
tests_integration_seg_forge_LDADD = -ldl
TESTS += tests/integration/test-elided-hostile.sh
EXTRA_DIST += tests/integration/test-elided-hostile.sh

# Installation into a DESTDIR; end to end with Debian's memcached and sysbench.
TESTS += tests/integration/test-install.sh tests/integration/test-e2e-memcached.sh \
	tests/integration/test-e2e-sysbench.sh
EXTRA_DIST += tests/integration/test-install.sh tests/integration/test-e2e-memcached.sh \
	tests/integration/test-e2e-sysbench.sh

# System-wide enablement, in a temporary root only.
TESTS += tests/integration/test-elidectl-enable.sh
EXTRA_DIST += tests/integration/test-elidectl-enable.sh
EXTRA_DIST += tests/integration/testlib.sh

# libelide's start-up decisions and the ELIDE variable.
TESTS += tests/integration/test-libelide-env.sh
EXTRA_DIST += tests/integration/test-libelide-env.sh

# libelide compiled against other glibc headers: the 2.43 layout (a shim) must
# build and run, a moved field must stop the build.  The test compiles with
# the flags the real build uses, which make writes down for it here.
TESTS += tests/integration/test-glibc-headers.sh
EXTRA_DIST += tests/integration/test-glibc-headers.sh \
	tests/glibc-2.43/bits/struct_mutex.h tests/glibc-2.43/bits/struct_rwlock.h \
	tests/glibc-bad-layout/bits/struct_rwlock.h
check_SCRIPTS += tests/integration/libelide-flags.sh
CLEANFILES += tests/integration/libelide-flags.sh
tests/integration/libelide-flags.sh: Makefile
	$(AM_V_GEN)$(MKDIR_P) tests/integration && { \
	echo "# Generated by make: how libelide.so is compiled and linked (paths relative to the build dir)."; \
	echo "libelide_sources='$(filter %.c,$(libelide_libelide_la_SOURCES))'"; \
	echo "libelide_cppflags='$(DEFS) $(DEFAULT_INCLUDES) $(libelide_libelide_la_CPPFLAGS) $(CPPFLAGS)'"; \
	echo "libelide_cflags='$(libelide_libelide_la_CFLAGS) $(CFLAGS)'"; \
	echo "libelide_ldflags='$(libelide_libelide_la_LDFLAGS) $(LDFLAGS)'"; \
	echo "libelide_libs='$(LIBS)'"; \
	echo "integration_cflags='$(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) $(INTEGRATION_CFLAGS) $(CFLAGS)'"; \
	} > $@

# Conformance: every interposed function, mutex type and rwlock kind, with
# and without libelide (the program is run by the .sh, not through preload.sh).
check_PROGRAMS += tests/integration/conformance
tests_integration_conformance_SOURCES = tests/integration/conformance.c tests/integration/testutil.h \
	tests/integration/conformance-util.h
tests_integration_conformance_CFLAGS = $(AM_CFLAGS)
# Its corners (issue 30), parts of the same test: rdtsc disabled, a seccomp
# filter, the 2.2.5 condition variable (conformance-compat.c), signals,
# cancellation, glibc's own entry points, expiring waits, destroy, errno,
# fork.
check_PROGRAMS += tests/integration/conformance-edge
tests_integration_conformance_edge_SOURCES = tests/integration/conformance-edge.c \
	tests/integration/conformance-compat.c tests/integration/conformance-compat.h \
	tests/integration/conformance-util.h tests/integration/testutil.h
tests_integration_conformance_edge_CFLAGS = $(AM_CFLAGS)
tests_integration_conformance_edge_LDADD = -ldl
TESTS += tests/integration/test-conformance.sh
EXTRA_DIST += tests/integration/test-conformance.sh

# Every transaction aborting (ELIDE_SIM_ABORT, or real RTM with a syscall in
# the section): adaptive mode keeps the lock backed off, mode=on tries once
# per acquisition; judged by libelide's counters, never by time.  The program
# is run by the .sh (not through preload.sh).
check_PROGRAMS += tests/integration/abort-regime
tests_integration_abort_regime_SOURCES = tests/integration/abort-regime.c tests/integration/own-segment.h
tests_integration_abort_regime_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_abort_regime_LDADD = common/libelide-tools.la -lm
TESTS += tests/integration/test-abort-regime.sh
EXTRA_DIST += tests/integration/test-abort-regime.sh

# Many backed-off locks taken in turn by one thread, more than its slots
# hold: each is still probed about once per span (counted, not timed).
check_PROGRAMS += tests/integration/slot-share
tests_integration_slot_share_SOURCES = tests/integration/slot-share.c tests/integration/own-segment.h
tests_integration_slot_share_CFLAGS = $(INTEGRATION_CFLAGS)
tests_integration_slot_share_LDADD = common/libelide-tools.la
TESTS += tests/integration/test-slot-share.sh
EXTRA_DIST += tests/integration/test-slot-share.sh

# Issue 12: signals reach only who may see the process, an owner change
# drops overrides, a user's flood of bad files is rate-limited.
check_PROGRAMS += tests/integration/signal-listen
tests_integration_signal_listen_SOURCES = tests/integration/signal-listen.c
tests_integration_signal_listen_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tests_integration_signal_listen_LDADD = $(SYSTEMD_LIBS)
TESTS += tests/integration/test-elided-privacy.sh
EXTRA_DIST += tests/integration/test-elided-privacy.sh

# Issue 13: exits seen at once after a restart and of zombies, a removed
# runtime directory, status of what elided cannot see.
TESTS += tests/integration/test-elided-lifecycle.sh
EXTRA_DIST += tests/integration/test-elided-lifecycle.sh

# Issue 13, scale: elided reads only the lock entries marked written.
TESTS += tests/integration/test-elided-marks.sh
EXTRA_DIST += tests/integration/test-elided-marks.sh

# Issue 13 item 7: BPF discovery with only the kernel's BTF (tp_btf, no
# tracefs), as root: adoption, exits of killed processes and zombies within
# an interval without pidfds, processes with libelide but no segment.
# Skips (77) when not root or when BPF does not load.
TESTS += tests/integration/test-elided-bpf.sh
EXTRA_DIST += tests/integration/test-elided-bpf.sh
# Processes with libelide but no segment, with pidfd discovery, as any user.
TESTS += tests/integration/test-elided-nosegment.sh
EXTRA_DIST += tests/integration/test-elided-nosegment.sh

# Issue 12: a hostile ELF file (make-elf) mapped through hard links with a
# contended lock inside each mapping (map-lock), against a real elided: the
# symbolizer child parses it once, as its owner, and the daemon answers.
check_PROGRAMS += tests/integration/make-elf tests/integration/map-lock tests/integration/dbus-ping
tests_integration_make_elf_SOURCES = tests/integration/make-elf.c
tests_integration_dbus_ping_SOURCES = tests/integration/dbus-ping.c
tests_integration_dbus_ping_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tests_integration_dbus_ping_LDADD = $(SYSTEMD_LIBS)
tests_integration_map_lock_SOURCES = tests/integration/map-lock.c
tests_integration_map_lock_LDADD = -lpthread
TESTS += tests/integration/test-elided-symbolizer.sh
EXTRA_DIST += tests/integration/test-elided-symbolizer.sh

# elided's learned-policy store (issue 16): learn, restart, zero attempts.
TESTS += tests/integration/test-elided-learned.sh
EXTRA_DIST += tests/integration/test-elided-learned.sh
TESTS += tests/integration/test-elided-learned-short.sh
EXTRA_DIST += tests/integration/test-elided-learned-short.sh

# Issue 31: elided stays on the bus and fair while one user floods it; a
# restarted bus daemon; owners before hints; hostile names in the log.
check_PROGRAMS += tests/integration/bus-flood
tests_integration_bus_flood_SOURCES = tests/integration/bus-flood.c
tests_integration_bus_flood_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tests_integration_bus_flood_LDADD = $(SYSTEMD_LIBS)
TESTS += tests/integration/test-elided-bus.sh
EXTRA_DIST += tests/integration/test-elided-bus.sh
TESTS += tests/integration/test-elided-lognames.sh
EXTRA_DIST += tests/integration/test-elided-lognames.sh

# Issue 32: the symbolizer's every error path (fork, pipe2, pidfd_open,
# sd_event_add_* failing), by fault injection into a real elided (the
# LD_PRELOAD library fault-inject.so); its names under a CPU-bound load
# (stress-ng); processes without libelide named through the BPF observer.
check_LTLIBRARIES = tests/integration/fault-inject.la
tests_integration_fault_inject_la_SOURCES = tests/integration/fault-inject.c
tests_integration_fault_inject_la_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS)
tests_integration_fault_inject_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere
tests_integration_fault_inject_la_LIBADD = -ldl
TESTS += tests/integration/test-elided-symfault.sh tests/integration/test-elided-symload.sh \
	tests/integration/test-elided-observe-names.sh
EXTRA_DIST += tests/integration/test-elided-symfault.sh tests/integration/test-elided-symload.sh \
	tests/integration/test-elided-observe-names.sh

# Issue 31 item 3: learned hints follow a process's owner (a setuid exec, a
# process that drops privileges without one).
check_PROGRAMS += tests/integration/drop-later
tests_integration_drop_later_SOURCES = tests/integration/drop-later.c
TESTS += tests/integration/test-elided-learned-owner.sh
EXTRA_DIST += tests/integration/test-elided-learned-owner.sh

# bench/apps/run.sh's judgement of the real-program goals, on made-up runs.
TESTS += tests/integration/test-bench-judge.sh
EXTRA_DIST += tests/integration/test-bench-judge.sh
