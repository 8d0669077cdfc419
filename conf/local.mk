# The commented default configuration, installed as $(sysconfdir)/elide.conf.
dist_sysconf_DATA = conf/elide.conf
