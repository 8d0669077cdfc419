# elided: the policy daemon.
sbin_PROGRAMS += elided/elided
elided_elided_SOURCES = \
	elided/main.c elided/elided.h \
	elided/process.c elided/process-internal.h elided/process-refresh.c elided/process-decisions.c \
	elided/process-owner.c elided/decide-lock.c elided/decide-lock.h elided/lock-names.c \
	elided/symbolizer.c elided/symcache.c elided/symcache.h \
	elided/learned.c elided/learned.h elided/learning.c elided/hints.c \
	elided/config.c elided/policy-config.h \
	elided/discovery.c elided/discovery.h \
	elided/futexwatch.c \
	elided/dbus.c elided/dbus-internal.h elided/dbus-queue.c elided/dbus-methods.c elided/dbus-object.c \
	elided/metrics.c elided/metrics.h \
	elided/events.c elided/events.h
elided_elided_CPPFLAGS = $(AM_CPPFLAGS) -DSYSCONFDIR=\"$(sysconfdir)\" -DLOCALSTATEDIR=\"$(localstatedir)\" -I$(srcdir)/elided \
	-I$(builddir)/elided/bpf -I$(srcdir)/elided/bpf
elided_elided_CFLAGS = $(AM_CFLAGS) $(SYSTEMD_CFLAGS) $(LIBCONFIG_CFLAGS) $(LIBBPF_CFLAGS)
elided_elided_LDADD = common/libelide-tools.la $(SYSTEMD_LIBS) $(LIBCONFIG_LIBS) $(LIBBPF_LIBS)

if HAVE_BPF
# CO-RE: vmlinux.h from the kernel's BTF, the object from clang -target bpf,
# the skeleton header from bpftool.
BUILT_SOURCES += elided/bpf/procwatch.skel.h
CLEANFILES += elided/bpf/vmlinux.h elided/bpf/procwatch.bpf.o elided/bpf/procwatch.skel.h
elided/bpf/vmlinux.h:
	$(AM_V_GEN)$(MKDIR_P) elided/bpf && $(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@
elided/bpf/procwatch.bpf.o: $(srcdir)/elided/bpf/procwatch.bpf.c $(srcdir)/elided/bpf/procwatch.h elided/bpf/vmlinux.h
	$(AM_V_CC)$(BPF_CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I elided/bpf -I $(srcdir)/elided/bpf \
		$(LIBBPF_CFLAGS) -c $< -o $@
elided/bpf/procwatch.skel.h: elided/bpf/procwatch.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@
# The lock-wait observer (futexwatch.c), built the same way.
BUILT_SOURCES += elided/bpf/futexwatch.skel.h
CLEANFILES += elided/bpf/futexwatch.bpf.o elided/bpf/futexwatch.skel.h
elided/bpf/futexwatch.bpf.o: $(srcdir)/elided/bpf/futexwatch.bpf.c $(srcdir)/elided/bpf/futexwatch.h elided/bpf/vmlinux.h
	$(AM_V_CC)$(BPF_CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I elided/bpf -I $(srcdir)/elided/bpf \
		$(LIBBPF_CFLAGS) -c $< -o $@
elided/bpf/futexwatch.skel.h: elided/bpf/futexwatch.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@
endif
EXTRA_DIST += elided/bpf/procwatch.bpf.c elided/bpf/procwatch.h elided/bpf/futexwatch.bpf.c elided/bpf/futexwatch.h
