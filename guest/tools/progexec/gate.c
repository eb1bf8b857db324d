// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The rules' gate of a program run without the host (docs/programs.md,
 * "Determinism and replay"; `progexec run --gate` and `faultline prog c`'s
 * reproducer): the program's rules are loaded at QEMU start, each matching
 * only in engine state 1; a one-sector direct read of a sector of every swap
 * device moves that state (`_gate_on: read lba=1 len=1 set-state=1`, and
 * `_gate_off` on sector 2).  The sectors lie in the swap header's page,
 * which the kernel never reads through the block layer in one-sector pieces.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

int pe_gate_read(const struct pe_program *p, long sector, char *why, size_t whylen)
{
	int rc = 0;

	for (int i = 0; i < p->env.nswap; i++) {
		void *buf = NULL;
		int fd = open(p->env.swap[i].path, O_RDONLY | O_DIRECT);
		int err = 0;
		ssize_t n;

		if (fd < 0) {
			err = errno;
		} else if (posix_memalign(&buf, PE_PAGE, PE_PAGE)) {
			err = ENOMEM;
		} else {
			n = pread(fd, buf, 512, sector * 512);
			err = n < 0 ? errno : n != 512 ? EIO : 0;
		}
		free(buf);
		if (fd >= 0)
			close(fd);
		if (err && !rc) {
			snprintf(why, whylen, "gate read of %s sector %ld: %s", p->env.swap[i].path,
				 sector, strerror(err));
			rc = -err;
		}
	}
	return rc;
}
