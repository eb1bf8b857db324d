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
	bool fails_reads;       /* `allow failed-read`: its rules may fail reads */
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
