/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by faultline guest tools: sysfs/procfs files, /proc/vmstat
 * snapshots, cgroup v2 memcgs, the seeded per-page memory pattern, the kernel
 * log (guestlib.c), kprobes and hist triggers (guestlib-trace.c), kernel
 * coverage (guestlib-kcov.c).  The NVMe vendor interface is in guestlib-nvme.h.
 */
#ifndef FAULTLINE_GUESTLIB_H
#define FAULTLINE_GUESTLIB_H

#include <pthread.h>
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

/* CLOCK_MONOTONIC in seconds. */
double gl_now_s(void);
void gl_sleep_ms(int ms);

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
long long gl_vmstat_delta(const struct gl_vmstat *before, const struct gl_vmstat *after,
                          int id);
/* Print "# PREFIX NAME DELTA" KTAP diagnostics for every counter. */
void gl_vmstat_report(const char *prefix, const struct gl_vmstat *before,
                      const struct gl_vmstat *after);

/* Create /sys/fs/cgroup/@name (memory.max = @max, swap unlimited), join it. */
int gl_memcg_enter(const char *name, uint64_t max);
/* Write a memcg control file, e.g. ("memory.reclaim", "64M"). */
int gl_memcg_write(const char *name, const char *file, const char *val);
long long gl_memcg_read(const char *name, const char *file);
/* Move back to the root cgroup and rmdir @name. */
int gl_memcg_leave(const char *name);
/* gl_memcg_write, with a KTAP diagnostic when it fails. */
void gl_memcg_set(const char *name, const char *file, const char *val);
/* memory.reclaim everything charged to the memcg (a few tries: EAGAIN). */
void gl_memcg_reclaim_all(const char *name);
/* "# PREFIX KEY VALUE" for the memory.stat @keys, memory.current and
 * memory.zswap.current. */
void gl_memcg_report(const char *name, const char *prefix, const char *const *keys,
                     size_t nkeys);

/* Seeded page pattern: half of the pages compress well (zswap stores them). */
void gl_pattern_fill(uint8_t *base, size_t pages, uint64_t seed);
/* Fill one page (@w, GL_PAGE_SIZE bytes) with the pattern of page @idx. */
void gl_pattern_page(uint64_t *w, size_t idx, uint64_t seed);
/* Returns the number of pages that differ; the first bad page in @first_bad. */
size_t gl_pattern_verify(const uint8_t *base, size_t pages, uint64_t seed,
                         size_t *first_bad);

/* One value from the cgroup's memory.stat (e.g. "zswpwb"); -1 when absent. */
long long gl_memcg_stat(const char *name, const char *key);

/* ---- kernel log (/dev/kmsg) */

/* What a test's slice of the kernel log said. */
struct gl_kmsg_counts {
    int splats;         /* BUG/WARNING/Oops/lockdep/... lines */
    int write_errors;   /* "Write-error on swap-device" */
    int read_errors;    /* "Read-error on swap-device" */
    int io_errors;      /* block layer "I/O error", "critical medium error" */
    int lines;
};

/* Open /dev/kmsg positioned at its end: later scans see only new records. */
int gl_kmsg_open(void);
/* Read and close @fd; the first splat lines are printed as KTAP diagnostics. */
void gl_kmsg_scan(int fd, struct gl_kmsg_counts *k);

/* ---- tracefs: kprobes and hist triggers keyed on the context flags */

#define GL_TRACEFS "/sys/kernel/tracing"

/*
 * trace_entry.flags bits (kernel/trace/trace.h, enum trace_flag_type), the
 * "common_flags" field of every event.
 */
#define GL_TRACE_FLAG_HARDIRQ 0x08
#define GL_TRACE_FLAG_SOFTIRQ 0x10

/* A hist trigger keyed on the context flags (printed in hex, without 0x). */
#define GL_HIST_CTX_TRIGGER "hist:keys=common_flags.hex"

enum gl_ctx { GL_CTX_HARDIRQ, GL_CTX_SOFTIRQ, GL_CTX_TASK, GL_CTX__N };
extern const char *const gl_ctx_names[GL_CTX__N];

/* A GL_HIST_CTX_TRIGGER hist file: event counts by context. */
struct gl_hist {
    long long ctx[GL_CTX__N];
    long long sum;      /* of ctx[] */
    long long hits;     /* the "Hits:" total line; -1 if absent */
};

/* Parse hist file @path; -errno if it cannot be read. */
int gl_hist_read(const char *path, struct gl_hist *h);
/* @buf = GL_TRACEFS/events/GROUP/EVENT/FILE. */
void gl_trace_event_path(char *buf, size_t len, const char *group, const char *event,
                         const char *file);
/* Add kprobe GROUP/EVENT on @sym with a GL_HIST_CTX_TRIGGER; 0 or -errno. */
int gl_kprobe_hist_add(const char *group, const char *event, const char *sym);
/* Remove the trigger and the kprobe (no error if absent). */
void gl_kprobe_hist_remove(const char *group, const char *event);
/* Hist trigger on an existing event (e.g. block/block_rq_error): add or remove. */
int gl_hist_trigger(const char *group, const char *event, bool on);

/* Return values of a kretprobe, from its "hist:keys=ret" file. */
#define GL_RET_HIST_MAX 32
struct gl_ret_hist {
    int n;
    long long ret[GL_RET_HIST_MAX], count[GL_RET_HIST_MAX];
    long long total;    /* every return counted */
    long long dropped;  /* returns of values beyond GL_RET_HIST_MAX */
};

/* Add kretprobe GROUP/EVENT on @sym ("ret" = $retval as s32), hist keyed on it. */
int gl_kretprobe_hist_add(const char *group, const char *event, const char *sym);
void gl_kretprobe_hist_remove(const char *group, const char *event);
int gl_hist_read_ret(const char *path, struct gl_ret_hist *h);
/* Returns of value @ret (0 if none). */
long long gl_ret_hist_count(const struct gl_ret_hist *h, long long ret);

/*
 * A kprobe whose hist is keyed on the call stack ("hist:keys=common_stacktrace",
 * "stacktrace" before 6.5): which callers reached the probed function.
 */
int gl_kprobe_stack_add(const char *group, const char *event, const char *sym);
void gl_kprobe_stack_remove(const char *group, const char *event);
/*
 * Read such a hist: @hits[i] = events whose innermost frame among the
 * functions @frames is one of @frames[i] (or of its .isra/.constprop copy);
 * @total (optional) = all events. -errno if it cannot be read.
 */
int gl_hist_read_frames(const char *path, const char *const *frames, size_t n,
                        long long *hits, long long *total);

/*
 * One pass over /proc/kallsyms resolving every symbol in @want: the exact
 * name, or else a compiler clone ("name.isra.0", "name.constprop.0"), into
 * @got ("" when absent).
 */
void gl_kallsyms_resolve(const char *const *want, char (*got)[96], size_t n);

/* ---- kcov: kernel coverage of the tool's threads (guestlib-kcov.c) */

/* Edges hashed into a map of this many bits ("# kcov-map", base64). */
#define GL_KCOV_MAP_BITS (1u << 16)

/*
 * Trace the calling thread too (a worker; the main thread traces from the
 * start when FAULTLINE_KCOV=1).  0, or -errno; 0 and nothing done when
 * coverage is off.
 */
int gl_kcov_thread_begin(void);
/*
 * pthread_create() of a worker whose kernel work belongs in the coverage map
 * (reclaim, swap-in faults, swapoff): @fn runs after gl_kcov_thread_begin().
 * Returns pthread_create()'s value.
 */
int gl_thread_create_traced(pthread_t *th, void *(*fn)(void *), void *arg);
/* Add the edges of @n consecutive PCs to @map; returns the bits newly set. */
size_t gl_kcov_add_trace(uint8_t *map, const unsigned long *pcs, size_t n);
size_t gl_kcov_map_bits(const uint8_t *map);
/* Base64 of @len bytes into @out (4 * ceil(len / 3) + 1 bytes). */
void gl_kcov_base64(const uint8_t *in, size_t len, char *out);

#endif /* FAULTLINE_GUESTLIB_H */
