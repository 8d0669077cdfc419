/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * RTM detection.  libelide calls this from its constructor, before malloc
 * may be safe, so nothing here allocates or uses stdio: formatted reasons go
 * into a static buffer (detection runs once per process).
 */
#include <cpuid.h>
#include <errno.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "sbuf.h"

#define PROBE_TRIES 16u

/* CPUID.(EAX=7,ECX=0) feature bits. */
#define CPUID7_EBX_HLE (1u << 4)
#define CPUID7_EBX_RTM (1u << 11)
#define CPUID7_EDX_RTM_ALWAYS_ABORT (1u << 11)
#define CPUID7_EDX_TSX_FORCE_ABORT (1u << 13)

static char reason_buf[160];

bool elide_hw_model_is_broken(const char *vendor, unsigned family, unsigned model, unsigned stepping)
{
	if (!vendor || strcmp(vendor, "GenuineIntel") != 0 || family != 6)
		return false;

	switch (model) {
	case 0x3f:
		/* Haswell-EP/EX: stepping 4 (E7 v3) and later have working TSX. */
		return stepping < 4;
	case 0x3c:
	case 0x45:
	case 0x46:
		/* Haswell client: erratum HSD131/HSM142/HSW131. */
		return true;
	case 0x4e:
	case 0x5e:
		/* Skylake client: Intel's TSX memory-ordering notice (2021),
		 * which glibc follows whatever the microcode says. */
		return true;
	case 0x8e:
	case 0x9e:
		/* Kaby/Coffee/Whiskey Lake client up to stepping 0xc: the same
		 * notice (0xc is a client part too, as glibc notes). */
		return stepping <= 0xc;
	case 0x55:
		/* Skylake/Cascade Lake server up to stepping 5: the same notice. */
		return stepping <= 5;
	default:
		return false;
	}
}

/*
 * A tunable's value as glibc 2.36 reads it (elf/dl-tunables.c and
 * _dl_strtoul): blanks and a sign skipped, C notation (1, 01, 0x1), parsing
 * stops at the first character that is not a digit, no digit at all reads
 * as 0, and a value outside the tunable's range (0..1) leaves the setting
 * as it was.  Returns 0 or 1, or -ERANGE for a value glibc ignores.
 */
static int parse_elision_enable(const char *p, const char *end)
{
	unsigned long long v = 0;
	unsigned base = 10;
	bool negative = false;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p < end && (*p == '-' || *p == '+'))
		negative = *p++ == '-';
	if (p == end || *p < '0' || *p > '9')
		return 0;
	if (*p == '0') {
		base = 8;
		if (end - p > 1 && (p[1] == 'x' || p[1] == 'X')) {
			base = 16;
			p += 2;
		}
	}
	for (; p < end; p++) {
		unsigned digit;

		if (*p >= '0' && *p <= '9')
			digit = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			digit = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F')
			digit = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (digit >= base)
			break;
		v = v * base + digit;
		if (v > 1)
			return -ERANGE;
	}
	if (negative && v != 0)
		return -ERANGE;
	return (int)v;
}

bool elide_glibc_elision_enabled(const char *tunables)
{
	static const char name[] = "glibc.elision.enable=";
	const char *p = tunables;
	bool enabled = false;

	if (!p)
		return false;

	while (*p) {
		const char *end = strchrnul(p, ':');

		if ((size_t)(end - p) >= sizeof(name) - 1 && memcmp(p, name, sizeof(name) - 1) == 0) {
			int v = parse_elision_enable(p + sizeof(name) - 1, end);

			if (v >= 0)
				enabled = v == 1;
		}
		p = *end ? end + 1 : end;
	}
	return enabled;
}

static void read_cpuid(struct elide_hw *hw)
{
	unsigned eax, ebx, ecx, edx, max_leaf, sig;

	if (!__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx))
		return;
	memcpy(hw->vendor + 0, &ebx, 4);
	memcpy(hw->vendor + 4, &edx, 4);
	memcpy(hw->vendor + 8, &ecx, 4);
	hw->vendor[12] = '\0';

	if (max_leaf >= 1 && __get_cpuid(1, &sig, &ebx, &ecx, &edx)) {
		/* Same arithmetic as the kernel's x86_family()/x86_model(). */
		hw->family = (sig >> 8) & 0xf;
		if (hw->family == 0xf)
			hw->family += (sig >> 20) & 0xff;
		hw->model = (sig >> 4) & 0xf;
		if (hw->family >= 0x6)
			hw->model += ((sig >> 16) & 0xf) << 4;
		hw->stepping = sig & 0xf;
	}

	if (max_leaf >= 7 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
		hw->cpuid_hle = ebx & CPUID7_EBX_HLE;
		hw->cpuid_rtm = ebx & CPUID7_EBX_RTM;
		hw->rtm_always_abort = edx & CPUID7_EDX_RTM_ALWAYS_ABORT;
		hw->tsx_force_abort = edx & CPUID7_EDX_TSX_FORCE_ABORT;
	}
}

/* Only reached when CPUID advertises RTM and nothing rules it out. */
static void probe_rtm(struct elide_hw *hw)
{
	static volatile int probe_word;

	hw->probe_done = true;
	for (unsigned i = 0; i < PROBE_TRIES; i++) {
		unsigned status;

		hw->probe_tries++;
		status = _xbegin();
		if (status == _XBEGIN_STARTED) {
			probe_word++;
			_xend();
			hw->probe_commits++;
		} else {
			hw->probe_last_status = status;
		}
	}
	/* The write is the probe's point; reading it back keeps compilers
	 * that warn about a variable only written (gcc 16) quiet. */
	(void)probe_word;
}

int elide_hw_detect(struct elide_hw *hw)
{
	struct sbuf b = SBUF_INIT(reason_buf);

	memset(hw, 0, sizeof(*hw));
	read_cpuid(hw);
	hw->model_broken = elide_hw_model_is_broken(hw->vendor, hw->family, hw->model, hw->stepping);

	/* Checked before anything that could execute xbegin, so tests can
	 * force the pass-through path on any machine. */
	if (secure_getenv("ELIDE_FAKE_NO_RTM")) {
		hw->reason = "disabled by ELIDE_FAKE_NO_RTM";
		return 0;
	}
	if (!hw->cpuid_rtm) {
		hw->reason = "CPU has no RTM (CPUID.7.0:EBX[11] clear)";
		return 0;
	}
	if (hw->rtm_always_abort) {
		hw->reason = "RTM_ALWAYS_ABORT set: microcode aborts every transaction (TSX disabled)";
		return 0;
	}
	if (hw->model_broken) {
		sb_puts(&b, "Intel model 0x");
		sb_putu(&b, hw->model, 16);
		sb_puts(&b, " stepping ");
		sb_putu(&b, hw->stepping, 10);
		sb_puts(&b, " has a TSX erratum");
		hw->reason = reason_buf;
		return 0;
	}

	probe_rtm(hw);
	hw->rtm_usable = hw->probe_commits > 0;

	sb_puts(&b, "probe: ");
	sb_putu(&b, hw->probe_commits, 10);
	sb_puts(&b, " of ");
	sb_putu(&b, hw->probe_tries, 10);
	sb_puts(&b, " transactions committed");
	if (!hw->rtm_usable) {
		sb_puts(&b, " (last status 0x");
		sb_putu(&b, hw->probe_last_status, 16);
		sb_puts(&b, ")");
	}
	hw->reason = reason_buf;
	return 0;
}
