// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest readahead: how much swap readahead a sequential refault does on
 * this device, page-cluster and zswap setting (seed "mm: bypass swap
 * readahead for zswap" v3, which measures swap_ra and swap_ra_hit).
 *
 * Fill the pattern, reclaim it (into zswap with --zswap on: shrinker off,
 * so nothing is written back and every refault is a zswap load; to the
 * device with --zswap off), then read every page in address order, which
 * grows the VMA readahead window to 1 << page-cluster. The counters of the
 * refault passes are the metrics `# readahead pcN zswap|device NAME VALUE`
 * (the tag names the setup, so several setups in one scenario stay apart).
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define PAGE_CLUSTER "/proc/sys/vm/page-cluster"
#define VMA_RA "/sys/kernel/mm/swap/vma_ra_enabled"

/* What the refault passes measured. */
static struct {
    char tag[32];           /* "pc3 zswap", "pc0 device" */
    int zswap_on;
    long long swap_ra, swap_ra_hit, pswpin, zswpin, majflt;
    size_t refaulted;       /* pages read back, all passes */
    double refault_s;
} ra;

static long long majflt_now(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_majflt;
}

void readahead_run(const struct options *o, struct run *R)
{
    const struct pattern pat = { o->seed, o->compressible };
    size_t pages = o->mem / GL_PAGE_SIZE;
    char old_pc[16] = "", buf[16], num[16];
    uint8_t *mem;
    long long pc;

    if (o->page_cluster >= 0 && gl_read_file(PAGE_CLUSTER, old_pc, sizeof(old_pc)) == 0) {
        snprintf(num, sizeof(num), "%d", o->page_cluster);
        gl_write_file(PAGE_CLUSTER, num);
    }
    pc = gl_read_u64(PAGE_CLUSTER);
    ra.zswap_on = gl_read_file(ZSWAP_PARAM "enabled", buf, sizeof(buf)) == 0 && buf[0] == 'Y';
    snprintf(ra.tag, sizeof(ra.tag), "pc%lld %s", pc, ra.zswap_on ? "zswap" : "device");
    ktap_diag("readahead page-cluster %lld vma_ra_enabled %s zswap %d", pc,
              gl_read_file(VMA_RA, buf, sizeof(buf)) == 0 ? buf : "n/a", ra.zswap_on);
    /* Refaults must come from zswap, not from entries written back meanwhile. */
    if (ra.zswap_on) {
        gl_write_file(ZSWAP_PARAM "shrinker_enabled", "N");
    }

    mem = map_pattern(o->mem);
    R->t0 = gl_now_s();
    gl_vmstat_read(&R->v0);
    pattern_fill(&pat, mem, pages);
    for (int r = 1; r <= o->rounds; r++) {
        struct gl_vmstat a, b;
        struct verify_result vr = { 0 };
        long long m0;
        double t;

        gl_memcg_reclaim_all(o->cgroup);
        ktap_diag("round %d reclaimed: memory.current %lld memory.zswap.current %lld", r,
                  gl_memcg_read(o->cgroup, "memory.current"),
                  gl_memcg_read(o->cgroup, "memory.zswap.current"));
        gl_vmstat_read(&a);
        m0 = majflt_now();
        t = gl_now_s();
        verify_pages(&pat, mem, 0, pages, 0, NULL, NULL, 0, &vr);
        ra.refault_s += gl_now_s() - t;
        ra.majflt += majflt_now() - m0;
        gl_vmstat_read(&b);
        ra.swap_ra += gl_vmstat_delta(&a, &b, VM_SWAP_RA);
        ra.swap_ra_hit += gl_vmstat_delta(&a, &b, VM_SWAP_RA_HIT);
        ra.pswpin += gl_vmstat_delta(&a, &b, VM_PSWPIN);
        ra.zswpin += gl_vmstat_delta(&a, &b, VM_ZSWPIN);
        ra.refaulted += pages;
        run_count_verify(R, &vr, 0);
        R->verified += vr.ok;
        ktap_check(!vr.bad && !vr.sigbus,
                   ktap_name("readahead %s: round %d: %zu pages refaulted in order and "
                             "verified", ra.tag, r, pages),
                   "%zu bad, %zu SIGBUS", vr.bad, vr.sigbus);
        if (vr.bad) {
            ktap_diag("first bad page %zu", vr.first_bad);
        }
    }
    gl_vmstat_read(&R->v_end);
    R->t1 = gl_now_s();
    R->v_wb0 = R->v_wb1 = R->v_end;     /* no writeback phase */
    munmap(mem, o->mem);
    if (old_pc[0]) {
        gl_write_file(PAGE_CLUSTER, old_pc);
    }
}

/* One KTAP result per round, before the checks. */
int readahead_planned(const struct options *o)
{
    return o->rounds;
}

/* ------------------------------------------------------------ checks */

static void ra_metrics(const struct options *o, const struct run *R)
{
    long long pct = ra.swap_ra > 0 ? ra.swap_ra_hit * 100 / ra.swap_ra : 0;

    ktap_diag("metrics: readahead %s, the refault passes", ra.tag);
    ktap_diag("readahead %s swap_ra %lld", ra.tag, ra.swap_ra);
    ktap_diag("readahead %s swap_ra_hit %lld", ra.tag, ra.swap_ra_hit);
    ktap_diag("readahead %s swap_ra_hit_pct %lld", ra.tag, pct);
    ktap_diag("readahead %s pswpin %lld", ra.tag, ra.pswpin);
    ktap_diag("readahead %s zswpin %lld", ra.tag, ra.zswpin);
    ktap_diag("readahead %s majfault %lld", ra.tag, ra.majflt);
    ktap_diag("readahead %s refault_ms %lld", ra.tag, (long long)(ra.refault_s * 1000 + 0.5));
    ktap_diag("readahead %s pages_refaulted %zu", ra.tag, ra.refaulted);
}

/*
 * The refaults came from the backend the tag names: with zswap on, zswap
 * loads and no device reads; with zswap off, device reads and no zswap loads
 * (at least half the pages, so a pattern that never left memory fails).
 */
static enum check_result ra_backend(const struct options *o, const struct run *R,
                                    struct check_out *out)
{
    long long from = ra.zswap_on ? ra.zswpin : ra.pswpin;
    long long other = ra.zswap_on ? ra.pswpin : ra.zswpin;

    check_describe(out, ktap_name("readahead %s: refaults from %s", ra.tag,
                                  ra.zswap_on ? "zswap" : "the device"),
                   "%s %lld >= %zu, %s %lld == 0", ra.zswap_on ? "zswpin" : "pswpin", from,
                   ra.refaulted / 2, ra.zswap_on ? "pswpin" : "zswpin", other);
    return from >= (long long)(ra.refaulted / 2) && other == 0 ? CHECK_PASS : CHECK_FAIL;
}

static int ra_expected(const struct options *o)
{
    return o->expect_ra != NULL;
}

/*
 * --expect-ra zero: no page was read ahead (page-cluster 0, or a
 * SWP_SYNCHRONOUS_IO device, whose swapin skips the swap cache); some: the
 * sequential refault read ahead and the read-ahead pages were used.
 */
static enum check_result ra_expect(const struct options *o, const struct run *R,
                                   struct check_out *out)
{
    if (!strcmp(o->expect_ra, "zero")) {
        check_describe(out, ktap_name("readahead %s: no swap readahead", ra.tag),
                       "swap_ra %lld, swap_ra_hit %lld", ra.swap_ra, ra.swap_ra_hit);
        return ra.swap_ra == 0 && ra.swap_ra_hit == 0 ? CHECK_PASS : CHECK_FAIL;
    }
    check_describe(out, ktap_name("readahead %s: sequential refault reads ahead", ra.tag),
                   "swap_ra %lld > 0, swap_ra_hit %lld > 0", ra.swap_ra, ra.swap_ra_hit);
    return ra.swap_ra > 0 && ra.swap_ra_hit > 0 ? CHECK_PASS : CHECK_FAIL;
}

static const struct check ra_metrics_check = { .report = ra_metrics };
static const struct check ra_backend_check = { .fn = ra_backend };
static const struct check ra_expect_check = { .wanted = ra_expected, .fn = ra_expect };

const struct check *const readahead_checks[] = {
    &check_pages, &ra_metrics_check, &ra_backend_check, &ra_expect_check, NULL,
};
