# elidectl/: the administrator's command line.  Verbs read through a source
# (source.h): elided over D-Bus (source-bus.c), else the segments directly
# (source-direct.c).  check-config links elided's configuration parser.
bin_PROGRAMS += elidectl/elidectl
elidectl_elidectl_SOURCES = \
	elidectl/elidectl.c elidectl/elidectl.h \
	elidectl/list.c \
	elidectl/show.c \
	elidectl/lock-rows.c elidectl/lock-rows.h \
	elidectl/history.c \
	elidectl/candidates.c \
	elidectl/advice.c elidectl/advice.h \
	elidectl/status.c \
	elidectl/control.c \
	elidectl/learned.c \
	elidectl/top.c elidectl/top.h \
	elidectl/top-locks.c \
	elidectl/sparkline.c elidectl/sparkline.h \
	elidectl/check-config.c \
	elidectl/hwinfo.c \
	elidectl/run.c \
	elidectl/enable.c \
	elidectl/format.c \
	elidectl/source.c elidectl/source.h \
	elidectl/source-direct.c \
	elidectl/source-bus.c \
	elidectl/table.c elidectl/table.h \
	elidectl/terminal.c elidectl/terminal.h \
	elidectl/json.c elidectl/json.h \
	elided/config.c elided/policy-config.h
elidectl_elidectl_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/elided \
	-DSYSCONFDIR=\"$(sysconfdir)\" -DLIBDIR=\"$(libdir)\"
elidectl_elidectl_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(LIBCONFIG_CFLAGS) $(SMARTCOLS_CFLAGS)
# Tables through libsmartcols (util-linux).
# libelide-tools.la: the segment reader, with libelide-common.la (log, elfsym, hw).
elidectl_elidectl_LDADD = common/libelide-tools.la $(SYSTEMD_LIBS) $(LIBCONFIG_LIBS) $(SMARTCOLS_LIBS)
dist_man_MANS += elidectl/elidectl.1
