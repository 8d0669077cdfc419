# fuzz/: libFuzzer harnesses for the parsers of hostile input (segment
# files, ELF files), of /etc/elide.conf and of elided's learned-policy
# store.  See fuzz/README.md.
#
#   ./configure CC=clang --enable-fuzzing && make fuzz [FUZZ_SECONDS=60]
#
# `make fuzz` replays every regression input, then fuzzes each harness for
# FUZZ_SECONDS over a scratch copy of its corpus (the tree is not modified),
# then says whether the known crashes still reproduce (never fails on them).
FUZZ_SECONDS = 60
FUZZ_HARNESSES = fuzz-segment fuzz-elfsym fuzz-config fuzz-learned
FUZZ_ARGS =

EXTRA_DIST += fuzz/README.md fuzz/run-fuzz.sh fuzz/seed-lib.c fuzz/fuzz-config.dict fuzz/lsan.supp \
	fuzz/corpus fuzz/regressions fuzz/known-crashes

.PHONY: fuzz fuzz-build
if ENABLE_FUZZING
noinst_PROGRAMS += fuzz/fuzz-segment fuzz/fuzz-elfsym fuzz/fuzz-config fuzz/fuzz-learned fuzz/make-seeds

FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/fuzz
fuzz_fuzz_segment_SOURCES = fuzz/fuzz-segment.c fuzz/fuzz-util.c fuzz/fuzz-util.h \
	common/segment-reader.c common/segment-names.c
fuzz_fuzz_segment_CPPFLAGS = $(FUZZ_CPPFLAGS)
fuzz_fuzz_segment_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
fuzz_fuzz_segment_LDFLAGS = $(FUZZ_CFLAGS)

fuzz_fuzz_elfsym_SOURCES = fuzz/fuzz-elfsym.c fuzz/fuzz-util.c fuzz/fuzz-util.h common/elfsym.c
fuzz_fuzz_elfsym_CPPFLAGS = $(FUZZ_CPPFLAGS)
fuzz_fuzz_elfsym_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
fuzz_fuzz_elfsym_LDFLAGS = $(FUZZ_CFLAGS)

fuzz_fuzz_config_SOURCES = fuzz/fuzz-config.c fuzz/fuzz-util.c fuzz/fuzz-util.h elided/config.c
fuzz_fuzz_config_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(srcdir)/elided
fuzz_fuzz_config_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS) $(LIBCONFIG_CFLAGS)
fuzz_fuzz_config_LDFLAGS = $(FUZZ_CFLAGS)
fuzz_fuzz_config_LDADD = $(LIBCONFIG_LIBS)

fuzz_fuzz_learned_SOURCES = fuzz/fuzz-learned.c fuzz/fuzz-util.c fuzz/fuzz-util.h elided/learned.c elided/learned.h
fuzz_fuzz_learned_CPPFLAGS = $(FUZZ_CPPFLAGS) -I$(srcdir)/elided
fuzz_fuzz_learned_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
fuzz_fuzz_learned_LDFLAGS = $(FUZZ_CFLAGS)

# Generated seeds and regression inputs (fuzz/make-seeds.c), plus a real
# shared object compiled from fuzz/seed-lib.c.
fuzz_make_seeds_SOURCES = fuzz/make-seeds.c

fuzz/seeds.stamp: fuzz/make-seeds$(EXEEXT) $(srcdir)/fuzz/seed-lib.c
	$(AM_V_GEN)rm -rf fuzz/seeds && \
	fuzz/make-seeds$(EXEEXT) fuzz/seeds && \
	$(CC) -std=gnu11 -O1 -fPIC -shared -nostdlib -Wl,--build-id=sha1 \
		-o fuzz/seeds/corpus/fuzz-elfsym/seed-lib.so $(srcdir)/fuzz/seed-lib.c && \
	touch $@

fuzz-build: fuzz/fuzz-segment$(EXEEXT) fuzz/fuzz-elfsym$(EXEEXT) fuzz/fuzz-config$(EXEEXT) fuzz/fuzz-learned$(EXEEXT) \
	fuzz/seeds.stamp

fuzz: fuzz-build
	$(AM_V_at)$(SHELL) $(srcdir)/fuzz/run-fuzz.sh '$(abs_top_builddir)' '$(abs_top_srcdir)' \
		'$(FUZZ_SECONDS)' '$(FUZZ_ARGS)' $(FUZZ_HARNESSES)

clean-local: clean-fuzz
clean-fuzz:
	-rm -rf fuzz/seeds fuzz/seeds.stamp fuzz/run
else
fuzz fuzz-build:
	@echo "make $@: the fuzz harnesses are not built in this tree." >&2; \
	echo "  Configure a build with clang and libFuzzer (Debian 12: apt-get install clang libclang-rt-dev):" >&2; \
	echo "    mkdir build-fuzz && cd build-fuzz && ../configure CC=clang --enable-fuzzing && make fuzz" >&2; \
	echo "  See fuzz/README.md." >&2; \
	exit 1
endif
