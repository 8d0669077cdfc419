/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Hardware transactional memory detection, shared by libelide (decides at
 * start-up whether to elide) and elidectl (`elidectl hw`).
 */
#ifndef ELIDE_HW_H
#define ELIDE_HW_H

#include <stdbool.h>
#include <stdint.h>

struct elide_hw {
	char vendor[13];          /* CPUID leaf 0 vendor string */
	unsigned family, model, stepping; /* display family/model, as in /proc/cpuinfo */
	bool cpuid_rtm;           /* CPUID.(EAX=7,ECX=0):EBX[11] */
	bool cpuid_hle;           /* CPUID.(EAX=7,ECX=0):EBX[4] */
	bool rtm_always_abort;    /* CPUID.(EAX=7,ECX=0):EDX[11] */
	bool tsx_force_abort;     /* CPUID.(EAX=7,ECX=0):EDX[13] */
	bool model_broken;        /* on the list of models with TSX errata */
	bool probe_done;          /* a probe transaction was attempted */
	unsigned probe_commits;   /* of probe_tries */
	unsigned probe_tries;
	uint32_t probe_last_status; /* _xbegin() status of the last failed try */
	bool rtm_usable;          /* the verdict: libelide may use RTM */
	const char *reason;       /* static string: why usable or not, one line */
};

/*
 * Fills *hw from CPUID and, only when CPUID reports RTM and nothing rules it
 * out, a probe of up to 16 tiny transactions (usable when at least one
 * commits).  Never executes an RTM instruction on a CPU without the RTM bit.
 * The ELIDE_FAKE_NO_RTM environment variable (any value), read with
 * secure_getenv, forces rtm_usable = false with reason "disabled by
 * ELIDE_FAKE_NO_RTM" so tests can exercise the pass-through path.
 * Returns 0 (detection itself cannot fail).
 */
int elide_hw_detect(struct elide_hw *hw);

/* True for family/model/stepping that glibc and Intel document as having
 * broken or unreliable TSX: the list glibc 2.36 disables RTM on (Haswell
 * 0x3c, 0x45, 0x46, 0x3f stepping < 4; Intel's 2021 TSX memory-ordering
 * notice: 0x4e, 0x5e, 0x8e/0x9e stepping <= 0xc, 0x55 stepping <= 5). */
bool elide_hw_model_is_broken(const char *vendor, unsigned family, unsigned model, unsigned stepping);

/*
 * True when the GLIBC_TUNABLES string (may be NULL) enables glibc's own
 * elision: its last valid glibc.elision.enable entry (colon separated)
 * has the value 1, parsed as glibc does ("1", "01", "0x1"; values out of
 * 0..1 or not numbers are ignored).  libelide then refuses to elide (no
 * double elision).
 */
bool elide_glibc_elision_enabled(const char *tunables);

#endif
