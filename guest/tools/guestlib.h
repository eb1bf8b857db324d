/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by faultline guest tools: sysfs/procfs files, /proc/vmstat
 * snapshots, cgroup v2 memcgs and the seeded per-page memory pattern.
 */
#ifndef FAULTLINE_GUESTLIB_H
#define FAULTLINE_GUESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GL_PAGE_SIZE 4096UL

/* Write @val to @path; returns 0 or -errno. */
int gl_write_file(const char *path, const char *val);
/* Read @path into @buf (NUL-terminated, trailing newline stripped). */
int gl_read_file(const char *path, char *buf, size_t len);
/* Read one unsigned number from @path; -1 when unreadable. */
long long gl_read_u64(const char *path);

/* Parse a size such as 384M, 2G, 4096, 16K. Returns 0 on bad input. */
uint64_t gl_parse_size(const char *s);

/* The /proc/vmstat counters the selftests report. */
enum gl_vmstat_id {
    VM_PSWPIN, VM_PSWPOUT, VM_ZSWPIN, VM_ZSWPOUT, VM_ZSWPWB, VM_PGROTATED,
    VM_NR_SWAPCACHED, VM_WS_REFAULT_ANON, VM_WS_ACTIVATE_ANON,
    VM_WS_RESTORE_ANON, VM_SWAP_RA, VM_SWAP_RA_HIT, VM__COUNT,
};

struct gl_vmstat {
    long long v[VM__COUNT];
};

void gl_vmstat_read(struct gl_vmstat *s);
const char *gl_vmstat_name(int id);
/* Print "# vmstat NAME DELTA" KTAP diagnostics for every counter. */
void gl_vmstat_report(const struct gl_vmstat *before, const struct gl_vmstat *after);

/* Create /sys/fs/cgroup/@name (memory.max = @max, swap unlimited), join it. */
int gl_memcg_enter(const char *name, uint64_t max);
/* Write a memcg control file, e.g. ("memory.reclaim", "64M"). */
int gl_memcg_write(const char *name, const char *file, const char *val);
long long gl_memcg_read(const char *name, const char *file);
/* Move back to the root cgroup and rmdir @name. */
int gl_memcg_leave(const char *name);

/* Seeded page pattern: half of the pages compress well (zswap stores them). */
void gl_pattern_fill(uint8_t *base, size_t pages, uint64_t seed);
/* Fill one page (@w, GL_PAGE_SIZE bytes) with the pattern of page @idx. */
void gl_pattern_page(uint64_t *w, size_t idx, uint64_t seed);
/* Returns the number of pages that differ; the first bad page in @first_bad. */
size_t gl_pattern_verify(const uint8_t *base, size_t pages, uint64_t seed,
                         size_t *first_bad);

/* One value from the cgroup's memory.stat (e.g. "zswpwb"); -1 when absent. */
long long gl_memcg_stat(const char *name, const char *key);

#endif /* FAULTLINE_GUESTLIB_H */
