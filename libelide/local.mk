# libelide.so: the LD_PRELOAD library.
lib_LTLIBRARIES += libelide/libelide.la
include_HEADERS += include/elide.h
pkgconfig_DATA += include/elide.pc
libelide_libelide_la_SOURCES = \
	libelide/elide.c libelide/elide-internal.h \
	libelide/api.c \
	libelide/cond.c \
	libelide/elision.c libelide/elision.h \
	libelide/fastpath.c libelide/hotpath.h \
	libelide/glibc-abi.h libelide/glibc-check.c \
	libelide/glibc-protocol.c libelide/glibc-protocol.h \
	libelide/learn.c \
	libelide/mutex.c libelide/mutex.h \
	libelide/rtm.h \
	libelide/options.c libelide/options.h \
	libelide/registry.c \
	libelide/report.c \
	libelide/resolve.c libelide/resolve.h \
	libelide/rwlock.c libelide/rwlock.h \
	libelide/sandbox.c \
	libelide/segment.c \
	libelide/watch.c libelide/watch.h
# -mrtm only enables the intrinsics; RTM instructions run only when hw.c said so.
libelide_libelide_la_CPPFLAGS = $(AM_CPPFLAGS) -DELIDE_BUILDING_LIBELIDE
libelide_libelide_la_CFLAGS = $(AM_CFLAGS) -mrtm -fvisibility=hidden -ftls-model=initial-exec
libelide_libelide_la_LIBADD = common/libelide-common.la
libelide_libelide_la_LDFLAGS = $(AM_LDFLAGS) -avoid-version -shared \
	-Wl,--version-script=$(srcdir)/libelide/libelide.sym -Wl,-z,nodelete -Wl,-z,now
EXTRA_DIST += libelide/libelide.sym
EXTRA_libelide_libelide_la_DEPENDENCIES = libelide/libelide.sym

# No libtool archive is installed: nothing links libelide (programs get it
# through LD_PRELOAD or /etc/ld.so.preload, and <elide.h> needs no linking),
# and distributions ship no .la files.  Without the .la, libtool's uninstall
# would remove only the .la, so the library goes by name.
install-exec-hook:
	rm -f "$(DESTDIR)$(libdir)/libelide.la"
uninstall-hook:
	rm -f "$(DESTDIR)$(libdir)/libelide.so"
