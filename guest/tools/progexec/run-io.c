// SPDX-License-Identifier: GPL-2.0-or-later
/* The coordinator's and the actors' sockets: whole buffers, an fd along. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "run.h"

int pe_send(int fd, const void *buf, size_t len, int pass_fd)
{
	const char *p = buf;

	while (len) {
		char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
		struct iovec iov = { (void *)p, len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		if (pass_fd >= 0) {
			struct cmsghdr *c;

			mh.msg_control = ctl;
			mh.msg_controllen = sizeof(ctl);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		pass_fd = -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int pe_recv(int fd, void *buf, size_t len, int *got_fd)
{
	char *p = buf;

	while (len) {
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { p, len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_type == SCM_RIGHTS && got_fd)
				memcpy(got_fd, CMSG_DATA(c), sizeof(int));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
