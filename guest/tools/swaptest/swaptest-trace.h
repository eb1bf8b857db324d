/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swaptest's tracing evidence (swaptest-trace.c): the patches' features
 * present in the kernel, and kprobes with hist triggers keyed on the
 * context flags, read by the checks.
 */
#ifndef FAULTLINE_SWAPTEST_TRACE_H
#define FAULTLINE_SWAPTEST_TRACE_H

#include "../lib/guestlib.h"

struct probe {
    const char *sym;
    char resolved[96];          /* kallsyms name probed (may be a .isra clone) */
    int ok;                     /* kprobe and hist trigger installed */
    struct gl_hist hist;
};
enum { P_EBW, P_FEW, P_SYNC, P_ASYNC, P_SWP_WRITEPAGE, P_ZSWAP_WB, P_EBR, P_RSYNC,
       P_DROPBEHIND, P_RMR, P_FEDB, P__N };

/*
 * A run's tracing evidence, kept by swaptest's main in its struct run:
 * filled here, read by the checks.
 */
struct tracing {
    int patched;            /* patch-specific expectations asserted, else XFAIL */
    struct probe probes[P__N];
    int blk_err_ok;         /* block_rq_error's hist trigger installed */
    long long blk_errors;
};

/* Name the probes: first, before the calls below. */
void tracing_init(struct tracing *t);
/* Set t->patched from --kernel-mode (auto: the dropbehind patch's symbols). */
void probe_features(struct tracing *t, const char *kernel_mode);
/* Install the probes (and block_rq_error's trigger); read them; report; remove. */
void tracing_start(struct tracing *t);
void tracing_collect(struct tracing *t);
void tracing_report(const struct tracing *t);
void tracing_cleanup(const struct tracing *t);

#endif /* FAULTLINE_SWAPTEST_TRACE_H */
