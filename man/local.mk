# Manual pages, and a test that lints them with groff.
dist_man_MANS += \
	man/libelide.7 \
	man/libelide-options.7 \
	man/libelide-semantics.7 \
	man/elided.8 \
	man/org.elide.elided1.5 \
	man/elide-learning.7 \
	man/elided-events.7 \
	man/elided-metrics.7 \
	man/elide-security.7 \
	man/elidectl-json.7 \
	man/elide.conf.5 \
	man/elide-segment.5 \
	man/elide.h.3 \
	man/elide_mutex_set_policy.3 \
	man/elide_mutex_set_name.3 \
	man/elide_rwlock_set_policy.3 \
	man/elide_rwlock_set_name.3 \
	man/elide_active.3

TESTS += man/test-man-lint.sh
EXTRA_DIST += man/test-man-lint.sh
