# Tests: Check unit suites (tests/unit) and integration tests (tests/integration).
# Every test program may exit 77 (automake SKIP) with its reason on stderr.
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; export top_builddir; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	ELIDE_SANITIZERS='$(enable_sanitizers)'; export ELIDE_SANITIZERS; \
	CC='$(CC)'; export CC; \
	CK_VERBOSITY=normal; export CK_VERBOSITY;

include tests/unit/local.mk
include tests/integration/local.mk

# Shell tests (*.sh) run with the shell; programs run through preload.sh
# (tests/integration/local.mk), which leaves tests/unit programs alone.
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
