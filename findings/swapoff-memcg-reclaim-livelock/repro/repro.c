/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A reproducer of the swap program program (faultline prog c).
 * Build: gcc -static -O2 -pthread repro.c -o repro
 * Run as root in the VM qemu.sh boots: exit 0 pass, 1 a finding (the
 * `finding` lines on stdout), 2 the program was refused.
 * The program's text:
 *
 *   swap s0 virtio-blk size=4M prio=74
 *   swap s1 nvme size=6M prio=10
 *   swap s2 nvme size=6M prio=50
 *   cgroup g1 memory.max=1M memory.high=920K
 *   
 *   anon o1 2552K cgroup=g1
 *   write o1 0 2552K v=1
 *   madvise o1 0 2552K pageout
 *   fork p1
 *   @p1 reclaim g1 1M &
 *   swapoff s0
 *   wait p1
 *   read o1 0 2552K
 */
#define _GNU_SOURCE
/* ---- progexec/env-knob.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's kernel knobs (language key -> file, saved and restored) and its
 * memory cgroups (env-internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- lib/guestlib.h ---- */
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
/* ---- progexec/env-internal.h ---- */
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

/* ---- progexec/progexec.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progexec: the guest executor of swap programs (docs/programs.md).
 *
 * The pieces, each in its own file (program.h: the parsed program):
 *   parse.c    canonical program text -> struct pe_program
 *   run.c      the coordinator: the operations, the model, the report
 *   run-actor.c the processes and threads that do the operations (run.h)
 *   run-env.c  the coordinator's environment operations (runner.h)
 *   run-io.c   their sockets
 *   model.c    what every page owes (the oracle; model.h)
 *   pattern.c  the page pattern and its undo
 *   env.c      swap devices, knobs, cgroups, leak checks (pe-env.h)
 *   report.c   the report lines (one format for both modes)
 *   kcov.c     the program's kernel coverage (`cover` lines; kcov.h)
 *   offers.c   what the kernel offers a program (`offers` lines; offers.h)
 *   gate.c     the rules' gate of a run without the host (run --gate, prog c)
 *   serve.c    the virtio-serial loop (`progexec serve PORT`)
 *   main.c     `progexec run FILE` and `progexec serve PORT`
 *
 * One return convention: 0 or a negative errno; a failure that needs words
 * leaves one line in the caller's `why` buffer.
 */
#ifndef PROGEXEC_H
#define PROGEXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- progexec/pe-env.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progexec's environment (env.c): the swap devices a program names, the
 * kernel knobs it sets, its memory cgroups, and the leak checks after it.
 *
 * parse.c fills struct pe_env from the program's header; run.c calls these
 * functions for the header (pe_env_check, pe_env_setup, pe_env_teardown) and
 * for the operations that change the environment (swapoff, swapon, knob,
 * cgset, move, reclaim, compact, drop_caches).  Every function returns 0 or
 * a negative errno and then leaves one line in e->why.
 */
#ifndef PE_ENV_H
#define PE_ENV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PE_MAX_SWAPS 8
#define PE_MAX_KNOBS 64
#define PE_MAX_CGROUPS 8
#define PE_MAX_LIMITS 5
#define PE_ENV_WHY 256

struct pe_report;

struct pe_swap {
	char name[17];
	char kind[16];          /* nvme, syncblk, virtio-blk */
	uint64_t size;          /* bytes of the swap area (mkswap'd by env.c) */
	int prio;               /* -1 to 32767; PE_PRIO_DEFAULT: the kernel's */
	bool discard;
	bool rotational;
	char completion[8];     /* syncblk: task, irq, thread ("" otherwise) */
	char target[80];        /* from `bind`: nvme:SERIAL, virtio-blk:SERIAL, syncblk:MODE */
	char path[64];          /* the block device env.c resolved, /dev/... */
	bool on;
};
#define PE_PRIO_DEFAULT (-2)

struct pe_knob {
	char key[48];           /* as the language names it: zswap.enabled, mthp.64kB.enabled */
	char value[32];
};

struct pe_cgroup {
	char name[17];
	int nlimits;
	char key[PE_MAX_LIMITS][24];    /* memory.max, ... */
	char value[PE_MAX_LIMITS][24];  /* bytes as decimal, or max */
};

/* Counters read before the program, compared after it (leak check). */
struct pe_baseline {
	long long swap_used_kb;
	long long shmem_kb;
};

struct pe_env {
	struct pe_swap swap[PE_MAX_SWAPS];
	int nswap;
	struct pe_knob knob[PE_MAX_KNOBS];      /* the header's */
	int nknob;
	struct pe_cgroup cg[PE_MAX_CGROUPS];
	int ncg;
	/* env.c's own: each knob's value before the program, to restore. */
	struct pe_knob saved[PE_MAX_KNOBS];
	int nsaved;
	struct pe_baseline base;
	char why[PE_ENV_WHY];
};

/* Refuse before anything changes: every knob exists here (and takes the
 * value), every device is bound, found and large enough. */
int pe_env_check(struct pe_env *e);
/* Refuse one knob the kernel lacks or does not take (a header's, or a
 * `knob` operation's: both are refused before the program starts). */
int pe_env_knob_check(struct pe_env *e, const char *key, const char *value);
/* Baseline, then mkswap + swapon of each device in header order, header
 * knobs, cgroups made with their limits. */
int pe_env_setup(struct pe_env *e);
int pe_env_swapoff(struct pe_env *e, int dev);
int pe_env_swapon(struct pe_env *e, int dev, int prio, bool discard);
/* Whether /proc/swaps lists the device now (after a killed swapoff). */
bool pe_env_swap_listed(struct pe_env *e, int dev);
int pe_env_knob(struct pe_env *e, const char *key, const char *value);
int pe_env_cgset(struct pe_env *e, int cg, const char *key, const char *value);
/* Move process @pid into cgroup @cg, or back to the executor's own (-1). */
int pe_env_move(struct pe_env *e, int cg, pid_t pid);
/* memory.reclaim; EAGAIN counts as done. */
int pe_env_reclaim(struct pe_env *e, int cg, uint64_t bytes);
int pe_env_compact(struct pe_env *e);
int pe_env_drop_caches(struct pe_env *e, int what);
/* memory.events oom_kill of cgroup @cg; -1: every OOM kill on the machine,
 * a cgroup's or global (/proc/vmstat oom_kill). */
long long pe_env_oom_kills(struct pe_env *e, int cg);
/* memory.events high of every cgroup of the program: how often a process
 * was throttled over memory.high. */
long long pe_env_high_events(struct pe_env *e);
/* Every object is gone: `finding leak ...` for what did not return to the
 * baseline, a final swapoff of every device (a failure is a finding),
 * knobs restored, cgroups removed.  Returns the number of findings. */
int pe_env_teardown(struct pe_env *e, struct pe_report *r);

#endif /* PE_ENV_H */

#define PE_PAGE 4096
#define PE_NAME_MAX 17          /* [a-z][a-z0-9_]{0,15} and a NUL */
#define PE_PROGRAM_NAME_MAX 65
#define PE_LINE_MAX 4096

/* Where report lines go: stdout (run) or the channel (serve). */
struct pe_report {
	FILE *out;
	int findings;
};

/* `finding CHECK ...`: @fmt holds the KEY=VALUE words; counts the finding. */
void pe_finding(struct pe_report *r, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Any other report line (`at`, `relaxed`, `stat`, `cover`, ...), flushed. */
void pe_say(struct pe_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct pe_program;              /* parse.c */

/* The serve loop's turns inside a run; NULL members are no-ops (run mode). */
struct pe_hooks {
	int (*ready)(void *arg);        /* after setup: 0 to start, <0 to stop */
	int (*ops_done)(void *arg);     /* after the last operation: 0 to tear down */
	void *arg;
};

/* Outcome of pe_program_run(). */
enum pe_outcome {
	PE_PASS = 0,
	PE_FAIL = 1,            /* at least one finding */
	PE_REFUSED = 2,         /* not run: why says which knob/device/line */
};

/* Parse canonical text (lines joined by '\n'); NULL with `LINE: reason` in why. */
struct pe_program *pe_program_parse(const char *name, const char *text, char *why, size_t whylen);
/* Bind program device @dev (its name) to @target (`nvme:SERIAL`...). */
int pe_program_bind(struct pe_program *p, const char *dev, const char *target, char *why,
		    size_t whylen);
/* Let the failed-read relaxation apply (`allow failed-read DEV`). */
int pe_program_allow_failed_read(struct pe_program *p, const char *dev, char *why, size_t whylen);
/* Set up, run, tear down; reports through @r and ends with the `result` line
 * (or `refused`). */
enum pe_outcome pe_program_run(struct pe_program *p, const struct pe_hooks *hooks,
			       struct pe_report *r);
void pe_program_free(struct pe_program *p);

/* gate.c: a one-sector direct read of @sector on each of the program's swap
 * devices, which moves the state of the injectors' gated rules (--gate). */
int pe_gate_read(const struct pe_program *p, long sector, char *why, size_t whylen);

/* serve.c: `progexec serve PORT`; returns the process exit code.  @plant (an
 * enum pe_plant, program.h) is set on every program served: self-tests only. */
int pe_serve(const char *port_name, int plant);

#endif /* PROGEXEC_H */

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
#undef THP_DIR
#undef ZSWAP_DIR
/* ---- progexec/env-swap.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's swap devices: a `bind` target -> a block device, the swap
 * header, swapon and swapoff (env-internal.h). */
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
#undef HDR_LAST_PAGE
#undef HDR_NR_BADPAGES
#undef HDR_VERSION
#undef SWAP_MIN_PAGES
/* ---- progexec/env.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's environment (pe-env.h): the order of check, setup and teardown,
 * the baseline and the leak check.  Devices are in env-swap.c, knobs and
 * cgroups in env-knob.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


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
#undef SHMEM_SETTLE_MS
#undef SWAPOFF_BUDGET_S
/* ---- progexec/gate.c ---- */
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
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- progexec/program.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A parsed swap program (parse.c): the header in struct pe_env, the
 * operations with every name resolved to an index.  Actors are the
 * processes and threads (index 0 is `main`); objects are numbered in the
 * order the program makes them (object i is the pattern's O = i + 1).
 */
#ifndef PE_PROGRAM_H
#define PE_PROGRAM_H


#define PE_MAX_ACTORS 64
#define PE_MAX_OBJECTS 64
#define PE_MAX_RULES 64
#define PE_MAX_OPS 4096

enum pe_verb {
	PE_ANON, PE_MEMFD, PE_TMPFS, PE_WRITE, PE_READ, PE_PWRITE, PE_PREAD, PE_MADVISE,
	PE_MPROTECT, PE_MREMAP, PE_MUNMAP, PE_TRUNCATE, PE_PUNCH, PE_UFFD_WP, PE_FORK,
	PE_EXIT, PE_KILL, PE_KILL_SWAPOFF, PE_THREAD, PE_WAIT, PE_MOVE, PE_CGSET,
	PE_RECLAIM, PE_SWAPOFF, PE_SWAPON, PE_KNOB, PE_COMPACT, PE_DROP_CACHES, PE_SLEEP,
	PE_VERB_COUNT,
};

enum pe_advice {
	PE_PAGEOUT, PE_COLD, PE_DONTNEED, PE_FREE, PE_WILLNEED, PE_REMOVE,
	PE_POPULATE_READ, PE_POPULATE_WRITE,
};

enum pe_prot { PE_RW, PE_RO, PE_NONE };
enum pe_kind { PE_KIND_ANON, PE_KIND_MEMFD, PE_KIND_TMPFS };
enum pe_map { PE_MAP_SHARED, PE_MAP_PRIVATE, PE_MAP_NONE };

/* --plant: a fault the executor makes on purpose, for its self-tests. */
enum pe_plant { PE_PLANT_NONE, PE_PLANT_DROP_WRITE, PE_PLANT_STALE_PAGE, PE_PLANT_LEAK_SLOT };

struct pe_op {
	int line;               /* of the text as sent, from 1 */
	enum pe_verb verb;
	int actor;              /* who runs it (main: 0) */
	bool bg;                /* trailing & */
	int obj;                /* -1 when none */
	int target;             /* fork/thread: the new actor; exit/kill/wait: the actor */
	int dev;                /* swapoff/swapon/kill swapoff/wait DEV; -1 when none */
	int cg;                 /* move/cgset/reclaim; -1 when none */
	uint64_t off, len;      /* ranges (munmap without a range: whole) */
	uint64_t size;          /* mremap, truncate, reclaim */
	bool whole;             /* munmap OBJ */
	int version;            /* write, pwrite */
	int advice;             /* enum pe_advice */
	int prot;               /* enum pe_prot */
	bool on;                /* uffd_wp on|off */
	int cpu;                /* thread cpu=, -1 when not pinned */
	int prio;               /* swapon prio=, PE_PRIO_DEFAULT when absent */
	bool discard;           /* swapon discard */
	int num;                /* drop_caches 1|2|3, sleep MS */
	char key[48], value[32];/* knob, cgset */
};

struct pe_actor {
	char name[PE_NAME_MAX];
	bool thread;
	int proc;               /* the process it belongs to (itself for a process) */
	int line;               /* where it was made; 0 for main */
};

struct pe_object {
	char name[PE_NAME_MAX];
	enum pe_kind kind;
	enum pe_map map;        /* anon: shared or private */
	int pages;              /* 0, 'b' (pages=base) or 'h' (pages=huge) */
	char huge[16];          /* tmpfs huge= ("" when absent) */
	int cg;                 /* cgroup=, -1 when none */
	uint64_t size;
	int proc;               /* the process that made it */
};

struct pe_program {
	char name[PE_PROGRAM_NAME_MAX];
	struct pe_env env;
	int nrules;             /* kept, not interpreted: the host sets them */
	struct pe_actor actor[PE_MAX_ACTORS];
	int nactors;
	struct pe_object obj[PE_MAX_OBJECTS];
	int nobjs;
	struct pe_op *op;
	int nops;
	bool allow_failed_read; /* some device may fail reads (allow failed-read) */
	enum pe_plant plant;
};

extern const char *const pe_verb_names[PE_VERB_COUNT];
extern const char *const pe_advice_names[];
/* The cgroup limit files a program may set (NULL-terminated). */
extern const char *const pe_cgroup_keys[];

/* Whether the object has one content for every process (file or shmem). */
static inline bool pe_object_is_file(const struct pe_object *o)
{
	return o->kind != PE_KIND_ANON || o->map == PE_MAP_SHARED;
}

/* The process an actor's operations run in. */
static inline int pe_actor_proc(const struct pe_program *p, int actor)
{
	return p->actor[actor].proc;
}

#endif /* PE_PROGRAM_H */

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
/* ---- progexec/kcov.c ---- */
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

/* ---- progexec/kcov.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Kernel coverage of a program (kcov.c): every actor thread, and the
 * coordinator around its own environment operations, traces the kernel's
 * PCs (KCOV_TRACE_PC) while it runs an operation; the edges (consecutive PC
 * pairs, hashed as guestlib-kcov.c hashes them) gather in a map shared by
 * every process of the program, reported as `cover` lines before `result`.
 * Without kcov in the kernel every call is a no-op.
 */
#ifndef PE_KCOV_H
#define PE_KCOV_H

#include <stdbool.h>

struct pe_report;

/* Once, in the executor before any program: whether this kernel traces
 * (debugfs kcov opens, takes a buffer and enables), and the shared map.
 * 0, or -errno (coverage stays off; FAULTLINE_KCOV=0 turns it off). */
int pe_kcov_setup(void);
bool pe_kcov_on(void);
/* A new program: the map is emptied. */
void pe_kcov_program_begin(void);
/* Around one operation in the calling thread (a forked process opens its
 * own trace on first use). */
void pe_kcov_op_begin(void);
void pe_kcov_op_end(void);
/* Inside a long operation: take the buffer's PCs before it fills. */
void pe_kcov_poll(void);
/* `cover N HEX...` lines of the program's distinct edges (none when off). */
void pe_kcov_report(struct pe_report *r);

#endif /* PE_KCOV_H */

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
#undef COVER_PER_LINE
#undef KCOV_PATH
#undef MAP_WORDS
#undef POLL_AT
#undef TRACE_WORDS
/* ---- progexec/model.c ---- */
#define make_object make_object__model
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The oracle's model (docs/programs.md, What the kernel owes).  Every object
 * has, when it is a file (memfd, tmpfs) or shared anonymous memory (a shmem
 * object), one content for all processes: `file`.  Every process holding the
 * object has a mapping: its pages' protection, and for private mappings the
 * process's own copies (`own`).  Each ruling on the kernel's semantics is a
 * comment where it is applied.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- progexec/model.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The oracle (docs/programs.md, What the kernel owes): for every object and
 * every process's mapping of it, the versions each 4K page may hold; and the
 * page pattern those versions are written with.
 */
#ifndef PE_MODEL_H
#define PE_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct pe_program;
struct pe_op;

#define PE_WORDS (4096 / 8)
#define PE_VSET_MAX 4

/* The relaxations of docs/programs.md, by the name reports give them. */
enum pe_relax {
	PE_RELAX_NONE, PE_RELAX_MADV_FREE, PE_RELAX_FAILED_READ, PE_RELAX_KILLED_WRITER,
	PE_RELAX_CONCURRENT_WRITE, PE_RELAX_OOM_KILL, PE_RELAX_THROTTLED, PE_RELAX_COUNT,
};
extern const char *const pe_relax_names[PE_RELAX_COUNT];

/* The versions a page may hold: v[0] is the one owed without relaxations,
 * the others are what relaxation @relax allows besides it. */
struct pe_vset {
	uint16_t v[PE_VSET_MAX];
	uint8_t n;
	uint8_t relax;
};

bool pe_vset_has(const struct pe_vset *s, int version);

/* ---- the pattern: version @version of page @page of object @obj (O, from 1) */
uint64_t pe_mix64(uint64_t z);
uint64_t pe_unmix64(uint64_t z);
uint64_t pe_pattern_word(int obj, uint64_t page, int version, int i);
void pe_pattern_fill(uint64_t *w, int obj, uint64_t page, int version);
/* The version of (@obj, @page) that @w holds (0: zeros), -1 for none. */
int pe_pattern_version_of(const uint64_t *w, int obj, uint64_t page);

/* ---- the model */
struct pe_model;

struct pe_model *pe_model_new(const struct pe_program *p);
void pe_model_free(struct pe_model *m);
/* Operation @op starts: -EINVAL with `LINE: reason` in @why when the program
 * cannot do it here (a name ended, a range outside the mapping...), else its
 * effect is applied (a write's pages may hold old or new until it ends). */
int pe_model_start(struct pe_model *m, const struct pe_op *op, char *why, size_t whylen);
/* Write/pwrite @op ended: its pages hold its version, except those in
 * @faulted (one byte a page of the range, NULL: none) that a failed read
 * left unwritten; @killed: its writer died (PE_RELAX_KILLED_WRITER or
 * PE_RELAX_OOM_KILL): old or new stay allowed. */
void pe_model_end(struct pe_model *m, const struct pe_op *op, const uint8_t *faulted,
		  enum pe_relax killed);
/* What read/pread @op owes, page by page of its range, into @out. */
void pe_model_expected(const struct pe_model *m, const struct pe_op *op, struct pe_vset *out);
/* The first `relaxed` line of @relax for object @obj: true once. */
bool pe_model_first_relax(struct pe_model *m, enum pe_relax relax, int obj);
/* Process @proc ended (exit, kill, OOM kill): its mappings are gone. */
void pe_model_process_gone(struct pe_model *m, int proc);
/* Whether actor @a still lives (its process was not ended). */
bool pe_model_alive(const struct pe_model *m, int actor);

/* A dry run of every operation (parse.c): 0, or -EINVAL and `LINE: reason`. */
int pe_model_validate(const struct pe_program *p, char *why, size_t whylen);

#endif /* PE_MODEL_H */

const char *const pe_relax_names[PE_RELAX_COUNT] = {
	"none", "madv-free", "failed-read", "killed-writer", "concurrent-write", "oom-kill",
	"throttled",
};

/* ---- version sets */

bool pe_vset_has(const struct pe_vset *s, int version)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == version)
			return true;
	return false;
}

static struct pe_vset only(int version)
{
	struct pe_vset s = { { (uint16_t)version }, 1, PE_RELAX_NONE };

	return s;
}

/* @s, or @version too under relaxation @relax (v[0] stays the owed one). */
static void widen(struct pe_vset *s, int version, enum pe_relax relax)
{
	if (!pe_vset_has(s, version)) {
		if (s->n == PE_VSET_MAX)
			s->n--;         /* the oldest alternative goes: v[0] is kept */
		s->v[s->n++] = (uint16_t)version;
	}
	s->relax = (uint8_t)relax;
}

/* ---- the model's state */

enum page_state { UNMAPPED, MAPPED, COW };

struct mapping {
	bool held;              /* the process has the object (mapped or its fd) */
	bool mapped;            /* false: map=none, or munmap'd whole */
	uint32_t npages;
	uint8_t *state;         /* enum page_state */
	uint8_t *prot;          /* enum pe_prot */
	struct pe_vset *own;    /* private mappings: the process's copies */
};

struct object {
	bool made;
	uint32_t fpages;        /* file objects: the file's (shmem object's) size */
	struct pe_vset *file;
};

struct pe_model {
	const struct pe_program *p;
	struct object obj[PE_MAX_OBJECTS];
	struct mapping *map[PE_MAX_ACTORS];     /* [process][object]; NULL: process gone */
	bool ended[PE_MAX_ACTORS];
	const struct pe_op *busy[PE_MAX_ACTORS];
	bool swapoff_bg[PE_MAX_SWAPS];
	bool relaxed[PE_RELAX_COUNT][PE_MAX_OBJECTS];
};

/* Objects the executor models: up to 16G each (4M pages). */
#define MODEL_MAX_PAGES (1u << 22)

static int refuse(char *why, size_t whylen, const struct pe_op *op, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(char *why, size_t whylen, const struct pe_op *op, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(why, whylen, "%d: %s: ", op->line, pe_verb_names[op->verb]);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < whylen)
		vsnprintf(why + n, whylen - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

struct pe_model *pe_model_new(const struct pe_program *p)
{
	struct pe_model *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->p = p;
	m->map[0] = calloc(PE_MAX_OBJECTS, sizeof(struct mapping));
	if (!m->map[0]) {
		free(m);
		return NULL;
	}
	return m;
}

static void mapping_free(struct mapping *mp)
{
	free(mp->state);
	free(mp->prot);
	free(mp->own);
	memset(mp, 0, sizeof(*mp));
}

void pe_model_process_gone(struct pe_model *m, int proc)
{
	if (!m->map[proc])
		return;
	for (int i = 0; i < PE_MAX_OBJECTS; i++)
		mapping_free(&m->map[proc][i]);
	free(m->map[proc]);
	m->map[proc] = NULL;
	for (int a = 0; a < m->p->nactors; a++) {
		if (m->p->actor[a].proc == proc) {
			m->ended[a] = true;
			m->busy[a] = NULL;
		}
	}
}

void pe_model_free(struct pe_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < PE_MAX_ACTORS; i++)
		pe_model_process_gone(m, i);
	for (int i = 0; i < PE_MAX_OBJECTS; i++)
		free(m->obj[i].file);
	free(m);
}

bool pe_model_alive(const struct pe_model *m, int actor)
{
	return !m->ended[actor] && m->map[m->p->actor[actor].proc];
}

bool pe_model_first_relax(struct pe_model *m, enum pe_relax relax, int obj)
{
	bool first = !m->relaxed[relax][obj];

	m->relaxed[relax][obj] = true;
	return first;
}

/* Resize @mp to @n pages; new pages mapped with @prot, own copies zero. */
static int mapping_resize(struct mapping *mp, uint32_t n, int prot)
{
	uint8_t *state = realloc(mp->state, n), *pr = realloc(mp->prot, n);
	struct pe_vset *own = realloc(mp->own, n * sizeof(*own));

	if (state)
		mp->state = state;
	if (pr)
		mp->prot = pr;
	if (own)
		mp->own = own;
	if (!state || !pr || !own)
		return -ENOMEM;
	for (uint32_t i = mp->npages; i < n; i++) {
		mp->state[i] = MAPPED;
		mp->prot[i] = (uint8_t)prot;
		mp->own[i] = only(0);
	}
	mp->npages = n;
	return 0;
}

static int file_resize(struct object *o, uint32_t n)
{
	struct pe_vset *f = realloc(o->file, (n ? n : 1) * sizeof(*f));

	if (!f)
		return -ENOMEM;
	o->file = f;
	/* Pages past the old end are a hole: zeros when the file grows again. */
	for (uint32_t i = o->fpages; i < n; i++)
		f[i] = only(0);
	o->fpages = n;
	return 0;
}

static bool is_private_file(const struct pe_object *o)
{
	return o->kind != PE_KIND_ANON && o->map == PE_MAP_PRIVATE;
}

/* The set a write through @proc's mapping of @obj changes at page @pg: its
 * own copy (private anon; private file, whose write makes the copy), or the
 * one content (shared).  NULL when that process is gone. */
static struct pe_vset *write_target(struct pe_model *m, int proc, int obj, uint32_t pg,
				    bool through_file)
{
	const struct pe_object *o = &m->p->obj[obj];
	struct mapping *mp = m->map[proc] ? &m->map[proc][obj] : NULL;

	if (through_file || (pe_object_is_file(o) && !is_private_file(o)))
		return pg < m->obj[obj].fpages ? &m->obj[obj].file[pg] : NULL;
	if (!mp || !mp->held || pg >= mp->npages)
		return NULL;
	if (is_private_file(o) && mp->state[pg] != COW) {
		/* A private file mapping's first write copies the page (COW). */
		mp->own[pg] = pg < m->obj[obj].fpages ? m->obj[obj].file[pg] : only(0);
		mp->state[pg] = COW;
	}
	return &mp->own[pg];
}

/* What a read of page @pg through @proc's mapping (or the file) owes. */
static struct pe_vset read_owed(const struct pe_model *m, int proc, int obj, uint32_t pg,
				bool through_file)
{
	const struct pe_object *o = &m->p->obj[obj];
	const struct mapping *mp = &m->map[proc][obj];

	if (!through_file && (!pe_object_is_file(o) || (is_private_file(o) && mp->state[pg] == COW)))
		return mp->own[pg];
	return pg < m->obj[obj].fpages ? m->obj[obj].file[pg] : only(0);
}

void pe_model_expected(const struct pe_model *m, const struct pe_op *op, struct pe_vset *out)
{
	int proc = pe_actor_proc(m->p, op->actor);
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	for (uint32_t i = 0; i < n; i++)
		out[i] = read_owed(m, proc, op->obj, first + i, op->verb == PE_PREAD);
}

void pe_model_end(struct pe_model *m, const struct pe_op *op, const uint8_t *faulted,
		  enum pe_relax killed)
{
	int proc = pe_actor_proc(m->p, op->actor);
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	if (op->verb != PE_WRITE && op->verb != PE_PWRITE)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct pe_vset *s = write_target(m, proc, op->obj, first + i, op->verb == PE_PWRITE);

		if (!s || !pe_vset_has(s, op->version))
			continue;       /* truncated or unmapped meanwhile, or the process is gone */
		if (killed)
			widen(s, op->version, killed);
		else if (faulted && faulted[i])
			/* A failed swap read stopped the store: the old version, or
			 * the new one if the store landed before the fault. */
			widen(s, op->version, PE_RELAX_FAILED_READ);
		else
			*s = only(op->version);
	}
}

/* ---- checks of an operation against what exists (the dry run's too) */

static const struct pe_object *need_object(struct pe_model *m, const struct pe_op *op,
					   int proc, struct mapping **mp, char *why, size_t len)
{
	if (!m->obj[op->obj].made) {
		refuse(why, len, op, "%s is not made yet", m->p->obj[op->obj].name);
		return NULL;
	}
	*mp = &m->map[proc][op->obj];
	if (!(*mp)->held) {
		refuse(why, len, op, "%s is not in process %s", m->p->obj[op->obj].name,
		       m->p->actor[proc].name);
		return NULL;
	}
	return &m->p->obj[op->obj];
}

/* A range through the mapping: inside @limit pages, mapped, protections in @prots. */
static int mapped_range(struct pe_model *m, const struct pe_op *op, struct mapping *mp,
			uint32_t limit, const char *prots, char *why, size_t len)
{
	uint64_t end = op->off + op->len;

	if (!mp->mapped)
		return refuse(why, len, op, "%s has no mapping here", m->p->obj[op->obj].name);
	if (end > (uint64_t)limit * PE_PAGE || end < op->off)
		return refuse(why, len, op, "range ends past %u pages", limit);
	for (uint64_t pg = op->off / PE_PAGE; pg < end / PE_PAGE; pg++) {
		if (op->verb == PE_MUNMAP)
			continue;
		if (mp->state[pg] == UNMAPPED)
			return refuse(why, len, op, "page %llu is unmapped", (unsigned long long)pg);
		if (prots && !strchr(prots, '0' + mp->prot[pg]))
			return refuse(why, len, op, "page %llu's protection forbids it",
				      (unsigned long long)pg);
	}
	return 0;
}

/* Only a read (pread) may run beside another actor's background write of
 * the same object (concurrent-write); nothing else may touch it. */
static int in_use(struct pe_model *m, const struct pe_op *op, int proc, char *why, size_t len)
{
	for (int a = 0; a < m->p->nactors; a++) {
		const struct pe_op *b = m->busy[a];

		if (!b || b->obj != op->obj || a == op->actor)
			continue;
		if (pe_actor_proc(m->p, a) != proc && !pe_object_is_file(&m->p->obj[op->obj]))
			continue;       /* private anonymous memory of another process */
		if ((op->verb == PE_READ || op->verb == PE_PREAD) &&
		    (b->verb == PE_WRITE || b->verb == PE_PWRITE))
			continue;
		return refuse(why, len, op, "%s's background %s (line %d) uses %s",
			      m->p->actor[a].name, pe_verb_names[b->verb], b->line,
			      m->p->obj[op->obj].name);
	}
	return 0;
}

static int make_object(struct pe_model *m, const struct pe_op *op, int proc, char *why,
		       size_t len)
{
	const struct pe_object *o = &m->p->obj[op->obj];
	struct mapping *mp = &m->map[proc][op->obj];
	uint32_t n = (uint32_t)(o->size / PE_PAGE);

	if (o->size / PE_PAGE > MODEL_MAX_PAGES)
		return refuse(why, len, op, "%s is larger than 16G", o->name);
	/* A fresh object is zeros; a file's size is its size for every process
	 * (a shared anonymous mapping's shmem object keeps its first size). */
	m->obj[op->obj].made = true;
	if (pe_object_is_file(o) && file_resize(&m->obj[op->obj], n))
		return refuse(why, len, op, "out of memory");
	mp->held = true;
	mp->mapped = o->map != PE_MAP_NONE;
	if (mp->mapped && mapping_resize(mp, n, PE_RW))
		return refuse(why, len, op, "out of memory");
	return 0;
}

static void madvise_effect(struct pe_model *m, const struct pe_op *op, int proc,
			   struct mapping *mp)
{
	const struct pe_object *o = &m->p->obj[op->obj];
	struct object *ob = &m->obj[op->obj];
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	for (uint32_t pg = first; pg < first + n; pg++) {
		switch (op->advice) {
		case PE_DONTNEED:
			/* Private anon: zeros.  Private file: the COW copy is
			 * dropped, the file shows again.  Shared: the page cache
			 * (shmem) keeps the content. */
			if (!pe_object_is_file(o))
				mp->own[pg] = only(0);
			else if (is_private_file(o) && mp->state[pg] == COW)
				mp->state[pg] = MAPPED;
			break;
		case PE_FREE:
			/* Lazy free: the old version until reclaim drops it, then
			 * zeros; a write cancels it (madv-free). */
			if (!pe_object_is_file(o))
				widen(&mp->own[pg], 0, PE_RELAX_MADV_FREE);
			break;
		case PE_REMOVE:
			/* MADV_REMOVE punches the backing file (shmem): zeros for
			 * every shared view; COW copies stay, as for punch. */
			if (pg < ob->fpages)
				ob->file[pg] = only(0);
			break;
		case PE_POPULATE_WRITE:
			/* Write faults without a store: a private file mapping gets
			 * its COW copy of what the file holds now, and no longer
			 * sees later pwrite/punch there.  Past EOF it fails. */
			if (is_private_file(o) && mp->state[pg] != COW && pg < ob->fpages) {
				mp->own[pg] = ob->file[pg];
				mp->state[pg] = COW;
			}
			break;
		default:
			/* pageout, cold, willneed, populate_read: where the page
			 * lives, never what it holds. */
			break;
		}
	}
}

static int resize_file(struct pe_model *m, const struct pe_op *op, uint32_t n, char *why,
		       size_t len)
{
	struct object *ob = &m->obj[op->obj];

	if (op->size / PE_PAGE > MODEL_MAX_PAGES)
		return refuse(why, len, op, "larger than 16G");
	/* Truncate drops the pages past the new end everywhere, the private
	 * COW copies too (the kernel unmaps even_cows); growing again reads
	 * zeros. */
	if (n < ob->fpages)
		ob->fpages = n;
	for (int pr = 0; pr < PE_MAX_ACTORS; pr++) {
		struct mapping *mp = m->map[pr] ? &m->map[pr][op->obj] : NULL;

		for (uint32_t pg = n; mp && mp->held && pg < mp->npages; pg++)
			if (mp->state[pg] == COW)
				mp->state[pg] = MAPPED;
	}
	return file_resize(ob, n) ? refuse(why, len, op, "out of memory") : 0;
}

/* No page unmapped, one protection: what mremap needs. */
static bool whole(const struct mapping *mp)
{
	for (uint32_t i = 0; i < mp->npages; i++)
		if (mp->state[i] == UNMAPPED || mp->prot[i] != mp->prot[0])
			return false;
	return true;
}

static int object_op(struct pe_model *m, const struct pe_op *op, int proc, char *why, size_t len)
{
	const struct pe_object *o;
	struct mapping *mp;
	struct object *ob = &m->obj[op->obj];
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);
	uint32_t limit;
	bool file_op = op->verb == PE_PWRITE || op->verb == PE_PREAD || op->verb == PE_PUNCH ||
		       op->verb == PE_TRUNCATE;

	if (!(o = need_object(m, op, proc, &mp, why, len)) || in_use(m, op, proc, why, len))
		return -EINVAL;
	if (file_op && o->kind == PE_KIND_ANON)
		return refuse(why, len, op, "%s is not a file", o->name);
	if (file_op && op->verb != PE_TRUNCATE && op->off + op->len > (uint64_t)ob->fpages * PE_PAGE)
		return refuse(why, len, op, "range past the file's end");
	/* Through a file or shmem mapping, no further than the file's end
	 * (SIGBUS past it). */
	limit = mp->npages;
	if (pe_object_is_file(o) && (op->verb == PE_READ || op->verb == PE_WRITE) &&
	    ob->fpages < limit)
		limit = ob->fpages;

	switch (op->verb) {
	case PE_WRITE:
		if (mapped_range(m, op, mp, limit, "0", why, len))
			return -EINVAL;
		/* Until the write ends, a reader may see the old or the new. */
		for (uint32_t i = 0; i < n; i++) {
			struct pe_vset *s = write_target(m, proc, op->obj, first + i, false);

			if (s)
				widen(s, op->version, PE_RELAX_CONCURRENT_WRITE);
		}
		return 0;
	case PE_PWRITE:
		for (uint32_t i = 0; i < n; i++)
			widen(&ob->file[first + i], op->version, PE_RELAX_CONCURRENT_WRITE);
		return 0;
	case PE_READ:
		return mapped_range(m, op, mp, limit, "01", why, len);
	case PE_PREAD:
		return 0;
	case PE_PUNCH:
		/* Zeros in the file and every view that follows it; private
		 * COW copies stay (the kernel's punch keeps even_cows off). */
		for (uint32_t i = 0; i < n; i++)
			ob->file[first + i] = only(0);
		return 0;
	case PE_TRUNCATE:
		return resize_file(m, op, (uint32_t)(op->size / PE_PAGE), why, len);
	case PE_MADVISE: {
		static const char *const need[] = {
			[PE_POPULATE_READ] = "01", [PE_POPULATE_WRITE] = "0",
		};
		const char *prots = op->advice == PE_POPULATE_READ || op->advice == PE_POPULATE_WRITE
					    ? need[op->advice] : NULL;

		if (op->advice == PE_FREE && pe_object_is_file(o))
			return refuse(why, len, op, "free is for private anonymous memory");
		if (op->advice == PE_REMOVE && o->map != PE_MAP_SHARED)
			return refuse(why, len, op, "remove needs a shared mapping");
		if (mapped_range(m, op, mp, mp->npages, prots, why, len))
			return -EINVAL;
		madvise_effect(m, op, proc, mp);
		return 0;
	}
	case PE_MPROTECT:
		if (mapped_range(m, op, mp, mp->npages, NULL, why, len))
			return -EINVAL;
		memset(mp->prot + first, op->prot, n);
		return 0;
	case PE_UFFD_WP:
		/* Write protection delays a write until the handler lifts it;
		 * what the page holds does not change. */
		return mapped_range(m, op, mp, mp->npages, NULL, why, len);
	case PE_MREMAP:
		if (!mp->mapped || !whole(mp))
			return refuse(why, len, op, "the mapping of %s is not whole with one protection",
				      o->name);
		if (op->size / PE_PAGE > MODEL_MAX_PAGES)
			return refuse(why, len, op, "larger than 16G");
		/* Shrinking drops the pages past the new end (COW copies too);
		 * growing maps new pages: zeros for private anon, the file's
		 * (its current content) for a file mapping. */
		if ((uint32_t)(op->size / PE_PAGE) < mp->npages)
			mp->npages = (uint32_t)(op->size / PE_PAGE);
		if (mapping_resize(mp, (uint32_t)(op->size / PE_PAGE), mp->npages ? mp->prot[0] : PE_RW))
			return refuse(why, len, op, "out of memory");
		return 0;
	case PE_MUNMAP:
		if (op->whole) {
			/* The process's mapping and its file are gone; the file's
			 * content lives on for the processes that hold it. */
			mapping_free(mp);
			return 0;
		}
		if (mapped_range(m, op, mp, mp->npages, NULL, why, len))
			return -EINVAL;
		for (uint32_t i = first; i < first + n; i++) {
			mp->state[i] = UNMAPPED;
			mp->own[i] = only(0);
		}
		return 0;
	default:
		return 0;
	}
}

static int alive_actor(struct pe_model *m, const struct pe_op *op, int a, char *why, size_t len)
{
	if (!pe_model_alive(m, a))
		return refuse(why, len, op, "%s has ended", m->p->actor[a].name);
	return 0;
}

static int end_process_op(struct pe_model *m, const struct pe_op *op, char *why, size_t len)
{
	int p = op->target;

	if (alive_actor(m, op, p, why, len))
		return -EINVAL;
	for (int a = 0; op->verb == PE_EXIT && a < m->p->nactors; a++)
		if (m->p->actor[a].proc == p && m->busy[a])
			return refuse(why, len, op, "%s's background operation runs",
				      m->p->actor[a].name);
	pe_model_process_gone(m, p);
	return 0;
}

int pe_model_start(struct pe_model *m, const struct pe_op *op, char *why, size_t len)
{
	const struct pe_program *p = m->p;
	int proc = pe_actor_proc(p, op->actor);

	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return end_process_op(m, op, why, len);
	case PE_WAIT:
		if (op->target < 0) {
			if (!m->swapoff_bg[op->dev])
				return refuse(why, len, op, "no background swapoff of %s",
					      p->env.swap[op->dev].name);
			m->swapoff_bg[op->dev] = false;
		} else if (!m->busy[op->target]) {
			return refuse(why, len, op, "%s has no background operation",
				      p->actor[op->target].name);
		}
		if (op->target >= 0)
			m->busy[op->target] = NULL;
		return 0;
	case PE_KILL_SWAPOFF:
		if (!m->swapoff_bg[op->dev])
			return refuse(why, len, op, "no background swapoff of %s", p->env.swap[op->dev].name);
		m->swapoff_bg[op->dev] = false;
		return 0;
	default:
		break;
	}
	if (alive_actor(m, op, op->actor, why, len))
		return -EINVAL;
	if (m->busy[op->actor])
		return refuse(why, len, op, "%s runs a background operation", p->actor[op->actor].name);
	if (op->bg && !op->actor && op->verb != PE_SWAPOFF)
		return refuse(why, len, op, "main never runs in the background");
	if ((op->verb == PE_SWAPOFF || op->verb == PE_SWAPON) && m->swapoff_bg[op->dev])
		return refuse(why, len, op, "a background swapoff of %s runs", p->env.swap[op->dev].name);
	if (op->verb == PE_SWAPOFF && op->bg)
		m->swapoff_bg[op->dev] = true;
	else if (op->bg)
		m->busy[op->actor] = op;
	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return make_object(m, op, proc, why, len);
	case PE_FORK: {
		/* fork: the child has every mapping of its parent; private pages
		 * are copies on write, so the child's copies start equal. */
		struct mapping *child = calloc(PE_MAX_OBJECTS, sizeof(*child));

		for (int a = 0; a < p->nactors; a++)
			if (m->busy[a] && p->actor[a].proc == proc)
				return free(child), refuse(why, len, op, "a background operation runs in %s",
							   p->actor[proc].name);
		if (!child)
			return refuse(why, len, op, "out of memory");
		for (int i = 0; i < PE_MAX_OBJECTS; i++) {
			const struct mapping *from = &m->map[proc][i];

			child[i].held = from->held;
			child[i].mapped = from->mapped;
			if (from->held && from->mapped) {
				if (mapping_resize(&child[i], from->npages, PE_RW))
					return refuse(why, len, op, "out of memory");
				memcpy(child[i].state, from->state, from->npages);
				memcpy(child[i].prot, from->prot, from->npages);
				memcpy(child[i].own, from->own, from->npages * sizeof(*from->own));
			}
		}
		m->map[op->target] = child;
		return 0;
	}
	default:
		return op->obj >= 0 ? object_op(m, op, proc, why, len) : 0;
	}
}

int pe_model_validate(const struct pe_program *p, char *why, size_t whylen)
{
	struct pe_model *m = pe_model_new(p);
	int err = 0;

	if (!m) {
		snprintf(why, whylen, "0: out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < p->nops && !err; i++) {
		err = pe_model_start(m, &p->op[i], why, whylen);
		pe_model_end(m, &p->op[i], NULL, PE_RELAX_NONE);
	}
	pe_model_free(m);
	return err;
}
#undef make_object
#undef MODEL_MAX_PAGES
/* ---- progexec/offers.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What this kernel and machine offer a program (the `offers` lines after
 * `hello`, docs/programs.md): the same tests pe_env_knob_check() and
 * env_cgroups_check() refuse a program by, asked of every value the
 * language has, so a generator that keeps to the offers writes programs
 * this guest runs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- progexec/offers.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What this kernel and machine offer a program (offers.c). */
#ifndef PE_OFFERS_H
#define PE_OFFERS_H

#include <stddef.h>

/* The `offers KEY VALUE...` lines, each ending in '\n', into @buf (lines
 * that do not fit are left out); how many there are. */
int pe_offers(char *buf, size_t len);

#endif /* PE_OFFERS_H */

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define MAX_MTHP 16

/* The language's values of the knobs whose answer is the kernel's write. */
static const char *const compressors[] = { "lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate",
					   "842", NULL };
static const char *const zpools[] = { "zsmalloc", "zbud", "z3fold", NULL };
static const char *const plain_knobs[] = {
	"zswap.enabled", "zswap.shrinker_enabled", "zswap.max_pool_percent",
	"zswap.accept_threshold_percent", "zswap.compressor", "zswap.zpool", "vm.page-cluster",
	"vm.swappiness", "thp.enabled", "thp.defrag", "thp.shmem_enabled", NULL,
};
static const char *const thp_choices[] = { "thp.enabled", "thp.defrag", "thp.shmem_enabled",
					   NULL };

struct lines {
	char *buf;
	size_t len, used;
	int n;
	char line[PE_LINE_MAX];
	size_t at;              /* bytes in line */
};

static void line_start(struct lines *l, const char *key)
{
	l->at = (size_t)snprintf(l->line, sizeof(l->line), "offers %s", key);
}

static void line_word(struct lines *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->at >= sizeof(l->line) - 1)
		return;
	l->line[l->at++] = ' ';
	va_start(ap, fmt);
	n = vsnprintf(l->line + l->at, sizeof(l->line) - l->at, fmt, ap);
	va_end(ap);
	if (n > 0 && l->at + (size_t)n < sizeof(l->line))
		l->at += (size_t)n;
	else
		l->line[--l->at] = '\0';        /* a word that does not fit is left out */
}

static void line_end(struct lines *l)
{
	int n = snprintf(l->buf + l->used, l->len - l->used, "%s\n", l->line);

	if (n > 0 && l->used + (size_t)n < l->len) {
		l->used += (size_t)n;
		l->n++;
	}
}

/* A choice file's words, brackets off: `offers KEY WORD...`. */
static void choice_line(struct lines *l, const char *key)
{
	char path[160], text[512], word[64];
	int n;

	if (env_knob_path(key, path, sizeof(path)) || gl_read_file(path, text, sizeof(text)))
		return;
	line_start(l, key);
	for (const char *p = text; sscanf(p, "%63s%n", word, &n) == 1; p += n) {
		size_t w = strlen(word);

		if (word[0] == '[' && w > 2 && word[w - 1] == ']')
			line_word(l, "%.*s", (int)w - 2, word + 1);
		else
			line_word(l, "%s", word);
	}
	line_end(l);
}

/* The values of @key the kernel takes, as pe_env_knob_check() decides. */
static void tried_line(struct lines *l, const char *key, const char *const *values)
{
	static struct pe_env scratch;
	char path[160];

	if (env_knob_path(key, path, sizeof(path)) || access(path, R_OK))
		return;
	line_start(l, key);
	for (int i = 0; values[i]; i++)
		if (!pe_env_knob_check(&scratch, key, values[i]))
			line_word(l, "%s", values[i]);
	line_end(l);
}

static int by_size(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The anonymous mTHP sizes (hugepages-SIZEkB/enabled; a size with only
 * shmem_enabled is no mthp.SIZE.enabled knob), ascending, in kB. */
static int mthp_sizes(int *kb, int max)
{
	DIR *d = opendir(THP_DIR);
	struct dirent *e;
	int n = 0, size;
	char tail[8], path[300];

	while (d && (e = readdir(d)) && n < max) {
		if (sscanf(e->d_name, "hugepages-%dkB%7s", &size, tail) != 1)
			continue;
		snprintf(path, sizeof(path), THP_DIR "/%s/enabled", e->d_name);
		if (!access(path, R_OK))
			kb[n++] = size;
	}
	if (d)
		closedir(d);
	qsort(kb, (size_t)n, sizeof(*kb), by_size);
	return n;
}

static void cgroup_line(struct lines *l)
{
	char probe[64], path[160], text[256], cur[64];

	line_start(l, "cgroup.files");
	if (!gl_read_file(PE_CGROUP_ROOT "/cgroup.subtree_control", text, sizeof(text)) &&
	    !env_choice_parse(text, "memory", cur, sizeof(cur))) {
		/* A new child cgroup shows which limit files this kernel has. */
		snprintf(probe, sizeof(probe), PE_CGROUP_ROOT "/pe-offers-%d", (int)getpid());
		if (!mkdir(probe, 0755) || errno == EEXIST) {
			for (int i = 0; pe_cgroup_keys[i]; i++) {
				snprintf(path, sizeof(path), "%s/%s", probe, pe_cgroup_keys[i]);
				if (!access(path, W_OK))
					line_word(l, "%s", pe_cgroup_keys[i]);
			}
			rmdir(probe);
		}
	}
	line_end(l);
}

static long long mem_total_kb(void)
{
	char text[4096];
	const char *p;

	if (gl_read_file("/proc/meminfo", text, sizeof(text)) || !(p = strstr(text, "MemTotal:")))
		return 0;
	return strtoll(p + 9, NULL, 10);
}

int pe_offers(char *buf, size_t len)
{
	struct lines l = { .buf = buf, .len = len };
	int kb[MAX_MTHP], nsizes = mthp_sizes(kb, MAX_MTHP);
	char key[48], path[160];

	buf[0] = '\0';
	line_start(&l, "knobs");
	for (int i = 0; plain_knobs[i]; i++)
		if (!env_knob_path(plain_knobs[i], path, sizeof(path)) && !access(path, R_OK))
			line_word(&l, "%s", plain_knobs[i]);
	for (int i = 0; i < nsizes; i++)
		line_word(&l, "mthp.%dkB.enabled", kb[i]);
	line_end(&l);
	tried_line(&l, "zswap.compressor", compressors);
	tried_line(&l, "zswap.zpool", zpools);
	for (int i = 0; thp_choices[i]; i++)
		choice_line(&l, thp_choices[i]);
	line_start(&l, "mthp.sizes");
	for (int i = 0; i < nsizes; i++)
		line_word(&l, "%dkB", kb[i]);
	line_end(&l);
	for (int i = 0; i < nsizes; i++) {
		snprintf(key, sizeof(key), "mthp.%dkB.enabled", kb[i]);
		choice_line(&l, key);
	}
	cgroup_line(&l);
	line_start(&l, "cpus");
	line_word(&l, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
	line_end(&l);
	line_start(&l, "memory");
	line_word(&l, "%lld", mem_total_kb() * 1024);
	line_end(&l);
	return l.n;
}
#undef MAX_MTHP
#undef THP_DIR
/* ---- progexec/parse.c ---- */
#define new_actor new_actor__parse
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Canonical program text -> struct pe_program (docs/programs.md).  The host's
 * checker (python/faultline/prog/check.py) has already accepted the text;
 * this parser still refuses, with `LINE: reason`, anything it cannot read,
 * and model.c's dry run (pe_model_validate) refuses what cannot be done.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


const char *const pe_verb_names[PE_VERB_COUNT] = {
	"anon", "memfd", "tmpfs", "write", "read", "pwrite", "pread", "madvise", "mprotect",
	"mremap", "munmap", "truncate", "punch", "uffd_wp", "fork", "exit", "kill",
	"kill swapoff", "thread", "wait", "move", "cgset", "reclaim", "swapoff", "swapon",
	"knob", "compact", "drop_caches", "sleep",
};
const char *const pe_advice_names[] = {
	"pageout", "cold", "dontneed", "free", "willneed", "remove", "populate_read",
	"populate_write", NULL,
};
static const char *const prot_names[] = { "rw", "ro", "none", NULL };
static const char *const map_names[] = { "shared", "private", "none", NULL };
static const char *const swap_kinds[] = { "nvme", "syncblk", "virtio-blk", NULL };
static const char *const completions[] = { "task", "irq", "thread", NULL };
static const char *const tmpfs_huge[] = { "never", "always", "within_size", "advise", NULL };
const char *const pe_cgroup_keys[] = {
	"memory.max", "memory.high", "memory.swap.max", "memory.zswap.max",
	"memory.zswap.writeback", NULL,
};

#define MAX_WORDS 16

enum name_kind { N_NONE, N_DEV, N_CG, N_OBJ, N_ACTOR };

struct parser {
	struct pe_program *p;
	int line;
	char *why;
	size_t whylen;
	int cap;
};

static int bad(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ps->why, ps->whylen, "%d: ", ps->line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->whylen)
		vsnprintf(ps->why + n, ps->whylen - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int word_index(const char *const *list, const char *w)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(list[i], w))
			return i;
	return -1;
}

/* 2476K, 16M, 1G or bytes; a multiple of 4K. */
static int parse_size(struct parser *ps, const char *w, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (!isdigit((unsigned char)w[0]))
		return bad(ps, "bad size %s", w);
	errno = 0;
	n = strtoull(w, &end, 10);
	if (errno || n > (1ULL << 40))
		return bad(ps, "size %s is too large", w);
	if (*end == 'K')
		n <<= 10, end++;
	else if (*end == 'M')
		n <<= 20, end++;
	else if (*end == 'G')
		n <<= 30, end++;
	if (*end || n % PE_PAGE)
		return bad(ps, "bad size %s (a multiple of 4K: 4K, 16M, 1G)", w);
	*out = n;
	return 0;
}

static int parse_int(struct parser *ps, const char *w, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(w, &end, 10);
	if (!*w || *end || errno || v < lo || v > hi)
		return bad(ps, "bad number %s (expected %ld to %ld)", w, lo, hi);
	*out = (int)v;
	return 0;
}

static enum name_kind lookup(const struct pe_program *p, const char *name, int *idx)
{
	for (int i = 0; i < p->env.nswap; i++)
		if (!strcmp(p->env.swap[i].name, name))
			return *idx = i, N_DEV;
	for (int i = 0; i < p->env.ncg; i++)
		if (!strcmp(p->env.cg[i].name, name))
			return *idx = i, N_CG;
	for (int i = 0; i < p->nobjs; i++)
		if (!strcmp(p->obj[i].name, name))
			return *idx = i, N_OBJ;
	for (int i = 0; i < p->nactors; i++)
		if (!strcmp(p->actor[i].name, name))
			return *idx = i, N_ACTOR;
	return N_NONE;
}

static int new_name(struct parser *ps, const char *w, char out[PE_NAME_MAX])
{
	int i, len = (int)strlen(w);

	if (len < 1 || len > PE_NAME_MAX - 1 || !islower((unsigned char)w[0]))
		return bad(ps, "bad name %s", w);
	for (i = 1; i < len; i++)
		if (!islower((unsigned char)w[i]) && !isdigit((unsigned char)w[i]) && w[i] != '_')
			return bad(ps, "bad name %s", w);
	if (lookup(ps->p, w, &i) != N_NONE)
		return bad(ps, "%s is defined twice", w);
	memcpy(out, w, len + 1);
	return 0;
}

static int ref(struct parser *ps, const char *w, enum name_kind kind, int *idx)
{
	static const char *const what[] = { "", "device", "cgroup", "object", "process or thread" };

	if (lookup(ps->p, w, idx) != kind)
		return bad(ps, "no %s %s", what[kind], w);
	return 0;
}

/* KEY=VALUE of option word @w whose key is @key; NULL when it is not. */
static const char *opt(const char *w, const char *key)
{
	size_t n = strlen(key);

	return !strncmp(w, key, n) && w[n] == '=' ? w + n + 1 : NULL;
}

static int copy_kv(struct parser *ps, const char *w, char *key, size_t klen, char *val,
		   size_t vlen)
{
	const char *eq = strchr(w, '=');

	if (!eq || eq == w || (size_t)(eq - w) >= klen || strlen(eq + 1) >= vlen || !eq[1])
		return bad(ps, "expected KEY=VALUE, got %s", w);
	memcpy(key, w, eq - w);
	key[eq - w] = 0;
	strcpy(val, eq + 1);
	return 0;
}

/* A cgroup limit value: a size (as decimal bytes) or max. */
static int limit_value(struct parser *ps, const char *key, const char *v, char out[24])
{
	uint64_t n;

	if (!strcmp(key, "memory.zswap.writeback")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			return bad(ps, "%s=%s: expected 0 or 1", key, v);
		strcpy(out, v);
		return 0;
	}
	if (!strcmp(v, "max")) {
		strcpy(out, "max");
		return 0;
	}
	if (parse_size(ps, v, &n))
		return -EINVAL;
	snprintf(out, 24, "%llu", (unsigned long long)n);
	return 0;
}

static int header_swap(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_swap *s;

	if (n < 3 || e->nswap >= PE_MAX_SWAPS)
		return bad(ps, "swap: expected `swap DEV KIND [options]` (at most %d)", PE_MAX_SWAPS);
	s = &e->swap[e->nswap];
	memset(s, 0, sizeof(*s));
	if (new_name(ps, w[1], s->name))
		return -EINVAL;
	if (word_index(swap_kinds, w[2]) < 0)
		return bad(ps, "swap: unknown kind %s", w[2]);
	strcpy(s->kind, w[2]);
	s->size = 64 << 20;
	s->prio = PE_PRIO_DEFAULT;
	for (int i = 3; i < n; i++) {
		const char *v;

		if ((v = opt(w[i], "size"))) {
			if (parse_size(ps, v, &s->size))
				return -EINVAL;
		} else if ((v = opt(w[i], "prio"))) {
			if (parse_int(ps, v, -1, 32767, &s->prio))
				return -EINVAL;
		} else if ((v = opt(w[i], "completion"))) {
			if (word_index(completions, v) < 0 || strcmp(s->kind, "syncblk"))
				return bad(ps, "swap: bad completion=%s", v);
			strcpy(s->completion, v);
		} else if (!strcmp(w[i], "discard")) {
			s->discard = true;
		} else if (!strcmp(w[i], "rotational")) {
			s->rotational = true;
		} else {
			return bad(ps, "swap: unexpected %s", w[i]);
		}
	}
	if (s->size < (1 << 20))
		return bad(ps, "swap %s: size below 1M", s->name);
	e->nswap++;
	return 0;
}

static int header_cgroup(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_cgroup *c;

	if (n < 2 || e->ncg >= PE_MAX_CGROUPS || n - 2 > PE_MAX_LIMITS)
		return bad(ps, "cgroup: expected `cgroup CG [KEY=V]...` (at most %d)", PE_MAX_CGROUPS);
	c = &e->cg[e->ncg];
	memset(c, 0, sizeof(*c));
	if (new_name(ps, w[1], c->name))
		return -EINVAL;
	for (int i = 2; i < n; i++) {
		char *val;

		if (copy_kv(ps, w[i], c->key[c->nlimits], sizeof(c->key[0]), c->value[c->nlimits],
			    sizeof(c->value[0])))
			return -EINVAL;
		if (word_index(pe_cgroup_keys, c->key[c->nlimits]) < 0)
			return bad(ps, "cgroup: unknown key %s", c->key[c->nlimits]);
		val = c->value[c->nlimits];
		if (limit_value(ps, c->key[c->nlimits], val, val))
			return -EINVAL;
		c->nlimits++;
	}
	e->ncg++;
	return 0;
}

static int header_knob(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_knob *k;

	if (n != 2 || e->nknob >= PE_MAX_KNOBS)
		return bad(ps, "knob: expected `knob KEY=VALUE`");
	k = &e->knob[e->nknob];
	if (copy_kv(ps, w[1], k->key, sizeof(k->key), k->value, sizeof(k->value)))
		return -EINVAL;
	for (int i = 0; i < e->nknob; i++)
		if (!strcmp(e->knob[i].key, k->key))
			return bad(ps, "knob %s twice in the header", k->key);
	e->nknob++;
	return 0;
}

/* The object-making operations: anon, memfd, tmpfs. */
static int op_object(struct parser *ps, struct pe_op *op, char **w, int n)
{
	struct pe_program *p = ps->p;
	struct pe_object *o;

	if (n < 3 || p->nobjs >= PE_MAX_OBJECTS)
		return bad(ps, "%s: expected `%s OBJ SIZE [options]` (at most %d objects)", w[0],
			   w[0], PE_MAX_OBJECTS);
	o = &p->obj[p->nobjs];
	memset(o, 0, sizeof(*o));
	if (new_name(ps, w[1], o->name) || parse_size(ps, w[2], &o->size))
		return -EINVAL;
	if (!o->size)
		return bad(ps, "%s: size 0", w[0]);
	o->kind = op->verb == PE_ANON ? PE_KIND_ANON : op->verb == PE_MEMFD ? PE_KIND_MEMFD
									    : PE_KIND_TMPFS;
	o->map = o->kind == PE_KIND_ANON ? PE_MAP_PRIVATE : PE_MAP_SHARED;
	o->cg = -1;
	o->proc = pe_actor_proc(p, op->actor);
	for (int i = 3; i < n; i++) {
		const char *v;

		if (o->kind == PE_KIND_ANON && word_index(map_names, w[i]) >= 0 &&
		    strcmp(w[i], "none")) {
			o->map = word_index(map_names, w[i]);
		} else if (o->kind != PE_KIND_ANON && (v = opt(w[i], "map"))) {
			if (word_index(map_names, v) < 0)
				return bad(ps, "%s: bad map=%s", w[0], v);
			o->map = word_index(map_names, v);
		} else if (o->kind != PE_KIND_TMPFS && (v = opt(w[i], "pages"))) {
			if (strcmp(v, "base") && strcmp(v, "huge"))
				return bad(ps, "%s: bad pages=%s", w[0], v);
			o->pages = v[0];
		} else if (o->kind == PE_KIND_TMPFS && (v = opt(w[i], "huge"))) {
			if (word_index(tmpfs_huge, v) < 0)
				return bad(ps, "tmpfs: bad huge=%s", v);
			strcpy(o->huge, v);
		} else if ((v = opt(w[i], "cgroup"))) {
			if (ref(ps, v, N_CG, &o->cg))
				return -EINVAL;
		} else {
			return bad(ps, "%s: unexpected %s", w[0], w[i]);
		}
	}
	op->obj = p->nobjs++;
	return 0;
}

/* OBJ OFF LEN at w[1..3]. */
static int range(struct parser *ps, struct pe_op *op, char **w, int n, int need)
{
	if (n != need)
		return bad(ps, "%s: expected %d words, got %d", w[0], need, n);
	if (ref(ps, w[1], N_OBJ, &op->obj) || parse_size(ps, w[2], &op->off) ||
	    parse_size(ps, w[3], &op->len))
		return -EINVAL;
	if (!op->len)
		return bad(ps, "%s: length 0", w[0]);
	return 0;
}

static int version(struct parser *ps, struct pe_op *op, const char *w)
{
	const char *v = opt(w, "v");

	if (!v)
		return bad(ps, "expected v=N, got %s", w);
	return parse_int(ps, v, 1, 65535, &op->version);
}

static int new_actor(struct parser *ps, struct pe_op *op, const char *w, bool thread)
{
	struct pe_program *p = ps->p;
	struct pe_actor *a;

	if (p->nactors >= PE_MAX_ACTORS)
		return bad(ps, "too many processes and threads (at most %d)", PE_MAX_ACTORS);
	a = &p->actor[p->nactors];
	if (new_name(ps, w, a->name))
		return -EINVAL;
	a->thread = thread;
	a->proc = thread ? pe_actor_proc(p, op->actor) : p->nactors;
	a->line = ps->line;
	op->target = p->nactors++;
	return 0;
}

static int op_words(struct parser *ps, struct pe_op *op, char **w, int n)
{
	const char *v;

	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return op_object(ps, op, w, n);
	case PE_WRITE: case PE_PWRITE:
		if (n != 5)
			return bad(ps, "%s: expected `%s OBJ OFF LEN v=N`", w[0], w[0]);
		return range(ps, op, w, 4, 4) || version(ps, op, w[4]) ? -EINVAL : 0;
	case PE_READ: case PE_PREAD: case PE_PUNCH:
		return range(ps, op, w, n, 4);
	case PE_MADVISE:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if ((op->advice = word_index(pe_advice_names, w[4])) < 0)
			return bad(ps, "madvise: unknown advice %s", w[4]);
		return 0;
	case PE_MPROTECT:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if ((op->prot = word_index(prot_names, w[4])) < 0)
			return bad(ps, "mprotect: expected ro, rw or none, got %s", w[4]);
		return 0;
	case PE_UFFD_WP:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if (strcmp(w[4], "on") && strcmp(w[4], "off"))
			return bad(ps, "uffd_wp: expected on or off, got %s", w[4]);
		op->on = !strcmp(w[4], "on");
		return 0;
	case PE_MUNMAP:
		if (n == 2) {
			op->whole = true;
			return ref(ps, w[1], N_OBJ, &op->obj);
		}
		return range(ps, op, w, n, 4);
	case PE_MREMAP: case PE_TRUNCATE:
		if (n != 3 || ref(ps, w[1], N_OBJ, &op->obj) || parse_size(ps, w[2], &op->size))
			return n != 3 ? bad(ps, "%s: expected `%s OBJ SIZE`", w[0], w[0]) : -EINVAL;
		if (op->verb == PE_MREMAP && !op->size)
			return bad(ps, "mremap: size 0");
		return 0;
	case PE_FORK: case PE_THREAD:
		if (n < 2 || n > 3 || (n == 3 && op->verb == PE_FORK))
			return bad(ps, "%s: expected one name", w[0]);
		if (new_actor(ps, op, w[1], op->verb == PE_THREAD))
			return -EINVAL;
		if (n == 3 && (!(v = opt(w[2], "cpu")) || parse_int(ps, v, 0, 63, &op->cpu)))
			return v ? -EINVAL : bad(ps, "thread: unexpected %s", w[2]);
		return 0;
	case PE_EXIT: case PE_KILL:
		if (n != 2 || ref(ps, w[1], N_ACTOR, &op->target))
			return n != 2 ? bad(ps, "%s: expected `%s P`", w[0], w[0]) : -EINVAL;
		if (!op->target || ps->p->actor[op->target].thread)
			return bad(ps, "%s: %s is not a forked process", w[0], w[1]);
		return 0;
	case PE_WAIT:
		if (n != 2)
			return bad(ps, "wait: expected `wait P|T|DEV`");
		if (lookup(ps->p, w[1], &op->target) == N_ACTOR)
			return 0;
		op->target = -1;
		return ref(ps, w[1], N_DEV, &op->dev);
	case PE_KILL_SWAPOFF: case PE_SWAPOFF:
		if (n != 2)
			return bad(ps, "%s: expected one device", w[0]);
		return ref(ps, w[1], N_DEV, &op->dev);
	case PE_SWAPON:
		if (n < 2 || ref(ps, w[1], N_DEV, &op->dev))
			return n < 2 ? bad(ps, "swapon: expected a device") : -EINVAL;
		for (int i = 2; i < n; i++) {
			if ((v = opt(w[i], "prio"))) {
				if (parse_int(ps, v, -1, 32767, &op->prio))
					return -EINVAL;
			} else if (!strcmp(w[i], "discard")) {
				op->discard = true;
			} else {
				return bad(ps, "swapon: unexpected %s", w[i]);
			}
		}
		return 0;
	case PE_MOVE:
		return n != 2 ? bad(ps, "move: expected `move CG`") : ref(ps, w[1], N_CG, &op->cg);
	case PE_CGSET:
		if (n != 3 || ref(ps, w[1], N_CG, &op->cg) ||
		    copy_kv(ps, w[2], op->key, sizeof(op->key), op->value, sizeof(op->value)))
			return n != 3 ? bad(ps, "cgset: expected `cgset CG KEY=V`") : -EINVAL;
		if (word_index(pe_cgroup_keys, op->key) < 0)
			return bad(ps, "cgset: unknown key %s", op->key);
		return limit_value(ps, op->key, op->value, op->value);
	case PE_RECLAIM:
		if (n != 3 || ref(ps, w[1], N_CG, &op->cg))
			return n != 3 ? bad(ps, "reclaim: expected `reclaim CG SIZE`") : -EINVAL;
		return parse_size(ps, w[2], &op->size);
	case PE_KNOB:
		if (n != 2)
			return bad(ps, "knob: expected `knob KEY=VALUE`");
		return copy_kv(ps, w[1], op->key, sizeof(op->key), op->value, sizeof(op->value));
	case PE_COMPACT:
		return n != 1 ? bad(ps, "compact takes no values") : 0;
	case PE_DROP_CACHES:
		return n != 2 ? bad(ps, "drop_caches: expected 1, 2 or 3")
			      : parse_int(ps, w[1], 1, 3, &op->num);
	case PE_SLEEP:
		return n != 2 ? bad(ps, "sleep: expected MS") : parse_int(ps, w[1], 1, 10000, &op->num);
	default:
		return bad(ps, "unknown operation %s", w[0]);
	}
}

static bool takes_prefix(enum pe_verb v)
{
	return v != PE_EXIT && v != PE_KILL && v != PE_KILL_SWAPOFF && v != PE_WAIT;
}

static bool may_background(enum pe_verb v)
{
	return v == PE_WRITE || v == PE_READ || v == PE_PWRITE || v == PE_PREAD ||
	       v == PE_MADVISE || v == PE_RECLAIM || v == PE_SWAPOFF || v == PE_COMPACT ||
	       v == PE_DROP_CACHES || v == PE_SLEEP;
}

static int operation(struct parser *ps, char **w, int n)
{
	struct pe_program *p = ps->p;
	struct pe_op *op;
	int verb;

	if (p->nops >= PE_MAX_OPS)
		return bad(ps, "too many operations (at most %d)", PE_MAX_OPS);
	if (p->nops == ps->cap) {
		struct pe_op *more = realloc(p->op, sizeof(*more) * (ps->cap = ps->cap * 2 + 64));

		if (!more)
			return bad(ps, "out of memory");
		p->op = more;
	}
	op = &p->op[p->nops];
	memset(op, 0, sizeof(*op));
	op->line = ps->line;
	op->obj = op->target = op->dev = op->cg = op->cpu = -1;
	op->prio = PE_PRIO_DEFAULT;
	if (w[0][0] == '@') {
		if (strcmp(w[0] + 1, "main") && ref(ps, w[0] + 1, N_ACTOR, &op->actor))
			return -EINVAL;
		w++, n--;
	}
	if (n && !strcmp(w[n - 1], "&"))
		op->bg = true, n--;
	if (!n)
		return bad(ps, "no operation");
	if (!strcmp(w[0], "kill") && n > 1 && !strcmp(w[1], "swapoff")) {
		verb = PE_KILL_SWAPOFF;
		w++, n--;
	} else {
		for (verb = 0; verb < PE_VERB_COUNT; verb++)
			if (!strcmp(pe_verb_names[verb], w[0]))
				break;
	}
	if (verb >= PE_VERB_COUNT)
		return bad(ps, "unknown operation %s", w[0]);
	op->verb = verb;
	if (op->actor && !takes_prefix(verb))
		return bad(ps, "%s takes no @ prefix", w[0]);
	if (op->bg && !may_background(verb))
		return bad(ps, "%s cannot run in the background", w[0]);
	if (op_words(ps, op, w, n))
		return -EINVAL;
	p->nops++;
	return 0;
}

static int statement(struct parser *ps, char *text, bool *in_header, bool *seen_any)
{
	char *w[MAX_WORDS], *save, *hash = strchr(text, '#');
	int n = 0;

	if (hash)
		*hash = 0;
	for (char *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (n == MAX_WORDS)
			return bad(ps, "too many words");
		w[n++] = t;
	}
	if (!n)
		return 0;
	if (!strcmp(w[0], "program")) {
		if (*seen_any || n != 2 || strcmp(w[1], "v1"))
			return bad(ps, "`program v1` must be the first line");
		*seen_any = true;
		return 0;
	}
	*seen_any = true;
	if (!strcmp(w[0], "rule")) {
		if (!*in_header)
			return bad(ps, "rule after the first operation");
		int dev;

		if (n < 5 || ps->p->nrules >= PE_MAX_RULES)
			return bad(ps, "rule: expected `rule DEV NAME: RULE` (at most %d)", PE_MAX_RULES);
		if (ref(ps, w[1], N_DEV, &dev))
			return -EINVAL;
		ps->p->nrules++;
		return 0;
	}
	if (!strcmp(w[0], "swap") || !strcmp(w[0], "cgroup") || (*in_header && !strcmp(w[0], "knob"))) {
		if (!*in_header)
			return bad(ps, "%s after the first operation", w[0]);
		return w[0][0] == 's' ? header_swap(ps, w, n) : w[0][0] == 'c' ? header_cgroup(ps, w, n)
										 : header_knob(ps, w, n);
	}
	*in_header = false;
	return operation(ps, w, n);
}

struct pe_program *pe_program_parse(const char *name, const char *text, char *why, size_t whylen)
{
	struct pe_program *p = calloc(1, sizeof(*p));
	struct parser ps = { p, 0, why, whylen, 0 };
	bool in_header = true, seen_any = false;
	char *copy = strdup(text), *line, *next;

	if (!p || !copy) {
		snprintf(why, whylen, "0: out of memory");
		goto fail;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	strcpy(p->actor[0].name, "main");
	p->nactors = 1;
	for (line = copy; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		ps.line++;
		if (strlen(line) >= PE_LINE_MAX) {
			bad(&ps, "line longer than %d bytes", PE_LINE_MAX - 1);
			goto fail;
		}
		if (statement(&ps, line, &in_header, &seen_any))
			goto fail;
	}
	if (pe_model_validate(p, why, whylen))
		goto fail;
	free(copy);
	return p;
fail:
	free(copy);
	pe_program_free(p);
	return NULL;
}

int pe_program_bind(struct pe_program *p, const char *dev, const char *target, char *why,
		    size_t whylen)
{
	for (int i = 0; i < p->env.nswap; i++) {
		if (strcmp(p->env.swap[i].name, dev))
			continue;
		if (strlen(target) >= sizeof(p->env.swap[i].target)) {
			snprintf(why, whylen, "bind %s: target too long", dev);
			return -EINVAL;
		}
		strcpy(p->env.swap[i].target, target);
		return 0;
	}
	snprintf(why, whylen, "bind %s: the program has no swap device %s", dev, dev);
	return -ENOENT;
}

int pe_program_allow_failed_read(struct pe_program *p, const char *dev, char *why, size_t whylen)
{
	for (int i = 0; i < p->env.nswap; i++) {
		if (!strcmp(p->env.swap[i].name, dev)) {
			p->allow_failed_read = true;
			return 0;
		}
	}
	snprintf(why, whylen, "allow failed-read %s: the program has no swap device %s", dev, dev);
	return -ENOENT;
}

void pe_program_free(struct pe_program *p)
{
	if (p)
		free(p->op);
	free(p);
}
#undef new_actor
#undef MAX_WORDS
/* ---- progexec/pattern.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The page pattern (docs/programs.md, The pattern): version N of page P of
 * object O, and which version a page holds (mix64 undone), as
 * python/faultline/prog/pattern.py computes them.
 */
#include <string.h>


/* ---- the pattern (docs/programs.md, The pattern) */

#define GOLDEN 0x9E3779B97F4A7C15ULL
#define M1 0xBF58476D1CE4E5B9ULL
#define M2 0x94D049BB133111EBULL

/* The inverse of odd @a modulo 2^64 (Newton's iteration). */
static uint64_t inverse(uint64_t a)
{
	uint64_t x = a;

	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

uint64_t pe_mix64(uint64_t z)
{
	z = (z ^ z >> 30) * M1;
	z = (z ^ z >> 27) * M2;
	return z ^ z >> 31;
}

/* x from z = x ^ (x >> s). */
static uint64_t unshift(uint64_t z, int s)
{
	uint64_t x = z;

	for (int i = 0; i < 64 / s + 1; i++)
		x = z ^ x >> s;
	return x;
}

uint64_t pe_unmix64(uint64_t z)
{
	z = unshift(z, 31);
	z = unshift(z * inverse(M2), 27);
	return unshift(z * inverse(M1), 30);
}

static uint64_t pattern_key(int obj, uint64_t page, int version)
{
	return (uint64_t)obj << 48 | page << 16 | (uint64_t)version;
}

uint64_t pe_pattern_word(int obj, uint64_t page, int version, int i)
{
	return version ? pe_mix64(pattern_key(obj, page, version) * GOLDEN + (uint64_t)i) : 0;
}

void pe_pattern_fill(uint64_t *w, int obj, uint64_t page, int version)
{
	uint64_t base = pattern_key(obj, page, version) * GOLDEN;

	for (int i = 0; i < PE_WORDS; i++)
		w[i] = version ? pe_mix64(base + (uint64_t)i) : 0;
}

int pe_pattern_version_of(const uint64_t *w, int obj, uint64_t page)
{
	uint64_t k = pe_unmix64(w[0]) * inverse(GOLDEN);
	int version = (int)(k & 0xffff);
	uint64_t want[PE_WORDS];

	if (!w[0]) {
		for (int i = 1; i < PE_WORDS; i++)
			if (w[i])
				return -1;
		return 0;
	}
	if (!version || k >> 48 != (uint64_t)obj || (k >> 16 & 0xffffffff) != page)
		return -1;
	pe_pattern_fill(want, obj, page, version);
	return memcmp(want, w, sizeof(want)) ? -1 : version;
}
#undef GOLDEN
#undef M1
#undef M2
/* ---- progexec/report.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's report lines (docs/programs.md, The executor and its channel). */
#include <stdarg.h>


void pe_finding(struct pe_report *r, const char *check, const char *fmt, ...)
{
	va_list ap;

	fprintf(r->out, "finding %s ", check);
	va_start(ap, fmt);
	vfprintf(r->out, fmt, ap);
	va_end(ap);
	fputc('\n', r->out);
	fflush(r->out);
	r->findings++;
}

void pe_say(struct pe_report *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(r->out, fmt, ap);
	va_end(ap);
	fputc('\n', r->out);
	fflush(r->out);
}
/* ---- progexec/run-actor.c ---- */
#define make_object make_object__run_actor
#define new_actor new_actor__run_actor
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The actors: the program's processes (`main`, each `fork P`) and threads
 * (`thread T`).  Each runs commands from the coordinator on its own socket
 * and replies there; none writes the report.  A process's objects (address,
 * length, fd) are this file's globals: a fork copies them, its threads
 * share them.  Forks are real (COW is the kernel's), threads are pthreads.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- progexec/run.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Between the coordinator (run.c: reads the program, keeps the model, writes
 * the report) and the actors (run-actor.c: the program's processes and
 * threads, each a command loop on a socket).  Commands and replies are
 * fixed-size headers with an array after them; a fork's or thread's reply
 * carries the coordinator's end of the new actor's socket (SCM_RIGHTS).
 */
#ifndef PE_RUN_H
#define PE_RUN_H

#include <stdint.h>
#include <sys/types.h>


enum pe_cmd_kind {
	PE_CMD_OP,              /* run operation `op` */
	PE_CMD_EXIT,            /* the process exits (no reply: its socket closes) */
	PE_CMD_HIDE,            /* --plant leak-slot: fork the hidden process */
};

struct pe_cmd {
	int32_t kind;
	int32_t op;             /* index in the program */
	int32_t plant;          /* enum pe_plant for this operation, or 0 */
	uint32_t npages;        /* read: struct pe_owed follow, one a page */
};

/* What a page owes a read: @v, or (@torn) a page written meanwhile whose
 * words are each @v's or @alt's (concurrent-write). */
struct pe_owed {
	uint16_t v, alt;
	uint32_t torn;
};

#define PE_SEEN_TORN (-3)       /* every word @v's or @alt's, the page neither */
#define PE_SEEN_NONE (-1)       /* the page holds no version of its (O, P) */
#define PE_SEEN_FAULT (-2)      /* SIGBUS (mapping) or an I/O error (file); word: errno */

/* A page that did not hold what the command said it owes (read), or whose
 * access faulted (read or write). */
struct pe_exc {
	uint32_t page;          /* in the object */
	int32_t seen;           /* version, PE_SEEN_NONE or PE_SEEN_FAULT */
	uint32_t word;          /* first wrong word, or errno of a fault */
	uint32_t pad;
	uint64_t got, want;
};

struct pe_reply {
	int32_t op;
	int32_t err;            /* 0 or -errno of the call named in `call` */
	char call[16];
	uint32_t nexc;          /* struct pe_exc follow */
	int32_t pid;            /* fork, thread, hide: the process */
	uint32_t pages;         /* pages the operation touched */
	int32_t has_fd;         /* an fd rides along (SCM_RIGHTS) */
};

/* Where tmpfs objects are made: one mount a huge= policy ("" the default). */
#define PE_TMPFS_POLICIES 5
extern char pe_tmpfs_dir[PE_TMPFS_POLICIES][64];
int pe_tmpfs_policy(const char *huge);

/* run-actor.c: become actor @self (a process) on socket @fd; never returns. */
void pe_actor_main(const struct pe_program *p, int self, int fd) __attribute__((noreturn));

/* Whole-buffer socket I/O: 0, or -errno (-EPIPE at EOF). */
int pe_send(int fd, const void *buf, size_t len, int pass_fd);
int pe_recv(int fd, void *buf, size_t len, int *got_fd);

#endif /* PE_RUN_H */

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 14)
#endif

char pe_tmpfs_dir[PE_TMPFS_POLICIES][64];

int pe_tmpfs_policy(const char *huge)
{
	static const char *const names[PE_TMPFS_POLICIES] = { "", "never", "always",
							       "within_size", "advise" };

	for (int i = 0; i < PE_TMPFS_POLICIES; i++)
		if (!strcmp(names[i], huge))
			return i;
	return 0;
}

static const struct pe_program *prog;
static int self_proc;
static struct handle {
	uint8_t *addr;          /* NULL: not mapped */
	size_t len;
	int fd;                 /* -1: none (anon private) */
	uint8_t *gone;          /* pages a partial munmap took, one byte a page (NULL: none) */
} obj[PE_MAX_OBJECTS];
static int chan[PE_MAX_ACTORS];         /* sockets this process holds: its own, its threads' */
static int uffd = -1;
static __thread sigjmp_buf *fault_jmp;

/* ---- SIGBUS: a failed swap read faults the accessing thread */

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (fault_jmp)
		siglongjmp(*fault_jmp, 1);
	signal(SIGBUS, SIG_DFL);        /* not ours: die of it, the coordinator reports */
	raise(SIGBUS);
}

/* Store version @v of page @pg into @dst; -EFAULT on SIGBUS. */
static int guarded_store(uint64_t *dst, int o, uint64_t pg, int v)
{
	sigjmp_buf jb;
	uint64_t base = ((uint64_t)o << 48 | pg << 16 | (uint64_t)v) * 0x9E3779B97F4A7C15ULL;

	/* SA_NODEFER: the handler leaves SIGBUS unblocked, no mask to restore. */
	if (sigsetjmp(jb, 0)) {
		fault_jmp = NULL;
		return -EFAULT;
	}
	fault_jmp = &jb;
	for (int i = 0; i < PE_WORDS; i++)
		dst[i] = pe_mix64(base + (uint64_t)i);
	fault_jmp = NULL;
	return 0;
}

static int guarded_copy(void *dst, const void *src)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0)) {
		fault_jmp = NULL;
		return -EFAULT;
	}
	fault_jmp = &jb;
	memcpy(dst, src, PE_PAGE);
	fault_jmp = NULL;
	return 0;
}

/* ---- replies */

struct out {
	struct pe_reply r;
	struct pe_exc *exc;
	uint32_t cap;
	int fd;
};

static void fail(struct out *o, const char *call)
{
	o->r.err = -errno;
	snprintf(o->r.call, sizeof(o->r.call), "%s", call);
}

static void add_exc(struct out *o, uint32_t page, int seen, uint32_t word, uint64_t got,
		    uint64_t want)
{
	if (o->r.nexc == o->cap) {
		struct pe_exc *more = realloc(o->exc, sizeof(*more) * (o->cap = o->cap * 2 + 16));

		if (!more)
			return;
		o->exc = more;
	}
	o->exc[o->r.nexc++] = (struct pe_exc){ page, seen, word, 0, got, want };
}

/* A page written while it was read: each word the old one's or the new one's. */
static bool torn(const uint64_t *buf, const uint64_t *w, int o, uint32_t pg, int alt)
{
	uint64_t a[PE_WORDS];

	pe_pattern_fill(a, o, pg, alt);
	for (int i = 0; i < PE_WORDS; i++)
		if (buf[i] != w[i] && buf[i] != a[i])
			return false;
	return true;
}

/* Page @pg of @o read into @buf: an exception unless it holds what it owes. */
static void check_page(struct out *out, const uint64_t *buf, int o, uint32_t pg,
		       const struct pe_owed *owed)
{
	uint64_t w[PE_WORDS];
	int i, seen;

	pe_pattern_fill(w, o, pg, owed->v);
	if (!memcmp(w, buf, PE_PAGE))
		return;
	for (i = 0; i < PE_WORDS && w[i] == buf[i]; i++)
		;
	seen = pe_pattern_version_of(buf, o, pg);
	if (seen < 0 && owed->torn && torn(buf, w, o, pg, owed->alt))
		seen = PE_SEEN_TORN;
	add_exc(out, pg, seen, (uint32_t)i, buf[i], w[i]);
}

/* ---- the operations */

static void make_object(const struct pe_op *op, struct out *out)
{
	const struct pe_object *o = &prog->obj[op->obj];
	struct handle *h = &obj[op->obj];
	int flags = MAP_SHARED;

	h->fd = -1;
	h->len = o->size;
	if (o->kind == PE_KIND_MEMFD) {
		h->fd = memfd_create(o->name, 0);
	} else if (o->kind == PE_KIND_TMPFS) {
		char path[128];

		snprintf(path, sizeof(path), "%s/%s", pe_tmpfs_dir[pe_tmpfs_policy(o->huge)], o->name);
		h->fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (h->fd >= 0)
			unlink(path);   /* the open file is the object: nothing left behind */
	}
	if (o->kind != PE_KIND_ANON && (h->fd < 0 || ftruncate(h->fd, (off_t)o->size)))
		return fail(out, "create");
	if (o->map == PE_MAP_NONE)
		return;
	if (o->map == PE_MAP_PRIVATE)
		flags = MAP_PRIVATE;
	if (o->kind == PE_KIND_ANON)
		flags |= MAP_ANONYMOUS;
	h->addr = mmap(NULL, h->len, PROT_READ | PROT_WRITE, flags, h->fd, 0);
	if (h->addr == MAP_FAILED) {
		h->addr = NULL;
		return fail(out, "mmap");
	}
	if (o->pages)
		madvise(h->addr, h->len, o->pages == 'h' ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

static void do_write(const struct pe_op *op, const struct pe_cmd *cmd, struct out *out)
{
	struct handle *h = &obj[op->obj];
	int o = op->obj + 1;
	uint64_t first = op->off / PE_PAGE, n = op->len / PE_PAGE;
	uint64_t buf[PE_WORDS], old[PE_WORDS];
	bool stale = cmd->plant == PE_PLANT_STALE_PAGE && !guarded_copy(old, h->addr + op->off);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t pg = first + i;

		out->r.pages++;
		pe_kcov_poll();
		if (i == 0 && cmd->plant == PE_PLANT_DROP_WRITE)
			continue;       /* planted: a store lost */
		if (op->verb == PE_PWRITE) {
			pe_pattern_fill(buf, o, pg, op->version);
			if (pwrite(h->fd, buf, PE_PAGE, (off_t)(pg * PE_PAGE)) != PE_PAGE)
				add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, (uint32_t)errno, 0, 0);
		} else if (guarded_store((uint64_t *)(h->addr + pg * PE_PAGE), o, pg, op->version)) {
			add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, EFAULT, 0, 0);
		}
	}
	if (stale) {
		/* Planted: an older copy of the first page mapped over the live one. */
		void *at = mmap(h->addr + op->off, PE_PAGE, PROT_READ | PROT_WRITE,
				MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (at != MAP_FAILED)
			memcpy(at, old, PE_PAGE);
	}
}

static void do_read(const struct pe_op *op, const struct pe_owed *owed, struct out *out)
{
	struct handle *h = &obj[op->obj];
	uint64_t first = op->off / PE_PAGE, n = op->len / PE_PAGE;
	uint64_t buf[PE_WORDS];

	for (uint64_t i = 0; i < n; i++) {
		uint64_t pg = first + i;

		out->r.pages++;
		pe_kcov_poll();
		if (op->verb == PE_PREAD) {
			if (pread(h->fd, buf, PE_PAGE, (off_t)(pg * PE_PAGE)) != PE_PAGE) {
				add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, (uint32_t)errno, 0, 0);
				continue;
			}
		} else if (guarded_copy(buf, h->addr + pg * PE_PAGE)) {
			add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, EFAULT, 0, 0);
			continue;
		}
		check_page(out, buf, op->obj + 1, (uint32_t)pg, &owed[i]);
	}
}

static void do_madvise(const struct pe_op *op, struct out *out)
{
	static const int advice[] = {
		[PE_PAGEOUT] = MADV_PAGEOUT, [PE_COLD] = MADV_COLD, [PE_DONTNEED] = MADV_DONTNEED,
		[PE_FREE] = MADV_FREE, [PE_WILLNEED] = MADV_WILLNEED, [PE_REMOVE] = MADV_REMOVE,
		[PE_POPULATE_READ] = MADV_POPULATE_READ, [PE_POPULATE_WRITE] = MADV_POPULATE_WRITE,
	};

	out->r.pages = (uint32_t)(op->len / PE_PAGE);
	if (madvise(obj[op->obj].addr + op->off, op->len, advice[op->advice]))
		fail(out, "madvise");
}

/* The uffd handler: a write to a write-protected page waits for it; the
 * handler lifts the protection of that page, which wakes the writer. */
static void *uffd_handler(void *arg)
{
	struct pollfd pfd = { uffd, POLLIN, 0 };
	struct uffd_msg msg;

	for (;;) {
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return NULL;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event == UFFD_EVENT_PAGEFAULT) {
			struct uffdio_writeprotect wp = {
				{ msg.arg.pagefault.address & ~(uint64_t)(PE_PAGE - 1), PE_PAGE }, 0 };

			ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
		}
	}
}

static int uffd_open(void)
{
	static const uint64_t features[] = {
		UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED,
		UFFD_FEATURE_WP_HUGETLBFS_SHMEM, 0,
	};
	pthread_t t;

	for (int i = 0; uffd < 0 && i < 3; i++) {
		struct uffdio_api api = { UFFD_API, features[i], 0 };
		int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);

		if (fd < 0)
			fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return -errno;
		if (!ioctl(fd, UFFDIO_API, &api))
			uffd = fd;
		else
			close(fd);
	}
	if (uffd < 0)
		return -EINVAL;
	if (pthread_create(&t, NULL, uffd_handler, NULL)) {
		close(uffd);
		uffd = -1;
		return -EAGAIN;
	}
	pthread_detach(t);
	return 0;
}

static void do_uffd_wp(const struct pe_op *op, struct out *out)
{
	uint64_t start = (uint64_t)(uintptr_t)(obj[op->obj].addr + op->off);
	struct uffdio_register reg = { { start, op->len }, UFFDIO_REGISTER_MODE_WP, 0 };
	struct uffdio_writeprotect wp = { { start, op->len }, 0 };

	if (uffd < 0 && (errno = -uffd_open()))
		return fail(out, "userfaultfd");
	if (op->on) {
		if (ioctl(uffd, UFFDIO_REGISTER, &reg))
			return fail(out, "uffd-register");
		wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
	}
	/* Lifting what was never registered is ENOENT/EINVAL: nothing to lift. */
	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) && op->on)
		fail(out, "uffd-wp");
}

static void actor_loop(int fd, int self) __attribute__((noreturn));

struct thread_start {
	int fd, self, cpu;
};

static void *thread_main(void *arg)
{
	struct thread_start ts = *(struct thread_start *)arg;

	free(arg);
	if (ts.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(ts.cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	actor_loop(ts.fd, ts.self);
}

static void new_actor(const struct pe_op *op, struct out *out)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return fail(out, "socketpair");
	if (op->verb == PE_THREAD) {
		struct thread_start *ts = malloc(sizeof(*ts));
		pthread_t t;

		if (!ts || (*ts = (struct thread_start){ sv[1], op->target, op->cpu },
			    errno = pthread_create(&t, NULL, thread_main, ts))) {
			free(ts);
			close(sv[0]);
			close(sv[1]);
			return fail(out, "pthread_create");
		}
		pthread_detach(t);
		chan[op->target] = sv[1];
		out->r.pid = getpid();
		out->fd = sv[0];
		return;
	}
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return fail(out, "fork");
	}
	if (!pid) {
		/* The child: none of its parent's sockets (their EOF tells the
		 * coordinator who died), no uffd context (a fork without
		 * UFFD_FEATURE_EVENT_FORK drops the protection). */
		for (int i = 0; i < PE_MAX_ACTORS; i++)
			if (chan[i] >= 0)
				close(chan[i]), chan[i] = -1;
		if (uffd >= 0)
			close(uffd), uffd = -1;
		close(sv[0]);
		pe_actor_main(prog, op->target, sv[1]);
	}
	close(sv[1]);
	out->r.pid = pid;
	out->fd = sv[0];
}

/* --plant leak-slot: a process the program does not know keeps a shmem
 * object, paged out (to swap when there is some), past the program. */
static void hide(struct out *out)
{
	pid_t pid = fork();

	if (pid < 0)
		return fail(out, "fork");
	if (!pid) {
		size_t len = 4 << 20;
		int fd = memfd_create("leak-slot", 0);
		uint8_t *a;

		for (int i = 0; i < PE_MAX_ACTORS; i++)
			if (chan[i] >= 0)
				close(chan[i]);
		if (fd < 0 || ftruncate(fd, (off_t)len) ||
		    (a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
			_exit(1);
		memset(a, 0x5a, len);
		madvise(a, len, MADV_PAGEOUT);
		for (;;)
			pause();
	}
	out->r.pid = pid;
}

/* munmap of the pages of [off, off + len) still mapped: what a partial
 * munmap freed may hold another object's mapping by now. */
static void unmap_part(struct handle *h, uint64_t off, uint64_t len, struct out *out)
{
	uint64_t first = off / PE_PAGE, end = (off + len) / PE_PAGE;

	if (!h->addr)
		return;
	if (!h->gone && !(h->gone = calloc(h->len / PE_PAGE, 1)))
		return fail(out, "calloc");
	for (uint64_t pg = first; pg < end;) {
		uint64_t run = pg;

		while (run < end && !h->gone[run])
			run++;
		if (run > pg && munmap(h->addr + pg * PE_PAGE, (run - pg) * PE_PAGE))
			return fail(out, "munmap");
		memset(h->gone + pg, 1, run - pg);
		pg = run + 1;
	}
}

static void run_op(const struct pe_cmd *cmd, const struct pe_owed *owed, struct out *out)
{
	const struct pe_op *op = &prog->op[cmd->op];
	struct handle *h = op->obj >= 0 ? &obj[op->obj] : NULL;

	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return make_object(op, out);
	case PE_WRITE: case PE_PWRITE:
		return do_write(op, cmd, out);
	case PE_READ: case PE_PREAD:
		return do_read(op, owed, out);
	case PE_MADVISE:
		return do_madvise(op, out);
	case PE_MPROTECT: {
		static const int prot[] = { PROT_READ | PROT_WRITE, PROT_READ, PROT_NONE };

		if (mprotect(h->addr + op->off, op->len, prot[op->prot]))
			fail(out, "mprotect");
		return;
	}
	case PE_MREMAP: {
		void *a;

		/* mremap moves one VMA: a uffd registration split the mapping, so
		 * it goes first (mremap drops a uffd context without
		 * UFFD_FEATURE_EVENT_REMAP anyway). */
		if (uffd >= 0) {
			struct uffdio_range r = { (uint64_t)(uintptr_t)h->addr, h->len };

			ioctl(uffd, UFFDIO_UNREGISTER, &r);
		}
		a = mremap(h->addr, h->len, op->size, MREMAP_MAYMOVE);

		if (a == MAP_FAILED)
			return fail(out, "mremap");
		h->addr = a;
		h->len = op->size;
		free(h->gone);  /* a whole mapping: nothing was gone */
		h->gone = NULL;
		return;
	}
	case PE_MUNMAP:
		if (!op->whole)
			return unmap_part(h, op->off, op->len, out);
		unmap_part(h, 0, h->len, out);
		if (h->fd >= 0)
			close(h->fd);
		free(h->gone);
		*h = (struct handle){ NULL, 0, -1, NULL };
		return;
	case PE_TRUNCATE:
		if (ftruncate(h->fd, (off_t)op->size))
			fail(out, "ftruncate");
		return;
	case PE_PUNCH:
		if (fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->off,
			      (off_t)op->len))
			fail(out, "fallocate");
		return;
	case PE_UFFD_WP:
		return do_uffd_wp(op, out);
	case PE_FORK: case PE_THREAD:
		return new_actor(op, out);
	case PE_RECLAIM:
		if ((errno = -pe_env_reclaim((struct pe_env *)&prog->env, op->cg, op->size)))
			fail(out, "reclaim");
		return;
	case PE_COMPACT:
		if ((errno = -pe_env_compact((struct pe_env *)&prog->env)))
			fail(out, "compact");
		return;
	case PE_DROP_CACHES:
		if ((errno = -pe_env_drop_caches((struct pe_env *)&prog->env, op->num)))
			fail(out, "drop_caches");
		return;
	case PE_SLEEP:
		usleep((useconds_t)op->num * 1000);
		return;
	default:
		errno = EINVAL;
		return fail(out, "verb");
	}
}

static void actor_loop(int fd, int self)
{
	for (;;) {
		struct pe_cmd cmd;
		struct out out = { .fd = -1 };
		struct pe_owed *owed = NULL;

		if (pe_recv(fd, &cmd, sizeof(cmd), NULL) || cmd.kind == PE_CMD_EXIT ||
		    (cmd.kind == PE_CMD_OP && (cmd.op < 0 || cmd.op >= prog->nops))) {
			if (prog->actor[self].thread)
				pthread_exit(NULL);     /* the coordinator let go of the thread */
			_exit(0);
		}
		if (cmd.npages && (!(owed = malloc(cmd.npages * sizeof(*owed))) ||
				   pe_recv(fd, owed, cmd.npages * sizeof(*owed), NULL)))
			_exit(1);
		out.r.op = cmd.op;
		if (cmd.kind == PE_CMD_HIDE)
			hide(&out);
		else {
			pe_kcov_op_begin();
			run_op(&cmd, owed, &out);
			pe_kcov_op_end();
		}
		free(owed);
		out.r.has_fd = out.fd >= 0;
		if (pe_send(fd, &out.r, sizeof(out.r), out.fd) ||
		    (out.r.nexc && pe_send(fd, out.exc, out.r.nexc * sizeof(*out.exc), -1)))
			_exit(1);
		if (out.fd >= 0)
			close(out.fd);
		free(out.exc);
	}
}

void pe_actor_main(const struct pe_program *p, int self, int fd)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };
	static bool first = true;

	prog = p;
	self_proc = self;
	if (first) {
		for (int i = 0; i < PE_MAX_OBJECTS; i++)
			obj[i] = (struct handle){ NULL, 0, -1, NULL };
		first = false;
	}
	for (int i = 0; i < PE_MAX_ACTORS; i++)
		chan[i] = -1;
	chan[self] = fd;
	sigaction(SIGBUS, &sa, NULL);
	/* The coordinator shields itself from the OOM killer; the program's
	 * processes are fair game (the oom-kill relaxation). */
	if (!self) {
		int adj = open("/proc/self/oom_score_adj", O_WRONLY);

		if (adj >= 0) {
			if (write(adj, "0", 1) < 0) {
				/* an old kernel: nothing was changed to undo */
			}
			close(adj);
		}
	}
	/* Children of an actor are reaped by the kernel; orphans go to the
	 * coordinator (a child subreaper). */
	signal(SIGCHLD, SIG_IGN);
	actor_loop(fd, self);
}
#undef make_object
#undef new_actor
#undef UFFD_FEATURE_WP_UNPOPULATED
/* ---- progexec/run-env.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The coordinator's own operations: swapoff (in a child process when it runs
 * in the background, so `kill swapoff` can SIGKILL it), swapon, knob, move,
 * cgset; the cgroup moves around `cgroup=CG` objects; the tmpfs mounts; the
 * refusals before setup; calls of the actors that failed.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- progexec/runner.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The coordinator's state while a program runs, shared by run.c (the
 * operations of the actors) and run-env.c (the environment's operations,
 * cgroup moves, tmpfs mounts, refusals before setup).
 */
#ifndef PE_RUNNER_H
#define PE_RUNNER_H

#include <sys/types.h>


/* Content findings of one program beyond which pages are counted, not listed. */
#define PE_RUN_MAX_PAGE_FINDINGS 32

/* An actor as the coordinator sees it. */
struct live {
	pid_t pid;              /* its process (kept once it is gone: to reap it); 0: none */
	int fd;                 /* its socket; -1 when gone */
	const struct pe_op *bg; /* its background operation, until wait */
	struct pe_vset *owed;   /* a pending read's owed sets */
	int cg;                 /* a process: its cgroup (`move`), -1: the executor's */
	int moved_to;           /* a process: the cgroup an object access moved it to, or -1 */
};

struct runner {
	struct pe_program *p;
	struct pe_report *r;
	struct pe_model *m;
	struct live live[PE_MAX_ACTORS];
	pid_t swapoff_pid[PE_MAX_SWAPS];        /* a background swapoff, 0: none */
	int swapoff_fd[PE_MAX_SWAPS];           /* its result (an int), -1: none */
	bool unmade[PE_MAX_OBJECTS];            /* its anon/memfd/tmpfs call failed (a
						 * finding): later operations on it are skipped */
	bool swapoff_skipped[PE_MAX_SWAPS];     /* a background swapoff skipped with its
						 * OOM-killed process: its wait or kill too */
	int plant_op;                           /* the operation --plant marks, -1: none */
	pid_t hidden;                           /* --plant leak-slot's process */
	long long oom_kills;
	unsigned long long written, read, checked;
	int uffd_unsupported;
	int page_findings;
	bool mounted[PE_TMPFS_POLICIES];
};

void pe_run_relaxed(struct runner *rn, enum pe_relax relax, const struct pe_op *op, int obj,
		    uint32_t page);
/* A call of an actor failed: a finding, or a skip the language allows. */
void pe_run_call_failed(struct runner *rn, const struct pe_op *op, int actor, const char *call,
			int err);
/* `cgroup=CG` objects: the process moves into CG for the access, then back. */
void pe_run_cgroup_enter(struct runner *rn, const struct pe_op *op);
void pe_run_cgroup_leave(struct runner *rn, const struct pe_op *op);
/* swapoff, swapon, kill swapoff, move, cgset, knob. */
void pe_run_env_op(struct runner *rn, const struct pe_op *op);
/* Wait for DEV's background swapoff (@op a `wait DEV`); NULL: every one. */
void pe_run_swapoff_wait(struct runner *rn, const struct pe_op *op, int timeout_ms);
/* Refusals before anything changes: pinned threads' CPUs, knob operations
 * the kernel lacks. */
int pe_run_precheck(struct runner *rn, char *why, size_t len);
int pe_run_tmpfs_mount(struct runner *rn, char *why, size_t len);
void pe_run_tmpfs_umount(struct runner *rn);

#endif /* PE_RUNNER_H */

#define SWAPOFF_KILL_MS 10000   /* docs/programs.md: a killed swapoff ends within 10 s */
/* A swapoff (not `&`) that has not returned after this long is a finding,
 * then killed: try_to_unuse() retries without end when it cannot bring a
 * slot back, and the host gives the whole program 300 s.  The kernel's own
 * hung-task limit is 120 s, but a retrying swapoff is not in D state. */
#define SWAPOFF_FOREGROUND_MS 120000

static const char *err_name(int err)
{
	return strerrorname_np(err) ?: "?";
}

static const char *proc_name(struct runner *rn, const struct pe_op *op)
{
	return rn->p->actor[op->actor].name;
}

void pe_run_call_failed(struct runner *rn, const struct pe_op *op, int actor, const char *call,
			int err)
{
	/* Advice the kernel lacks (EINVAL), populate past a file's end
	 * (EFAULT), a busy page (EAGAIN): madvise only asks. */
	if (op->verb == PE_MADVISE)
		return;
	/* A kernel without write-protect for this memory: the operation is
	 * skipped and counted (stat uffd_unsupported). */
	if (op->verb == PE_UFFD_WP && (err == EINVAL || err == EPERM || err == ENOSYS)) {
		rn->uffd_unsupported++;
		return;
	}
	/* memory.reclaim may not reach its target: EAGAIN is done. */
	if (op->verb == PE_RECLAIM && err == EAGAIN)
		return;
	if (op->verb == PE_ANON || op->verb == PE_MEMFD || op->verb == PE_TMPFS)
		rn->unmade[op->obj] = true;
	pe_finding(rn->r, "content", "line=%d proc=%s%s%s why=%s errno=%s", op->line,
		   rn->p->actor[actor].name, op->obj >= 0 ? " obj=" : "",
		   op->obj >= 0 ? rn->p->obj[op->obj].name : "", call, err_name(err));
}

/* The cgroup an access to @op's object runs in, or -1 when it has none. */
static int object_cgroup(struct runner *rn, const struct pe_op *op)
{
	if (op->obj < 0 || rn->p->obj[op->obj].cg < 0)
		return -1;
	return rn->p->obj[op->obj].cg;
}

void pe_run_cgroup_enter(struct runner *rn, const struct pe_op *op)
{
	int cg = object_cgroup(rn, op), proc = rn->p->actor[op->actor].proc;
	struct live *l = &rn->live[proc];

	if (cg < 0 || l->cg == cg || l->pid <= 0)
		return;
	if (pe_env_move(&rn->p->env, cg, l->pid))
		pe_finding(rn->r, "content", "line=%d proc=%s why=move detail=\"%s\"", op->line,
			   proc_name(rn, op), rn->p->env.why);
	else
		l->moved_to = cg;
}

void pe_run_cgroup_leave(struct runner *rn, const struct pe_op *op)
{
	int proc = rn->p->actor[op->actor].proc;
	struct live *l = &rn->live[proc];

	if (l->moved_to < 0 || l->pid <= 0)
		return;
	/* Back where `move` put it: the pages it charged stay charged to CG. */
	pe_env_move(&rn->p->env, l->cg, l->pid);
	l->moved_to = -1;
}

/* swapoff's check: 0, or ENOMEM (no room to bring the pages back), or
 * EINTR (killed). */
static void judge_swapoff(struct runner *rn, const struct pe_op *op, int dev, int rc)
{
	struct pe_env *e = &rn->p->env;

	e->swap[dev].on = pe_env_swap_listed(e, dev);
	if (rc && rc != -ENOMEM && rc != -EINTR)
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s errno=%s", op ? op->line : 0,
			   e->swap[dev].name, err_name(-rc));
}

static void swapoff_bg(struct runner *rn, const struct pe_op *op)
{
	int pfd[2], dev = op->dev;
	pid_t pid;

	if (pipe(pfd)) {
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=pipe errno=%s", op->line,
			   rn->p->env.swap[dev].name, err_name(errno));
		return;
	}
	fflush(NULL);
	pid = fork();
	if (!pid) {
		int rc;

		pe_kcov_op_begin();
		rc = pe_env_swapoff(&rn->p->env, dev);
		pe_kcov_op_end();

		close(pfd[0]);
		if (write(pfd[1], &rc, sizeof(rc)) != sizeof(rc))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		judge_swapoff(rn, op, dev, -errno);
		return;
	}
	rn->swapoff_pid[dev] = pid;
	rn->swapoff_fd[dev] = pfd[0];
}

/* The result of @dev's background swapoff; -ETIMEDOUT after @ms (<0: none). */
static int swapoff_result(struct runner *rn, int dev, int ms)
{
	struct pollfd pfd = { rn->swapoff_fd[dev], POLLIN, 0 };
	int rc = -EINTR;        /* killed before it could say */

	if (poll(&pfd, 1, ms) == 0)
		return -ETIMEDOUT;
	if (read(rn->swapoff_fd[dev], &rc, sizeof(rc)) != sizeof(rc))
		rc = -EINTR;
	close(rn->swapoff_fd[dev]);
	rn->swapoff_fd[dev] = -1;
	rn->swapoff_pid[dev] = 0;
	return rc;
}

void pe_run_swapoff_wait(struct runner *rn, const struct pe_op *op, int timeout_ms)
{
	for (int dev = 0; dev < rn->p->env.nswap; dev++) {
		if (rn->swapoff_fd[dev] < 0 || (op && op->dev != dev))
			continue;
		judge_swapoff(rn, op, dev, swapoff_result(rn, dev, timeout_ms));
	}
}

static void kill_swapoff(struct runner *rn, const struct pe_op *op)
{
	int dev = op->dev, rc;

	if (rn->swapoff_fd[dev] < 0)
		return;
	kill(rn->swapoff_pid[dev], SIGKILL);
	rc = swapoff_result(rn, dev, SWAPOFF_KILL_MS);
	if (rc == -ETIMEDOUT) {
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=timeout", op->line,
			   rn->p->env.swap[dev].name);
		/* Still stuck: its result is taken at the end. */
		return;
	}
	/* Killed before or after it finished: DEV may be on or off. */
	judge_swapoff(rn, op, dev, rc);
}

/* A swapoff without `&` runs in a child as a background one does, so that
 * one that never returns is a finding and is killed, not a silent guest. */
static void swapoff_foreground(struct runner *rn, const struct pe_op *op)
{
	int dev = op->dev, rc;

	if (rn->swapoff_fd[dev] < 0)
		return;         /* no child: swapoff_bg judged it */
	rc = swapoff_result(rn, dev, SWAPOFF_FOREGROUND_MS);
	if (rc != -ETIMEDOUT)
		return judge_swapoff(rn, op, dev, rc);
	pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=timeout ms=%d", op->line,
		   rn->p->env.swap[dev].name, SWAPOFF_FOREGROUND_MS);
	kill_swapoff(rn, op);
}

void pe_run_env_op(struct runner *rn, const struct pe_op *op)
{
	struct pe_env *e = &rn->p->env;
	int proc = rn->p->actor[op->actor].proc, rc = 0;
	const char *what = pe_verb_names[op->verb];

	switch (op->verb) {
	case PE_SWAPOFF:
		/* After a killed swapoff the device may already be off. */
		if (!pe_env_swap_listed(e, op->dev)) {
			e->swap[op->dev].on = false;
			return;
		}
		swapoff_bg(rn, op);
		if (!op->bg)
			swapoff_foreground(rn, op);
		return;
	case PE_KILL_SWAPOFF:
		return kill_swapoff(rn, op);
	case PE_SWAPON:
		if (pe_env_swap_listed(e, op->dev)) {
			e->swap[op->dev].on = true;
			return;
		}
		if ((rc = pe_env_swapon(e, op->dev, op->prio, op->discard)))
			pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=swapon errno=%s",
				   op->line, e->swap[op->dev].name, err_name(-rc));
		return;
	case PE_MOVE:
		if (!(rc = pe_env_move(e, op->cg, rn->live[proc].pid)))
			rn->live[proc].cg = op->cg;
		break;
	case PE_CGSET:
		rc = pe_env_cgset(e, op->cg, op->key, op->value);
		break;
	case PE_KNOB:
		rc = pe_env_knob(e, op->key, op->value);
		break;
	default:
		return;
	}
	if (rc)
		pe_finding(rn->r, "content", "line=%d proc=%s why=%s errno=%s detail=\"%s\"", op->line,
			   proc_name(rn, op), what, err_name(-rc), e->why);
}

/* An object larger than the machine's memory and the program's swap
 * together: the kernel's overcommit heuristic refuses such an mmap, and a
 * program the VM cannot hold is one it lacks the size for (refused). */
static bool machine_refuses_size(struct runner *rn, char *why, size_t len)
{
	char text[4096];
	const char *p;
	uint64_t room = 0;

	if (gl_read_file("/proc/meminfo", text, sizeof(text)) || !(p = strstr(text, "MemTotal:")))
		return false;
	room = strtoull(p + 9, NULL, 10) * 1024;
	for (int d = 0; d < rn->p->env.nswap; d++)
		room += rn->p->env.swap[d].size;
	for (int i = 0; i < rn->p->nobjs; i++) {
		if (rn->p->obj[i].size <= room)
			continue;
		snprintf(why, len, "%s %llu bytes: more than this machine's memory and the program's "
			 "swap (%llu bytes)", rn->p->obj[i].name,
			 (unsigned long long)rn->p->obj[i].size, (unsigned long long)room);
		return true;
	}
	return false;
}

int pe_run_precheck(struct runner *rn, char *why, size_t len)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int sv[2];

	why[0] = 0;
	/* The program's processes talk to the coordinator over socket pairs. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		int err = errno;

		snprintf(why, len, "this kernel has no AF_UNIX socket pairs (%s): the executor's "
			 "processes need them (CONFIG_NET, CONFIG_UNIX)", strerror(err));
		return -err;
	}
	close(sv[0]);
	close(sv[1]);
	if (machine_refuses_size(rn, why, len))
		return -ENOMEM;
	for (int i = 0; i < rn->p->nops; i++) {
		const struct pe_op *op = &rn->p->op[i];

		if (op->verb == PE_THREAD && op->cpu >= 0 && op->cpu >= cpus) {
			snprintf(why, len, "line %d: thread %s cpu=%d: this machine has %ld CPUs",
				 op->line, rn->p->actor[op->target].name, op->cpu, cpus);
			return -ENODEV;
		}
		/* A knob the kernel lacks is refused as the header's are: the
		 * program never starts, rather than failing halfway. */
		if (op->verb == PE_KNOB && pe_env_knob_check(&rn->p->env, op->key, op->value)) {
			snprintf(why, len, "line %d: %s", op->line, rn->p->env.why);
			return -ENOENT;
		}
	}
	return 0;
}

/* One tmpfs mount for each huge= policy the program's tmpfs objects use. */
int pe_run_tmpfs_mount(struct runner *rn, char *why, size_t len)
{
	static const char *const opts[PE_TMPFS_POLICIES] = {
		"mode=0700", "mode=0700,huge=never", "mode=0700,huge=always",
		"mode=0700,huge=within_size", "mode=0700,huge=advise",
	};

	why[0] = 0;
	for (int i = 0; i < rn->p->nobjs; i++) {
		int pol = pe_tmpfs_policy(rn->p->obj[i].huge);
		char *dir = pe_tmpfs_dir[pol];

		if (rn->p->obj[i].kind != PE_KIND_TMPFS || rn->mounted[pol])
			continue;
		snprintf(dir, sizeof(pe_tmpfs_dir[0]), "/tmp/progexec-tmpfs-XXXXXX");
		if (!mkdtemp(dir) || mount("progexec", dir, "tmpfs", 0, opts[pol])) {
			snprintf(why, len, "tmpfs %s: %s %s: %s", rn->p->obj[i].name, dir, opts[pol],
				 strerror(errno));
			if (dir[0])
				rmdir(dir);
			pe_run_tmpfs_umount(rn);
			return -errno;
		}
		rn->mounted[pol] = true;
	}
	return 0;
}

void pe_run_tmpfs_umount(struct runner *rn)
{
	for (int pol = 0; pol < PE_TMPFS_POLICIES; pol++) {
		if (!rn->mounted[pol])
			continue;
		umount2(pe_tmpfs_dir[pol], MNT_DETACH);
		rmdir(pe_tmpfs_dir[pol]);
		rn->mounted[pol] = false;
	}
}
#undef SWAPOFF_FOREGROUND_MS
#undef SWAPOFF_KILL_MS
/* ---- progexec/run-io.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* The coordinator's and the actors' sockets: whole buffers, an fd along. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>


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
/* ---- progexec/run.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pe_program_run(): the coordinator.  It reads the program, keeps the model,
 * writes the report and runs the environment operations itself; the memory
 * operations go to the actors (run-actor.c) over their sockets.  It is no
 * process of the program and stays out of the program's cgroups, so an OOM
 * kill or a SIGBUS there cannot take the executor down.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define END_TIMEOUT_MS 10000    /* a killed process or swapoff must end within this */
/* An operation not back after this long is looked at: throttled over
 * memory.high (the `throttled` relaxation), or left to run.  The host gives
 * the whole program 300 s. */
#define STALL_MS 30000
#define THROTTLE_PROBE_MS 2000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Wait until @pid (a child, or an orphan the subreaper adopted) is gone. */
static void reap_pid(pid_t pid)
{
	for (long long end = now_ms() + END_TIMEOUT_MS; now_ms() < end; gl_sleep_ms(10)) {
		pid_t got;

		errno = 0;
		got = waitpid(pid, NULL, WNOHANG);
		if (got == pid || (got < 0 && errno == ECHILD && kill(pid, 0)))
			return;
	}
}

/* Wait for EOF on @fd (its process died) for at most @ms; true when it came. */
static bool wait_eof(int fd, int ms)
{
	long long end = now_ms() + ms;
	char buf[4096];

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		long long left = end - now_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			return false;
		if (read(fd, buf, sizeof(buf)) <= 0)
			return true;
	}
}

static const char *actor_name(struct runner *rn, int a)
{
	return rn->p->actor[a].name;
}

void pe_run_relaxed(struct runner *rn, enum pe_relax relax, const struct pe_op *op, int obj,
		    uint32_t page)
{
	if (obj >= 0 && !pe_model_first_relax(rn->m, relax, obj))
		return;
	pe_say(rn->r, "relaxed %s line=%d obj=%s page=%u", pe_relax_names[relax], op->line,
	       obj >= 0 ? rn->p->obj[obj].name : "-", page);
}

/* The process of actor @a is gone (exit, kill, OOM kill): close its sockets
 * and its threads'; what its background writes were storing stays old|new. */
static void process_gone(struct runner *rn, int proc, enum pe_relax relax)
{
	for (int a = 0; a < rn->p->nactors; a++) {
		struct live *l = &rn->live[a];

		if (rn->p->actor[a].proc != proc || l->fd < 0)
			continue;
		if (l->bg)
			pe_model_end(rn->m, l->bg, NULL, relax);
		free(l->owed);
		l->owed = NULL;
		l->bg = NULL;
		close(l->fd);
		l->fd = -1;
	}
	pe_model_process_gone(rn->m, proc);
}

/* The socket of @a closed while it owed a reply: an OOM kill (the oom-kill
 * relaxation) when the kernel counted one not yet matched to a death, else
 * a finding.  One kill explains one death: two processes killed together
 * are two kills, and the second death must find its own. */
static void actor_died(struct runner *rn, int a, const struct pe_op *op)
{
	int proc = rn->p->actor[a].proc;
	long long ooms = pe_env_oom_kills(&rn->p->env, -1);

	if (ooms > rn->oom_kills) {
		rn->oom_kills++;
		pe_run_relaxed(rn, PE_RELAX_OOM_KILL, op, op->obj, (uint32_t)(op->off / PE_PAGE));
		process_gone(rn, proc, PE_RELAX_OOM_KILL);
		return;
	}
	pe_finding(rn->r, "content", "line=%d proc=%s why=died", op->line, actor_name(rn, a));
	process_gone(rn, proc, PE_RELAX_KILLED_WRITER);
}

/* Send @op to its actor; a read carries what each page owes (v[0]) and
 * keeps the whole sets to judge the reply. */
static int send_op(struct runner *rn, const struct pe_op *op, int kind)
{
	struct live *l = &rn->live[op->actor];
	struct pe_cmd cmd = { kind, (int32_t)(op - rn->p->op), 0, 0 };
	struct pe_owed *owed = NULL;
	int err;

	if (kind == PE_CMD_OP && (op->verb == PE_READ || op->verb == PE_PREAD)) {
		cmd.npages = (uint32_t)(op->len / PE_PAGE);
		l->owed = malloc(cmd.npages * sizeof(*l->owed));
		owed = malloc(cmd.npages * sizeof(*owed));
		if (!l->owed || !owed) {
			free(owed);
			return -ENOMEM;
		}
		pe_model_expected(rn->m, op, l->owed);
		for (uint32_t i = 0; i < cmd.npages; i++) {
			const struct pe_vset *s = &l->owed[i];

			owed[i] = (struct pe_owed){ s->v[0], s->v[s->n - 1],
						    s->relax == PE_RELAX_CONCURRENT_WRITE && s->n > 1 };
		}
	}
	if (kind == PE_CMD_OP && rn->plant_op == cmd.op)
		cmd.plant = rn->p->plant;
	err = pe_send(l->fd, &cmd, sizeof(cmd), -1);
	if (!err && owed)
		err = pe_send(l->fd, owed, cmd.npages * sizeof(*owed), -1);
	free(owed);
	return err;
}

static void judge_fault(struct runner *rn, const struct pe_op *op, int a, const struct pe_exc *x)
{
	bool file = op->verb == PE_PREAD || op->verb == PE_PWRITE;

	if (rn->p->allow_failed_read) {
		pe_run_relaxed(rn, PE_RELAX_FAILED_READ, op, op->obj, x->page);
		return;
	}
	if (file)
		pe_finding(rn->r, "io-error", "line=%d proc=%s obj=%s page=%u errno=%s why=eio",
			   op->line, actor_name(rn, a), rn->p->obj[op->obj].name, x->page,
			   strerrorname_np((int)x->word) ?: "?");
	else
		pe_finding(rn->r, "content", "line=%d proc=%s obj=%s page=%u why=sigbus", op->line,
			   actor_name(rn, a), rn->p->obj[op->obj].name, x->page);
}

static void judge_read(struct runner *rn, const struct pe_op *op, int a, const struct pe_exc *x,
		       const struct pe_vset *owed)
{
	char expected[64] = "", seen[16] = "?";
	int n = 0;

	if (x->seen == PE_SEEN_FAULT)
		return judge_fault(rn, op, a, x);
	if ((x->seen >= 0 && pe_vset_has(owed, x->seen)) ||
	    (x->seen == PE_SEEN_TORN && owed->relax == PE_RELAX_CONCURRENT_WRITE)) {
		pe_run_relaxed(rn, (enum pe_relax)owed->relax, op, op->obj, x->page);
		return;
	}
	for (int i = 0; i < owed->n; i++)
		n += snprintf(expected + n, sizeof(expected) - n, "%sv%u", i ? "|" : "", owed->v[i]);
	if (x->seen >= 0)
		snprintf(seen, sizeof(seen), "v%d", x->seen);
	if (++rn->page_findings > PE_RUN_MAX_PAGE_FINDINGS)
		return;         /* the first ones tell; a run of thousands tells nothing more */
	pe_finding(rn->r, "content",
		   "line=%d proc=%s obj=%s page=%u expected=%s seen=%s word=%u got=%016llx want=%016llx",
		   op->line, actor_name(rn, a), rn->p->obj[op->obj].name, x->page, expected, seen,
		   x->word, (unsigned long long)x->got, (unsigned long long)x->want);
}

/* Whether @fd has something to read within @ms. */
static bool readable(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	return poll(&pfd, 1, ms) != 0;
}

/*
 * Wait for @a's reply to @op.  A cgroup over memory.high whose memory
 * cannot be reclaimed (no swap it may use: memory.zswap.max=0 with
 * memory.zswap.writeback=0, say) throttles its processes without end and
 * is never OOM-killed: the kernel does what memory.high says.  An operation
 * stalled that long while a program cgroup's `high` events grow has its
 * process SIGKILLed by the executor (the `throttled` relaxation: gone as by
 * `kill`, its later operations skipped); false then.
 */
static bool await_reply(struct runner *rn, int a, const struct pe_op *op)
{
	int proc = rn->p->actor[a].proc;
	struct live *l = &rn->live[a];
	long long high;

	while (!readable(l->fd, STALL_MS)) {
		high = pe_env_high_events(&rn->p->env);
		if (readable(l->fd, THROTTLE_PROBE_MS))
			break;
		if (pe_env_high_events(&rn->p->env) == high)
			continue;       /* not throttled: it may be slow, the host's budget rules */
		pe_run_relaxed(rn, PE_RELAX_THROTTLED, op, op->obj,
			       op->obj >= 0 ? (uint32_t)(op->off / PE_PAGE) : 0);
		kill(rn->live[proc].pid, SIGKILL);
		if (!wait_eof(l->fd, END_TIMEOUT_MS))
			pe_finding(rn->r, "content", "line=%d proc=%s why=timeout", op->line,
				   actor_name(rn, a));
		pe_model_end(rn->m, op, NULL, PE_RELAX_THROTTLED);
		free(l->owed);
		l->owed = NULL;
		process_gone(rn, proc, PE_RELAX_THROTTLED);
		return false;
	}
	return true;
}

/* Take @a's reply to @op and judge it; false when the actor died. */
static bool take_reply(struct runner *rn, int a, const struct pe_op *op)
{
	struct live *l = &rn->live[a];
	struct pe_reply rep;
	struct pe_exc *exc = NULL;
	uint8_t *faulted = NULL;
	int fd = -1;
	uint32_t first = (uint32_t)(op->off / PE_PAGE);

	if (!await_reply(rn, a, op))
		return false;
	if (pe_recv(l->fd, &rep, sizeof(rep), &fd) || rep.nexc > (1u << 24) ||
	    (rep.nexc && (!(exc = malloc(rep.nexc * sizeof(*exc))) ||
			  pe_recv(l->fd, exc, rep.nexc * sizeof(*exc), NULL)))) {
		free(exc);
		actor_died(rn, a, op);
		return false;
	}
	if (op->verb == PE_WRITE || op->verb == PE_PWRITE) {
		rn->written += rep.pages;
		faulted = calloc(op->len / PE_PAGE, 1);
		for (uint32_t i = 0; i < rep.nexc; i++) {
			judge_fault(rn, op, a, &exc[i]);
			if (faulted && exc[i].page - first < op->len / PE_PAGE)
				faulted[exc[i].page - first] = 1;
		}
		pe_model_end(rn->m, op, faulted, PE_RELAX_NONE);
	} else if (op->verb == PE_READ || op->verb == PE_PREAD) {
		rn->read += rep.pages;
		rn->checked += rep.pages;
		for (uint32_t i = 0; i < rep.nexc; i++)
			if (exc[i].page - first < op->len / PE_PAGE)
				judge_read(rn, op, a, &exc[i], &l->owed[exc[i].page - first]);
	} else if (op->verb == PE_FORK || op->verb == PE_THREAD) {
		if (fd >= 0) {
			rn->live[op->target].fd = fd;
			rn->live[op->target].pid = rep.pid;
		}
	}
	if (rep.err)
		pe_run_call_failed(rn, op, a, rep.call, -rep.err);
	free(exc);
	free(faulted);
	free(l->owed);
	l->owed = NULL;
	pe_run_cgroup_leave(rn, op);
	return true;
}

/* An operation of an actor: sent, and unless it runs in the background,
 * its reply taken. */
static void actor_op(struct runner *rn, const struct pe_op *op)
{
	struct live *l = &rn->live[op->actor];

	pe_run_cgroup_enter(rn, op);
	if (send_op(rn, op, PE_CMD_OP)) {
		actor_died(rn, op->actor, op);
		return;
	}
	if (op->bg)
		l->bg = op;
	else
		take_reply(rn, op->actor, op);
}

static void end_process(struct runner *rn, const struct pe_op *op)
{
	int p = op->target;
	struct live *l = &rn->live[p];

	if (op->verb == PE_KILL) {
		kill(l->pid, SIGKILL);
	} else {
		struct pe_cmd cmd = { PE_CMD_EXIT, 0, 0, 0 };

		if (pe_send(l->fd, &cmd, sizeof(cmd), -1))
			kill(l->pid, SIGKILL);
	}
	if (!wait_eof(l->fd, END_TIMEOUT_MS)) {
		pe_finding(rn->r, "content", "line=%d proc=%s why=timeout", op->line,
			   actor_name(rn, p));
		kill(l->pid, SIGKILL);
		wait_eof(l->fd, END_TIMEOUT_MS);
	}
	process_gone(rn, p, PE_RELAX_KILLED_WRITER);
	reap();
}

static void wait_op(struct runner *rn, const struct pe_op *op)
{
	if (op->target < 0) {
		pe_run_swapoff_wait(rn, op, -1);
		return;
	}
	if (rn->live[op->target].bg) {
		const struct pe_op *bg = rn->live[op->target].bg;

		rn->live[op->target].bg = NULL;
		take_reply(rn, op->target, bg);
	}
}

static bool actor_alive(struct runner *rn, int a)
{
	return rn->live[a].fd >= 0 && pe_model_alive(rn->m, a);
}

/* Whether @op is skipped: its actor (or the process it names) was OOM-killed,
 * or it waits for or kills a background swapoff skipped for that reason. */
static bool skipped(struct runner *rn, const struct pe_op *op)
{
	bool *swapoff_skipped = op->dev >= 0 ? &rn->swapoff_skipped[op->dev] : NULL;

	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return !actor_alive(rn, op->target);
	case PE_WAIT: case PE_KILL_SWAPOFF:
		if (op->verb == PE_WAIT && op->target >= 0)
			return !actor_alive(rn, op->target);
		if (!*swapoff_skipped)
			return false;
		*swapoff_skipped = false;
		return true;
	case PE_SWAPOFF:
		if (actor_alive(rn, op->actor))
			return false;
		*swapoff_skipped = op->bg;
		return true;
	default:
		/* An object whose making failed (already a finding) has nothing
		 * to operate on. */
		return !actor_alive(rn, op->actor) || (op->obj >= 0 && rn->unmade[op->obj]);
	}
}

static void run_one(struct runner *rn, const struct pe_op *op)
{
	char why[256];

	pe_say(rn->r, "at %d", op->line);
	if (skipped(rn, op))
		return;
	if (pe_model_start(rn->m, op, why, sizeof(why))) {
		pe_finding(rn->r, "content", "line=%d proc=%s why=model detail=\"%s\"", op->line,
			   actor_name(rn, op->actor), why);
		return;
	}
	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return end_process(rn, op);
	case PE_WAIT:
		return wait_op(rn, op);
	case PE_KILL_SWAPOFF: case PE_SWAPON: case PE_MOVE: case PE_CGSET: case PE_KNOB:
	case PE_SWAPOFF:
		/* The coordinator's own operations are the program's coverage too. */
		pe_kcov_op_begin();
		pe_run_env_op(rn, op);
		pe_kcov_op_end();
		return;
	default:
		return actor_op(rn, op);
	}
}

static bool covers(const struct pe_op *op, int obj, uint64_t off)
{
	return op->obj == obj && op->off <= off && off < op->off + op->len;
}

/* The operation --plant marks: the first write through a mapping whose
 * first page a later read of its process checks before anything else
 * writes it (so the plant has a read to catch it). */
static int plant_op(const struct pe_program *p)
{
	if (p->plant != PE_PLANT_DROP_WRITE && p->plant != PE_PLANT_STALE_PAGE)
		return -1;
	for (int i = 0; i < p->nops; i++) {
		const struct pe_op *w = &p->op[i];

		if (w->verb != PE_WRITE)
			continue;
		for (int j = i + 1; j < p->nops; j++) {
			const struct pe_op *o = &p->op[j];

			if (o->verb == PE_READ && covers(o, w->obj, w->off) &&
			    pe_actor_proc(p, o->actor) == pe_actor_proc(p, w->actor))
				return i;
			if (o->obj == w->obj && o->verb != PE_READ && o->verb != PE_PREAD)
				break;
		}
	}
	return -1;
}

static int start_main(struct runner *rn)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (!pid) {
		close(sv[0]);
		pe_actor_main(rn->p, 0, sv[1]);
	}
	close(sv[1]);
	rn->live[0].fd = sv[0];
	rn->live[0].pid = pid;
	if (rn->p->plant == PE_PLANT_LEAK_SLOT) {
		struct pe_cmd cmd = { PE_CMD_HIDE, 0, 0, 0 };
		struct pe_reply rep;

		if (!pe_send(sv[0], &cmd, sizeof(cmd), -1) && !pe_recv(sv[0], &rep, sizeof(rep), NULL))
			rn->hidden = rep.pid;
	}
	return 0;
}

/* Every process of the program exits; its objects go with it. */
static void end_all(struct runner *rn)
{
	for (int a = 0; a < rn->p->nactors; a++) {
		struct live *l = &rn->live[a];

		if (rn->p->actor[a].thread || l->fd < 0)
			continue;
		for (int t = 0; t < rn->p->nactors; t++)
			if (rn->live[t].bg && rn->p->actor[t].proc == a)
				take_reply(rn, t, rn->live[t].bg);
		if (l->fd >= 0) {
			struct pe_op bye = { .line = 0, .verb = PE_EXIT, .target = a };

			end_process(rn, &bye);
		}
	}
	/* Gone for good, not only their sockets: each is reaped (an orphan of
	 * the program is the subreaper's, ours) before the leak checks. */
	for (int a = 0; a < rn->p->nactors; a++)
		if (!rn->p->actor[a].thread && rn->live[a].pid > 0)
			reap_pid(rn->live[a].pid);
	reap();
}

static void say_stat(struct runner *rn, const struct gl_vmstat *before, long long t0)
{
	struct gl_vmstat after;

	gl_vmstat_read(&after);
	pe_say(rn->r, "stat pages_written=%llu pages_read=%llu pages_checked=%llu swapins=%lld "
		      "uffd_unsupported=%d elapsed_ms=%lld",
	       (unsigned long long)rn->written, (unsigned long long)rn->read,
	       (unsigned long long)rn->checked, gl_vmstat_delta(before, &after, VM_PSWPIN),
	       rn->uffd_unsupported, now_ms() - t0);
}

enum pe_outcome pe_program_run(struct pe_program *p, const struct pe_hooks *hooks,
			       struct pe_report *r)
{
	struct runner rn = { .p = p, .r = r, .hidden = 0 };
	struct gl_vmstat before;
	long long t0 = now_ms();
	int findings0 = r->findings;
	char why[PE_ENV_WHY];

	for (int a = 0; a < PE_MAX_ACTORS; a++)
		rn.live[a] = (struct live){ 0, -1, NULL, NULL, -1, -1 };
	for (int d = 0; d < PE_MAX_SWAPS; d++)
		rn.swapoff_fd[d] = -1;
	if (pe_run_precheck(&rn, why, sizeof(why)) || pe_env_check(&p->env) ||
	    pe_run_tmpfs_mount(&rn, why, sizeof(why))) {
		pe_say(r, "refused %s %s", p->name, why[0] ? why : p->env.why);
		return PE_REFUSED;
	}
	if (pe_env_setup(&p->env)) {
		pe_say(r, "refused %s %s", p->name, p->env.why);
		pe_env_teardown(&p->env, r);
		pe_run_tmpfs_umount(&rn);
		return PE_REFUSED;
	}
	pe_kcov_program_begin();
	rn.m = pe_model_new(p);
	rn.plant_op = plant_op(p);
	rn.oom_kills = pe_env_oom_kills(&p->env, -1);
	gl_vmstat_read(&before);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* The OOM killer never picks the coordinator (main sets 0 again for
	 * the program's processes); a kernel that refuses leaves it as it was. */
	gl_write_file("/proc/self/oom_score_adj", "-1000");
	/* `ready` comes first: whatever follows it, even main failing to
	 * start, is reported in the order the channel has (ops-done, result). */
	if (!hooks || !hooks->ready || !hooks->ready(hooks->arg)) {
		int err = rn.m ? start_main(&rn) : -ENOMEM;

		if (err)
			pe_finding(r, "content", "line=0 proc=main why=start errno=%s",
				   strerrorname_np(-err) ?: "?");
		for (int i = 0; i < p->nops && !err; i++)
			run_one(&rn, &p->op[i]);
		if (hooks && hooks->ops_done)
			hooks->ops_done(hooks->arg);
	}
	end_all(&rn);
	pe_run_swapoff_wait(&rn, NULL, -1);
	pe_env_teardown(&p->env, r);
	if (rn.hidden > 0) {
		kill(rn.hidden, SIGKILL);
		reap_pid(rn.hidden);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	pe_run_tmpfs_umount(&rn);
	say_stat(&rn, &before, t0);
	pe_kcov_report(r);
	pe_model_free(rn.m);
	pe_say(r, "result %s %s %d", p->name, r->findings > findings0 ? "fail" : "pass",
	       r->findings - findings0);
	return r->findings > findings0 ? PE_FAIL : PE_PASS;
}
#undef END_TIMEOUT_MS
#undef STALL_MS
#undef THROTTLE_PROBE_MS
/* ---- lib/guestlib.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* Helpers shared by faultline guest tools; see guestlib.h. */
/* ---- lib/ktap.h ---- */
/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Minimal KTAP writer for faultline guest selftests (same output format as
 * the kernel's tools/testing/selftests/kselftest.h).  The counters live in
 * ktap.c: every file of a tool reports into the same plan.
 */
#ifndef FAULTLINE_KTAP_H
#define FAULTLINE_KTAP_H

/* Tests planned, reported and failed so far (XFAIL and SKIP do not fail). */
extern int ktap_planned, ktap_num, ktap_failed;

void ktap_header(int plan);
void ktap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Report a test result.  @name is the case's id in CI (LAVA, KCIDB): it may
 * hold configuration (a round, a size option) but no measured value, so it
 * is the same in every run and for a pass and a fail.  What was measured
 * goes in @detail_fmt, printed just before the result as "# NAME: detail"
 * (kselftest style; nothing when NULL or empty).  @directive is NULL,
 * "SKIP reason" or "XFAIL reason".
 */
void ktap_result(int ok, const char *directive, const char *name, const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define ktap_check(cond, name, ...) ktap_result(!!(cond), NULL, name, __VA_ARGS__)
/* A name with configuration in it; the buffer is reused by the next call. */
const char *ktap_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Pad the plan with failures if we stopped early, and give the exit code. */
int ktap_finish(void);
void ktap_bail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif /* FAULTLINE_KTAP_H */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gl_write_file(const char *path, const char *val)
{
    int fd = open(path, O_WRONLY);
    ssize_t n;
    int err;

    if (fd < 0) {
        return -errno;
    }
    n = write(fd, val, strlen(val));
    err = n < 0 ? -errno : 0;
    close(fd);
    return err;
}

int gl_read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n;

    if (fd < 0) {
        return -errno;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return -errno;
    }
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
    }
    return 0;
}

long long gl_read_u64(const char *path)
{
    char buf[64];

    if (gl_read_file(path, buf, sizeof(buf)) < 0) {
        return -1;
    }
    return strtoll(buf, NULL, 0);
}

uint64_t gl_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);

    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    return *end ? 0 : v;
}

double gl_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void gl_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

#define ZSWAP_WRITTEN_BACK "/sys/kernel/debug/zswap/written_back_pages"

static const char *const vmstat_names[VM__COUNT] = {
    [VM_PSWPIN] = "pswpin",
    [VM_PSWPOUT] = "pswpout",
    [VM_ZSWPIN] = "zswpin",
    [VM_ZSWPOUT] = "zswpout",
    [VM_ZSWPWB] = "zswpwb",
    [VM_PGROTATED] = "pgrotated",
    [VM_NR_SWAPCACHED] = "nr_swapcached",
    [VM_WS_REFAULT_ANON] = "workingset_refault_anon",
    [VM_WS_ACTIVATE_ANON] = "workingset_activate_anon",
    [VM_WS_RESTORE_ANON] = "workingset_restore_anon",
    [VM_SWAP_RA] = "swap_ra",
    [VM_SWAP_RA_HIT] = "swap_ra_hit",
};

const char *gl_vmstat_name(int id)
{
    return vmstat_names[id];
}

void gl_vmstat_read(struct gl_vmstat *s)
{
    FILE *f = fopen("/proc/vmstat", "r");
    char name[64];
    long long val;

    for (int i = 0; i < VM__COUNT; i++) {
        s->v[i] = -1;
    }
    if (!f) {
        return;
    }
    while (fscanf(f, "%63s %lld", name, &val) == 2) {
        for (int i = 0; i < VM__COUNT; i++) {
            if (!strcmp(name, vmstat_names[i])) {
                s->v[i] = val;
            }
        }
    }
    fclose(f);
    /*
     * zswpwb is in /proc/vmstat since Linux 6.8; before, zswap counts the
     * pages it wrote back in debugfs only (both are global counts).
     */
    if (s->v[VM_ZSWPWB] < 0 && gl_read_file(ZSWAP_WRITTEN_BACK, name, sizeof(name)) == 0) {
        s->v[VM_ZSWPWB] = strtoll(name, NULL, 10);
    }
}

long long gl_vmstat_delta(const struct gl_vmstat *before, const struct gl_vmstat *after,
                          int id)
{
    return after->v[id] - before->v[id];
}

void gl_vmstat_report(const char *prefix, const struct gl_vmstat *before,
                      const struct gl_vmstat *after)
{
    for (int i = 0; i < VM__COUNT; i++) {
        if (after->v[i] < 0) {
            ktap_diag("%s %s n/a", prefix, vmstat_names[i]);
        } else {
            ktap_diag("%s %s %lld", prefix, vmstat_names[i], after->v[i] - before->v[i]);
        }
    }
}

static void memcg_path(char *buf, size_t len, const char *name, const char *file)
{
    snprintf(buf, len, "/sys/fs/cgroup/%s%s%s", name, file ? "/" : "", file ? file : "");
}

int gl_memcg_write(const char *name, const char *file, const char *val)
{
    char path[256];

    memcg_path(path, sizeof(path), name, file);
    return gl_write_file(path, val);
}

long long gl_memcg_read(const char *name, const char *file)
{
    char path[256];

    memcg_path(path, sizeof(path), name, file);
    return gl_read_u64(path);
}

void gl_memcg_set(const char *name, const char *file, const char *val)
{
    int err = gl_memcg_write(name, file, val);

    if (err) {
        ktap_diag("write %s=%s: %s", file, val, strerror(-err));
    }
}

void gl_memcg_reclaim_all(const char *name)
{
    char val[32];

    for (int i = 0; i < 3; i++) {
        long long cur = gl_memcg_read(name, "memory.current");

        if (cur < (long long)(1 << 20)) {
            break;
        }
        snprintf(val, sizeof(val), "%lld", cur);
        if (gl_memcg_write(name, "memory.reclaim", val) == 0) {
            break;
        }
    }
}

void gl_memcg_report(const char *name, const char *prefix, const char *const *keys,
                     size_t nkeys)
{
    for (size_t i = 0; i < nkeys; i++) {
        long long v = gl_memcg_stat(name, keys[i]);

        if (v >= 0) {
            ktap_diag("%s %s %lld", prefix, keys[i], v);
        }
    }
    ktap_diag("%s memory.current %lld", prefix, gl_memcg_read(name, "memory.current"));
    ktap_diag("%s memory.zswap.current %lld", prefix,
              gl_memcg_read(name, "memory.zswap.current"));
}

int gl_memcg_enter(const char *name, uint64_t max)
{
    char path[256], val[32];
    int err;

    memcg_path(path, sizeof(path), name, NULL);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        return -errno;
    }
    snprintf(val, sizeof(val), "%" PRIu64, max);
    err = gl_memcg_write(name, "memory.max", val);
    if (!err) {
        err = gl_memcg_write(name, "memory.swap.max", "max");
    }
    if (!err) {
        snprintf(val, sizeof(val), "%d", getpid());
        err = gl_memcg_write(name, "cgroup.procs", val);
    }
    return err;
}

int gl_memcg_leave(const char *name)
{
    char path[256], val[32];

    snprintf(val, sizeof(val), "%d", getpid());
    gl_write_file("/sys/fs/cgroup/cgroup.procs", val);
    memcg_path(path, sizeof(path), name, NULL);
    return rmdir(path) < 0 ? -errno : 0;
}

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/*
 * Even pages: one 64-bit value repeated (compresses to almost nothing);
 * odd pages: pseudo-random words (incompressible, zswap may reject them).
 * Every page starts with its own index so misplaced pages are caught too.
 */
void gl_pattern_page(uint64_t *w, size_t idx, uint64_t seed)
{
    uint64_t k = mix64(seed ^ (idx * 0x100000001b3ULL));
    size_t n = GL_PAGE_SIZE / sizeof(uint64_t);

    w[0] = idx;
    if (idx & 1) {
        for (size_t i = 1; i < n; i++) {
            w[i] = mix64(k + i);
        }
    } else {
        for (size_t i = 1; i < n; i++) {
            w[i] = k;
        }
    }
}

void gl_pattern_fill(uint8_t *base, size_t pages, uint64_t seed)
{
    for (size_t p = 0; p < pages; p++) {
        gl_pattern_page((uint64_t *)(base + p * GL_PAGE_SIZE), p, seed);
    }
}

size_t gl_pattern_verify(const uint8_t *base, size_t pages, uint64_t seed,
                         size_t *first_bad)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];
    size_t bad = 0;

    for (size_t p = 0; p < pages; p++) {
        gl_pattern_page(want, p, seed);
        if (memcmp(want, base + p * GL_PAGE_SIZE, GL_PAGE_SIZE)) {
            if (!bad && first_bad) {
                *first_bad = p;
            }
            bad++;
        }
    }
    return bad;
}

long long gl_memcg_stat(const char *name, const char *key)
{
    char path[256], k[64];
    long long val, ret = -1;
    FILE *f;

    memcg_path(path, sizeof(path), name, "memory.stat");
    f = fopen(path, "r");
    if (!f) {
        return -1;
    }
    while (fscanf(f, "%63s %lld", k, &val) == 2) {
        if (!strcmp(k, key)) {
            ret = val;
            break;
        }
    }
    fclose(f);
    return ret;
}

int gl_kmsg_open(void)
{
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

    if (fd >= 0) {
        lseek(fd, 0, SEEK_END);
    }
    return fd;
}

static const char *const splat_markers[] = {
    "BUG:", "kernel BUG", "WARNING:", "Oops", "lockdep", "general protection fault",
    "sleeping function called from invalid context", "possible circular locking",
    "INFO: task", "Call Trace",
};

void gl_kmsg_scan(int fd, struct gl_kmsg_counts *k)
{
    char rec[8192];
    ssize_t n;
    int shown = 0;

    memset(k, 0, sizeof(*k));
    if (fd < 0) {
        ktap_diag("kmsg unavailable");
        return;
    }
    for (;;) {
        char *msg, *nl;

        n = read(fd, rec, sizeof(rec) - 1);
        if (n < 0 && errno == EPIPE) {
            continue;   /* overwritten records: keep reading */
        }
        if (n <= 0) {
            break;
        }
        rec[n] = '\0';
        msg = strchr(rec, ';');
        msg = msg ? msg + 1 : rec;
        nl = strchr(msg, '\n');
        if (nl) {
            *nl = '\0';
        }
        k->lines++;
        if (strstr(msg, "Write-error on swap-device")) {
            k->write_errors++;
        }
        if (strstr(msg, "Read-error on swap-device")) {
            k->read_errors++;
        }
        if (strstr(msg, "I/O error") || strstr(msg, "critical medium error")) {
            k->io_errors++;
        }
        for (size_t i = 0; i < sizeof(splat_markers) / sizeof(splat_markers[0]); i++) {
            if (strstr(msg, splat_markers[i])) {
                k->splats++;
                if (shown++ < 10) {
                    ktap_diag("kmsg splat: %.200s", msg);
                }
                break;
            }
        }
    }
    close(fd);
}
#undef ZSWAP_WRITTEN_BACK
/* ---- lib/guestlib-trace.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* kprobes, hist triggers and /proc/kallsyms for guest tools; see guestlib.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gl_ctx_names[GL_CTX__N] = { "hardirq", "softirq", "task" };

void gl_trace_event_path(char *buf, size_t len, const char *group, const char *event,
                         const char *file)
{
    snprintf(buf, len, GL_TRACEFS "/events/%s/%s/%s", group, event, file);
}

/*
 * Lines such as "{ common_flags: 19 } hitcount:          3" (keys with .hex
 * are printed in hex without "0x"), then a "Hits: N" total.
 */
int gl_hist_read(const char *path, struct gl_hist *h)
{
    FILE *f = fopen(path, "r");
    char line[512];

    memset(h, 0, sizeof(*h));
    h->hits = -1;
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *fl = strstr(line, "common_flags:");
        char *hc = strstr(line, "hitcount:");
        unsigned long long flags, n;

        if (!fl || !hc) {
            if (sscanf(line, " Hits: %llu", &n) == 1) {
                h->hits = n;
            }
            continue;
        }
        flags = strtoull(fl + strlen("common_flags:"), NULL, 16);
        n = strtoull(hc + strlen("hitcount:"), NULL, 10);
        if (flags & GL_TRACE_FLAG_HARDIRQ) {
            h->ctx[GL_CTX_HARDIRQ] += n;
        } else if (flags & GL_TRACE_FLAG_SOFTIRQ) {
            h->ctx[GL_CTX_SOFTIRQ] += n;
        } else {
            h->ctx[GL_CTX_TASK] += n;
        }
        h->sum += n;
    }
    fclose(f);
    return 0;
}

int gl_hist_trigger(const char *group, const char *event, bool on)
{
    char path[256];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    return gl_write_file(path, on ? GL_HIST_CTX_TRIGGER : "!" GL_HIST_CTX_TRIGGER);
}

int gl_kprobe_hist_add(const char *group, const char *event, const char *sym)
{
    char cmd[256];
    int err;

    snprintf(cmd, sizeof(cmd), "p:%s/%s %s", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    return err ? err : gl_hist_trigger(group, event, true);
}

void gl_kprobe_hist_remove(const char *group, const char *event)
{
    char cmd[256];

    gl_hist_trigger(group, event, false);
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

/*
 * A kretprobe whose hist is keyed on the return value: "r:GROUP/EVENT SYM
 * ret=$retval:s32" and "hist:keys=ret". Its hist lines read
 * "{ ret:        -12 } hitcount:          3".
 */
#define GL_HIST_RET_TRIGGER "hist:keys=ret"

int gl_kretprobe_hist_add(const char *group, const char *event, const char *sym)
{
    char cmd[256], path[256];
    int err;

    snprintf(cmd, sizeof(cmd), "r:%s/%s %s ret=$retval:s32", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    if (err) {
        return err;
    }
    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    return gl_write_file(path, GL_HIST_RET_TRIGGER);
}

void gl_kretprobe_hist_remove(const char *group, const char *event)
{
    char cmd[256], path[256];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    gl_write_file(path, "!" GL_HIST_RET_TRIGGER);
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

int gl_hist_read_ret(const char *path, struct gl_ret_hist *h)
{
    FILE *f = fopen(path, "r");
    char line[512];

    memset(h, 0, sizeof(*h));
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *k = strstr(line, "{ ret:");
        char *hc = strstr(line, "hitcount:");
        long long n, ret;

        /* not the "# trigger info: hist:keys=ret:vals=hitcount..." header */
        if (line[0] == '#' || !k || !hc) {
            continue;
        }
        ret = strtoll(k + strlen("{ ret:"), NULL, 10);
        n = strtoll(hc + strlen("hitcount:"), NULL, 10);
        h->total += n;
        if (h->n < GL_RET_HIST_MAX) {
            h->ret[h->n] = ret;
            h->count[h->n] = n;
            h->n++;
        } else {
            h->dropped += n;
        }
    }
    fclose(f);
    return 0;
}

long long gl_ret_hist_count(const struct gl_ret_hist *h, long long ret)
{
    for (int i = 0; i < h->n; i++) {
        if (h->ret[i] == ret) {
            return h->count[i];
        }
    }
    return 0;
}

/*
 * The stack key's name: "common_stacktrace" since 6.5, which still takes
 * "stacktrace" (the only name before it).
 */
static const char *const stack_triggers[] = {
    "hist:keys=common_stacktrace", "hist:keys=stacktrace",
};

int gl_kprobe_stack_add(const char *group, const char *event, const char *sym)
{
    char cmd[256], path[256];
    int err;

    snprintf(cmd, sizeof(cmd), "p:%s/%s %s", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    if (err) {
        return err;
    }
    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    for (size_t i = 0; i < sizeof(stack_triggers) / sizeof(stack_triggers[0]); i++) {
        err = gl_write_file(path, stack_triggers[i]);
        if (!err) {
            break;
        }
    }
    return err;
}

void gl_kprobe_stack_remove(const char *group, const char *event)
{
    char cmd[256], path[256], trig[64];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    for (size_t i = 0; i < sizeof(stack_triggers) / sizeof(stack_triggers[0]); i++) {
        snprintf(trig, sizeof(trig), "!%s", stack_triggers[i]);
        gl_write_file(path, trig);
    }
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

/* A frame line "  zswap_store+0x1c5/0x7e0" (or "NAME.isra.0+0x...") is of @fn. */
static bool frame_is(const char *line, const char *fn)
{
    size_t len = strlen(fn);

    line += strspn(line, " \t");
    return !strncmp(line, fn, len) && (line[len] == '+' || line[len] == '.');
}

/*
 * Entries read
 *   { common_stacktrace:
 *            __swap_writepage+0x5/0x80
 *            ...
 *   } hitcount:          3
 * innermost frame first, one a line (at most 16).
 */
int gl_hist_read_frames(const char *path, const char *const *frames, size_t n,
                        long long *hits, long long *total)
{
    FILE *f = fopen(path, "r");
    char line[512];
    bool in_entry = false;
    long first = -1;        /* the entry's innermost frame among @frames */

    for (size_t i = 0; i < n; i++) {
        hits[i] = 0;
    }
    if (total) {
        *total = 0;
    }
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *hc = strstr(line, "hitcount:");

        if (line[0] == '{') {
            in_entry = true;
            first = -1;
        } else if (in_entry && line[0] == '}' && hc) {
            long long c = strtoll(hc + strlen("hitcount:"), NULL, 10);

            if (first >= 0) {
                hits[first] += c;
            }
            if (total) {
                *total += c;
            }
            in_entry = false;
        } else if (in_entry && first < 0) {
            for (size_t i = 0; i < n && first < 0; i++) {
                if (frame_is(line, frames[i])) {
                    first = i;
                }
            }
        }
    }
    fclose(f);
    return 0;
}

void gl_kallsyms_resolve(const char *const *want, char (*got)[96], size_t n)
{
    FILE *f = fopen("/proc/kallsyms", "r");
    char line[512], addr[32], type[8], name[256];

    for (size_t i = 0; i < n; i++) {
        got[i][0] = '\0';
    }
    if (!f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%31s %7s %255s", addr, type, name) != 3) {
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(want[i]);

            if (strncmp(name, want[i], len)) {
                continue;
            }
            if (!name[len] || (name[len] == '.' && !got[i][0])) {
                snprintf(got[i], sizeof(got[i]), "%.95s", name);
            }
        }
    }
    fclose(f);
}
#undef GL_HIST_RET_TRIGGER
/* ---- lib/guestlib-kcov.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Kernel coverage of a tool's own threads (kcov), for faultline explore's
 * feedback: with FAULTLINE_KCOV=1 in the environment (run.sh exports it for
 * a scenario with [vm] kcov) the main thread traces from before main() and
 * workers started by gl_thread_create_traced().  Direct reclaim under a memcg
 * limit and swap-in faults run in these threads, so their trace covers the
 * swap paths the test drives; kswapd and completion interrupts are not
 * covered.
 *
 * A collector thread turns each traced thread's PC buffer into edges (two
 * consecutive PCs), hashed into a 64 Ki-bit map, and restarts the buffer.
 * It polls: what a thread traces while its buffer is full is lost, so the
 * map is a sample that grows with the run, not an exact edge set.  At exit
 * the process prints the map as two KTAP diagnostics:
 *   # kcov edges N          (bits set)
 *   # kcov-map BASE64       (the 8 KiB map)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcov.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>


#define KCOV_PATH "/sys/kernel/debug/kcov"
/* Words per thread (1 MiB): the PCs of about one poll interval of reclaim. */
#define KCOV_WORDS (1UL << 17)
#define KCOV_POLL_MS 10
#define KCOV_MAX_THREADS 16

static struct {
    pthread_mutex_t lock;
    bool on;
    pid_t pid;              /* the process that prints (not a forked child) */
    unsigned long *area[KCOV_MAX_THREADS];
    int n;
    uint8_t map[GL_KCOV_MAP_BITS / 8];
    const char *why_off;    /* FAULTLINE_KCOV set but no kcov: said once */
} kc = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Hash a PC into the map's index space (Fibonacci hashing). */
static uint32_t pc_slot(unsigned long pc)
{
    return (uint32_t)(((uint64_t)pc * 0x9E3779B97F4A7C15ULL) >> 48);
}

size_t gl_kcov_add_trace(uint8_t *map, const unsigned long *pcs, size_t n)
{
    uint32_t prev = 0;
    size_t added = 0;

    for (size_t i = 0; i < n; i++) {
        uint32_t cur = pc_slot(pcs[i]);
        uint32_t e = (cur ^ (prev >> 1)) & (GL_KCOV_MAP_BITS - 1);
        if (!(map[e / 8] & (1u << (e % 8)))) {
            map[e / 8] |= 1u << (e % 8);
            added++;
        }
        prev = cur;
    }
    return added;
}

static void drain(unsigned long *area)
{
    unsigned long n = __atomic_load_n(&area[0], __ATOMIC_RELAXED);

    if (n > KCOV_WORDS - 1)
        n = KCOV_WORDS - 1;
    gl_kcov_add_trace(kc.map, area + 1, n);
    /* The kernel appends at area[0] + 1: restart the buffer.  A PC written
     * between the load and this store is lost (the map is a sample). */
    __atomic_store_n(&area[0], 0, __ATOMIC_RELAXED);
}

static void drain_all(void)
{
    pthread_mutex_lock(&kc.lock);
    for (int i = 0; i < kc.n; i++)
        drain(kc.area[i]);
    pthread_mutex_unlock(&kc.lock);
}

static void *collector(void *arg)
{
    for (;;) {
        gl_sleep_ms(KCOV_POLL_MS);
        drain_all();
    }
    return NULL;
}

int gl_kcov_thread_begin(void)
{
    int fd, err;
    unsigned long *area;

    if (!kc.on || getpid() != kc.pid)
        return 0;
    fd = open(KCOV_PATH, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (ioctl(fd, KCOV_INIT_TRACE, KCOV_WORDS)) {
        err = -errno;
        close(fd);
        return err;
    }
    area = mmap(NULL, KCOV_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE,
                MAP_SHARED, fd, 0);
    if (area == MAP_FAILED) {
        err = -errno;
        close(fd);
        return err;
    }
    pthread_mutex_lock(&kc.lock);
    if (kc.n == KCOV_MAX_THREADS) {
        pthread_mutex_unlock(&kc.lock);
        munmap(area, KCOV_WORDS * sizeof(unsigned long));
        close(fd);
        return -ENOSPC;
    }
    kc.area[kc.n++] = area;
    pthread_mutex_unlock(&kc.lock);
    /* The trace belongs to the calling thread until it exits; the fd is not
     * needed for that, and the mapping stays for the collector. */
    if (ioctl(fd, KCOV_ENABLE, KCOV_TRACE_PC)) {
        err = -errno;
        close(fd);
        return err;
    }
    close(fd);
    return 0;
}

struct traced_start {
    void *(*fn)(void *);
    void *arg;
};

static void *traced_main(void *p)
{
    struct traced_start start = *(struct traced_start *)p;

    free(p);
    (void)gl_kcov_thread_begin();    /* coverage is a sample: a failure costs it */
    return start.fn(start.arg);
}

int gl_thread_create_traced(pthread_t *th, void *(*fn)(void *), void *arg)
{
    struct traced_start *start = malloc(sizeof(*start));
    int err;

    if (!start)
        return ENOMEM;
    start->fn = fn;
    start->arg = arg;
    err = pthread_create(th, NULL, traced_main, start);
    if (err)
        free(start);
    return err;
}

size_t gl_kcov_map_bits(const uint8_t *map)
{
    size_t n = 0;

    for (size_t i = 0; i < GL_KCOV_MAP_BITS / 8; i++)
        n += (size_t)__builtin_popcount(map[i]);
    return n;
}

void gl_kcov_base64(const uint8_t *in, size_t len, char *out)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

static void report(void)
{
    static char text[(GL_KCOV_MAP_BITS / 8 + 2) / 3 * 4 + 1];

    if (getpid() != kc.pid)
        return;             /* a forked child: its parent reports */
    if (kc.why_off) {
        printf("# kcov unavailable: %s\n", kc.why_off);
        return;
    }
    drain_all();
    gl_kcov_base64(kc.map, sizeof(kc.map), text);
    printf("# kcov edges %zu\n# kcov-map %s\n", gl_kcov_map_bits(kc.map), text);
    fflush(stdout);
}

__attribute__((constructor)) static void kcov_start(void)
{
    const char *env = getenv("FAULTLINE_KCOV");
    pthread_t th;
    sigset_t all, old;
    int err;

    if (!env || strcmp(env, "1"))
        return;
    kc.pid = getpid();
    kc.on = true;
    atexit(report);
    err = gl_kcov_thread_begin();
    if (err) {
        kc.why_off = strerror(-err);
        kc.on = false;
        return;
    }
    /* The collector takes no signal: the tool's handlers and alarms stay
     * with its own threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&th, NULL, collector, NULL))
        kc.why_off = "no collector thread";
    else
        pthread_detach(th);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
#undef KCOV_MAX_THREADS
#undef KCOV_PATH
#undef KCOV_POLL_MS
#undef KCOV_WORDS
/* ---- lib/ktap.c ---- */
// SPDX-License-Identifier: GPL-2.0-or-later
/* KTAP writer for faultline guest selftests; see ktap.h. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int ktap_planned, ktap_num, ktap_failed;

void ktap_header(int plan)
{
    ktap_planned = plan;
    printf("KTAP version 1\n1..%d\n", plan);
    fflush(stdout);
}

void ktap_diag(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

const char *ktap_name(const char *fmt, ...)
{
    static char name[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    return name;
}

void ktap_result(int ok, const char *directive, const char *name, const char *detail_fmt, ...)
{
    char detail[512] = "";
    va_list ap;

    ktap_num++;
    if (!ok && !directive) {
        ktap_failed++;
    }
    if (detail_fmt) {
        va_start(ap, detail_fmt);
        vsnprintf(detail, sizeof(detail), detail_fmt, ap);
        va_end(ap);
    }
    if (detail[0]) {
        printf("# %s: %s\n", name, detail);
    }
    printf("%s %d %s", ok ? "ok" : "not ok", ktap_num, name);
    if (directive) {
        printf(" # %s", directive);
    }
    printf("\n");
    fflush(stdout);
}

int ktap_finish(void)
{
    while (ktap_num < ktap_planned) {
        ktap_result(0, NULL, ktap_name("test %d not run", ktap_num + 1),
                    "the test stopped early");
    }
    printf("# totals: pass:%d fail:%d\n", ktap_num - ktap_failed, ktap_failed);
    fflush(stdout);
    return ktap_failed ? 1 : 0;
}

void ktap_bail(const char *fmt, ...)
{
    va_list ap;

    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

/* ---- the reproducer's main (faultline prog c) ---- */

static const char repro_name[] = "program";
static const char repro_text[] =
	"swap s0 virtio-blk size=4M prio=74\n"
	"swap s1 nvme size=6M prio=10\n"
	"swap s2 nvme size=6M prio=50\n"
	"cgroup g1 memory.max=1M memory.high=920K\n"
	"\n"
	"anon o1 2552K cgroup=g1\n"
	"write o1 0 2552K v=1\n"
	"madvise o1 0 2552K pageout\n"
	"fork p1\n"
	"@p1 reclaim g1 1M &\n"
	"swapoff s0\n"
	"wait p1\n"
	"read o1 0 2552K\n";
/* program device -> the VM's device (docs/programs.md, `bind`) */
static const char *const repro_binds[][2] = {
	{ "s0", "virtio-blk:fl-vblk0" },
	{ "s1", "nvme:fl-nvme0" },
	{ "s2", "nvme:fl-nvme1" },
	{ NULL, NULL } };
/* devices whose rules may fail reads: the failed-read relaxation */
static const char *const repro_failed_read[] = {  NULL };
static const int repro_gated = 0;

/* The rules' gate (rules.txt, gate.c): a failed read is said, not fatal. */
static void repro_gate(struct pe_program *p, long sector)
{
	char why[512];

	if (pe_gate_read(p, sector, why, sizeof(why)))
		fprintf(stderr, "repro: %s (its rules may not apply)\n", why);
}

static int repro_ready(void *arg)
{
	if (repro_gated)
		repro_gate(arg, 1);
	return 0;
}

static int repro_ops_done(void *arg)
{
	if (repro_gated)
		repro_gate(arg, 2);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const plants[] = { "", "drop-write", "stale-page", "leak-slot" };
	struct pe_report report = { stdout, 0 };
	struct pe_hooks hooks = { repro_ready, repro_ops_done, NULL };
	enum pe_plant plant = PE_PLANT_NONE;
	struct pe_program *p;
	char why[512];
	int rc;

	/* --plant KIND: the executor wrong on purpose, as `progexec run --plant`. */
	if (argc == 3 && !strcmp(argv[1], "--plant")) {
		for (plant = PE_PLANT_DROP_WRITE; plant <= PE_PLANT_LEAK_SLOT; plant++)
			if (!strcmp(argv[2], plants[plant]))
				break;
	}
	if (argc != 1 && (argc != 3 || plant > PE_PLANT_LEAK_SLOT || plant == PE_PLANT_NONE)) {
		fprintf(stderr, "usage: %s [--plant drop-write|stale-page|leak-slot]\n", argv[0]);
		return 2;
	}
	p = pe_program_parse(repro_name, repro_text, why, sizeof(why));
	if (!p) {
		printf("refused %s %s\n", repro_name, why);
		return 2;
	}
	p->plant = plant;
	for (int i = 0; repro_binds[i][0]; i++) {
		if (pe_program_bind(p, repro_binds[i][0], repro_binds[i][1], why, sizeof(why))) {
			fprintf(stderr, "repro: %s\n", why);
			return 2;
		}
	}
	for (int i = 0; repro_failed_read[i]; i++) {
		if (pe_program_allow_failed_read(p, repro_failed_read[i], why, sizeof(why))) {
			fprintf(stderr, "repro: %s\n", why);
			return 2;
		}
	}
	hooks.arg = p;
	rc = pe_program_run(p, &hooks, &report);
	pe_program_free(p);
	return rc == PE_PASS ? 0 : rc == PE_FAIL ? 1 : 2;
}
