/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What env.c's pieces share (pe-env.h is the interface to the rest of
 * progexec):
 *   env.c        check, setup, teardown: the order, the baseline, the leak check
 *   env-swap.c   devices: resolving a target, the swap header, swapon/swapoff
 *   env-knob.c   knobs (language key -> file, save and restore) and cgroups
 * The parsers are here so the unit test (tests/unit/test-progexec-env.c)
 * checks them on the build host.
 */
#ifndef PE_ENV_INTERNAL_H
#define PE_ENV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "progexec.h"

#define PE_CGROUP_ROOT "/sys/fs/cgroup"
#define PE_SWAP_MAGIC "SWAPSPACE2"

/* One line in e->why; returns @err (a negative errno) for `return env_fail(...)`. */
int env_fail(struct pe_env *e, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- env-swap.c */

/* Fill @page (4096 bytes) with the version-1 swap header of an area of
 * @size bytes (mkswap's layout); -EINVAL when @size holds under 10 pages. */
int env_swap_header(uint8_t *page, uint64_t size);
/* Resolve @s->target to a block device in @s->path (and its sysfs name in
 * @sysname, "nvme0n1"); the device's size in bytes in @bytes. */
int env_swap_resolve(struct pe_env *e, struct pe_swap *s, char *sysname, size_t len,
		     uint64_t *bytes);
/* Write the swap header to @s->path (rotational too) and swapon it. */
int env_swap_make(struct pe_env *e, struct pe_swap *s);
/* swapoff in a child killed after @timeout_s: 0, or -errno (-ETIMEDOUT when
 * even the killed child did not end). */
int env_swapoff_timed(const char *path, int timeout_s);
/* The kB in use on @path per /proc/swaps, -1 when not listed; @path NULL:
 * the total of every device. */
long long env_swaps_used_kb(const char *path);

/* ---- env-knob.c */

/* The file of language key @key ("zswap.enabled" -> /sys/module/...). */
int env_knob_path(const char *key, char *path, size_t len);
/* A sysfs choice file's text ("always [madvise] never"): whether @value is
 * one of its words; the bracketed one in @cur (the plain text when there
 * are no brackets).  -EINVAL when @value is not offered. */
int env_choice_parse(const char *text, const char *value, char *cur, size_t len);
/* Whether /proc/crypto's @text lists compression algorithm @name. */
int env_crypto_has_compressor(const char *text, const char *name);
/* Restore every saved knob, in reverse order. */
int env_knobs_restore(struct pe_env *e);
/* Refuse a cgroup limit file this kernel lacks (a probe cgroup). */
int env_cgroups_check(struct pe_env *e);
/* Make each program cgroup with its limits. */
int env_cgroups_make(struct pe_env *e);
/* /sys/fs/cgroup/PREFIX-NAME[/FILE] of cgroup @cg. */
void env_cgroup_path(const struct pe_env *e, int cg, const char *file, char *buf, size_t len);
/* Move any process left in @cg out, rmdir it. */
int env_cgroup_remove(struct pe_env *e, int cg);
/* pe-PID-RUN: the prefix of this program's cgroup names (env.c sets it at
 * setup: the executor's pid and its program count), and the cgroup the
 * executor was in (move -1). */
extern char env_cgroup_prefix[32];
extern char env_home_cgroup[256];

#endif /* PE_ENV_INTERNAL_H */
