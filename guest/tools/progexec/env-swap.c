// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's swap devices: a `bind` target -> a block device, the swap
 * header, swapon and swapoff (env-internal.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "env-internal.h"

/* The version-1 header after the 1024 boot bytes (mkswap's layout). */
#define HDR_VERSION 1024
#define HDR_LAST_PAGE 1028
#define HDR_NR_BADPAGES 1032
#define SWAP_MIN_PAGES 10       /* mkswap's floor */

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (8 * i);
}

int env_swap_header(uint8_t *page, uint64_t size)
{
	uint64_t pages = size / PE_PAGE;

	if (pages < SWAP_MIN_PAGES || pages - 1 > UINT32_MAX)
		return -EINVAL;
	memset(page, 0, PE_PAGE);
	put_le32(page + HDR_VERSION, 1);
	put_le32(page + HDR_LAST_PAGE, (uint32_t)(pages - 1));
	put_le32(page + HDR_NR_BADPAGES, 0);
	memcpy(page + PE_PAGE - strlen(PE_SWAP_MAGIC), PE_SWAP_MAGIC, strlen(PE_SWAP_MAGIC));
	return 0;
}

/* Whether /sys/block/@name is a device of @kind's naming (nvme0n1, not the
 * hidden multipath path nvme0c0n1; vda; syncblk0). */
static int kind_names(const char *kind, const char *name)
{
	unsigned a, b;
	int n = -1;

	if (!strcmp(kind, "nvme"))
		return sscanf(name, "nvme%un%u%n", &a, &b, &n) == 2 && n == (int)strlen(name);
	if (!strcmp(kind, "virtio-blk"))
		return !strncmp(name, "vd", 2) && name[2] && strspn(name + 2, "abcdefghijklmnopqrstuvwxyz") == strlen(name + 2);
	if (!strcmp(kind, "syncblk"))
		return sscanf(name, "syncblk%u%n", &a, &n) == 1 && n == (int)strlen(name);
	return 0;
}

/* The sysfs attribute of /sys/block/NAME that a target's key is in. */
static const char *key_attr(const char *kind)
{
	if (!strcmp(kind, "nvme"))
		return "device/serial";
	if (!strcmp(kind, "virtio-blk"))
		return "serial";
	return "mode";
}

static void trim(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n'))
		s[--n] = '\0';
}

int env_swap_resolve(struct pe_env *e, struct pe_swap *s, char *sysname, size_t len,
		     uint64_t *bytes)
{
	const char *colon = strchr(s->target, ':');
	char kind[16], path[320], val[128];
	struct dirent *d;
	struct stat st;
	int found = 0;
	DIR *dir;

	if (!s->target[0])
		return env_fail(e, -ENODEV, "swap %s: not bound to a device (bind %s TARGET)",
				s->name, s->name);
	if (!colon || colon == s->target || (size_t)(colon - s->target) >= sizeof(kind) ||
	    !colon[1])
		return env_fail(e, -EINVAL, "swap %s: bad target %s (KIND:KEY)", s->name, s->target);
	snprintf(kind, sizeof(kind), "%.*s", (int)(colon - s->target), s->target);
	if (strcmp(kind, s->kind))
		return env_fail(e, -EINVAL, "swap %s: a %s device bound to %s", s->name, s->kind,
				s->target);
	dir = opendir("/sys/block");
	if (!dir)
		return env_fail(e, -errno, "/sys/block: %s", strerror(errno));
	while ((d = readdir(dir))) {
		if (!kind_names(kind, d->d_name))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/%s", d->d_name, key_attr(kind));
		if (gl_read_file(path, val, sizeof(val)) < 0)
			continue;
		trim(val);
		if (strcmp(val, colon + 1))
			continue;
		if (found++) {
			closedir(dir);
			return env_fail(e, -EINVAL, "swap %s: %s matches %s and %s", s->name,
					s->target, sysname, d->d_name);
		}
		snprintf(sysname, len, "%s", d->d_name);
	}
	closedir(dir);
	if (!found)
		return env_fail(e, -ENODEV, "swap %s: no %s device %s in this VM", s->name, kind,
				s->target);
	snprintf(s->path, sizeof(s->path), "/dev/%s", sysname);
	if (stat(s->path, &st) || !S_ISBLK(st.st_mode))
		return env_fail(e, -ENODEV, "swap %s: %s is not a block device", s->name, s->path);
	snprintf(path, sizeof(path), "/sys/block/%s/size", sysname);
	*bytes = (uint64_t)gl_read_u64(path) * 512;
	return 0;
}

int env_swap_make(struct pe_env *e, struct pe_swap *s)
{
	static uint8_t page[PE_PAGE];
	const char *sysname = strrchr(s->path, '/') + 1;
	char path[128];
	int fd, err, flags = 0;

	err = env_swap_header(page, s->size);
	if (err)
		return env_fail(e, err, "swap %s: size %llu is too small", s->name,
				(unsigned long long)s->size);
	/* O_EXCL: refused while mounted or swapped on elsewhere. */
	fd = open(s->path, O_RDWR | O_EXCL | O_CLOEXEC);
	if (fd < 0)
		return env_fail(e, -errno, "swap %s: open %s: %s", s->name, s->path, strerror(errno));
	if (pwrite(fd, page, PE_PAGE, 0) != PE_PAGE || fsync(fd)) {
		err = -errno;
		close(fd);
		return env_fail(e, err ? err : -EIO, "swap %s: writing the swap header to %s: %s",
				s->name, s->path, strerror(-err));
	}
	close(fd);
	/* Always written: the previous program may have marked it rotational. */
	snprintf(path, sizeof(path), "/sys/block/%s/queue/rotational", sysname);
	err = gl_write_file(path, s->rotational ? "1" : "0");
	if (err)
		return env_fail(e, err, "swap %s: %s: %s", s->name, path, strerror(-err));
	if (s->prio >= 0)
		flags |= SWAP_FLAG_PREFER | (s->prio & SWAP_FLAG_PRIO_MASK);
	if (s->discard)
		flags |= SWAP_FLAG_DISCARD;
	if (swapon(s->path, flags))
		return env_fail(e, -errno, "swap %s: swapon %s: %s", s->name, s->path,
				strerror(errno));
	s->on = true;
	return 0;
}

int env_swapoff_timed(const char *path, int timeout_s)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	int status, waited = 0, killed = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(swapoff(path) ? errno : 0);
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return -errno;
		nanosleep(&tick, NULL);
		waited += 10;
		if (!killed && waited >= timeout_s * 1000) {
			/* A swapoff that cannot find a slot's owner retries until killed. */
			kill(pid, SIGKILL);
			killed = 1;
			waited = 0;
		} else if (killed && waited >= 10 * 1000) {
			return -ETIMEDOUT;
		}
	}
	if (WIFSIGNALED(status))
		return -EINTR;
	return -WEXITSTATUS(status);
}

long long env_swaps_used_kb(const char *path)
{
	char name[512], type[32], line[1024];
	long long size, used, total = 0;
	FILE *f = fopen("/proc/swaps", "re");

	if (!f)
		return path ? -1 : 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%511s %31s %lld %lld", name, type, &size, &used) != 4)
			continue;       /* the title line */
		if (path && !strcmp(name, path)) {
			fclose(f);
			return used;
		}
		total += used;
	}
	fclose(f);
	return path ? -1 : total;
}

int pe_env_swapoff(struct pe_env *e, int dev)
{
	struct pe_swap *s = &e->swap[dev];

	if (swapoff(s->path))
		return env_fail(e, -errno, "swapoff %s (%s): %s", s->name, s->path, strerror(errno));
	s->on = false;
	return 0;
}

int pe_env_swapon(struct pe_env *e, int dev, int prio, bool discard)
{
	struct pe_swap *s = &e->swap[dev];
	int flags = 0;

	if (prio >= 0)
		flags |= SWAP_FLAG_PREFER | (prio & SWAP_FLAG_PRIO_MASK);
	if (discard)
		flags |= SWAP_FLAG_DISCARD;
	if (swapon(s->path, flags))
		return env_fail(e, -errno, "swapon %s (%s): %s", s->name, s->path, strerror(errno));
	s->on = true;
	return 0;
}

bool pe_env_swap_listed(struct pe_env *e, int dev)
{
	return env_swaps_used_kb(e->swap[dev].path) >= 0;
}
