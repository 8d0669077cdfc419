/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl hw: can this machine elide?  CPUID bits, TSX_CTRL, what the
 * kernel did with TSX, a probe transaction, and the verdict libelide would
 * reach (common/hw.c, the very same code).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elidectl.h"
#include "hw.h"
#include "json.h"
#include "log.h"

#define MSR_IA32_TSX_CTRL 0x122
#define TSX_CTRL_RTM_DISABLE (1u << 0)
#define TSX_CTRL_CPUID_CLEAR (1u << 1)

/* -errno when the msr module is not loaded, we are not root, or the CPU
 * has no TSX_CTRL (the read fails with EIO). */
static int read_tsx_ctrl(uint64_t *ret)
{
	int fd = open("/dev/cpu/0/msr", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, ret, sizeof(*ret), MSR_IA32_TSX_CTRL);
	close(fd);
	if (n != (ssize_t)sizeof(*ret))
		return n < 0 ? -errno : -EIO;
	return 0;
}

static void read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return;
	if (fgets(buf, (int)size, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* The tsx= word of the kernel command line, "" when absent. */
static void kernel_tsx_param(char *buf, size_t size)
{
	char cmdline[4096];
	const char *p;

	buf[0] = '\0';
	read_line("/proc/cmdline", cmdline, sizeof(cmdline));
	for (p = cmdline; (p = strstr(p, "tsx=")); p += 4)
		if (p == cmdline || p[-1] == ' ') {
			snprintf(buf, size, "%.*s", (int)strcspn(p, " "), p);
			return;
		}
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "no";
}

int verb_hw(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	struct elide_hw hw;
	char taa[256], param[128], tsx_ctrl[128], probe[128];
	uint64_t msr = 0;
	int r;

	(void)s;
	(void)argv;
	if (argc != 1) {
		log_error("hw takes no arguments");
		return EXIT_USAGE;
	}
	elide_hw_detect(&hw);
	read_line("/sys/devices/system/cpu/vulnerabilities/tsx_async_abort", taa, sizeof(taa));
	kernel_tsx_param(param, sizeof(param));
	r = read_tsx_ctrl(&msr);
	if (r == 0)
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "0x%llx (RTM_DISABLE=%d, TSX_CPUID_CLEAR=%d)",
			 (unsigned long long)msr, !!(msr & TSX_CTRL_RTM_DISABLE), !!(msr & TSX_CTRL_CPUID_CLEAR));
	else if (r == -EIO)
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "not present");
	else
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "unknown (needs root and the msr module)");
	if (hw.probe_done)
		snprintf(probe, sizeof(probe), "%u of %u transactions committed", hw.probe_commits, hw.probe_tries);
	else
		snprintf(probe, sizeof(probe), "not run (CPUID rules RTM out)");

	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "vendor");
		json_string(&j, hw.vendor);
		json_key(&j, "family");
		json_uint(&j, hw.family);
		json_key(&j, "model");
		json_uint(&j, hw.model);
		json_key(&j, "stepping");
		json_uint(&j, hw.stepping);
		json_key(&j, "rtm");
		json_bool(&j, hw.cpuid_rtm);
		json_key(&j, "hle");
		json_bool(&j, hw.cpuid_hle);
		json_key(&j, "rtm_always_abort");
		json_bool(&j, hw.rtm_always_abort);
		json_key(&j, "tsx_force_abort");
		json_bool(&j, hw.tsx_force_abort);
		json_key(&j, "model_broken");
		json_bool(&j, hw.model_broken);
		json_key(&j, "tsx_ctrl");
		if (r == 0)
			json_uint(&j, msr);
		else
			json_string(&j, r == -EIO ? "not present" : "unknown");
		json_key(&j, "kernel_tsx_param");
		json_string(&j, param[0] ? param : NULL);
		json_key(&j, "tsx_async_abort");
		json_string(&j, taa[0] ? taa : NULL);
		json_key(&j, "probe_tries");
		json_uint(&j, hw.probe_done ? hw.probe_tries : 0);
		json_key(&j, "probe_commits");
		json_uint(&j, hw.probe_done ? hw.probe_commits : 0);
		json_key(&j, "rtm_usable");
		json_bool(&j, hw.rtm_usable);
		json_key(&j, "reason");
		json_string(&j, hw.reason);
		json_end_object(&j);
		if (json_finish(&j) < 0)
			return EXIT_FAIL;
	} else {
		printf("%-18s %s family %u model %u stepping %u%s\n", "CPU:", hw.vendor, hw.family, hw.model,
		       hw.stepping, hw.model_broken ? " (TSX errata)" : "");
		printf("%-18s %s\n", "CPUID RTM:", yes_no(hw.cpuid_rtm));
		printf("%-18s %s\n", "CPUID HLE:", yes_no(hw.cpuid_hle));
		printf("%-18s %s\n", "RTM_ALWAYS_ABORT:", yes_no(hw.rtm_always_abort));
		printf("%-18s %s\n", "TSX_FORCE_ABORT:", yes_no(hw.tsx_force_abort));
		printf("%-18s %s\n", "TSX_CTRL:", tsx_ctrl);
		printf("%-18s %s\n", "Kernel tsx=:", param[0] ? param + 4 : "not set (kernel default)");
		printf("%-18s %s\n", "tsx_async_abort:", taa[0] ? taa : "unknown (no sysfs entry)");
		printf("%-18s %s\n", "Probe:", probe);
		printf("%-18s %s: %s\n", "Verdict:", hw.rtm_usable ? "RTM usable" : "RTM not usable", hw.reason);
	}
	/* Scripts: `elidectl hw >/dev/null && ...` asks "can we elide?". */
	return hw.rtm_usable ? EXIT_OK : EXIT_FAIL;
}
