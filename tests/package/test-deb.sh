#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tests/package/test-deb.sh DIR: install the elide packages built in DIR
# (libelide, elide, libelide-dev: what dpkg-buildpackage -b wrote there)
# on this machine with apt-get, use them, purge them, and check that
# nothing is left.  Needs root and Debian; tools/run-tests runs it after
# building the packages.  Asserts:
#   - apt-get installs the three .debs (and their dependencies);
#   - the files are where Debian puts them: libelide.so under
#     /usr/lib/<triplet>, no libtool .la anywhere, the unit, the tmpfiles.d
#     entry, the D-Bus policy, /etc/elide.conf registered as a conffile,
#     elide.pc naming the multiarch libdir, the man pages; the unit is
#     enabled (dh_installsystemd) and /run/elide exists, sticky and
#     world-writable (dh_installtmpfiles);
#   - elidectl check-config accepts the installed configuration, a valid
#     drop-in in /etc/elide.conf.d, and rejects a bad one naming FILE:LINE;
#   - elidectl enable --system (in a scratch --root, never the live /etc)
#     writes /usr/lib/<triplet>/libelide.so, the installed library's real
#     path, to ld.so.preload, and disable --system removes it; libelide's
#     prerm takes exactly that line out of ld.so.preload (run against a
#     scratch root through DPKG_ROOT) and keeps every other line;
#   - elided runs: under systemd (PID 1) the package started it; elsewhere
#     the test starts the installed /usr/sbin/elided by hand on a private
#     bus built from the system's own /usr/share/dbus-1/system.conf (which
#     reads the installed policy); elidectl status answers over D-Bus as
#     root and as an unprivileged user, busctl sees org.elide.elided1;
#   - a program built against the installed <elide.h> (pkg-config elide)
#     and run with LD_PRELOAD=/usr/lib/<triplet>/libelide.so is adopted by
#     elided: elidectl list shows its pid, elidectl show its named lock;
#   - apt-get purge removes every file the packages installed, /etc/elide.conf,
#     the unit's enablement symlinks and deb-systemd-helper state, and
#     /run/elide; /etc/ld.so.preload is exactly as before.
# Whatever happens, the EXIT trap stops what the test started, removes its
# drop-ins and purges the packages, so the machine is left as it was.
set -u

dir=${1:?usage: $0 DIR-WITH-THE-DEBS}
dir=$(cd "$dir" && pwd) || exit 1

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
note() { echo "note: $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }

# Poll CMD... every 0.2 s for up to $1 seconds.
poll() {
	local n=$(($1 * 5))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}

[ "$(id -u)" -eq 0 ] || die "needs root: it installs and purges packages"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "needs apt-get and dpkg (Debian)"

arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null) || ma=$(gcc -print-multiarch 2>/dev/null)
[ -n "$ma" ] || die "cannot tell the multiarch triplet (dpkg-architecture, gcc -print-multiarch)"
lib=/usr/lib/$ma/libelide.so
packages=(libelide elide libelide-dev)

debs=()
for p in "${packages[@]}"; do
	# The newest version if several were built.
	deb=$(ls -1v "$dir/${p}"_*_"$arch".deb 2>/dev/null | tail -n1)
	[ -n "$deb" ] || die "no ${p}_*_$arch.deb in $dir"
	debs+=("$deb")
done

# ---- preconditions: the test must not take over anything installed ---------------
state() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null; }
for p in "${packages[@]}"; do
	s=$(state "$p")
	case "$s" in
	"" | not-installed) ;;
	*) die "$p is already on this machine ($s): this test installs and purges it; purge it first" ;;
	esac
done
clash=()
for deb in "${debs[@]}"; do
	while read -r path; do
		[ -e "$path" ] || [ -L "$path" ] && clash+=("$path")
	done < <(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's|^\./|/|; /[^/]$/p')
done
[ ${#clash[@]} -eq 0 ] ||
	die "files of the packages already exist (a make install?); the purge would remove them: ${clash[*]}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/elide-deb-test.XXXXXX") || exit 1
chmod 0755 "$tmp"
preload=/etc/ld.so.preload
if [ -e "$preload" ] || [ -L "$preload" ]; then
	cp -a "$preload" "$tmp/ld.so.preload.before"
	preload_before=$(sha256sum < "$preload")
else
	preload_before=absent
fi
run_elide_existed=no
[ -e /run/elide ] && run_elide_existed=yes
confd_existed=no
[ -e /etc/elide.conf.d ] && confd_existed=yes

pids=()
installed=no
start=$(date +%s)

purge() {
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${packages[@]}" >"$tmp/purge.log" 2>&1 ||
		DEBIAN_FRONTEND=noninteractive dpkg --purge "${packages[@]}" >>"$tmp/purge.log" 2>&1
}

cleanup() {
	local rc=$?
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null
	done
	rm -f /etc/elide.conf.d/50-elide-deb-test.conf /etc/elide.conf.d/60-elide-deb-test-bad.conf
	[ "$confd_existed" = yes ] || rmdir /etc/elide.conf.d 2>/dev/null
	if [ "$installed" = yes ]; then
		echo "cleanup: purging ${packages[*]}" >&2
		purge || { echo "cleanup: purge failed:" >&2; cat "$tmp/purge.log" >&2; rc=1; }
	fi
	# /etc/ld.so.preload must be exactly as it was.
	if [ "$preload_before" = absent ]; then
		if [ -e "$preload" ] || [ -L "$preload" ]; then
			echo "cleanup: FAIL: $preload appeared; removing it" >&2
			rm -f "$preload"
			rc=1
		fi
	elif [ "$(sha256sum < "$preload" 2>/dev/null)" != "$preload_before" ]; then
		echo "cleanup: FAIL: $preload changed; restoring it" >&2
		cp -a "$tmp/ld.so.preload.before" "$preload"
		rc=1
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# ---- install ---------------------------------------------------------------------
echo "installing ${debs[*]##*/}"
installed=yes
if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${debs[@]}" \
	>"$tmp/install.log" 2>&1; then
	ok "apt-get install of the three packages ($(($(date +%s) - start)) s)"
else
	cat "$tmp/install.log" >&2
	die "apt-get install"
fi
for p in "${packages[@]}"; do
	[ "$(state "$p")" = installed ] && ok "$p: installed" || fail "$p: state $(state "$p")"
done

# ---- the files -------------------------------------------------------------------
if [ -f "$lib" ] && [ ! -L "$lib" ] && [ "$(stat -c %U "$lib")" = root ]; then
	soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	ok "$lib: a regular root-owned file, SONAME $soname"
else
	fail "$lib: not installed as a regular root-owned file ($(ls -l "$lib" 2>&1))"
fi
las=$(dpkg -L "${packages[@]}" | grep '\.la$')
[ -z "$las" ] && ok "no libtool .la installed" || fail "libtool archives installed: $las"
unit=
for d in /lib/systemd/system /usr/lib/systemd/system; do
	[ -f "$d/elided.service" ] && unit=$d/elided.service
done
[ -n "$unit" ] && ok "unit: $unit" || fail "no elided.service under /lib/systemd/system or /usr/lib/systemd/system"
for f in /usr/sbin/elided /usr/bin/elidectl /usr/lib/tmpfiles.d/elide.conf \
	/usr/share/dbus-1/system.d/org.elide.elided1.conf /usr/include/elide.h \
	"/usr/lib/$ma/pkgconfig/elide.pc" /usr/share/bash-completion/completions/elidectl \
	/usr/share/zsh/vendor-completions/_elidectl /usr/share/fish/vendor_completions.d/elidectl.fish; do
	[ -f "$f" ] || fail "$f is not installed"
done
for page in elided.8 elidectl.1 elide.conf.5 libelide.7 elide.h.3 org.elide.elided1.5 elide-learning.7 \
	elide-security.7 elided-events.7 elided-metrics.7 elidectl-json.7 libelide-options.7 libelide-semantics.7; do
	[ -e "/usr/share/man/man${page##*.}/$page.gz" ] || fail "man page $page is not installed"
done
dpkg-query -W -f='${Conffiles}\n' elide | grep -q '^ /etc/elide.conf ' &&
	ok "/etc/elide.conf is a conffile of elide" || fail "/etc/elide.conf is not a conffile: $(dpkg-query -W -f='${Conffiles}' elide)"
pcdir=$(pkg-config --variable=libdir elide 2>&1)
[ "$pcdir" = "/usr/lib/$ma" ] && ok "elide.pc: libdir=$pcdir" || fail "elide.pc libdir: '$pcdir', not /usr/lib/$ma"
wants=/etc/systemd/system/multi-user.target.wants/elided.service
[ -L "$wants" ] && ok "elided.service enabled ($wants)" || fail "elided.service is not enabled: no $wants"
if command -v systemd-tmpfiles >/dev/null; then
	[ "$(stat -c '%a %U' /run/elide 2>&1)" = "1777 root" ] && ok "/run/elide: 1777 root (tmpfiles.d)" ||
		fail "/run/elide after install: $(stat -c '%a %U' /run/elide 2>&1)"
else
	note "systemd-tmpfiles is missing: the package could not create /run/elide"
fi

# ---- configuration ---------------------------------------------------------------
if out=$(elidectl check-config 2>&1); then
	ok "elidectl check-config accepts the installed /etc/elide.conf"
else
	fail "elidectl check-config: $out"
fi
mkdir -p /etc/elide.conf.d
printf 'daemon: {\n\tinterval = 0.5;\n};\n' > /etc/elide.conf.d/50-elide-deb-test.conf
if out=$(elidectl check-config 2>&1); then
	ok "elidectl check-config accepts a drop-in in /etc/elide.conf.d"
else
	fail "elidectl check-config with a valid drop-in: $out"
fi
printf 'daemon: {\n\tinterval = "often";\n};\n' > /etc/elide.conf.d/60-elide-deb-test-bad.conf
if out=$(elidectl check-config 2>&1); then
	fail "elidectl check-config accepted a bad drop-in: $out"
elif grep -q '60-elide-deb-test-bad.conf:2' <<<"$out"; then
	ok "elidectl check-config rejects a bad drop-in, naming it: $(grep -m1 '60-elide-deb-test-bad' <<<"$out")"
else
	fail "elidectl check-config rejected the bad drop-in without naming FILE:LINE: $out"
fi
rm -f /etc/elide.conf.d/50-elide-deb-test.conf /etc/elide.conf.d/60-elide-deb-test-bad.conf
[ "$confd_existed" = yes ] || rmdir /etc/elide.conf.d

# ---- enable --system writes the installed path ----------------------------------
root=$tmp/root
mkdir -p "$root/etc" "$root/usr/lib/$ma"
cp -p "$lib" "$root/usr/lib/$ma/"
enable_system() {
	elidectl enable --system --root "$root" "$@" >"$tmp/enable.out" 2>&1
}
# Without usable RTM, enable --system may ask for --force.
if enable_system || { grep -q -- --force "$tmp/enable.out" && enable_system --force; }; then
	if [ "$(cat "$root/etc/ld.so.preload")" = "$lib" ]; then
		ok "enable --system wrote $lib to ld.so.preload"
	else
		fail "enable --system wrote '$(cat "$root/etc/ld.so.preload")', not $lib"
	fi
else
	fail "elidectl enable --system --root: $(cat "$tmp/enable.out")"
fi
if elidectl disable --system --root "$root" >"$tmp/disable.out" 2>&1 && [ ! -e "$root/etc/ld.so.preload" ]; then
	ok "disable --system removed the line (and the emptied file)"
else
	fail "disable --system: $(cat "$tmp/disable.out"); left: $(cat "$root/etc/ld.so.preload" 2>&1)"
fi
prerm=
for f in "/var/lib/dpkg/info/libelide:$arch.prerm" /var/lib/dpkg/info/libelide.prerm; do
	[ -f "$f" ] && prerm=$f
done
if [ -n "$prerm" ]; then
	printf '/lib/other-preload.so\n%s\n# a comment\n' "$lib" > "$root/etc/ld.so.preload"
	chmod 0640 "$root/etc/ld.so.preload"
	DPKG_ROOT=$root sh "$prerm" remove >/dev/null 2>"$tmp/prerm.err"
	if [ "$(cat "$root/etc/ld.so.preload")" = "$(printf '/lib/other-preload.so\n# a comment')" ] &&
		[ "$(stat -c %a "$root/etc/ld.so.preload")" = 640 ]; then
		ok "libelide prerm: took $lib out of ld.so.preload, kept the other lines and the mode"
	else
		fail "libelide prerm left: $(cat "$root/etc/ld.so.preload") ($(cat "$tmp/prerm.err"))"
	fi
	printf '%s\n' "$lib" > "$root/etc/ld.so.preload"
	DPKG_ROOT=$root sh "$prerm" remove >/dev/null 2>&1
	[ ! -e "$root/etc/ld.so.preload" ] && ok "libelide prerm: removed ld.so.preload holding only its line" ||
		fail "libelide prerm left ld.so.preload: $(cat "$root/etc/ld.so.preload")"
else
	fail "no prerm script of libelide in /var/lib/dpkg/info"
fi

# ---- elided ------------------------------------------------------------------------
if [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ] && [ -d /run/systemd/system ]; then
	mode=systemd
	if poll 20 sh -c '[ "$(systemctl is-active elided.service)" = active ]'; then
		ok "systemd started elided.service on installation"
	else
		fail "elided.service is not active: $(systemctl is-active elided.service)"
		systemctl status --no-pager elided.service >&2
		journalctl -u elided.service -n 30 --no-pager >&2
	fi
	bus=yes
else
	mode=manual
	note "systemd is not PID 1 ($(ps -p 1 -o comm=)): starting the installed elided by hand"
	[ -d /run/elide ] || { mkdir -m 1777 /run/elide && note "created /run/elide (no systemd-tmpfiles)"; }
	bus=no
	if command -v dbus-daemon >/dev/null && [ -f /usr/share/dbus-1/system.conf ]; then
		# The system bus's own configuration (it reads the installed
		# policy from /usr/share/dbus-1/system.d), on a private socket.
		mkdir -m 0755 "$tmp/bus"
		dbus-daemon --config-file=/usr/share/dbus-1/system.conf --address="unix:path=$tmp/bus/socket" \
			--nofork --nopidfile --print-address=3 3>"$tmp/bus/address" 2>"$tmp/bus/log" &
		pids+=($!)
		if poll 10 test -s "$tmp/bus/address"; then
			DBUS_SYSTEM_BUS_ADDRESS=$(head -n1 "$tmp/bus/address")
			export DBUS_SYSTEM_BUS_ADDRESS
			bus=yes
			ok "a private bus with /usr/share/dbus-1/system.conf"
		else
			fail "dbus-daemon with the system configuration did not start: $(cat "$tmp/bus/log")"
		fi
	else
		note "no dbus-daemon: elided runs with --no-bus"
	fi
	args=()
	[ "$bus" = yes ] || args=(--no-bus)
	/usr/sbin/elided "${args[@]}" 2>"$tmp/elided.log" &
	elided=$!
	pids+=("$elided")
	if [ "$bus" = yes ]; then
		poll 10 elidectl status && ok "elided (pid $elided) is on the bus" ||
			fail "elided did not answer on the bus: $(cat "$tmp/elided.log")"
	else
		sleep 1
	fi
	kill -0 "$elided" 2>/dev/null && ok "elided runs" || fail "elided exited: $(cat "$tmp/elided.log")"
fi

if [ "$bus" = yes ]; then
	if out=$(elidectl status 2>&1); then
		ok "elidectl status answers over D-Bus as root"
	else
		fail "elidectl status as root: $out"
	fi
	if command -v setpriv >/dev/null; then
		if out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env DBUS_SYSTEM_BUS_ADDRESS="${DBUS_SYSTEM_BUS_ADDRESS:-}" \
			elidectl status 2>&1); then
			ok "elidectl status answers over D-Bus as uid 65534 (the installed bus policy lets users call)"
		else
			fail "elidectl status as uid 65534: $out"
		fi
	fi
	if command -v busctl >/dev/null; then
		busctl --system list --no-pager 2>/dev/null | grep -q '^org\.elide\.elided1 ' &&
			ok "busctl sees org.elide.elided1" || fail "busctl --system list: no org.elide.elided1"
	fi
fi

# ---- a program under the installed libelide -------------------------------------
cat > "$tmp/work.c" <<'EOF'
#include <elide.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter;
static volatile int stop;

static void *worker(void *arg)
{
	(void)arg;
	while (!stop) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	int seconds = argc > 1 ? atoi(argv[1]) : 20;

	printf("elide_active %d name %d\n", elide_active(), elide_mutex_set_name(&lock, "pkgtest_lock"));
	fflush(stdout);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	sleep(seconds);
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
EOF
if cc -std=gnu11 $(pkg-config --cflags elide) -O1 -pthread -o "$tmp/work" "$tmp/work.c" 2>"$tmp/cc.err"; then
	ok "a program builds against the installed <elide.h> (pkg-config elide)"
	# Without usable RTM every transaction 'aborts' (ELIDE_SIM_ABORT, as
	# tools/run-demo does), so the lock has statistics to publish; where RTM
	# works libelide ignores the variable.
	ELIDE_SIM_ABORT=0x6 LD_PRELOAD=$lib "$tmp/work" 20 >"$tmp/work.out" 2>&1 &
	work=$!
	pids+=("$work")
	poll 5 grep -q '^elide_active 1 name 0$' "$tmp/work.out" &&
		ok "the program runs with the installed libelide: $(cat "$tmp/work.out")" ||
		fail "the program under LD_PRELOAD=$lib said: $(cat "$tmp/work.out")"
	if [ "$bus" = yes ]; then
		if poll 15 sh -c "elidectl list --no-legend | grep -qw $work"; then
			ok "elided adopted the program: elidectl list shows pid $work"
			poll 10 sh -c "elidectl show $work | grep -q pkgtest_lock" &&
				ok "elidectl show $work names its lock pkgtest_lock" ||
				fail "elidectl show $work: $(elidectl show "$work" 2>&1)"
		else
			fail "elidectl list does not show pid $work: $(elidectl list 2>&1)"
			[ "$mode" = manual ] && cat "$tmp/elided.log" >&2
		fi
	else
		# No bus: elided's log tells whether it adopted the process.
		elidectl list --no-legend 2>/dev/null | grep -qw "$work" &&
			ok "elidectl list (segments, without the daemon) shows pid $work" ||
			fail "elidectl list does not show pid $work: $(elidectl list 2>&1)"
	fi
	kill "$work" 2>/dev/null
	wait "$work" 2>/dev/null
else
	fail "cc against <elide.h>: $(cat "$tmp/cc.err")"
fi

if [ "$mode" = manual ]; then
	kill -TERM "$elided" 2>/dev/null
	wait "$elided"
	rc=$?
	[ $rc -eq 0 ] && ok "elided stopped on SIGTERM (exit status 0)" ||
		fail "elided exited with status $rc on SIGTERM: $(tail -n 5 "$tmp/elided.log")"
fi
sleep 0.5 # the segments of the stopped program and elided's own cleanup

# ---- purge -------------------------------------------------------------------------
dpkg -L "${packages[@]}" 2>/dev/null | while read -r f; do
	[ -d "$f" ] || echo "$f" # directories (or links to one, /lib on merged /usr) stay
done | sort -u > "$tmp/files"
if purge; then
	installed=no
	ok "apt-get purge"
else
	cat "$tmp/purge.log" >&2
	fail "apt-get purge"
fi
for p in "${packages[@]}"; do
	s=$(state "$p")
	[ -z "$s" ] || [ "$s" = not-installed ] || fail "$p after purge: $s"
done
left=$(while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done < "$tmp/files")
[ -z "$left" ] && ok "none of the $(wc -l < "$tmp/files") installed files is left" ||
	fail "files left after purge: $left"
for f in /etc/elide.conf /etc/elide.conf.d "$wants" /var/lib/elide \
	/var/lib/systemd/deb-systemd-helper-enabled/elided.service.dsh-also \
	/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/elided.service \
	/var/lib/systemd/deb-systemd-helper-masked/elided.service; do
	if [ "$f" = /etc/elide.conf.d ] && [ "$confd_existed" = yes ]; then
		continue
	fi
	[ -e "$f" ] || [ -L "$f" ] && fail "$f is left after purge"
done
if [ "$run_elide_existed" = no ]; then
	[ -e /run/elide ] && fail "/run/elide is left after purge: $(ls -A /run/elide | head -5)" ||
		ok "/run/elide is gone"
fi
if [ "$preload_before" = absent ]; then
	[ -e "$preload" ] && fail "$preload exists now" || ok "$preload: still absent"
else
	[ "$(sha256sum < "$preload")" = "$preload_before" ] && ok "$preload: unchanged" || fail "$preload changed"
fi

echo "test-deb: $(($(date +%s) - start)) s, $failures failure(s)"
[ "$failures" -eq 0 ]
