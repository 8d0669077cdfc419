# tests/model/: spin checks of the lock protocols libelide runs itself
# (libelide/model/README).  Part of make check (a SKIP without spin), and
# alone as `make check-model`.
TESTS += tests/model/check-model.sh
EXTRA_DIST += tests/model/check-model.sh libelide/model/README \
	libelide/model/own-mutex.pml libelide/model/own-rwlock.pml

check-model:
	top_srcdir='$(abs_top_srcdir)' CC='$(CC)' $(SHELL) $(top_srcdir)/tests/model/check-model.sh

.PHONY: check-model
