// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest lru: what the zswap shrinker's LRU walk gets out of
 * zswap_writeback_entry() (seed "mm/zswap: optimize zswap lru list", whose
 * probe is `kr:zswap_writeback_entry { @[(int32)retval] = count() }`).
 *
 * Fill the pattern and reclaim it into zswap (shrinker off: no writeback
 * yet; 6.12 sends the incompressible half to the device). Then, while a worker thread refaults random chunks (swap-ins racing
 * with writeback: -EEXIST) and discards others with MADV_DONTNEED (freed swap
 * entries whose zswap entries a kernel may leave on the LRU: -ENOMEM), the
 * main thread runs --wb-rounds x --wb-reclaims memory.reclaim calls with the
 * shrinker on and memory.zswap.max 0. A kretprobe with a hist keyed on the return value counts the
 * outcomes; kprobes count the LRU walk (shrink_memcg_cb: entries scanned)
 * and the shrinker's scan calls (zswap_shrinker_scan). Afterwards every
 * chunk verifies: the pattern, or zeroes where it was discarded.
 *
 * Not every writeback is the shrinker's: a store over memory.zswap.max
 * writes back one LRU entry itself (6.12 zswap_store -> shrink_memcg), and a
 * full pool queues shrink_worker, whatever shrinker_enabled says. How many
 * refaulted chunks are stored again during the phase, and so how many such
 * writebacks happen, depends on how the worker and the reclaim calls
 * interleave (beside another VM: 627 with the shrinker off). A kprobe keyed
 * on the call stack of __swap_writepage, which a writeback reaches once it
 * has succeeded, tells them apart: the shrinker checks judge the
 * shrinker's own writebacks.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LRU_GROUP "faultline"
#define LRU_CHUNK 64    /* pages per refault/discard unit */

enum { LP_WB_ENTRY, LP_WALK, LP_SCAN, LP__N };

static struct {
    const char *sym, *event;
    char resolved[96];
    int ok;
    struct gl_hist hist;
} lp[LP__N] = {
    [LP_WB_ENTRY] = { "zswap_writeback_entry", "fl_lru_wb_entry" },
    [LP_WALK] = { "shrink_memcg_cb", "fl_lru_walk" },
    [LP_SCAN] = { "zswap_shrinker_scan", "fl_lru_scan" },
};

#define RET_EVENT "fl_lru_wb_ret"

/*
 * Successful writebacks by caller: a stack-keyed kprobe on __swap_writepage.
 * A zswap writeback has the LRU walk's callback on its stack (ordinary
 * pageouts do not); the innermost of the walk's three callers says whose it
 * was (a store may enter reclaim and so the shrinker).
 */
#define STACK_SYM "__swap_writepage"
#define STACK_EVENT "fl_lru_wb_stack"
enum { WB_SHRINKER, WB_STORE, WB_POOL, WB__N };
static const char *const wb_walk_frame[] = { "shrink_memcg_cb" };
static const char *const wb_frames[WB__N] = {
    [WB_SHRINKER] = "zswap_shrinker_scan",
    [WB_STORE] = "zswap_store",
    [WB_POOL] = "shrink_worker",
};

/* What the writeback phase measured. */
static struct {
    int ret_ok;                 /* kretprobe installed and read */
    /*
     * zswap_writeback_entry is not in kallsyms (7.2 inlines it into its one
     * caller, shrink_memcg_cb): outcomes come from zswpwb and debugfs
     * reject_reclaim_fail, which count successes and failures but not errnos.
     */
    int inlined;
    long long reclaim_fail0, reclaim_fail1;
    struct gl_ret_hist ret;
    long long nmissed;          /* kretprobe misses (kprobe_profile) */
    long long refaulted, discarded;     /* chunks the worker touched */
    size_t zero_bad;            /* discarded pages that did not read as zeroes */
    int stack_ok;               /* stack-keyed kprobe installed and read */
    long long wb_zswap;         /* successful zswap writebacks seen on it */
    long long wb_by[WB__N];     /* ... of them by caller (wb_frames) */
} lw;

/* debugfs zswap/reject_reclaim_fail: writebacks that failed (-1: unreadable). */
static long long reclaim_fail_count(void)
{
    char buf[32];

    if (gl_read_file("/sys/kernel/debug/zswap/reject_reclaim_fail", buf, sizeof(buf)) < 0) {
        return -1;
    }
    return strtoll(buf, NULL, 10);
}

static void lru_tracing_stop(void)
{
    for (int i = 0; i < LP__N; i++) {
        gl_kprobe_hist_remove(LRU_GROUP, lp[i].event);
    }
    gl_kretprobe_hist_remove(LRU_GROUP, RET_EVENT);
    gl_kprobe_stack_remove(LRU_GROUP, STACK_EVENT);
}

static void lru_tracing_start(void)
{
    const char *want[LP__N];
    char got[LP__N][96];
    int err;

    lru_tracing_stop();     /* leftovers of an earlier test in this VM */
    for (int i = 0; i < LP__N; i++) {
        want[i] = lp[i].sym;
    }
    gl_kallsyms_resolve(want, got, LP__N);
    for (int i = 0; i < LP__N; i++) {
        snprintf(lp[i].resolved, sizeof(lp[i].resolved), "%.95s", got[i]);
        err = got[i][0] ? gl_kprobe_hist_add(LRU_GROUP, lp[i].event, got[i]) : -ENOENT;
        lp[i].ok = !err;
        if (err) {
            ktap_diag("lru kprobe %s not installed: %s", lp[i].sym, strerror(-err));
        }
    }
    err = got[LP_WB_ENTRY][0] ?
          gl_kretprobe_hist_add(LRU_GROUP, RET_EVENT, got[LP_WB_ENTRY]) : -ENOENT;
    lw.ret_ok = !err;
    if (err) {
        ktap_diag("lru kretprobe %s not installed: %s", lp[LP_WB_ENTRY].sym, strerror(-err));
    }
    err = gl_kprobe_stack_add(LRU_GROUP, STACK_EVENT, STACK_SYM);
    lw.stack_ok = !err;
    if (err) {
        ktap_diag("lru stack kprobe %s not installed: %s", STACK_SYM, strerror(-err));
    }
    lw.inlined = !got[LP_WB_ENTRY][0];
    if (lw.inlined) {
        ktap_diag("lru %s is not a symbol of this kernel (inlined): outcomes from zswpwb and "
                  "debugfs zswap/reject_reclaim_fail, without the errno split",
                  lp[LP_WB_ENTRY].sym);
    }
    lw.reclaim_fail0 = reclaim_fail_count();
}

/* The kretprobe's miss count: "faultline/fl_lru_wb_ret HITS MISSES". */
static long long kretprobe_missed(void)
{
    FILE *f = fopen(GL_TRACEFS "/kprobe_profile", "r");
    char name[128];
    long long hits, missed, ret = -1;

    if (!f) {
        return -1;
    }
    while (fscanf(f, "%127s %lld %lld", name, &hits, &missed) == 3) {
        if (!strcmp(name, LRU_GROUP "/" RET_EVENT) || !strcmp(name, RET_EVENT)) {
            ret = missed;
        }
    }
    fclose(f);
    return ret;
}

static void lru_tracing_collect(void)
{
    char path[256];

    for (int i = 0; i < LP__N; i++) {
        gl_trace_event_path(path, sizeof(path), LRU_GROUP, lp[i].event, "hist");
        if (lp[i].ok && gl_hist_read(path, &lp[i].hist) < 0) {
            lp[i].ok = 0;
        }
    }
    lw.reclaim_fail1 = reclaim_fail_count();
    if (lw.stack_ok) {
        gl_trace_event_path(path, sizeof(path), LRU_GROUP, STACK_EVENT, "hist");
        lw.stack_ok = gl_hist_read_frames(path, wb_walk_frame, 1, &lw.wb_zswap, NULL) == 0 &&
                      gl_hist_read_frames(path, wb_frames, WB__N, lw.wb_by, NULL) == 0;
    }
    if (lw.ret_ok) {
        gl_trace_event_path(path, sizeof(path), LRU_GROUP, RET_EVENT, "hist");
        lw.ret_ok = gl_hist_read_ret(path, &lw.ret) == 0;
        lw.nmissed = kretprobe_missed();
    }
    lru_tracing_stop();
}

/* ------------------------------------------------------------ the workload */

struct worker {
    const struct options *o;
    uint8_t *mem;
    uint8_t *zeroed;            /* per chunk: discarded with MADV_DONTNEED */
    size_t chunks;
    volatile int stop;
    struct verify_result vr;    /* refaults of intact chunks */
    long long refaulted, discarded;
};

/* Random chunks: 3 of 4 refaulted and verified, 1 of 4 discarded (once). */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct options *o = w->o;
    const struct pattern pat = { o->seed, o->compressible };
    uint64_t x = o->seed * 2654435761u + 1;

    while (!w->stop) {
        size_t c;

        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        c = (x >> 33) % w->chunks;
        if (w->zeroed[c]) {
            continue;
        }
        if ((x >> 20) % 4 == 0) {
            madvise(w->mem + c * LRU_CHUNK * GL_PAGE_SIZE, LRU_CHUNK * GL_PAGE_SIZE,
                    MADV_DONTNEED);
            w->zeroed[c] = 1;
            w->discarded++;
        } else {
            verify_pages(&pat, w->mem, c * LRU_CHUNK, LRU_CHUNK, c * LRU_CHUNK, NULL, NULL,
                         0, &w->vr);
            w->refaulted++;
        }
    }
    return NULL;
}

static size_t zero_mismatches(const uint8_t *p, size_t len)
{
    size_t bad = 0;

    for (size_t off = 0; off < len; off += GL_PAGE_SIZE) {
        for (size_t i = 0; i < GL_PAGE_SIZE; i++) {
            if (p[off + i]) {
                bad++;
                break;
            }
        }
    }
    return bad;
}

void lru_run(const struct options *o, struct run *R)
{
    const struct pattern pat = { o->seed, o->compressible };
    size_t chunks = o->mem / GL_PAGE_SIZE / LRU_CHUNK, pages = chunks * LRU_CHUNK;
    struct worker w = { .o = o, .chunks = chunks };
    struct verify_result vr = { 0 };
    long long ps0, pt0;
    pthread_t tid;
    char val[32];

    if (!chunks) {
        ktap_bail("--mem too small for one %d-page chunk", LRU_CHUNK);
    }
    w.mem = map_pattern(pages * GL_PAGE_SIZE);
    w.zeroed = calloc(chunks, 1);
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", "N");
    R->t0 = gl_now_s();
    gl_vmstat_read(&R->v0);
    pattern_fill(&pat, w.mem, pages);
    gl_memcg_reclaim_all(o->cgroup);
    gl_vmstat_read(&R->v_fill);
    ktap_check(1, ktap_name("filled %zu pages and reclaimed into zswap", pages),
               "memory.zswap.current %lld, zswpwb %lld",
               gl_memcg_read(o->cgroup, "memory.zswap.current"),
               gl_vmstat_delta(&R->v0, &R->v_fill, VM_ZSWPWB));

    lru_tracing_start();
    gl_vmstat_read(&R->v_wb0);
    ps0 = gl_memcg_stat(o->cgroup, "pgscan");
    pt0 = gl_memcg_stat(o->cgroup, "pgsteal");
    /* As the writeback mode drains zswap: the shrinker on, and memory.zswap.max 0
     * so the memcg's entries are over its limit and get written back. */
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", R->env.wb_shrinker);
    gl_memcg_set(o->cgroup, "memory.zswap.max", "0");
    gl_thread_create_traced(&tid, worker_main, &w);
    for (int r = 0; r < o->wb_rounds; r++) {
        for (int i = 0; i < o->wb_reclaims; i++) {
            long long cur = gl_memcg_read(o->cgroup, "memory.current");
            struct gl_vmstat a, b;

            snprintf(val, sizeof(val), "%lld", cur > 4096 ? cur : 4096);
            gl_vmstat_read(&a);
            gl_memcg_write(o->cgroup, "memory.reclaim", val);
            gl_vmstat_read(&b);
            R->wb_calls++;
            ktap_diag("wb round %d call %d zswpwb %lld", r + 1, i + 1,
                      gl_vmstat_delta(&a, &b, VM_ZSWPWB));
        }
    }
    w.stop = 1;
    pthread_join(tid, NULL);
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", "N");
    zswap_max_restore(o);
    gl_vmstat_read(&R->v_wb1);
    lru_tracing_collect();
    R->pgscan_wb = gl_memcg_stat(o->cgroup, "pgscan") - ps0;
    R->pgsteal_wb = gl_memcg_stat(o->cgroup, "pgsteal") - pt0;
    R->swapcached_wb = swapcached_pages(o, &R->v_wb1);
    lw.refaulted = w.refaulted;
    lw.discarded = w.discarded;
    run_count_verify(R, &w.vr, 0);
    ktap_check(!w.vr.bad && !w.vr.sigbus,
               "writeback phase: chunks refaulted during writeback intact",
               "%lld chunks refaulted, %zu bad, %zu SIGBUS; %lld chunks discarded",
               w.refaulted, w.vr.bad, w.vr.sigbus, w.discarded);

    /* Every chunk once more: the pattern, or zeroes where discarded. */
    for (size_t c = 0; c < chunks; c++) {
        uint8_t *p = w.mem + c * LRU_CHUNK * GL_PAGE_SIZE;

        if (w.zeroed[c]) {
            lw.zero_bad += zero_mismatches(p, LRU_CHUNK * GL_PAGE_SIZE);
        } else {
            verify_pages(&pat, w.mem, c * LRU_CHUNK, LRU_CHUNK, c * LRU_CHUNK, NULL, NULL,
                         0, &vr);
        }
    }
    run_count_verify(R, &vr, 0);
    run_count_verify(R, &(struct verify_result){ .bad = lw.zero_bad }, 0);
    R->verified += pages - vr.bad - vr.sigbus - lw.zero_bad;
    ktap_check(!vr.bad && !vr.sigbus && !lw.zero_bad,
               ktap_name("final verify of %zu pages", pages),
               "%zu bad, %zu SIGBUS, %zu discarded pages not zero", vr.bad, vr.sigbus,
               lw.zero_bad);
    gl_vmstat_read(&R->v_end);
    R->t1 = gl_now_s();
    free(w.zeroed);
    munmap(w.mem, pages * GL_PAGE_SIZE);
}

/* The fill, the writeback phase and the final verify, before the checks. */
int lru_planned(const struct options *o)
{
    return 3;
}

/* ------------------------------------------------------------ checks and metrics */

static long long lp_hits(int i)
{
    return lp[i].ok ? lp[i].hist.sum : -1;
}

/* Failed writebacks when the function is inlined (-1: unknown). */
static long long inlined_failed(void)
{
    if (!lw.inlined || lw.reclaim_fail0 < 0 || lw.reclaim_fail1 < 0) {
        return -1;
    }
    return lw.reclaim_fail1 - lw.reclaim_fail0;
}

/* zswap_writeback_entry calls: probed, else successes + failures (-1: unknown). */
static long long wb_calls(const struct run *R)
{
    long long zswpwb = gl_vmstat_delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB);

    if (lp[LP_WB_ENTRY].ok) {
        return lp_hits(LP_WB_ENTRY);
    }
    return inlined_failed() < 0 ? -1 : zswpwb + inlined_failed();
}

/* Successful writebacks of one caller (-1: no stack-keyed kprobe). */
static long long by_caller(int who)
{
    return lw.stack_ok ? lw.wb_by[who] : -1;
}

static void lru_metrics(const struct options *o, const struct run *R)
{
    long long ok = gl_ret_hist_count(&lw.ret, 0);
    long long enomem = gl_ret_hist_count(&lw.ret, -ENOMEM);
    long long eexist = gl_ret_hist_count(&lw.ret, -EEXIST);
    long long zswpwb = gl_vmstat_delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB);

    ktap_diag("metrics: lru, the writeback phase (zswpwb, pgrotated, pgscan below)");
    for (int i = 0; i < lw.ret.n; i++) {
        ktap_diag("lru zswap_writeback_entry returned %lld: %lld times", lw.ret.ret[i],
                  lw.ret.count[i]);
    }
    if (!lw.ret_ok && inlined_failed() >= 0) {
        ok = zswpwb;
    }
    ktap_diag("zswap_wb_calls %lld", lw.ret_ok ? lw.ret.total : wb_calls(R));
    ktap_diag("zswap_wb_ok %lld", lw.ret_ok || inlined_failed() >= 0 ? ok : -1);
    ktap_diag("zswap_wb_failed %lld", lw.ret_ok ? lw.ret.total - ok : inlined_failed());
    ktap_diag("zswap_wb_enomem %lld", lw.ret_ok ? enomem : -1);
    ktap_diag("zswap_wb_eexist %lld", lw.ret_ok ? eexist : -1);
    ktap_diag("zswap_wb_other %lld", lw.ret_ok ? lw.ret.total - ok - enomem - eexist : -1);
    ktap_diag("zswap_wb_kretprobe_missed %lld", lw.nmissed);
    ktap_diag("zswap_wb_by_shrinker %lld", by_caller(WB_SHRINKER));
    ktap_diag("zswap_wb_by_store %lld", by_caller(WB_STORE));
    ktap_diag("zswap_wb_by_pool_limit %lld", by_caller(WB_POOL));
    ktap_diag("zswap_wb_by_unknown %lld", lw.stack_ok ? lw.wb_zswap - lw.wb_by[WB_SHRINKER] -
              lw.wb_by[WB_STORE] - lw.wb_by[WB_POOL] : -1);
    ktap_diag("zswap_lru_walked %lld", lp_hits(LP_WALK));
    ktap_diag("zswap_shrinker_scans %lld", lp_hits(LP_SCAN));
    ktap_diag("lru chunks_refaulted %lld", lw.refaulted);
    ktap_diag("lru chunks_discarded %lld", lw.discarded);
}

/*
 * The outcome histogram saw every call, once: returns = entries, no misses;
 * and the shrinker's calls are among them (it wrote back at least once): a
 * phase whose writebacks were all a store's or the pool limit's measured
 * nothing of the shrinker's walk.
 */
static enum check_result lru_counted(const struct options *o, const struct run *R,
                                     struct check_out *out)
{
    long long entries = lp_hits(LP_WB_ENTRY);

    check_describe(out, "zswap_writeback_entry returns counted", "%lld returns for %lld calls, "
                   "%lld missed; by the shrinker %lld written back", lw.ret_ok ? lw.ret.total : -1,
                   entries, lw.nmissed, by_caller(WB_SHRINKER));
    if (lw.inlined) {
        /* Nothing to probe; "shrinker wrote back" still judges from zswpwb. */
        snprintf(out->reason, sizeof(out->reason), "inlined in this kernel: no kretprobe");
        return CHECK_SKIP;
    }
    return lw.ret_ok && entries > 0 && lw.ret.total == entries && lw.nmissed == 0 &&
           !lw.ret.dropped && by_caller(WB_SHRINKER) > 0 ? CHECK_PASS : CHECK_FAIL;
}

/*
 * Each return 0 is one written-back entry: their number is zswpwb; and the
 * shrinker's own writebacks (not a store's over memory.zswap.max, nor the
 * pool limit's) are more than none.
 */
static enum check_result lru_ok_is_zswpwb(const struct options *o, const struct run *R,
                                          struct check_out *out)
{
    long long zswpwb = gl_vmstat_delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB);
    long long ok = gl_ret_hist_count(&lw.ret, 0), shrinker = by_caller(WB_SHRINKER);
    char by[128];

    snprintf(by, sizeof(by), "by the shrinker %lld > 0 (by stores %lld, by the pool limit %lld)",
             shrinker, by_caller(WB_STORE), by_caller(WB_POOL));
    if (lw.inlined) {
        check_describe(out, "shrinker wrote back", "zswpwb %lld > 0, reject_reclaim_fail +%lld "
                       "(zswap_writeback_entry inlined); %s", zswpwb, inlined_failed(), by);
        return zswpwb > 0 && inlined_failed() >= 0 && shrinker > 0 ? CHECK_PASS : CHECK_FAIL;
    }
    check_describe(out, "shrinker wrote back", "returns 0: %lld == zswpwb %lld; %s", ok, zswpwb,
                   by);
    return lw.ret_ok && zswpwb > 0 && ok == zswpwb && shrinker > 0 ? CHECK_PASS : CHECK_FAIL;
}

/* Every writeback attempt comes from the LRU walk, which scans at least as many. */
static enum check_result lru_walked(const struct options *o, const struct run *R,
                                    struct check_out *out)
{
    long long walked = lp_hits(LP_WALK), calls = wb_calls(R);

    check_describe(out, "the shrinker walked the zswap LRU", "shrink_memcg_cb %lld >= "
                   "zswap_writeback_entry %lld, zswap_shrinker_scan %lld > 0", walked, calls,
                   lp_hits(LP_SCAN));
    return walked > 0 && walked >= calls && lp_hits(LP_SCAN) > 0 ? CHECK_PASS : CHECK_FAIL;
}

static const struct check lru_metrics_check = { .report = lru_metrics };
static const struct check lru_counted_check = { .fn = lru_counted, .zswpwb = true };
static const struct check lru_ok_check = { .fn = lru_ok_is_zswpwb, .zswpwb = true };
static const struct check lru_walked_check = { .fn = lru_walked };

const struct check *const lru_checks[] = {
    &check_pages, &lru_metrics_check, &lru_counted_check, &lru_ok_check, &lru_walked_check,
    NULL,
};
