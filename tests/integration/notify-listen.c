/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A stand-in for systemd's notification socket: binds a datagram socket at
 * PATH and prints every message it receives, one datagram per line group,
 * until it sees STOPPING=1 or TIMEOUT seconds pass.
 *
 *   notify-listen PATH TIMEOUT
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char buf[4096];
	time_t deadline;
	int fd;

	if (argc != 3 || strlen(argv[1]) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "usage: notify-listen PATH TIMEOUT\n");
		return 2;
	}
	deadline = time(NULL) + atoi(argv[2]);
	strcpy(addr.sun_path, argv[1]);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("notify-listen: socket");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("LISTENING\n");
	while (time(NULL) < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 200) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("notify-listen: recv");
			return 1;
		}
		buf[n] = '\0';
		printf("%s\n", buf);
		if (strstr(buf, "STOPPING=1"))
			return 0;
	}
	return 0;
}
