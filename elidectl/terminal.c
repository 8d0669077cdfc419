/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

#include "log.h"
#include "terminal.h"

static struct {
	bool set_up;
	bool full;
	bool tty;            /* standard output was a terminal at set-up */
	bool colors;
	bool utf8;
	size_t columns_env;  /* $COLUMNS, 0 when unset or invalid */
	size_t lines_env;
	size_t tty_columns, tty_lines;
	size_t margin;       /* columns kept free at the right */
	pid_t pager;
} term = { .pager = -1 };

static size_t env_size(const char *name)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || v[0] < '1' || v[0] > '9')
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n > 100000)
		return 0;
	return n;
}

/* 1 yes, 0 no, -1 not set or not a boolean. */
static int env_bool(const char *name)
{
	const char *v = getenv(name);

	if (!v)
		return -1;
	if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on") ||
	    !strcmp(v, "16") || !strcmp(v, "256") || !strcmp(v, "24bit"))
		return 1;
	if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
		return 0;
	return -1;
}

static void read_size(void)
{
	struct winsize ws;

	term.tty_columns = term.tty_lines = 0;
	if (term.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
		term.tty_columns = ws.ws_col;
		term.tty_lines = ws.ws_row;
	}
}

void terminal_update_size(void)
{
	/* After a resize, $COLUMNS and $LINES are the old size. */
	term.columns_env = term.lines_env = 0;
	read_size();
}

void terminal_setup(bool full, bool no_color)
{
	const char *t = getenv("TERM"), *no = getenv("NO_COLOR"), *cs = nl_langinfo(CODESET);
	int force;

	term.set_up = true;
	term.full = full;
	term.tty = isatty(STDOUT_FILENO);
	term.utf8 = cs && (!strcasecmp(cs, "UTF-8") || !strcasecmp(cs, "utf8"));
	term.columns_env = env_size("COLUMNS");
	term.lines_env = env_size("LINES");
	read_size();

	/* https://no-color.org: set and not empty.  SYSTEMD_COLORS as systemd reads it. */
	force = env_bool("SYSTEMD_COLORS");
	if (no_color || (no && *no))
		term.colors = false;
	else if (force >= 0)
		term.colors = force;
	else
		term.colors = term.tty && !(t && !strcmp(t, "dumb"));
}

size_t terminal_width(void)
{
	size_t w;

	if (term.full)
		return 0;
	w = term.columns_env ? term.columns_env : term.tty_columns;
	return w > term.margin ? w - term.margin : w;
}

void terminal_set_margin(size_t columns)
{
	term.margin = columns;
}

size_t terminal_height(void)
{
	return term.lines_env ? term.lines_env : term.tty_lines;
}

bool terminal_colors(void)
{
	return term.colors;
}

bool terminal_utf8(void)
{
	return term.utf8;
}

const char *ansi_highlight_green(void)
{
	return term.colors ? "\033[0;1;32m" : "";
}

const char *ansi_highlight_yellow(void)
{
	return term.colors ? "\033[0;1;33m" : "";
}

const char *ansi_highlight_red(void)
{
	return term.colors ? "\033[0;1;31m" : "";
}

const char *ansi_normal(void)
{
	return term.colors ? "\033[0m" : "";
}

/* --- pager ------------------------------------------------------------------ */

/* The pager's end of the pipe as its stdin; only async-signal-safe calls. */
static _Noreturn void run_pager(int fd, const char *pager)
{
	static const char *const fallback[] = { "less", "more" };
	char buf[4096];
	ssize_t n;

	if (dup2(fd, STDIN_FILENO) < 0)
		_exit(EXIT_FAILURE);
	if (fd != STDIN_FILENO)
		close(fd);
	if (pager)
		execl("/bin/sh", "sh", "-c", pager, (char *)NULL);
	else
		for (size_t i = 0; i < sizeof(fallback) / sizeof(fallback[0]); i++)
			execlp(fallback[i], fallback[i], (char *)NULL);
	/* No pager at all: copy, so the output is not lost. */
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));

			if (w <= 0)
				_exit(EXIT_FAILURE);
			off += w;
		}
	_exit(EXIT_SUCCESS);
}

void pager_open(bool no_pager)
{
	const char *pager = getenv("SYSTEMD_PAGER"), *less = getenv("SYSTEMD_LESS");
	int fd[2];
	pid_t pid;

	if (no_pager || term.pager >= 0 || !term.set_up || !term.tty)
		return;
	if (!pager)
		pager = getenv("PAGER");
	if (pager && (!pager[strspn(pager, " \t")] || !strcmp(pager, "cat")))
		return;
	if (setenv("LESS", less ? less : "FRXMK", 1) < 0 ||
	    (term.utf8 && !getenv("LESSCHARSET") && setenv("LESSCHARSET", "utf-8", 1) < 0))
		return;
	fflush(stdout);
	if (pipe2(fd, O_CLOEXEC) < 0) {
		log_debug("no pager: cannot create a pipe: %m");
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_debug("no pager: cannot fork: %m");
		close(fd[0]);
		close(fd[1]);
		return;
	}
	if (pid == 0) {
		close(fd[1]);
		/* dup2 clears O_CLOEXEC on the copy. */
		run_pager(fd[0], pager);
	}
	close(fd[0]);
	if (dup2(fd[1], STDOUT_FILENO) < 0) {
		close(fd[1]);
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return;
	}
	close(fd[1]);
	term.pager = pid;
	atexit(pager_close);
}

void pager_close(void)
{
	if (term.pager < 0)
		return;
	fflush(stdout);
	/* The pager sees the end of its input; its output stays the terminal's. */
	close(STDOUT_FILENO);
	while (waitpid(term.pager, NULL, 0) < 0 && errno == EINTR)
		;
	term.pager = -1;
}

/* --- widths and ellipses ------------------------------------------------------ */

/* Length in bytes and display width of the character at s (s non-empty). */
static size_t char_at(const char *s, size_t *width)
{
	mbstate_t st;
	wchar_t wc;
	size_t len;
	int w;

	if (!term.utf8 || (unsigned char)*s < 0x80) {
		*width = 1;
		return 1;
	}
	memset(&st, 0, sizeof(st));
	len = mbrtowc(&wc, s, MB_CUR_MAX, &st);
	if (len == 0 || len > 4) {
		*width = 1;
		return 1;
	}
	w = wcwidth(wc);
	*width = w < 0 ? 1 : (size_t)w;
	return len;
}

size_t text_width(const char *s)
{
	size_t width = 0, w;

	while (*s) {
		s += char_at(s, &w);
		width += w;
	}
	return width;
}

const char *text_tail(const char *s, size_t width)
{
	size_t total = text_width(s), w;

	while (*s && total > width) {
		s += char_at(s, &w);
		total -= w;
	}
	return s;
}

size_t ellipsize(const char *s, size_t width, bool middle, char *buf, size_t size)
{
	const char *dots = term.utf8 ? "\xe2\x80\xa6" : "...";
	size_t dots_width = term.utf8 ? 1 : 3, total = text_width(s), left, right, used = 0, out = 0, w;
	const char *p, *tail;

	if (size == 0)
		return 0;
	if (total <= width || width == 0) {
		snprintf(buf, size, "%s", width == 0 ? "" : s);
		return width == 0 ? 0 : total;
	}
	if (width <= dots_width) {
		/* No room for text and dots: the beginning alone. */
		for (p = s; *p;) {
			size_t len = char_at(p, &w);

			if (used + w > width)
				break;
			used += w;
			p += len;
		}
		snprintf(buf, size, "%.*s", (int)(p - s), s);
		return used;
	}
	left = middle ? (width - dots_width) * 2 / 5 : width - dots_width;
	right = width - dots_width - left;
	for (p = s; *p;) {
		size_t len = char_at(p, &w);

		if (used + w > left)
			break;
		used += w;
		p += len;
	}
	out = (size_t)(p - s);
	/* The tail: what is left after skipping characters until it fits `right`. */
	tail = s + strlen(s);
	if (right > 0) {
		size_t remaining = total - used;

		for (tail = p; *tail && remaining > right;) {
			size_t len = char_at(tail, &w);

			remaining -= w;
			tail += len;
		}
		used += remaining;
	}
	snprintf(buf, size, "%.*s%s%s", (int)out, s, dots, tail);
	return used + dots_width;
}

void print_clipped(FILE *f, const char *line, size_t width)
{
	size_t used = 0, w;
	bool colored = false;
	const char *p = line;

	if (width == 0) {
		fputs(line, f);
		return;
	}
	while (*p) {
		size_t len;

		/* Colour sequences take no room. */
		if (p[0] == '\033' && p[1] == '[') {
			len = 2 + strspn(p + 2, "0123456789;");
			if (p[len])
				len++;
			fwrite(p, 1, len, f);
			colored = true;
			p += len;
			continue;
		}
		len = char_at(p, &w);
		if (used + w > width)
			break;
		fwrite(p, 1, len, f);
		used += w;
		p += len;
	}
	if (colored && *p)
		fputs("\033[0m", f);
}

void print_wrapped(FILE *f, const char *prefix, size_t indent, const char *text, size_t width)
{
	size_t col = indent;
	const char *p = text;

	fputs(prefix, f);
	if (width <= indent + 20) {
		fprintf(f, "%s\n", text);
		return;
	}
	while (*p) {
		size_t word = strcspn(p, " "), w;
		char buf[1024];

		snprintf(buf, sizeof(buf), "%.*s", (int)word, p);
		w = text_width(buf);
		if (col > indent && col + 1 + w > width) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fputs(buf, f);
		col += w;
		p += word;
		while (*p == ' ')
			p++;
	}
	fputc('\n', f);
}
