// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's checks, run after a mode (as the kernel's test_zswap.c runs its
 * table of tests): each is a small function returning PASS, FAIL, SKIP or
 * XFAIL; each mode lists the checks it asserts, in the order they report.
 * Also the named metrics `faultline compare` reads.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long delta(const struct gl_vmstat *a, const struct gl_vmstat *b, int id)
{
    return gl_vmstat_delta(a, b, id);
}

void check_describe(struct check_out *out, const char *name, const char *detail_fmt, ...)
{
    va_list ap;

    snprintf(out->name, sizeof(out->name), "%s", name);
    out->detail[0] = 0;
    if (detail_fmt) {
        va_start(ap, detail_fmt);
        vsnprintf(out->detail, sizeof(out->detail), detail_fmt, ap);
        va_end(ap);
    }
}

static enum check_result pass_if(int cond)
{
    return cond ? CHECK_PASS : CHECK_FAIL;
}

/*
 * A patch-specific expectation: asserted on a patched kernel; on a stock one
 * SKIP when it holds anyway, else XFAIL with the measured values.
 */
static enum check_result patch_expect(const struct run *R, int cond, struct check_out *out,
                                      const char *what, const char *measured)
{
    check_describe(out, what, "measured %s", measured);
    if (R->tr.patched) {
        out->patch_asserted = true;
        return pass_if(cond);
    }
    if (cond) {
        snprintf(out->reason, sizeof(out->reason), "stock kernel: holds anyway");
        return CHECK_SKIP;
    }
    snprintf(out->reason, sizeof(out->reason), "stock kernel");
    return CHECK_XFAIL;
}

int run_check(const struct check *c, const struct options *o, const struct run *R)
{
    struct check_out out = { "", "", "", false };
    char directive[sizeof(out.reason) + 8];
    enum check_result res;

    if (c->wanted && !c->wanted(o)) {
        return 0;
    }
    if (c->report) {
        c->report(o, R);
    }
    if (!c->fn) {
        return 0;
    }
    res = c->fn(o, R, &out);
    if (c->zswpwb && R->v0.v[VM_ZSWPWB] < 0) {
        snprintf(out.reason, sizeof(out.reason),
                 "no zswpwb in /proc/vmstat: zswap writeback is not counted before Linux 6.8");
        res = CHECK_SKIP;
    }
    switch (res) {
    case CHECK_PASS:
    case CHECK_FAIL:
        ktap_result(res == CHECK_PASS, NULL, out.name, "%s", out.detail);
        break;
    case CHECK_SKIP:
    case CHECK_XFAIL:
        snprintf(directive, sizeof(directive), "%s %s", res == CHECK_SKIP ? "SKIP" : "XFAIL",
                 out.reason);
        ktap_result(res == CHECK_SKIP, directive, out.name, "%s", out.detail);
        break;
    }
    return out.patch_asserted;
}

int checks_planned(const struct check *const *checks, const struct options *o)
{
    int n = 0;

    for (; *checks; checks++) {
        n += (*checks)->fn && (!(*checks)->wanted || (*checks)->wanted(o));
    }
    return n;
}

int run_checks(const struct check *const *checks, const struct options *o, const struct run *R)
{
    int asserted = 0;

    for (; *checks; checks++) {
        asserted += run_check(*checks, o, R);
    }
    return asserted;
}

/* ------------------------------------------------------------ data errors */

/*
 * Every data check's verify result is counted here, so that data_errors
 * (report_metrics) is what the data checks found in every mode: bad pages,
 * and SIGBUS where none may happen (@sigbus_expected: read-error's armed
 * child, where SIGBUS is the point).
 */
void run_count_verify(struct run *R, const struct verify_result *vr, int sigbus_expected)
{
    R->bad += vr->bad;
    if (!sigbus_expected) {
        R->sigbus_verify += vr->sigbus;
    }
}

size_t run_data_errors(const struct run *R)
{
    return R->bad + R->sigbus_verify;
}

/* ------------------------------------------------------------ every mode */

static enum check_result swapped_out(const struct options *o, const struct run *R,
                                     struct check_out *out)
{
    long long pswpout = delta(&R->v0, &R->v_end, VM_PSWPOUT);

    check_describe(out, "pattern was swapped out to the device", "pswpout +%lld", pswpout);
    return pass_if(pswpout > 0);
}

/* pages_verified: page reads that matched the pattern (over every round). */
static void pages_report(const struct options *o, const struct run *R)
{
    ktap_diag("pages_verified %zu", R->verified);
    ktap_diag("pages_bad %zu", R->bad);
}

static enum check_result no_splat(const struct options *o, const struct run *R,
                                  struct check_out *out)
{
    check_describe(out, "no BUG/WARNING/Oops/lockdep splat in the kernel log", "%d splat lines",
                   R->kmsg.splats);
    return pass_if(R->kmsg.splats == 0);
}

static const struct check check_swapped_out = { .fn = swapped_out };
const struct check check_pages = { .report = pages_report };
const struct check check_no_splat = { .fn = no_splat };

/* ------------------------------------------------------------ asked for by options */

/* Every completion ran in @want ("irq": hardirq or softirq), none elsewhere. */
static int ctx_matches(const struct probe *p, const char *want)
{
    const long long *ctx = p->hist.ctx, total = p->hist.sum;

    if (!total) {
        return 0;
    }
    if (!strcmp(want, "hardirq")) {
        return ctx[GL_CTX_HARDIRQ] == total;
    }
    if (!strcmp(want, "softirq")) {
        return ctx[GL_CTX_SOFTIRQ] == total;
    }
    if (!strcmp(want, "irq")) {
        return ctx[GL_CTX_HARDIRQ] + ctx[GL_CTX_SOFTIRQ] == total;
    }
    return ctx[GL_CTX_TASK] == total;
}

static int ctx_wanted(const struct options *o)
{
    return o->expect_ctx != NULL;
}

/* --expect-ctx: the context the swap write completions ran in. */
static enum check_result completion_ctx(const struct options *o, const struct run *R,
                                        struct check_out *out)
{
    const struct probe *probes = R->tr.probes;
    const struct probe *p = probes[P_EBW].hist.sum ? &probes[P_EBW] : &probes[P_FEW];

    const char *name = ktap_name("swap write completions all in %s context", o->expect_ctx);

    check_describe(out, name, "%s hardirq %lld softirq %lld task %lld", p->sym,
                   p->hist.ctx[GL_CTX_HARDIRQ], p->hist.ctx[GL_CTX_SOFTIRQ],
                   p->hist.ctx[GL_CTX_TASK]);
    if (!p->ok) {
        check_describe(out, name, "%s not probeable", p->sym);
        return CHECK_FAIL;
    }
    return pass_if(ctx_matches(p, o->expect_ctx));
}

static int path_wanted(const struct options *o)
{
    return o->expect_sync >= 0;
}

/*
 * --expect-sync / --expect-async: the swap write path.  swap_writepage_bdev_async
 * is often inlined; its bio callback end_swap_bio_write is what only the
 * async path calls.  The option claims a path: a probe that cannot attach
 * leaves the claim unjudged, which fails.
 */
static enum check_result write_path(const struct options *o, const struct run *R,
                                    struct check_out *out)
{
    const struct probe *probes = R->tr.probes;
    const struct probe *s = &probes[P_SYNC];
    const struct probe *a = probes[P_ASYNC].ok ? &probes[P_ASYNC] : &probes[P_EBW];

    const char *name = ktap_name("swap write path is %s",
                                 o->expect_sync ? "synchronous" : "asynchronous");

    if (!s->ok || !a->ok) {
        check_describe(out, name, "%s not probeable", !s->ok ? s->sym : a->sym);
        return CHECK_FAIL;
    }
    check_describe(out, name, "swap_writepage_bdev_sync %lld, %s %lld", s->hist.sum, a->sym,
                   a->hist.sum);
    return pass_if(o->expect_sync ? s->hist.sum > 0 && a->hist.sum == 0 :
                   a->hist.sum > 0 && s->hist.sum == 0);
}

static int errors_wanted(const struct options *o)
{
    return o->expect_errors;
}

/* --expect-errors: the injected errors reached the kernel. */
static enum check_result injected_errors(const struct options *o, const struct run *R,
                                         struct check_out *out)
{
    const struct gl_kmsg_counts *k = &R->kmsg;

    ktap_diag("kmsg write_error_lines %d read_error_lines %d io_error_lines %d",
              k->write_errors, k->read_errors, k->io_errors);
    check_describe(out, "the device reported I/O errors",
                   "block_rq_error %lld, Write-error lines %d", R->tr.blk_errors,
                   k->write_errors);
    return pass_if(R->tr.blk_errors > 0 || k->write_errors > 0 || k->read_errors > 0);
}

static const struct check check_completion_ctx = { .wanted = ctx_wanted, .fn = completion_ctx };
static const struct check check_write_path = { .wanted = path_wanted, .fn = write_path };
static const struct check check_injected_errors = {
    .wanted = errors_wanted, .fn = injected_errors,
};

/* ------------------------------------------------------------ mode-specific */

static enum check_result zswap_wrote_back(const struct options *o, const struct run *R,
                                          struct check_out *out)
{
    long long zswpwb = delta(&R->v0, &R->v_end, VM_ZSWPWB);

    check_describe(out, "zswap wrote back to the device", "zswpwb +%lld", zswpwb);
    return pass_if(zswpwb > 0);
}

/*
 * heal: once disarmed, the folios whose write failed (redirtied: swapped
 * out, in swap cache, their slot not holding them) are written by reclaim:
 * they leave swap cache (within the bounded reclaim passes that follow the
 * disarm: one pass need not reach them all). Global pswpout is not
 * evidence: zswap's rejected pages are written whether or not the
 * redirtied ones are.
 */
static enum check_result rewritten_after_disarm(const struct options *o, const struct run *R,
                                                struct check_out *out)
{
    check_describe(out, "after disarm the redirtied folios were written", "%lld of %lld left swap "
                   "cache in %d reclaim passes, %lld of them on the device; pswpout +%lld",
                   R->redirtied_written, R->redirtied, R->heal_passes, R->redirtied_on_disk,
                   R->heal_pswpout);
    return pass_if(R->redirtied > 0 && R->redirtied_written == R->redirtied);
}

/* Writeback-phase counters of the dropbehind checks. */
struct wb_phase {
    long long zswpwb, pswpout, rotated;
};

static struct wb_phase wb_phase(const struct run *R)
{
    return (struct wb_phase){
        .zswpwb = delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB),
        .pswpout = delta(&R->v_wb0, &R->v_wb1, VM_PSWPOUT),
        .rotated = delta(&R->v_wb0, &R->v_wb1, VM_PGROTATED),
    };
}

static void dropbehind_report(const struct options *o, const struct run *R)
{
    struct wb_phase w = wb_phase(R);

    ktap_diag("dropbehind wb_phase zswpwb %lld pswpout %lld pgrotated %lld",
              w.zswpwb, w.pswpout, w.rotated);
    ktap_diag("dropbehind rotated_excess %lld", w.rotated - (w.pswpout - w.zswpwb));
    ktap_diag("dropbehind total pgrotated %lld zswpwb %lld",
              delta(&R->v0, &R->v_end, VM_PGROTATED), delta(&R->v0, &R->v_end, VM_ZSWPWB));
}

/* Rotations beyond what ordinary pageout explains (pswpout - zswpwb). */
static enum check_result not_rotated(const struct options *o, const struct run *R,
                                     struct check_out *out)
{
    struct wb_phase w = wb_phase(R);
    long long excess = w.rotated - (w.pswpout - w.zswpwb);
    char m[256];

    snprintf(m, sizeof(m), "pgrotated %lld, zswpwb %lld, direct pageouts %lld, excess %lld",
             w.rotated, w.zswpwb, w.pswpout - w.zswpwb, excess);
    return patch_expect(R, w.zswpwb > 0 && excess * 10 <= w.zswpwb, out,
                        "zswap writeback folios are not rotated on writeback completion", m);
}

/*
 * The drop on writeback completion: v3 calls swap_writeback_dropbehind_folio
 * (or a .isra/.constprop copy), v4 drops from folio_end_writeback through
 * remove_mapping_reclaim; whichever the kernel has is probed.
 */
static enum check_result dropped_on_completion(const struct options *o, const struct run *R,
                                               struct check_out *out)
{
    long long zswpwb = delta(&R->v0, &R->v_end, VM_ZSWPWB);
    const struct probe *probes = R->tr.probes;
    const struct probe *p = probes[P_DROPBEHIND].ok ? &probes[P_DROPBEHIND] : &probes[P_RMR];
    long long db = p->ok ? p->hist.sum : -1;
    char m[256];

    snprintf(m, sizeof(m), "%s %lld, zswpwb %lld", p->ok ? p->resolved : "no drop probe", db,
             zswpwb);
    return patch_expect(R, db >= 0 && zswpwb > 0 && db * 2 >= zswpwb, out,
                        "zswap writeback folios are dropped on completion (dropbehind)", m);
}

/*
 * Swap-cache residency right after the writeback phase (memcg swapcached,
 * after --settle-ms): on stock the folios the last memory.reclaim call wrote
 * back stay in swap cache until a later reclaim; dropbehind frees them on
 * writeback completion.
 */
static enum check_result no_linger(const struct options *o, const struct run *R,
                                   struct check_out *out)
{
    char m[256];

    ktap_diag("dropbehind last_reclaim zswpwb %lld", R->last_call_zswpwb);
    snprintf(m, sizeof(m), "swap cache after the writeback phase %lld pages, last "
             "reclaim call zswpwb %lld", R->swapcached_wb, R->last_call_zswpwb);
    return patch_expect(R, R->last_call_zswpwb > 0 &&
                        R->swapcached_wb * 4 <= R->last_call_zswpwb,
                        out, "written-back folios do not linger in swap cache", m);
}

/*
 * refault: workingset shadows survive writeback. Only the pages written
 * back in the last round that wrote any back count (refaults of pages still
 * in zswap find shadows too): touched alone, nine in ten must refault.
 */
static enum check_result shadows_survive(const struct options *o, const struct run *R,
                                         struct check_out *out)
{
    long long refault = delta(&R->v_wb1, &R->v_end, VM_WS_REFAULT_ANON);
    long long swapins = delta(&R->v_wb1, &R->v_end, VM_PSWPIN) +
                        delta(&R->v_wb1, &R->v_end, VM_ZSWPIN);

    ktap_diag("refault after_wb workingset_refault_anon %lld swapins %lld", refault, swapins);
    check_describe(out, "refaults of written-back pages find workingset shadows",
                   "workingset_refault_anon %lld for %lld written-back pages touched",
                   R->wb_refaults, R->wb_marked);
    return pass_if(R->wb_marked > 0 && R->wb_refaults * 10 >= R->wb_marked * 9);
}

static void refault_wb_report(const struct options *o, const struct run *R)
{
    ktap_diag("refault wb_phase workingset_refault_anon %lld zswpwb %lld",
              delta(&R->v_wb0, &R->v_wb1, VM_WS_REFAULT_ANON),
              delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB));
}

static const struct check check_zswap_wrote_back = { .fn = zswap_wrote_back, .zswpwb = true };
static const struct check check_rewritten = { .fn = rewritten_after_disarm };
static const struct check check_not_rotated = {
    .report = dropbehind_report, .fn = not_rotated, .zswpwb = true,
};
static const struct check check_dropped = { .fn = dropped_on_completion, .zswpwb = true };
static const struct check check_no_linger = { .fn = no_linger, .zswpwb = true };
static const struct check check_shadows = { .fn = shadows_survive };
static const struct check check_refault_wb = { .report = refault_wb_report };

/* ------------------------------------------------------------ the modes' lists */

#define REQUESTED &check_completion_ctx, &check_write_path, &check_injected_errors

const struct check *const writeback_checks[] = {
    &check_swapped_out, &check_zswap_wrote_back, &check_pages, REQUESTED,
    &check_not_rotated, &check_dropped, &check_no_linger, NULL,
};
const struct check *const completion_checks[] = {
    &check_swapped_out, &check_zswap_wrote_back, &check_pages, REQUESTED, NULL,
};
const struct check *const write_error_checks[] = {
    &check_swapped_out, &check_pages, REQUESTED, NULL,
};
const struct check *const heal_checks[] = {
    &check_swapped_out, &check_pages, REQUESTED, &check_rewritten, NULL,
};
const struct check *const read_error_checks[] = {
    &check_swapped_out, &check_pages, REQUESTED, NULL,
};
const struct check *const refault_checks[] = {
    &check_swapped_out, &check_zswap_wrote_back, &check_pages, REQUESTED,
    &check_shadows, &check_refault_wb, NULL,
};
const struct check *const race_checks[] = {
    &check_swapped_out, &check_pages, REQUESTED, NULL,
};
const struct check *const swapoff_checks[] = {
    &check_swapped_out, &check_pages, REQUESTED, NULL,
};

/*
 * The named metrics of a run, for `faultline compare`: one `# NAME VALUE` line
 * each, printed once (docs/scenarios.md, "Metrics"). vmstat/memcg counters are
 * writeback-phase deltas (v_wb0..v_wb1: the forced writeback plus the settle
 * time; race mode: the race); data_errors and workload_ms cover the whole run.
 */
void report_metrics(const struct run *R)
{
    ktap_diag("metrics: writeback phase deltas unless noted");
    ktap_diag("pgrotated %lld", delta(&R->v_wb0, &R->v_wb1, VM_PGROTATED));
    ktap_diag("zswpwb %lld", delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB));
    ktap_diag("pswpout %lld", delta(&R->v_wb0, &R->v_wb1, VM_PSWPOUT));
    ktap_diag("pgscan %lld", R->pgscan_wb);
    ktap_diag("pgsteal %lld", R->pgsteal_wb);
    ktap_diag("nr_swapcached_after_writeback %lld", R->swapcached_wb);
    ktap_diag("fill_zswpwb %lld", delta(&R->v0, &R->v_fill, VM_ZSWPWB));
    ktap_diag("wb_reclaim_calls %d", R->wb_calls);
    ktap_diag("data_errors %zu", run_data_errors(R));
    ktap_diag("workload_ms %lld", (long long)((R->t1 - R->t0) * 1000 + 0.5));
}
