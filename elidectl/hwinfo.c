/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elidectl hw: can this machine elide?  CPUID bits, TSX_CTRL (Intel's
 * MSR: read on Intel CPUs only), what the kernel did with TSX, a probe
 * transaction, the verdict libelide would reach (common/hw.c, the very same
 * code), and advice for this machine: what would make RTM usable, or that
 * nothing can.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elidectl.h"
#include "hw.h"
#include "json.h"
#include "log.h"
#include "terminal.h"

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

/* The vendor as people say it: "Intel", "AMD", ... */
static const char *vendor_name(const char *vendor)
{
	if (!strcmp(vendor, "GenuineIntel"))
		return "Intel";
	if (!strcmp(vendor, "AuthenticAMD"))
		return "AMD";
	if (!strcmp(vendor, "HygonGenuine"))
		return "Hygon";
	if (!strcmp(vendor, "CentaurHauls") || !strcmp(vendor, "  Shanghai  "))
		return "Zhaoxin/Centaur";
	return vendor[0] ? vendor : "this vendor's";
}

/* Whether the kernel says we run in a virtual machine. */
static bool in_vm(void)
{
	char line[4096];
	bool vm = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (!vm && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && strstr(line, " hypervisor"))
			vm = true;
	fclose(f);
	return vm;
}

enum tsx_ctrl_state {
	TSX_CTRL_VALUE,        /* read: msr */
	TSX_CTRL_ABSENT,       /* Intel, the read failed: no such MSR */
	TSX_CTRL_NOT_INTEL,    /* only Intel CPUs have it */
	TSX_CTRL_NEED_ROOT,
	TSX_CTRL_NEED_MODULE,  /* root, but no /dev/cpu/0/msr */
};

#define MAX_ADVICE 4

struct hw_view {
	struct elide_hw hw;
	bool intel, vm;
	char taa[256], param[128];
	enum tsx_ctrl_state tsx;
	uint64_t msr;
	const char *advice[MAX_ADVICE];
	size_t nadvice;
	char buf[MAX_ADVICE][512];
};

static void advise(struct hw_view *v, const char *fmt, ...) _printf_(2, 3);
static void advise(struct hw_view *v, const char *fmt, ...)
{
	va_list ap;

	if (v->nadvice >= MAX_ADVICE)
		return;
	va_start(ap, fmt);
	vsnprintf(v->buf[v->nadvice], sizeof(v->buf[0]), fmt, ap);
	va_end(ap);
	v->advice[v->nadvice] = v->buf[v->nadvice];
	v->nadvice++;
}

/* What to do about it, for the machine this runs on. */
static void make_advice(struct hw_view *v)
{
	const struct elide_hw *hw = &v->hw;
	bool tsx_off_by_kernel = !strcmp(v->param, "tsx=off") ||
		(v->tsx == TSX_CTRL_VALUE && (v->msr & (TSX_CTRL_RTM_DISABLE | TSX_CTRL_CPUID_CLEAR))) ||
		strstr(v->taa, "TSX disabled");

	if (hw->rtm_usable) {
		advise(v, "RTM works here: elidectl run CMD, or elidectl enable --unit NAME for a service, "
			  "preloads libelide; elided then adapts each lock.");
		return;
	}
	if (getenv("ELIDE_FAKE_NO_RTM")) {
		advise(v, "ELIDE_FAKE_NO_RTM is set: unset it for this machine's own verdict.");
		return;
	}
	if (!v->intel) {
		advise(v, "%s processors have no TSX/RTM: nothing can be elided on this machine. libelide "
			  "watches instead: its processes show up in elidectl list as watching, with the "
			  "waiting and hold times of their contended locks (elidectl candidates).",
		       vendor_name(hw->vendor));
		advise(v, "Lock elision needs an Intel CPU with TSX enabled (for example a Xeon Scalable "
			  "server with tsx=on).");
		return;
	}
	if (hw->model_broken) {
		advise(v, "This Intel model has a TSX erratum, so libelide (as glibc) does not elide on it: "
			  "nothing can be elided on this machine.");
		return;
	}
	if (hw->rtm_always_abort) {
		advise(v, "The microcode makes every transaction abort (RTM_ALWAYS_ABORT: Intel retired TSX on "
			  "this CPU): nothing can be elided on this machine, and no setting changes that.");
		return;
	}
	if (!hw->cpuid_rtm && tsx_off_by_kernel) {
		advise(v, "The kernel turned TSX off (%s): boot with tsx=on to make RTM usable, after "
			  "weighing the TSX Async Abort mitigation (the kernel's tsx_async_abort documentation).",
			  v->param[0] ? v->param : "its default on CPUs affected by TSX Async Abort");
		return;
	}
	if (!hw->cpuid_rtm) {
		if (v->vm)
			advise(v, "This is a virtual machine and its CPU model hides RTM: give the guest the host's "
				  "TSX (e.g. QEMU -cpu host, or +rtm), if the host has it.");
		if (v->tsx == TSX_CTRL_NEED_ROOT || v->tsx == TSX_CTRL_NEED_MODULE)
			advise(v, "Whether the kernel or firmware turned TSX off shows in TSX_CTRL: run elidectl hw "
				  "as root%s.", v->tsx == TSX_CTRL_NEED_MODULE ? " after modprobe msr" : "");
		advise(v, "Otherwise this CPU has no RTM (most Intel CPUs since 2019-2021 lost it to microcode "
			  "updates): nothing can be elided on this machine; libelide passes every lock through.");
		return;
	}
	/* CPUID says RTM, yet no probe transaction committed. */
	advise(v, "CPUID reports RTM but no probe transaction committed: %s",
	       v->vm ? "the hypervisor makes them abort; check the VM's CPU model." :
		       hw->tsx_force_abort ? "TSX_FORCE_ABORT may be on (perf using PMU counter 3): see "
					     "/sys/devices/cpu/allow_tsx_force_abort." :
					     "check the kernel's tsx= setting and the firmware.");
}

static void read_hw(struct hw_view *v)
{
	int r;

	memset(v, 0, sizeof(*v));
	elide_hw_detect(&v->hw);
	v->intel = !strcmp(v->hw.vendor, "GenuineIntel");
	v->vm = in_vm();
	read_line("/sys/devices/system/cpu/vulnerabilities/tsx_async_abort", v->taa, sizeof(v->taa));
	kernel_tsx_param(v->param, sizeof(v->param));
	if (!v->intel) {
		v->tsx = TSX_CTRL_NOT_INTEL;
	} else {
		r = read_tsx_ctrl(&v->msr);
		if (r == 0)
			v->tsx = TSX_CTRL_VALUE;
		else if (r == -EIO)
			v->tsx = TSX_CTRL_ABSENT;
		else if (geteuid() != 0 || r == -EACCES || r == -EPERM)
			v->tsx = TSX_CTRL_NEED_ROOT;
		else
			v->tsx = TSX_CTRL_NEED_MODULE;
	}
	make_advice(v);
}

int verb_hw(struct source *s, const struct ctl_options *o, int argc, char **argv)
{
	static struct hw_view v;
	const struct elide_hw *hw = &v.hw;
	char tsx_ctrl[160], probe[128];

	(void)s;
	(void)argv;
	if (argc != 1) {
		log_error("hw takes no arguments");
		return EXIT_USAGE;
	}
	read_hw(&v);
	switch (v.tsx) {
	case TSX_CTRL_VALUE:
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "0x%llx (RTM_DISABLE=%d, TSX_CPUID_CLEAR=%d)",
			 (unsigned long long)v.msr, !!(v.msr & TSX_CTRL_RTM_DISABLE), !!(v.msr & TSX_CTRL_CPUID_CLEAR));
		break;
	case TSX_CTRL_ABSENT:
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "not present (this CPU or its microcode has none)");
		break;
	case TSX_CTRL_NOT_INTEL:
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "not applicable (an Intel MSR; %s CPUs have no TSX)",
			 vendor_name(hw->vendor));
		break;
	case TSX_CTRL_NEED_ROOT:
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "unknown (readable by root, with the msr module loaded)");
		break;
	case TSX_CTRL_NEED_MODULE:
		snprintf(tsx_ctrl, sizeof(tsx_ctrl), "unknown (load the msr module: modprobe msr)");
		break;
	}
	if (hw->probe_done)
		snprintf(probe, sizeof(probe), "%u of %u transactions committed", hw->probe_commits, hw->probe_tries);
	else
		snprintf(probe, sizeof(probe), "not run (CPUID rules RTM out)");

	if (o->json) {
		struct json j;

		json_init(&j, stdout, o->json_pretty);
		json_begin_object(&j);
		json_key(&j, "vendor");
		json_string(&j, hw->vendor);
		json_key(&j, "family");
		json_uint(&j, hw->family);
		json_key(&j, "model");
		json_uint(&j, hw->model);
		json_key(&j, "stepping");
		json_uint(&j, hw->stepping);
		json_key(&j, "rtm");
		json_bool(&j, hw->cpuid_rtm);
		json_key(&j, "hle");
		json_bool(&j, hw->cpuid_hle);
		json_key(&j, "rtm_always_abort");
		json_bool(&j, hw->rtm_always_abort);
		json_key(&j, "tsx_force_abort");
		json_bool(&j, hw->tsx_force_abort);
		json_key(&j, "model_broken");
		json_bool(&j, hw->model_broken);
		/* The value, else why not: "not present", "not applicable"
		 * (not Intel) or "unknown" (needs root and the msr module). */
		json_key(&j, "tsx_ctrl");
		if (v.tsx == TSX_CTRL_VALUE)
			json_uint(&j, v.msr);
		else
			json_string(&j, v.tsx == TSX_CTRL_ABSENT ? "not present" :
					v.tsx == TSX_CTRL_NOT_INTEL ? "not applicable" : "unknown");
		json_key(&j, "kernel_tsx_param");
		json_string(&j, v.param[0] ? v.param : NULL);
		json_key(&j, "tsx_async_abort");
		json_string(&j, v.taa[0] ? v.taa : NULL);
		json_key(&j, "virtual_machine");
		json_bool(&j, v.vm);
		json_key(&j, "probe_tries");
		json_uint(&j, hw->probe_done ? hw->probe_tries : 0);
		json_key(&j, "probe_commits");
		json_uint(&j, hw->probe_done ? hw->probe_commits : 0);
		json_key(&j, "rtm_usable");
		json_bool(&j, hw->rtm_usable);
		json_key(&j, "reason");
		json_string(&j, hw->reason);
		json_key(&j, "advice");
		json_begin_array(&j);
		for (size_t i = 0; i < v.nadvice; i++)
			json_string(&j, v.advice[i]);
		json_end_array(&j);
		json_end_object(&j);
		if (json_finish(&j) < 0)
			return EXIT_FAIL;
	} else {
		printf("%-18s %s family %u model %u stepping %u%s%s\n", "CPU:", hw->vendor, hw->family, hw->model,
		       hw->stepping, hw->model_broken ? " (TSX errata)" : "", v.vm ? ", virtual machine" : "");
		printf("%-18s %s\n", "CPUID RTM:", yes_no(hw->cpuid_rtm));
		printf("%-18s %s\n", "CPUID HLE:", yes_no(hw->cpuid_hle));
		printf("%-18s %s\n", "RTM_ALWAYS_ABORT:", yes_no(hw->rtm_always_abort));
		printf("%-18s %s\n", "TSX_FORCE_ABORT:", yes_no(hw->tsx_force_abort));
		printf("%-18s %s\n", "TSX_CTRL:", tsx_ctrl);
		printf("%-18s %s\n", "Kernel tsx=:", v.param[0] ? v.param + 4 : "not set (kernel default)");
		printf("%-18s %s\n", "tsx_async_abort:", v.taa[0] ? v.taa : "unknown (no sysfs entry)");
		printf("%-18s %s\n", "Probe:", probe);
		printf("%-18s %s%s%s: %s\n", "Verdict:", hw->rtm_usable ? ansi_highlight_green() : ansi_highlight_red(),
		       hw->rtm_usable ? "RTM usable" : "RTM not usable", ansi_normal(), hw->reason);
		/* Prose: wrapped at the terminal's width, else at 80. */
		for (size_t i = 0; i < v.nadvice; i++) {
			char prefix[32];

			snprintf(prefix, sizeof(prefix), "%-18s ", i == 0 ? "Advice:" : "");
			print_wrapped(stdout, prefix, 19, v.advice[i], terminal_width() ? terminal_width() : 80);
		}
	}
	/* Scripts: `elidectl hw >/dev/null && ...` asks "can we elide?". */
	return hw->rtm_usable ? EXIT_OK : EXIT_FAIL;
}
