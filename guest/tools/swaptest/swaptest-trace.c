// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's tracing evidence (swaptest-trace.h): which kernel features the
 * patches add are present, and kprobes with hist triggers keyed on the
 * context flags on the swap write and read paths.
 */
#define _GNU_SOURCE
#include "swaptest-trace.h"
#include "../lib/ktap.h"

#include <stdio.h>
#include <string.h>

#define KPROBE_GROUP "faultline"

/* ------------------------------------------------------------ feature probes */

struct feature {
    const char *name;   /* diagnostic name */
    const char *sym;    /* /proc/kallsyms symbol that marks it */
    int dropbehind;     /* evidence of the swap dropbehind patch */
    int present;
};

/*
 * Several probes of the dropbehind patch, any one enough: v3's helper and
 * its static workqueue callbacks (each may be inlined or become a
 * .isra/.constprop copy; the resolver accepts "NAME.suffix" copies of NAME
 * only), and v4's remove_mapping_reclaim (v4 has no helper symbol: it drops
 * from folio_end_writeback). A rebase that renames all of them is judged
 * stock under auto: scenarios that know better declare kernel_mode.
 */
static struct feature features[] = {
    { "dropbehind_v3", "swap_writeback_dropbehind_folio", 1, 0 },
    { "dropbehind_v3_work", "swap_dropbehind_workfn", 1, 0 },
    { "dropbehind_v3_drop", "swap_dropbehind_drop_folio", 1, 0 },
    { "dropbehind_v4", "remove_mapping_reclaim", 1, 0 },
    { "bio_complete_in_task", "__bio_complete_in_task", 0, 0 },
    { "folio_end_dropbehind", "folio_end_dropbehind", 0, 0 },
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))

void probe_features(struct tracing *t, const char *kernel_mode)
{
    const char *want[N_FEATURES];
    char got[N_FEATURES][96];
    int found = 0;

    for (size_t i = 0; i < N_FEATURES; i++) {
        want[i] = features[i].sym;
    }
    gl_kallsyms_resolve(want, got, N_FEATURES);
    for (size_t i = 0; i < N_FEATURES; i++) {
        features[i].present = got[i][0] != '\0';
        found += features[i].present && features[i].dropbehind;
        ktap_diag("feature %s %d (%s)", features[i].name, features[i].present,
                  features[i].present ? got[i] : features[i].sym);
    }
    ktap_diag("patch_probes_found %d", found);
    if (!strcmp(kernel_mode, "patched")) {
        t->patched = 1;
    } else if (!strcmp(kernel_mode, "stock")) {
        t->patched = 0;
    } else {
        t->patched = found > 0;
    }
    ktap_diag("kernel_mode %s%s (patch-specific checks %s)", t->patched ? "patched" : "stock",
              strcmp(kernel_mode, "auto") ? " (declared)" : " (detected)",
              t->patched ? "asserted" : "reported as baseline");
}

/* ------------------------------------------------------------ tracing */

static const char *const probe_syms[P__N] = {
    [P_EBW] = "end_swap_bio_write",
    [P_FEW] = "folio_end_writeback",
    [P_SYNC] = "swap_writepage_bdev_sync",
    [P_ASYNC] = "swap_writepage_bdev_async",
    [P_SWP_WRITEPAGE] = "__swap_writepage",
    [P_ZSWAP_WB] = "zswap_writeback_entry",
    [P_EBR] = "end_swap_bio_read",
    [P_RSYNC] = "swap_read_folio_bdev_sync",
    [P_DROPBEHIND] = "swap_writeback_dropbehind_folio",
    [P_RMR] = "remove_mapping_reclaim",
    [P_FEDB] = "folio_end_dropbehind",
};

void tracing_init(struct tracing *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < P__N; i++) {
        t->probes[i].sym = probe_syms[i];
    }
}

/* Event name of a probe: "fl_" + its symbol without leading underscores. */
static void probe_event(const struct probe *p, char *buf, size_t len)
{
    const char *s = p->sym;

    while (*s == '_') {
        s++;
    }
    snprintf(buf, len, "fl_%s", s);
}

void tracing_cleanup(const struct tracing *t)
{
    char ev[96];

    for (size_t i = 0; i < P__N; i++) {
        probe_event(&t->probes[i], ev, sizeof(ev));
        gl_kprobe_hist_remove(KPROBE_GROUP, ev);
    }
    gl_hist_trigger("block", "block_rq_error", false);
}

void tracing_start(struct tracing *t)
{
    const char *want[P__N];
    char got[P__N][96], ev[96];
    int err;

    tracing_cleanup(t);     /* leftovers of an earlier test in this VM */
    for (size_t i = 0; i < P__N; i++) {
        want[i] = t->probes[i].sym;
    }
    gl_kallsyms_resolve(want, got, P__N);
    for (size_t i = 0; i < P__N; i++) {
        struct probe *p = &t->probes[i];

        if (!got[i][0]) {
            continue;
        }
        snprintf(p->resolved, sizeof(p->resolved), "%.95s", got[i]);
        if (strcmp(got[i], p->sym)) {
            ktap_diag("kprobe %s resolved to %s", p->sym, got[i]);
        }
        probe_event(p, ev, sizeof(ev));
        err = gl_kprobe_hist_add(KPROBE_GROUP, ev, p->resolved);
        p->ok = !err;
        if (err) {
            ktap_diag("kprobe %s not installed: %s", p->sym, strerror(-err));
        }
    }
    err = gl_hist_trigger("block", "block_rq_error", true);
    t->blk_err_ok = !err;
    if (err) {
        ktap_diag("block_rq_error hist trigger not installed: %s", strerror(-err));
    }
}

void tracing_collect(struct tracing *t)
{
    char ev[96], path[256];
    struct gl_hist h;

    for (size_t i = 0; i < P__N; i++) {
        struct probe *p = &t->probes[i];

        if (!p->ok) {
            continue;
        }
        probe_event(p, ev, sizeof(ev));
        gl_trace_event_path(path, sizeof(path), KPROBE_GROUP, ev, "hist");
        if (gl_hist_read(path, &p->hist) < 0) {
            p->ok = 0;
        }
    }
    if (t->blk_err_ok) {
        gl_trace_event_path(path, sizeof(path), "block", "block_rq_error", "hist");
        if (gl_hist_read(path, &h) == 0) {
            t->blk_errors = h.sum;
        }
    }
    tracing_cleanup(t);
}

void tracing_report(const struct tracing *t)
{
    for (size_t i = 0; i < P__N; i++) {
        const struct probe *p = &t->probes[i];

        if (!p->ok) {
            ktap_diag("kprobe %s n/a", p->sym);
            continue;
        }
        ktap_diag("kprobe %s %lld", p->sym, p->hist.sum);
        for (int c = 0; c < GL_CTX__N; c++) {
            ktap_diag("ctx %s %s %lld", p->sym, gl_ctx_names[c], p->hist.ctx[c]);
        }
    }
    if (t->blk_err_ok) {
        ktap_diag("block_rq_error %lld", t->blk_errors);
    } else {
        ktap_diag("block_rq_error n/a");
    }
}
