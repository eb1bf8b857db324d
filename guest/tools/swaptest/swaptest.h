/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swaptest's runs and checks: swaptest.c (options, the table of modes, main)
 * runs a mode, swaptest-pipeline.c (fill, forced writeback, refault and
 * verify), swaptest-race.c (the race mode), swaptest-readahead.c and
 * swaptest-lru.c (the readahead and lru modes with their checks and
 * metrics), swaptest-swapoff.c (swapoff with read errors), then its
 * checks, swaptest-checks.c (with the metrics).
 * Below them, and never calling up: swaptest-env.h (options, memcg and
 * zswap settings, fault arming), swaptest-trace.h (tracing evidence),
 * swaptest-slots.h (where the pages are) and the guest library's
 * ../lib/pagecheck.h (the pattern and its verification).
 */
#ifndef FAULTLINE_SWAPTEST_H
#define FAULTLINE_SWAPTEST_H

#include "../lib/guestlib.h"
#include "../lib/pagecheck.h"
#include "swaptest-env.h"
#include "swaptest-slots.h"
#include "swaptest-trace.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ one run */

/*
 * What a mode's run measured, for the checks and the metrics; and what main
 * set up around it, which the modes and checks read from here.
 */
struct run {
    struct global_env env;      /* settings changed for the run (swaptest-env.c) */
    struct tracing tr;          /* tracing evidence (swaptest-trace.c) */
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
    bool patch_asserted;        /* a patch-specific expectation, asserted */
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
    int (*wanted)(const struct options *o);
    void (*report)(const struct options *o, const struct run *R);
    enum check_result (*fn)(const struct options *o, const struct run *R,
                            struct check_out *out);
    /* judged from zswpwb, which kernels before 6.8 do not count: SKIP there */
    bool zswpwb;
};

/* Mode check lists (NULL-terminated), in the order they report. */
extern const struct check *const writeback_checks[], *const completion_checks[],
    *const write_error_checks[], *const heal_checks[], *const read_error_checks[],
    *const refault_checks[], *const race_checks[], *const readahead_checks[],
    *const lru_checks[], *const swapoff_checks[];
extern const struct check check_no_splat, check_pages;

/*
 * Run the checks; each returns how many patch-specific expectations it
 * asserted (main reports the sum: the judge needs > 0 for kernel_mode patched).
 */
int run_checks(const struct check *const *checks, const struct options *o,
               const struct run *R);
/* KTAP results the checks of @checks will report (for the plan). */
int checks_planned(const struct check *const *checks, const struct options *o);
int run_check(const struct check *c, const struct options *o, const struct run *R);
void report_metrics(const struct run *R);
/* Count a data check's verify result (bad pages, SIGBUS) into data_errors. */
void run_count_verify(struct run *R, const struct verify_result *vr, int sigbus_expected);
size_t run_data_errors(const struct run *R);

/* The seed-path modes (swaptest-readahead.c, swaptest-lru.c) and the KTAP
 * results each run reports before its checks. */
void readahead_run(const struct options *o, struct run *R);
int readahead_planned(const struct options *o);
void lru_run(const struct options *o, struct run *R);
int lru_planned(const struct options *o);
/* swaptest-swapoff.c */
void swapoff_run(const struct options *o, struct run *R);
int swapoff_planned(const struct options *o);

/* The runs of the modes, and the KTAP results each reports. */
void pipeline(const struct options *o, struct run *R);
void race(const struct options *o, struct run *R);
int pipeline_planned(const struct options *o);
int race_planned(const struct options *o);

#endif /* FAULTLINE_SWAPTEST_H */
