/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swaptest's tracing evidence (swaptest-trace.c): the patches' features
 * present in the kernel, and kprobes with hist triggers keyed on the
 * context flags, read by the checks.
 */
#ifndef FAULTLINE_SWAPTEST_TRACE_H
#define FAULTLINE_SWAPTEST_TRACE_H

#include "../lib/guestlib.h"

/* Patch-specific expectations are asserted (a patched kernel), else XFAIL. */
extern int patched;
/* Set patched from --kernel-mode (auto: the dropbehind patch's symbols). */
void probe_features(const char *kernel_mode);

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

/* Install the probes (and block_rq_error's trigger); read them; report; remove. */
void tracing_start(void);
void tracing_collect(void);
void tracing_report(void);
void tracing_cleanup(void);

#endif /* FAULTLINE_SWAPTEST_TRACE_H */
