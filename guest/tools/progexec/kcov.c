// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A program's kernel coverage (kcov.h).  Each thread that runs operations
 * holds its own kcov trace (debugfs kcov is per task: a forked process opens
 * its own on first use) and enables it only around an operation, so the
 * trace is what the program asked of the kernel, not the executor's
 * sockets.  The trace is exact: only the traced thread writes its buffer,
 * and it takes the PCs itself (after the operation, or in pe_kcov_poll()
 * inside long loops) before the buffer fills.
 *
 * Edges are hashed into a map of GL_KCOV_MAP_BITS bits by guestlib's
 * gl_kcov_add_trace(), first into the thread's own map (plain stores), then
 * ORed into the map every process of the program shares (MAP_SHARED, made
 * before the first program so the leak check's Shmem baseline includes it);
 * only words with new bits take an atomic OR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kcov.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "kcov.h"
#include "progexec.h"

#define KCOV_PATH "/sys/kernel/debug/kcov"
/* Words of a thread's buffer (2 MiB): one memory.reclaim of tens of MiB
 * fills about this much; longer syscalls lose their tail. */
#define TRACE_WORDS (1UL << 18)
#define POLL_AT (TRACE_WORDS / 2)
#define MAP_WORDS (GL_KCOV_MAP_BITS / 64)
/* Edge hashes a `cover` line carries: "cover NNN " and 5 bytes each stay
 * under the channel's 4096. */
#define COVER_PER_LINE 800

static bool kcov_on;
static uint64_t *shared_map;

static __thread struct {
	pid_t tid;              /* the thread this trace belongs to; 0: none */
	int fd;
	unsigned long *area;
	bool enabled, dirty;    /* tracing now; map has bits not yet shared */
	uint64_t map[MAP_WORDS];
} tr;

bool pe_kcov_on(void)
{
	return kcov_on;
}

/* A trace for the calling thread: an inherited one (fork) is let go. */
static int trace_open(void)
{
	pid_t tid = gettid();
	unsigned long *area;
	int fd, err;

	if (tr.tid == tid)
		return 0;
	if (tr.tid) {
		munmap(tr.area, TRACE_WORDS * sizeof(unsigned long));
		close(tr.fd);
		tr.tid = 0;
		tr.enabled = false;
	}
	fd = open(KCOV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, KCOV_INIT_TRACE, TRACE_WORDS)) {
		err = -errno;
		close(fd);
		return err;
	}
	area = mmap(NULL, TRACE_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, 0);
	if (area == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	tr.fd = fd;
	tr.area = area;
	tr.tid = tid;
	return 0;
}

/* The buffer's PCs into the thread's map; the buffer restarts. */
static void trace_take(void)
{
	unsigned long n = __atomic_load_n(&tr.area[0], __ATOMIC_RELAXED);

	if (n > TRACE_WORDS - 1)
		n = TRACE_WORDS - 1;
	if (gl_kcov_add_trace((uint8_t *)tr.map, tr.area + 1, n))
		tr.dirty = true;
	__atomic_store_n(&tr.area[0], 0, __ATOMIC_RELAXED);
}

static void map_share(void)
{
	for (unsigned int i = 0; i < MAP_WORDS; i++) {
		uint64_t miss = tr.map[i] & ~__atomic_load_n(&shared_map[i], __ATOMIC_RELAXED);

		if (miss)
			__atomic_fetch_or(&shared_map[i], miss, __ATOMIC_RELAXED);
	}
	tr.dirty = false;
}

int pe_kcov_setup(void)
{
	void *map;
	int err;

	if (kcov_on)
		return 0;
	/* FAULTLINE_KCOV=0: off on purpose (to time programs without it). */
	if (getenv("FAULTLINE_KCOV") && !strcmp(getenv("FAULTLINE_KCOV"), "0"))
		return -ECANCELED;
	err = trace_open();
	if (err)
		return err;
	/* Whether this kernel really traces: enable and disable once. */
	if (ioctl(tr.fd, KCOV_ENABLE, KCOV_TRACE_PC) || ioctl(tr.fd, KCOV_DISABLE, 0))
		return -errno;
	map = mmap(NULL, MAP_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return -errno;
	/* Resident and never swapped from now on: the program's leak check
	 * sees no change of Shmem or swap from it. */
	memset(map, 0, MAP_WORDS * sizeof(uint64_t));
	mlock(map, MAP_WORDS * sizeof(uint64_t));
	shared_map = map;
	kcov_on = true;
	return 0;
}

void pe_kcov_program_begin(void)
{
	if (!kcov_on)
		return;
	memset(shared_map, 0, MAP_WORDS * sizeof(uint64_t));
	memset(tr.map, 0, sizeof(tr.map));     /* the coordinator's: main inherits it */
	tr.dirty = false;
}

void pe_kcov_op_begin(void)
{
	if (!kcov_on || trace_open())
		return;
	__atomic_store_n(&tr.area[0], 0, __ATOMIC_RELAXED);
	tr.enabled = !ioctl(tr.fd, KCOV_ENABLE, KCOV_TRACE_PC);
}

void pe_kcov_op_end(void)
{
	if (!tr.enabled || tr.tid != gettid())
		return;
	ioctl(tr.fd, KCOV_DISABLE, 0);
	tr.enabled = false;
	trace_take();
	if (tr.dirty)
		map_share();
}

void pe_kcov_poll(void)
{
	if (tr.enabled && __atomic_load_n(&tr.area[0], __ATOMIC_RELAXED) >= POLL_AT)
		trace_take();
}

void pe_kcov_report(struct pe_report *r)
{
	char line[PE_LINE_MAX];
	int n = 0, len = 0;

	if (!kcov_on)
		return;
	for (uint32_t e = 0; e < GL_KCOV_MAP_BITS; e++) {
		if (!(shared_map[e / 64] >> (e % 64) & 1))
			continue;
		len += snprintf(line + len, sizeof(line) - len, " %04x", e);
		if (++n == COVER_PER_LINE) {
			pe_say(r, "cover %d%s", n, line);
			n = len = 0;
		}
	}
	if (n)
		pe_say(r, "cover %d%s", n, line);
}
