# Check suites, one per module.  They link the module sources directly.
if HAVE_CHECK
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -I$(top_srcdir)/libelide
UNIT_LDADD = $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test-log tests/unit/test-options tests/unit/test-hw tests/unit/test-registry tests/unit/test-elfsym tests/unit/test-segment-reader tests/unit/test-config tests/unit/test-discovery tests/unit/test-dbus tests/unit/test-symcache tests/unit/test-learned tests/unit/test-advice tests/unit/test-sparkline tests/unit/test-learn-format tests/unit/test-decide-lock
UNIT_TESTS += tests/unit/test-log tests/unit/test-options tests/unit/test-hw tests/unit/test-registry tests/unit/test-elfsym tests/unit/test-segment-reader tests/unit/test-config tests/unit/test-discovery tests/unit/test-dbus tests/unit/test-symcache tests/unit/test-learned tests/unit/test-advice tests/unit/test-sparkline tests/unit/test-learn-format tests/unit/test-decide-lock

tests_unit_test_advice_SOURCES = tests/unit/test-advice.c elidectl/advice.c elidectl/advice.h
tests_unit_test_advice_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/elidectl
tests_unit_test_advice_LDADD = $(UNIT_LDADD)

tests_unit_test_sparkline_SOURCES = tests/unit/test-sparkline.c elidectl/sparkline.c elidectl/sparkline.h
tests_unit_test_sparkline_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/elidectl
tests_unit_test_sparkline_LDADD = $(UNIT_LDADD)

tests_unit_test_log_SOURCES = tests/unit/test-log.c common/log.c
tests_unit_test_log_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_log_LDADD = $(UNIT_LDADD)

tests_unit_test_options_SOURCES = tests/unit/test-options.c libelide/options.c
tests_unit_test_options_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_options_LDADD = $(UNIT_LDADD)

tests_unit_test_hw_SOURCES = tests/unit/test-hw.c common/hw.c common/sbuf.h
tests_unit_test_hw_CFLAGS = $(UNIT_CFLAGS) -mrtm
tests_unit_test_hw_LDADD = $(UNIT_LDADD)

tests_unit_test_registry_SOURCES = tests/unit/test-registry.c libelide/registry.c libelide/options.c
tests_unit_test_registry_CFLAGS = $(UNIT_CFLAGS) -mrtm
tests_unit_test_registry_LDADD = $(UNIT_LDADD)

tests_unit_test_symcache_SOURCES = tests/unit/test-symcache.c elided/symcache.c
tests_unit_test_symcache_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/elided
tests_unit_test_symcache_LDADD = $(UNIT_LDADD)

tests_unit_test_learned_SOURCES = tests/unit/test-learned.c elided/learned.c elided/learned.h
tests_unit_test_learned_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/elided
tests_unit_test_learned_LDADD = $(UNIT_LDADD)

tests_unit_test_decide_lock_SOURCES = tests/unit/test-decide-lock.c elided/decide-lock.c elided/decide-lock.h
tests_unit_test_decide_lock_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/elided
tests_unit_test_decide_lock_LDADD = $(UNIT_LDADD)

tests_unit_test_learn_format_SOURCES = tests/unit/test-learn-format.c common/learn-format.c common/learn-format.h
tests_unit_test_learn_format_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_learn_format_LDADD = $(UNIT_LDADD)

tests_unit_test_elfsym_SOURCES = tests/unit/test-elfsym.c common/elfsym.c
tests_unit_test_elfsym_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_elfsym_LDADD = $(UNIT_LDADD)

tests_unit_test_segment_reader_SOURCES = tests/unit/test-segment-reader.c common/segment-reader.c common/segment-names.c
tests_unit_test_segment_reader_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_segment_reader_LDADD = $(UNIT_LDADD)

tests_unit_test_config_SOURCES = tests/unit/test-config.c elided/config.c
tests_unit_test_config_CFLAGS = $(UNIT_CFLAGS) $(LIBCONFIG_CFLAGS) -I$(top_srcdir)/elided
tests_unit_test_config_LDADD = $(UNIT_LDADD) $(LIBCONFIG_LIBS)

tests_unit_test_discovery_SOURCES = tests/unit/test-discovery.c elided/discovery.c common/segment-reader.c common/segment-names.c common/log.c
tests_unit_test_discovery_CFLAGS = $(UNIT_CFLAGS) $(SYSTEMD_CFLAGS) $(LIBBPF_CFLAGS) -I$(top_srcdir)/elided \
	-I$(srcdir)/elided/bpf -I$(builddir)/elided/bpf
tests_unit_test_discovery_LDADD = $(UNIT_LDADD) $(SYSTEMD_LIBS) $(LIBBPF_LIBS)

tests_unit_test_dbus_SOURCES = tests/unit/test-dbus.c elided/dbus.c elided/dbus.h elided/dbus-internal.h \
	elided/dbus-queue.c elided/dbus-methods.c elided/dbus-object.c elided/lock-names.c \
	elided/events.c elided/events.h elided/learned.c elided/learned.h
tests_unit_test_dbus_CFLAGS = $(UNIT_CFLAGS) $(SYSTEMD_CFLAGS) -I$(top_srcdir)/elided -DTOP_SRCDIR=\"$(abs_top_srcdir)\"
tests_unit_test_dbus_LDADD = $(UNIT_LDADD) $(SYSTEMD_LIBS) common/libelide-tools.la
endif

# glibc-check.c: version verdicts and the probe, run against this glibc without LD_PRELOAD.
if HAVE_CHECK
check_PROGRAMS += tests/unit/test-glibc-check
UNIT_TESTS += tests/unit/test-glibc-check
tests_unit_test_glibc_check_SOURCES = tests/unit/test-glibc-check.c libelide/glibc-check.c libelide/glibc-abi.h
tests_unit_test_glibc_check_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_glibc_check_LDADD = $(UNIT_LDADD)

# glibc-protocol.c's rwlock read side, driven against this glibc's rwlocks.
check_PROGRAMS += tests/unit/test-rwlock-protocol
UNIT_TESTS += tests/unit/test-rwlock-protocol
tests_unit_test_rwlock_protocol_SOURCES = tests/unit/test-rwlock-protocol.c libelide/glibc-protocol.c
tests_unit_test_rwlock_protocol_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_rwlock_protocol_LDADD = $(UNIT_LDADD)
endif

TESTS += $(UNIT_TESTS)
