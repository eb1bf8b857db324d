// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's environment (pe-env.h): the order of check, setup and teardown,
 * the baseline and the leak check.  Devices are in env-swap.c, knobs and
 * cgroups in env-knob.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "env-internal.h"

/* The final swapoffs of one teardown share this budget: the host waits 120 s
 * for `result`. */
#define SWAPOFF_BUDGET_S 80
/* Deferred file releases (a memfd closed by an exiting process) may drop
 * Shmem a moment after the last object is gone. */
#define SHMEM_SETTLE_MS 1000

char env_cgroup_prefix[32];
char env_home_cgroup[256];

int env_fail(struct pe_env *e, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->why, sizeof(e->why), fmt, ap);
	va_end(ap);
	return err;
}

static long long meminfo_kb(const char *key)
{
	char line[256];
	size_t n = strlen(key);
	long long v = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtoll(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/*
 * Shmem, exact: the kernel counts it per CPU and folds the counts into the
 * total now and then (up to a threshold each), so /proc/meminfo alone may be
 * pages off either way (a page migrated between CPUs' counts: 20 kB below
 * the truth at one baseline).  vm.stat_refresh folds them first.
 */
static long long shmem_kb(void)
{
	gl_write_file("/proc/sys/vm/stat_refresh", "1");
	return meminfo_kb("Shmem");
}

static int check_swaps(struct pe_env *e)
{
	char sysname[PE_MAX_SWAPS][32], path[96];
	uint64_t bytes;

	if (e->nswap && access("/proc/swaps", R_OK))
		return env_fail(e, -ENOSYS, "swap %s: this kernel has no swap (/proc/swaps)",
				e->swap[0].name);
	for (int i = 0; i < e->nswap; i++) {
		struct pe_swap *s = &e->swap[i];
		const char *key = strchr(s->target, ':');
		int err = env_swap_resolve(e, s, sysname[i], sizeof(sysname[i]), &bytes);

		if (err)
			return err;
		if (s->completion[0] && strcmp(key + 1, s->completion))
			return env_fail(e, -EINVAL, "swap %s: completion=%s but bound to %s",
					s->name, s->completion, s->target);
		if (bytes < s->size)
			return env_fail(e, -ENOSPC, "swap %s: %s (%s) holds %llu bytes, size=%llu",
					s->name, s->target, s->path, (unsigned long long)bytes,
					(unsigned long long)s->size);
		if (env_swaps_used_kb(s->path) >= 0)
			return env_fail(e, -EBUSY, "swap %s: %s is already in use as swap", s->name,
					s->path);
		for (int j = 0; j < i; j++)
			if (!strcmp(e->swap[j].path, s->path))
				return env_fail(e, -EINVAL, "swap %s and %s: both bound to %s",
						e->swap[j].name, s->name, s->path);
		snprintf(path, sizeof(path), "/sys/block/%.31s/queue/rotational", sysname[i]);
		if (access(path, W_OK))
			return env_fail(e, -ENOENT, "swap %s: %s is missing", s->name, path);
	}
	return 0;
}

int pe_env_check(struct pe_env *e)
{
	int err = check_swaps(e);

	if (!err)
		err = env_cgroups_check(e);
	/* Last: zswap.compressor and zswap.zpool may be tried (and put back). */
	for (int i = 0; i < e->nknob && !err; i++)
		err = pe_env_knob_check(e, e->knob[i].key, e->knob[i].value);
	return err;
}

/* The executor's own cgroup (for `move` back), from /proc/self/cgroup. */
static void read_home_cgroup(void)
{
	char text[512];

	env_home_cgroup[0] = '\0';
	if (gl_read_file("/proc/self/cgroup", text, sizeof(text)) == 0 &&
	    !strncmp(text, "0::", 3) && strcmp(text + 3, "/"))
		snprintf(env_home_cgroup, sizeof(env_home_cgroup), "%.255s", text + 3);
}

/* Undo a setup that failed halfway: nothing stays changed. */
static void setup_undo(struct pe_env *e)
{
	char why[PE_ENV_WHY];

	memcpy(why, e->why, sizeof(why));
	for (int i = e->nswap - 1; i >= 0; i--)
		if (e->swap[i].on && env_swapoff_timed(e->swap[i].path, 30) == 0)
			e->swap[i].on = false;
	env_knobs_restore(e);
	for (int c = 0; c < e->ncg; c++)
		env_cgroup_remove(e, c);
	memcpy(e->why, why, sizeof(why));
}

int pe_env_setup(struct pe_env *e)
{
	static unsigned runs;
	int err = 0;

	snprintf(env_cgroup_prefix, sizeof(env_cgroup_prefix), "pe-%d-%u", (int)getpid(), ++runs);
	read_home_cgroup();
	e->nsaved = 0;
	e->base.swap_used_kb = env_swaps_used_kb(NULL);
	e->base.shmem_kb = shmem_kb();
	for (int i = 0; i < e->nswap && !err; i++)
		err = env_swap_make(e, &e->swap[i]);
	for (int i = 0; i < e->nknob && !err; i++)
		err = pe_env_knob(e, e->knob[i].key, e->knob[i].value);
	if (!err)
		err = env_cgroups_make(e);
	if (err)
		setup_undo(e);
	return err;
}

int pe_env_compact(struct pe_env *e)
{
	int err = gl_write_file("/proc/sys/vm/compact_memory", "1");

	return err ? env_fail(e, err, "compact: %s", strerror(-err)) : 0;
}

int pe_env_drop_caches(struct pe_env *e, int what)
{
	char val[4];
	int err;

	if (what < 1 || what > 3)
		return env_fail(e, -EINVAL, "drop_caches %d: 1, 2 or 3", what);
	snprintf(val, sizeof(val), "%d", what);
	sync();
	err = gl_write_file("/proc/sys/vm/drop_caches", val);
	return err ? env_fail(e, err, "drop_caches %d: %s", what, strerror(-err)) : 0;
}

/* Shmem back to the baseline (every object is gone), after a short settle. */
static void leak_shmem(struct pe_env *e, struct pe_report *r)
{
	long long now = shmem_kb();

	for (int ms = 0; now > e->base.shmem_kb && ms < SHMEM_SETTLE_MS; ms += 20) {
		gl_sleep_ms(20);
		now = shmem_kb();
	}
	if (now > e->base.shmem_kb)
		pe_finding(r, "leak", "line=0 proc=main why=shmem kb=%lld base=%lld", now,
			   e->base.shmem_kb);
}

/* The final swapoff of every device still listed, within the shared budget. */
static void final_swapoffs(struct pe_env *e, struct pe_report *r)
{
	time_t end = time(NULL) + SWAPOFF_BUDGET_S;

	for (int i = e->nswap - 1; i >= 0; i--) {
		struct pe_swap *s = &e->swap[i];
		long left = (long)(end - time(NULL));
		int err;

		if (!pe_env_swap_listed(e, i)) {
			s->on = false;
			continue;
		}
		err = env_swapoff_timed(s->path, left > 1 ? (int)left : 1);
		if (err)
			pe_finding(r, "leak", "line=0 proc=main why=swapoff dev=%s errno=%s", s->name,
				   err == -ETIMEDOUT ? "timeout" : strerrorname_np(-err));
		s->on = pe_env_swap_listed(e, i);
	}
}

/*
 * memory.zswap.current is a memcg statistic, not a counter: the kernel
 * folds a cgroup's per-CPU updates into it only when enough pile up (64 on
 * a CPU, then 64 per CPU in all; a zswap entry freed counts as one), so
 * after the last entries went it may read a few kB for good (2219 and 6658
 * bytes were seen, 6.12).  Every
 * zswap entry is gone when zswap's own count, /sys/kernel/debug/zswap/
 * stored_pages, is 0: that count is exact, and it decides.
 */
static bool zswap_empty(void)
{
	return gl_read_u64("/sys/kernel/debug/zswap/stored_pages") == 0;
}

static void leak_cgroup(struct pe_env *e, struct pe_report *r, int c, const char *file,
			const char *why)
{
	char path[160];
	long long v;

	env_cgroup_path(e, c, file, path, sizeof(path));
	v = gl_read_u64(path);  /* -1: this kernel lacks the file (no zswap) */
	if (v > 0 && !strcmp(file, "memory.zswap.current") && zswap_empty())
		return;
	if (v > 0)
		pe_finding(r, "leak", "line=0 proc=main why=%s cgroup=%s bytes=%lld", why,
			   e->cg[c].name, v);
}

/*
 * The order matters:
 * - Shmem first: the final swapoff brings a swapped shmem page back into the
 *   page cache (only a leaked object would hold one, but it would then count
 *   twice).
 * - The final swapoff before the swap counters: it frees the swap cache
 *   pages the kernel frees lazily (their slots count as used), and it
 *   succeeds only when every slot in use still has an owner to give it back
 *   to (a leaked slot makes swapoff retry until it is killed).
 * - Then swap in use and each program cgroup's memory.swap.current and
 *   memory.zswap.current, with no tolerance: no slot of the program's
 *   devices is left for them to count.
 * Shmem and swap in use are the whole machine's: they are the program's
 * only in the VM, where the executor runs alone, so they are checked for a
 * program with swap devices (one run on the build host has none).
 */
int pe_env_teardown(struct pe_env *e, struct pe_report *r)
{
	int before = r->findings;
	long long used;

	if (e->ncg)
		pe_env_move(e, -1, getpid());
	if (e->nswap) {
		leak_shmem(e, r);
		final_swapoffs(e, r);
		used = env_swaps_used_kb(NULL);
		if (used > e->base.swap_used_kb)
			pe_finding(r, "leak", "line=0 proc=main why=swap-used kb=%lld base=%lld",
				   used, e->base.swap_used_kb);
	}
	for (int c = 0; c < e->ncg; c++) {
		leak_cgroup(e, r, c, "memory.swap.current", "cgroup-swap");
		leak_cgroup(e, r, c, "memory.zswap.current", "cgroup-zswap");
	}
	if (env_knobs_restore(e))
		pe_finding(r, "leak", "line=0 proc=main why=knob-restore");
	for (int c = 0; c < e->ncg; c++) {
		int err = env_cgroup_remove(e, c);

		if (err)
			pe_finding(r, "leak", "line=0 proc=main why=cgroup cgroup=%s errno=%s",
				   e->cg[c].name, strerrorname_np(-err));
	}
	return r->findings - before;
}
