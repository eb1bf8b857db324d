/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swaptest's options, and the environment of a run (swaptest-env.c): the
 * memcg and zswap settings it changes and restores, its memcg counters, the
 * device's fault state.
 */
#ifndef FAULTLINE_SWAPTEST_ENV_H
#define FAULTLINE_SWAPTEST_ENV_H

#include "../lib/guestlib.h"

#include <stdint.h>

#define ZSWAP_PARAM "/sys/module/zswap/parameters/"

/* ------------------------------------------------------------ options */

enum arm_point { ARM_NONE, ARM_WRITEBACK, ARM_REFAULT };

struct options {
    const char *mode;
    uint64_t mem, memcg_max, seed;
    const char *cgroup;
    int zswap;              /* -1: leave as configured, 0 off, 1 on */
    int shrinker;           /* -1: leave */
    const char *zswap_max;  /* memory.zswap.max during the test */
    int zswap_writeback;    /* memory.zswap.writeback */
    int wb_rounds;          /* forced-writeback rounds */
    int rounds;             /* verify rounds after writeback */
    long arm_state;         /* -1: no arming */
    enum arm_point arm_at;
    int disarm;
    const char *fault_dev;  /* auto | nvme | syncblk */
    const char *kernel_mode;/* auto | stock | patched */
    const char *expect_ctx; /* hardirq | softirq | irq | task | NULL */
    int expect_sync;        /* 1: sync bdev path, 0: async, -1: don't care */
    int expect_errors;      /* write/read errors must be seen */
    int expect_sigbus;
    int device_lost;        /* the device dies while armed: no disarm, SIGBUS ok */
    int settle_ms;
    int threads;
    double duration;
    int chunk_pages;
    int page_cluster;       /* /proc/sys/vm/page-cluster for the test; -1: leave */
    const char *expect_ra;  /* readahead: zero | some | NULL (report only) */
    int compressible;       /* every page compressible (default: half) */
    int wb_limit;           /* force writeback by lowering memory.zswap.max */
    int wb_reclaims;        /* memory.reclaim calls per round (shrinker) */
    int fill_writeback;     /* 0: no zswap writeback before the writeback phase */
    int wb_refaults;        /* refault: mark the pages written back, refault those */
    int heal_slots;         /* heal: name the redirtied folios, see them written */
    int leak_check;         /* race: the memcg's LRU empties once the pattern is gone */
    uint64_t shmem;         /* swapoff: bytes of pattern in a shmem file */
    const char *swapoff_dev;/* swapoff: the swap device to swap off */
    int swapoff_stall;      /* swapoff: seconds without progress before it is killed */
};

/* ------------------------------------------------------------ environment */

/*
 * The settings a run changes, kept by swaptest's main in its struct run:
 * the old ones to restore, and the shrinker setting the modes' writeback
 * phases turn back on.
 */
struct global_env {
    char old_thp[64], old_zswap[8], old_shrinker[8];
    char wb_shrinker[8];    /* zswap shrinker_enabled for the writeback phase (as configured) */
};

/* THP off and zswap as the options say (remembering the old settings); restore them. */
void global_setup(const struct options *o, struct global_env *env);
void global_teardown(const struct global_env *env);
/* memory.zswap.max back to --zswap-max. */
void zswap_max_restore(const struct options *o);
/* "# PREFIX KEY VALUE" for the memcg counters swaptest reports. */
void report_memstat(const struct options *o, const char *prefix);
/* memcg swap-cache pages now (memory.stat swapcached, else vmstat). */
long long swapcached_pages(const struct options *o, const struct gl_vmstat *now);

/* Arm the fault state before a phase, disarm after it (--arm-state, --disarm). */
void arm(const struct options *o, const char *where);
void disarm(const struct options *o, const char *where);
/* The last arm() was not followed by a disarm(). */
int fault_left_armed(void);

#endif /* FAULTLINE_SWAPTEST_ENV_H */
