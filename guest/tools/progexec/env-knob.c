// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's kernel knobs (language key -> file, saved and restored) and its
 * memory cgroups (env-internal.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "env-internal.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define ZSWAP_DIR "/sys/module/zswap/parameters"

static const char *const zswap_params[] = {
	"enabled", "shrinker_enabled", "max_pool_percent", "accept_threshold_percent",
	"compressor", "zpool",
};
static const char *const thp_files[] = { "enabled", "defrag", "shmem_enabled" };

int env_knob_path(const char *key, char *path, size_t len)
{
	char size[16];
	int n = -1;

	if (!strncmp(key, "zswap.", 6)) {
		for (size_t i = 0; i < sizeof(zswap_params) / sizeof(*zswap_params); i++)
			if (!strcmp(key + 6, zswap_params[i]))
				return snprintf(path, len, ZSWAP_DIR "/%s", key + 6), 0;
	} else if (!strcmp(key, "vm.page-cluster") || !strcmp(key, "vm.swappiness")) {
		return snprintf(path, len, "/proc/sys/vm/%s", key + 3), 0;
	} else if (!strncmp(key, "thp.", 4)) {
		for (size_t i = 0; i < sizeof(thp_files) / sizeof(*thp_files); i++)
			if (!strcmp(key + 4, thp_files[i]))
				return snprintf(path, len, THP_DIR "/%s", key + 4), 0;
	} else if (sscanf(key, "mthp.%15[0-9]kB.enabled%n", size, &n) == 1 &&
		   n == (int)strlen(key)) {
		return snprintf(path, len, THP_DIR "/hugepages-%skB/enabled", size), 0;
	}
	return -EINVAL;
}

/* thp.* and mthp.* are the choice files: "always [madvise] never". */
static int is_choice(const char *key)
{
	return !strncmp(key, "thp.", 4) || !strncmp(key, "mthp.", 5);
}

int env_choice_parse(const char *text, const char *value, char *cur, size_t len)
{
	char word[64];
	int found = 0, n;

	snprintf(cur, len, "%s", text);
	for (const char *p = text; sscanf(p, "%63s%n", word, &n) == 1; p += n) {
		size_t w = strlen(word);

		if (word[0] == '[' && w > 2 && word[w - 1] == ']') {
			word[w - 1] = '\0';
			memmove(word, word + 1, w - 1);
			snprintf(cur, len, "%s", word);
		}
		if (!strcmp(word, value))
			found = 1;
	}
	return found ? 0 : -EINVAL;
}

int env_crypto_has_compressor(const char *text, const char *name)
{
	char key[32], val[128];
	int named = 0, n;

	/* Blocks of "key : value" lines; "name" comes before "type" in each. */
	for (const char *p = text; *p; p += n) {
		n = strcspn(p, "\n");
		if (sscanf(p, "%31s : %127s", key, val) == 2) {
			if (!strcmp(key, "name"))
				named = !strcmp(val, name);
			else if (!strcmp(key, "type") && named &&
				 (!strcmp(val, "compression") || !strcmp(val, "scomp") ||
				  !strcmp(val, "acomp")))
				return 1;
		}
		if (p[n] == '\n')
			n++;
	}
	return 0;
}

/* The file's current value: the bracketed word of a choice file. */
static int knob_read(const char *key, const char *path, char *cur, size_t len)
{
	char text[256];
	int err = gl_read_file(path, text, sizeof(text));

	if (err)
		return err;
	if (is_choice(key))
		env_choice_parse(text, "", cur, len);
	else
		snprintf(cur, len, "%.*s", (int)len - 1, text);
	return 0;
}

/* A kernel booted with zswap off leaves zswap uninitialized until it is
 * first enabled, and until then takes any compressor or zpool name without
 * a check (it falls back to its defaults when enabled).  Enabling it once
 * (and disabling it again at once) makes every later write the checked
 * one, the same before and during a program.  Nothing is swapped meanwhile:
 * no program runs. */
static void zswap_initialize(void)
{
	char on[8];

	if (gl_read_file(ZSWAP_DIR "/enabled", on, sizeof(on)) || strcmp(on, "N"))
		return;
	if (!gl_write_file(ZSWAP_DIR "/enabled", "Y"))
		gl_write_file(ZSWAP_DIR "/enabled", "N");
}

/* zswap.compressor and zswap.zpool: whether the kernel takes @value is its
 * own answer to a write (it may load a module for it); the old value is
 * written back at once. */
static int knob_try(struct pe_env *e, const char *key, const char *path, const char *value,
		    const char *cur)
{
	int err;

	if (!strcmp(value, cur))
		return 0;
	zswap_initialize();
	err = gl_write_file(path, value);
	if (err)
		return env_fail(e, err, "knob %s=%s: this kernel does not offer it (%s)", key, value,
				strerror(-err));
	err = gl_write_file(path, cur);
	if (err)
		return env_fail(e, err, "knob %s: restoring %s after trying %s: %s", key, cur, value,
				strerror(-err));
	return 0;
}

int pe_env_knob_check(struct pe_env *e, const char *key, const char *value)
{
	char path[160], text[256], cur[64];
	static char crypto[1 << 16];
	int err;

	if (env_knob_path(key, path, sizeof(path)))
		return env_fail(e, -EINVAL, "knob %s: not a knob", key);
	err = gl_read_file(path, text, sizeof(text));
	if (err)
		return env_fail(e, err, "knob %s: this kernel lacks %s", key, path);
	if (is_choice(key)) {
		if (env_choice_parse(text, value, cur, sizeof(cur)))
			return env_fail(e, -EINVAL, "knob %s=%s: this kernel offers only %s", key,
					value, text);
		return 0;
	}
	if (!strcmp(key, "zswap.compressor")) {
		if (gl_read_file("/proc/crypto", crypto, sizeof(crypto)) == 0 &&
		    env_crypto_has_compressor(crypto, value))
			return 0;
		return knob_try(e, key, path, value, text);
	}
	if (!strcmp(key, "zswap.zpool"))
		return knob_try(e, key, path, value, text);
	return 0;
}

int pe_env_knob(struct pe_env *e, const char *key, const char *value)
{
	char path[160];
	int i, err;

	if (env_knob_path(key, path, sizeof(path)))
		return env_fail(e, -EINVAL, "knob %s: not a knob", key);
	for (i = 0; i < e->nsaved && strcmp(e->saved[i].key, key); i++)
		;
	if (i == e->nsaved) {
		if (e->nsaved == PE_MAX_KNOBS)
			return env_fail(e, -E2BIG, "knob %s: more than %d knobs", key, PE_MAX_KNOBS);
		err = knob_read(key, path, e->saved[i].value, sizeof(e->saved[i].value));
		if (err)
			return env_fail(e, err, "knob %s: reading %s: %s", key, path, strerror(-err));
		snprintf(e->saved[i].key, sizeof(e->saved[i].key), "%s", key);
		e->nsaved++;
	}
	err = gl_write_file(path, value);
	if (err)
		return env_fail(e, err, "knob %s=%s: %s", key, value, strerror(-err));
	return 0;
}

int env_knobs_restore(struct pe_env *e)
{
	char path[160];
	int first = 0;

	for (int i = e->nsaved - 1; i >= 0; i--) {
		int err;

		env_knob_path(e->saved[i].key, path, sizeof(path));
		err = gl_write_file(path, e->saved[i].value);
		if (err && !first)
			first = env_fail(e, err, "knob %s: restoring %s: %s", e->saved[i].key,
					 e->saved[i].value, strerror(-err));
	}
	e->nsaved = 0;
	return first;
}

/* ---- cgroups */

void env_cgroup_path(const struct pe_env *e, int cg, const char *file, char *buf, size_t len)
{
	snprintf(buf, len, PE_CGROUP_ROOT "/%s-%s%s%s", env_cgroup_prefix, e->cg[cg].name,
		 file ? "/" : "", file ? file : "");
}

int env_cgroups_check(struct pe_env *e)
{
	char probe[64], path[160], text[256], cur[64];
	int err = 0;

	if (!e->ncg)
		return 0;
	if (gl_read_file(PE_CGROUP_ROOT "/cgroup.subtree_control", text, sizeof(text)) ||
	    env_choice_parse(text, "memory", cur, sizeof(cur)))
		return env_fail(e, -ENOENT, "cgroup %s: no memory controller in " PE_CGROUP_ROOT,
				e->cg[0].name);
	/* A child cgroup shows which limit files this kernel has. */
	snprintf(probe, sizeof(probe), PE_CGROUP_ROOT "/pe-probe-%d", (int)getpid());
	if (mkdir(probe, 0755) && errno != EEXIST)
		return env_fail(e, -errno, "cgroup %s: mkdir %s: %s", e->cg[0].name, probe,
				strerror(errno));
	for (int c = 0; c < e->ncg && !err; c++)
		for (int k = 0; k < e->cg[c].nlimits && !err; k++) {
			snprintf(path, sizeof(path), "%s/%s", probe, e->cg[c].key[k]);
			if (access(path, W_OK))
				err = env_fail(e, -ENOENT, "cgroup %s: this kernel lacks %s",
					       e->cg[c].name, e->cg[c].key[k]);
		}
	rmdir(probe);
	return err;
}

int pe_env_cgset(struct pe_env *e, int cg, const char *key, const char *value)
{
	char path[160];
	int err;

	env_cgroup_path(e, cg, key, path, sizeof(path));
	err = gl_write_file(path, value);
	if (err)
		return env_fail(e, err, "cgroup %s: %s=%s: %s", e->cg[cg].name, key, value,
				strerror(-err));
	return 0;
}

int env_cgroups_make(struct pe_env *e)
{
	char path[160];

	for (int c = 0; c < e->ncg; c++) {
		env_cgroup_path(e, c, NULL, path, sizeof(path));
		if (mkdir(path, 0755))
			return env_fail(e, -errno, "cgroup %s: mkdir %s: %s", e->cg[c].name, path,
					strerror(errno));
		for (int k = 0; k < e->cg[c].nlimits; k++) {
			int err = pe_env_cgset(e, c, e->cg[c].key[k], e->cg[c].value[k]);

			if (err)
				return err;
		}
	}
	return 0;
}

int pe_env_move(struct pe_env *e, int cg, pid_t pid)
{
	char path[320], val[24];
	int err;

	if (cg < 0)
		snprintf(path, sizeof(path), PE_CGROUP_ROOT "%s/cgroup.procs", env_home_cgroup);
	else
		env_cgroup_path(e, cg, "cgroup.procs", path, sizeof(path));
	snprintf(val, sizeof(val), "%d", (int)pid);
	err = gl_write_file(path, val);
	if (err)
		return env_fail(e, err, "move %d to %s: %s", (int)pid, path, strerror(-err));
	return 0;
}

int pe_env_reclaim(struct pe_env *e, int cg, uint64_t bytes)
{
	char path[160], val[24];
	int err;

	env_cgroup_path(e, cg, "memory.reclaim", path, sizeof(path));
	snprintf(val, sizeof(val), "%llu", (unsigned long long)bytes);
	err = gl_write_file(path, val);
	if (err && err != -EAGAIN)
		return env_fail(e, err, "reclaim %s %s: %s", e->cg[cg].name, val, strerror(-err));
	return 0;
}

/* The `KEY N` line of memory.events or /proc/vmstat (0 without one). */
static long long events_count(const char *path, const char *key)
{
	static char text[16384];        /* /proc/vmstat is a few kB */
	size_t n = strlen(key);
	const char *p;

	if (gl_read_file(path, text, sizeof(text)))
		return 0;
	for (p = text; strncmp(p, key, n) || p[n] != ' '; p++)
		if (!(p = strchr(p, '\n')))
			return 0;
	return strtoll(p + n + 1, NULL, 10);
}

static long long events_oom_kill(const char *path)
{
	return events_count(path, "oom_kill");
}

long long pe_env_high_events(struct pe_env *e)
{
	char path[160];
	long long n = 0;

	for (int c = 0; c < e->ncg; c++) {
		env_cgroup_path(e, c, "memory.events", path, sizeof(path));
		n += events_count(path, "high");
	}
	return n;
}

long long pe_env_oom_kills(struct pe_env *e, int cg)
{
	char path[160];

	/* Every OOM kill, of a cgroup's or the machine's: a process of the
	 * program outside its cgroups dies of a global one, which only
	 * /proc/vmstat counts (memory.events would count a cgroup's twice). */
	if (cg < 0)
		return events_oom_kill("/proc/vmstat");
	env_cgroup_path(e, cg, "memory.events", path, sizeof(path));
	return events_oom_kill(path);
}

int env_cgroup_remove(struct pe_env *e, int cg)
{
	char path[160], procs[4096];
	int err = 0;

	/* Processes still exiting leave it a little later: up to 2 s. */
	for (int tries = 0; tries < 200; tries++) {
		env_cgroup_path(e, cg, "cgroup.procs", path, sizeof(path));
		if (gl_read_file(path, procs, sizeof(procs)) == 0)
			for (char *p = strtok(procs, "\n"); p; p = strtok(NULL, "\n"))
				pe_env_move(e, -1, (pid_t)atoi(p));
		env_cgroup_path(e, cg, NULL, path, sizeof(path));
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		err = -errno;
		gl_sleep_ms(10);
	}
	return env_fail(e, err, "cgroup %s: rmdir %s: %s", e->cg[cg].name, path, strerror(-err));
}
