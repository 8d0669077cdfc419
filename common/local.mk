# common/: code shared by libelide, elided and elidectl.
#
# libelide-common.la is linked into libelide.so (so it is built PIC and kept
# small); libelide-tools.la adds what only the daemon and the CLI need.
noinst_LTLIBRARIES += common/libelide-common.la common/libelide-tools.la
common_libelide_common_la_SOURCES = \
	common/macros.h \
	common/log.c common/log.h \
	common/hw.c common/hw.h common/sbuf.h common/errbuf.h \
	common/elfsym.c common/elfsym.h \
	common/segment-format.h \
	common/learn-format.c common/learn-format.h common/fdio.h \
	common/segment-names.c common/segment-names.h
# hw.c executes RTM instructions only after CPUID says they exist.
common_libelide_common_la_CFLAGS = $(AM_CFLAGS) -mrtm -fvisibility=hidden

common_libelide_tools_la_SOURCES = \
	common/segment-reader.c common/segment-reader.h
common_libelide_tools_la_LIBADD = common/libelide-common.la
