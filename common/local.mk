# common/: code shared by libelide, elided and elidectl (built PIC for libelide).
noinst_LTLIBRARIES += common/libelide-common.la
common_libelide_common_la_SOURCES = \
	common/macros.h \
	common/log.c common/log.h \
	common/hw.c common/hw.h \
	common/segment-format.h
# hw.c executes RTM instructions only after CPUID says they exist.
common_libelide_common_la_CFLAGS = $(AM_CFLAGS) -mrtm -fvisibility=hidden
