/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swaptest internals shared by its files: swaptest.c (options, the table of
 * modes, setup, tracing evidence, fault arming, main), swaptest-pipeline.c
 * (fill, forced writeback, refault and verify), swaptest-race.c (the race
 * mode), swaptest-checks.c (the checks run after a mode, the metrics),
 * swaptest-readahead.c and swaptest-lru.c (the readahead and lru modes with
 * their checks and metrics).
 */
#ifndef FAULTLINE_SWAPTEST_H
#define FAULTLINE_SWAPTEST_H

#include "guestlib.h"
#include "pagecheck.h"

#include <stddef.h>
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
};

extern struct options o;

/* ------------------------------------------------------------ one run */

/* Where the pages are (swaptest-slots.c), one byte per page. */
struct slot_map {
    size_t pages, n_swapped, n_cached, n_on_disk;
    uint8_t *swapped;       /* the PTE is a swap entry (of swap type 0) */
    uint8_t *cached;        /* ... whose folio is in swap cache (mincore) */
    uint8_t *on_disk;       /* ... whose device slot holds the page's pattern */
    int ok;
};
int slots_scan(const struct pattern *pat, uint8_t *mem, size_t pages, struct slot_map *m);
/* As slots_scan, without reading the device (on_disk stays 0): a cheap rescan. */
int slots_scan_cache(uint8_t *mem, size_t pages, struct slot_map *m);
void slots_free(struct slot_map *m);

/*
 * heal: the folios whose write failed, named by the slot scan after the
 * disarm (swapped out, in swap cache, slot not holding the page), and those
 * of them seen out of swap cache by any later scan: written (nothing else
 * touches the pattern, so only reclaim, having written a folio, frees it;
 * zswap writeback may bring one back into swap cache later, still written).
 */
struct heal_track {
    size_t pages;
    uint8_t *redirtied, *written;   /* one byte per page */
    long long n_redirtied, n_written;
};
/* Name the redirtied folios of scan @a; -ENOMEM, or -EINVAL for a failed scan. */
int heal_track_start(struct heal_track *t, const struct slot_map *a);
/* Fold in a later scan (a failed one is ignored); returns n_written. */
long long heal_track_scan(struct heal_track *t, const struct slot_map *now);
void heal_track_free(struct heal_track *t);

/* What a mode's run measured, for the checks and the metrics. */
struct run {
    struct gl_vmstat v0, v_fill, v_wb0, v_wb1, v_end;
    struct verify_result vr_wb;
    size_t verified, bad, sigbus_child, sigbus_parent, sigbus_unexpected;
    size_t sigbus_verify;       /* SIGBUS where none may happen (sigbus_unexpected
                                 * are among them) */
    long long heal_pswpout;
    /* heal: folios whose write failed (swapped, in swap cache, not on the
     * device), and how many of them left swap cache or reached the device
     * once disarmed */
    long long redirtied, redirtied_written, redirtied_on_disk;
    int heal_passes;            /* reclaim passes until all were written (bounded) */
    /* refault: pages written back in the last writeback round (on the device
     * now, not before it), refaults counted while touching only those */
    long long wb_marked, wb_marked_cached, wb_refaults;
    long long swapcached_wb;    /* memcg swap-cache pages right after the wb phase */
    long long pgscan_wb, pgsteal_wb;    /* memcg deltas over the wb phase */
    double t0, t1;              /* workload start/end */
    /* the forced-writeback phase (shrinker method) */
    struct gl_vmstat v_last0;   /* before its last memory.reclaim call */
    long long last_call_zswpwb; /* zswpwb of that call */
    int wb_calls;               /* memory.reclaim calls made */
    struct gl_kmsg_counts kmsg; /* the kernel log since the start */
};

/* ------------------------------------------------------------ checks */

enum check_result { CHECK_PASS, CHECK_FAIL, CHECK_SKIP, CHECK_XFAIL };

/*
 * A check's KTAP result: its name (configuration only: the case's CI id),
 * the measured detail ("# NAME: detail") and, for SKIP/XFAIL, the reason.
 */
struct check_out {
    char name[160];
    char detail[320];
    char reason[320];
};
/* Set @out's name and (@detail_fmt NULL: no) detail. */
void check_describe(struct check_out *out, const char *name, const char *detail_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * One check run after a mode: @wanted (NULL: always) says whether the
 * options ask for it; @report prints diagnostics; @fn (NULL: diagnostics
 * only) decides and describes the result.
 */
struct check {
    int (*wanted)(void);
    void (*report)(const struct run *R);
    enum check_result (*fn)(const struct run *R, struct check_out *out);
    /* judged from zswpwb, which kernels before 6.8 do not count: SKIP there */
    bool zswpwb;
};

/* Mode check lists (NULL-terminated), in the order they report. */
extern const struct check *const writeback_checks[], *const completion_checks[],
    *const write_error_checks[], *const heal_checks[], *const read_error_checks[],
    *const refault_checks[], *const race_checks[], *const readahead_checks[],
    *const lru_checks[];
extern const struct check check_no_splat, check_pages;

void run_checks(const struct check *const *checks, const struct run *R);
/* KTAP results the checks of @checks will report (for the plan). */
int checks_planned(const struct check *const *checks);
void run_check(const struct check *c, const struct run *R);
void report_metrics(const struct run *R);
/* Count a data check's verify result (bad pages, SIGBUS) into data_errors. */
void run_count_verify(struct run *R, const struct verify_result *vr, int sigbus_expected);
size_t run_data_errors(const struct run *R);

/* ------------------------------------------------------------ shared by the runs */

/* Patch-specific expectations are asserted (a patched kernel), else XFAIL. */
extern int patched;
/* Patch-specific checks asserted so far (the judge needs > 0 for kernel_mode patched). */
extern int patch_checks_asserted;
/* zswap shrinker_enabled for the writeback phase (as configured). */
extern char wb_shrinker[8];

/* Tracing evidence: kprobes with hist triggers keyed on the context flags. */
struct probe {
    const char *sym;
    char resolved[96];          /* kallsyms name probed (may be a .isra clone) */
    int ok;                     /* kprobe and hist trigger installed */
    struct gl_hist hist;
};
enum { P_EBW, P_FEW, P_SYNC, P_ASYNC, P_SWP_WRITEPAGE, P_ZSWAP_WB, P_EBR, P_RSYNC,
       P_DROPBEHIND, P_RMR, P_FEDB, P__N };
extern struct probe probes[P__N];
extern int blk_err_ok;
extern long long blk_errors;

/* The seed-path modes (swaptest-readahead.c, swaptest-lru.c) and the KTAP
 * results each run reports before its checks. */
void readahead_run(struct run *R);
int readahead_planned(void);
void lru_run(struct run *R);
int lru_planned(void);

/* Arm the fault state before a phase, disarm after it (--arm-state, --disarm). */
void arm(const char *where);
void disarm(const char *where);

void zswap_max_restore(void);
/* "# PREFIX KEY VALUE" for the memcg counters swaptest reports. */
void report_memstat(const char *prefix);
/* memcg swap-cache pages now (memory.stat swapcached, else vmstat). */
long long swapcached_pages(const struct gl_vmstat *now);

/* The runs of the modes, and the KTAP results each reports. */
void pipeline(struct run *R);
void race(struct run *R);
int pipeline_planned(void);
int race_planned(void);

#endif /* FAULTLINE_SWAPTEST_H */
