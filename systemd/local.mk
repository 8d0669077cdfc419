# systemd unit, tmpfiles.d entry and D-Bus policy.
systemdsystemunit_DATA = systemd/elided.service
tmpfiles_DATA = systemd/tmpfiles.d/elide.conf
dbuspolicy_DATA = systemd/org.elide.elided1.conf
CLEANFILES += systemd/elided.service
EXTRA_DIST += systemd/elided.service.in systemd/tmpfiles.d/elide.conf systemd/org.elide.elided1.conf systemd/README.md

systemd/elided.service: $(srcdir)/systemd/elided.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && sed -e 's|@sbindir[@]|$(sbindir)|g' $< > $@.tmp && mv $@.tmp $@
