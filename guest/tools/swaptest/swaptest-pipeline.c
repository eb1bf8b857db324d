// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's swap pipeline (every mode but race): fill the seeded pattern,
 * reclaim it, force zswap writeback (optionally with the fault armed),
 * refault and verify every page, SIGBUS-safe.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ forced zswap writeback */

/*
 * Force zswap writeback. shrinker (default): with the pattern stored in zswap,
 * repeated memory.reclaim finds no LRU pages left and runs the memcg-aware
 * zswap shrinker (shrinker_enabled), which writes entries back (zswpwb); then
 * fault everything back in and store it again for the next round.
 * limit (test_zswap.c's recipe): lower memory.zswap.max to half of
 * memory.zswap.current, fault everything in and reclaim again. On 6.12 a
 * store over the memcg limit is rejected and goes to the device directly
 * (pswpout without zswpwb), so this mostly measures direct pageout.
 *
 * --fill-writeback off (writeback mode): nothing is written back before this
 * phase (zswap_quiet() during the fill and the refills between rounds), and
 * each round drains zswap: shrinker on, memory.zswap.max 0, memory.reclaim
 * until memory.stat zswapped is 0 or --wb-reclaims calls were made. Without
 * this, a kernel that frees written-back folios at once (dropbehind) lets the
 * fill's own reclaim write everything back and the writeback phase sees
 * nothing.
 */
/* No zswap writeback: shrinker off, memory.zswap.max unlimited. memory.zswap.
 * writeback stays as configured: 6.12+ keeps pages zswap rejects in memory
 * when it is 0, and 7.2 stores incompressible pages as-is only when it is 1. */
static void zswap_quiet(const struct options *o)
{
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", "N");
    gl_memcg_set(o->cgroup, "memory.zswap.max", "max");
}

static void zswap_drain_start(const struct options *o, const struct run *R)
{
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", R->env.wb_shrinker);
    gl_memcg_set(o->cgroup, "memory.zswap.max", "0");
}

static void force_writeback(const struct options *o, struct run *R, uint8_t *mem, size_t pages,
                            struct verify_result *vr, struct slot_map *before_last)
{
    const struct pattern pat = { o->seed, o->compressible };
    char val[32];

    gl_vmstat_read(&R->v_last0);
    for (int r = 0; r < o->wb_rounds; r++) {
        /* What is on the device before the round: kept as @before_last when
         * the round writes back (a kernel may drain zswap in the first
         * round and leave the later ones nothing to write). */
        struct slot_map before_round = { 0 };
        struct gl_vmstat round0, round1;

        if (o->wb_refaults) {
            slots_scan(&pat, mem, pages, &before_round);
        }
        gl_vmstat_read(&round0);
        if (o->wb_limit) {
            long long zc = gl_memcg_read(o->cgroup, "memory.zswap.current");

            snprintf(val, sizeof(val), "%lld", zc > 8192 ? zc / 2 : 4096);
            gl_memcg_set(o->cgroup, "memory.zswap.max", val);
        } else {
            if (!o->fill_writeback) {
                zswap_drain_start(o, R);
            }
            for (int i = 0; i < o->wb_reclaims; i++) {
                long long cur = gl_memcg_read(o->cgroup, "memory.current");
                struct gl_vmstat a, b;

                if (!o->fill_writeback && gl_memcg_stat(o->cgroup, "zswapped") == 0) {
                    break;  /* drained */
                }
                snprintf(val, sizeof(val), "%lld", cur > 4096 ? cur : 4096);
                gl_vmstat_read(&a);
                gl_memcg_write(o->cgroup, "memory.reclaim", val);
                gl_vmstat_read(&b);
                R->wb_calls++;
                if (r + 1 == o->wb_rounds) {
                    R->v_last0 = a;
                    R->last_call_zswpwb = gl_vmstat_delta(&a, &b, VM_ZSWPWB);
                }
                ktap_diag("wb round %d call %d zswpwb %lld", r + 1, i + 1,
                          gl_vmstat_delta(&a, &b, VM_ZSWPWB));
            }
        }
        gl_vmstat_read(&round1);
        if (o->wb_refaults && (gl_vmstat_delta(&round0, &round1, VM_ZSWPWB) > 0 ||
                               !before_last->ok)) {
            slots_free(before_last);
            *before_last = before_round;
        } else {
            slots_free(&before_round);
        }
        if (r + 1 < o->wb_rounds || o->wb_limit) {
            verify_pages(&pat, mem, 0, pages, 0, NULL, NULL, 0, vr);
            if (!o->fill_writeback) {
                zswap_quiet(o);
            }
            gl_memcg_reclaim_all(o->cgroup);
        }
    }
    zswap_max_restore(o);
}

/* ------------------------------------------------------------ the swap pipeline */

/*
 * refault: the pages the last writeback round that wrote any back wrote back
 * (on the device now, not before that round) are evicted from swap cache (clean: reclaim keeps
 * their shadow, shrinker off so nothing else is written back), then touched
 * one by one with page-cluster 0 (no readahead): each must refault against
 * its shadow. Refaults of pages that never left zswap do not count here.
 */
static void refault_written_back(const struct options *o, struct run *R, uint8_t *mem,
                                 size_t pages, struct slot_map *before)
{
    const struct pattern pat = { o->seed, o->compressible };
    struct slot_map now;
    struct verify_result vr = { 0 };
    uint8_t *skip = malloc(pages);
    char old_cluster[16] = "3";
    long long r0, r1;

    zswap_quiet(o);
    gl_memcg_reclaim_all(o->cgroup);
    slots_scan(&pat, mem, pages, &now);
    for (size_t p = 0; p < pages; p++) {
        int marked = before->ok && now.ok && now.swapped[p] && now.on_disk[p] &&
                     !before->on_disk[p];

        R->wb_marked_cached += marked && now.cached[p];
        marked = marked && !now.cached[p];
        R->wb_marked += marked;
        skip[p] = !marked;
    }
    gl_read_file("/proc/sys/vm/page-cluster", old_cluster, sizeof(old_cluster));
    gl_write_file("/proc/sys/vm/page-cluster", "0");
    r0 = gl_memcg_stat(o->cgroup, "workingset_refault_anon");
    verify_pages(&pat, mem, 0, pages, 0, NULL, skip, 0, &vr);
    r1 = gl_memcg_stat(o->cgroup, "workingset_refault_anon");
    gl_write_file("/proc/sys/vm/page-cluster", old_cluster);
    zswap_max_restore(o);
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", R->env.wb_shrinker);
    R->wb_refaults = r1 - r0;
    run_count_verify(R, &vr, 0);
    ktap_diag("refault slots swapped %zu on_disk %zu (before the last round that wrote back %zu) "
              "cached %zu",
              now.n_swapped, now.n_on_disk, before->n_on_disk, now.n_cached);
    ktap_diag("refault wb_marked %lld", R->wb_marked);
    ktap_diag("refault wb_marked_still_cached %lld", R->wb_marked_cached);
    ktap_diag("refault wb_refaults %lld", R->wb_refaults);
    slots_free(&now);
    free(skip);
}

/*
 * heal, once disarmed: the folios whose write failed are the swapped-out
 * pages still in swap cache whose slot does not hold their pattern (before
 * arming, only direct pageouts reached the device, and those slots match).
 * Reclaim must write each of them (to zswap or the device): a redirtied
 * folio that reclaim cannot write stays in swap cache. One pass need not
 * free them all (beside another VM one left 8 of 52: one still under
 * writeback to the device, or not reached before the pass met its target),
 * so reclaim is driven until every one has left swap cache, at most
 * HEAL_PASSES passes and no new pass HEAL_SECONDS after the first.
 */
#define HEAL_PASSES 60
#define HEAL_SECONDS 60

/* /proc/vmstat nr_writeback: pages under writeback now (-1: unreadable). */
static long long nr_writeback(void)
{
    FILE *f = fopen("/proc/vmstat", "r");
    char name[64];
    long long v, ret = -1;

    while (f && fscanf(f, "%63s %lld", name, &v) == 2) {
        if (!strcmp(name, "nr_writeback")) {
            ret = v;
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return ret;
}

/*
 * One pass: memory.reclaim of all that is charged, however little (what is
 * left after the first pass is a few folios, under gl_memcg_reclaim_all's
 * 1 MiB floor: beside another VM one folio stayed through 6 passes that
 * did not reclaim; another time 3 stayed through 8 passes in 6 s, likely
 * writes a loaded host had not completed yet: the bound is time, not
 * passes). EAGAIN only says less was reclaimed: the scan judges.
 */
static void heal_reclaim_pass(const struct options *o)
{
    long long cur = gl_memcg_read(o->cgroup, "memory.current");
    char val[32];

    snprintf(val, sizeof(val), "%lld", cur > 4096 ? cur : 4096);
    gl_memcg_write(o->cgroup, "memory.reclaim", val);
}

static void heal_redirtied(const struct options *o, struct run *R, uint8_t *mem, size_t pages)
{
    const struct pattern pat = { o->seed, o->compressible };
    struct slot_map a, b;
    struct heal_track t;
    double t0;

    slots_scan(&pat, mem, pages, &a);
    heal_track_start(&t, &a);
    t0 = gl_now_s();
    do {
        heal_reclaim_pass(o);
        gl_sleep_ms(o->settle_ms);
        R->heal_passes++;
        slots_scan_cache(mem, pages, &b);
        heal_track_scan(&t, &b);
        ktap_diag("heal pass %d redirtied_written %lld memory.current %lld nr_writeback %lld",
                  R->heal_passes, t.n_written, gl_memcg_read(o->cgroup, "memory.current"),
                  nr_writeback());
        slots_free(&b);
    } while (t.n_written < t.n_redirtied && R->heal_passes < HEAL_PASSES &&
             gl_now_s() - t0 < HEAL_SECONDS);
    ktap_diag("heal reclaim_passes %d (%.1f s)", R->heal_passes, gl_now_s() - t0);
    slots_scan(&pat, mem, pages, &b);
    heal_track_scan(&t, &b);
    R->redirtied = t.n_redirtied;
    R->redirtied_written = t.n_written;
    for (size_t p = 0; b.ok && t.redirtied && p < pages; p++) {
        R->redirtied_on_disk += t.redirtied[p] && b.swapped[p] && b.on_disk[p];
    }
    ktap_diag("heal slots after disarm swapped %zu cached %zu on_disk %zu", a.n_swapped,
              a.n_cached, a.n_on_disk);
    ktap_diag("heal redirtied %lld", R->redirtied);
    ktap_diag("heal redirtied_written %lld", R->redirtied_written);
    ktap_diag("heal redirtied_on_disk %lld", R->redirtied_on_disk);
    heal_track_free(&t);
    slots_free(&a);
    slots_free(&b);
}

/*
 * read-error: a child touches every page while the fault is armed; its
 * verify result and the pages that raised SIGBUS come back in shared memory.
 */
struct child_verify {
    struct verify_result vr;
    uint8_t busmap[];           /* one byte per page: SIGBUS in the child */
};

static void refault_in_child(const struct options *o, uint8_t *mem, size_t pages, struct run *R)
{
    const struct pattern pat = { o->seed, o->compressible };
    size_t shared_len = sizeof(struct child_verify) + pages;
    struct child_verify *cv = mmap(NULL, shared_len, PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct verify_result vp = { 0 };
    uint8_t *busmap;
    pid_t pid;
    int st = 0;

    if (cv == MAP_FAILED) {
        ktap_bail("mmap busmap failed");
    }
    /* Faulted in by the (locked) parent now, so it is never swapped: the
     * parent reads it while the fault is still armed. */
    memset(cv, 0, shared_len);
    busmap = cv->busmap;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        /* Memory locks are not inherited: the child's own stack and heap
         * must not swap while reads fail either. */
        lock_own_memory();
        pattern_unlock(mem, pages * GL_PAGE_SIZE);
        verify_pages(&pat, mem, 0, pages, 0, busmap, NULL, 0, &cv->vr);
        /* exit code: 0 all fine, 1 data mismatch (never acceptable) */
        _exit(cv->vr.bad ? 1 : 0);
    }
    waitpid(pid, &st, 0);
    for (size_t p = 0; p < pages; p++) {
        R->sigbus_child += busmap[p];
    }
    /* Bad data in the child is a data error; its SIGBUS is the point. */
    run_count_verify(R, &cv->vr, 1);
    ktap_check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
               ktap_name("child refaulted %zu pages with the fault armed: no bad data", pages),
               "%zu SIGBUS, %zu bad%s", R->sigbus_child, cv->vr.bad,
               WIFSIGNALED(st) ? " (child killed by a signal)" : "");
    ktap_diag("sigbus_pages_child %zu", R->sigbus_child);
    disarm(o, "after the child's refault");
    /* Disarmed, the errors were transient: the parent must read every page,
     * those that failed in the child included (a kernel that leaves a failed
     * page unreadable fails here); unless the device is lost (--device-lost). */
    uint8_t *pbus = calloc(pages, 1);

    verify_pages(&pat, mem, 0, pages, 0, pbus, NULL, 0, &vp);
    size_t unexpected = 0;

    for (size_t p = 0; p < pages; p++) {
        unexpected += pbus[p] && !busmap[p];
    }
    R->sigbus_parent = vp.sigbus;
    /* With the device lost, a parent SIGBUS is the expected outcome. */
    run_count_verify(R, &vp, o->device_lost);
    R->verified += vp.ok;
    ktap_diag("sigbus_pages_parent %zu", vp.sigbus);
    if (o->device_lost) {
        /* The device is gone: a page verifies or its reader gets SIGBUS
         * (also one the child read from the swap cache, since reclaimed). */
        ktap_diag("sigbus_pages_parent_not_child %zu", unexpected);
        ktap_check(!vp.bad && vp.ok + vp.sigbus == pages,
                   ktap_name("device lost: the parent read all %zu pages", pages),
                   "%zu match, %zu SIGBUS, %zu bad (%zu SIGBUS not seen by the child)",
                   vp.ok, vp.sigbus, vp.bad, unexpected);
    } else {
        R->sigbus_unexpected += unexpected;
        ktap_check(!vp.bad && !vp.sigbus,
                   ktap_name("after disarm the parent verified all %zu pages", pages),
                   "%zu match, %zu bad, %zu SIGBUS (%zu of them not seen by the child)",
                   vp.ok, vp.bad, vp.sigbus, unexpected);
    }
    if (o->expect_sigbus) {
        ktap_check(R->sigbus_child > 0, "the read error reached the task as SIGBUS",
                   "%zu SIGBUS pages in the child", R->sigbus_child);
    }
    free(pbus);
    munmap(cv, shared_len);
}

void pipeline(const struct options *o, struct run *R)
{
    const struct pattern pat = { o->seed, o->compressible };
    size_t pages = o->mem / GL_PAGE_SIZE;
    uint8_t *mem;
    struct verify_result vr;
    struct slot_map before_last = { 0 };
    long long ps0, pt0;
    int zswap_on;
    char buf[8];

    /* map_pattern() leaves only the pattern swappable (lock_own_memory()),
     * which --device-lost needs too: our own pages would be lost with it. */
    mem = map_pattern(o->mem);

    zswap_on = gl_read_file(ZSWAP_PARAM "enabled", buf, sizeof(buf)) == 0 && buf[0] == 'Y';
    if (zswap_on && !o->fill_writeback) {
        zswap_quiet(o);
        ktap_diag("phase fill: zswap shrinker off, memory.zswap.max max (no writeback before "
                  "the writeback phase)");
    }
    R->t0 = gl_now_s();
    gl_vmstat_read(&R->v0);
    pattern_fill(&pat, mem, pages);
    ktap_diag("phase fill memory.current %lld", gl_memcg_read(o->cgroup, "memory.current"));
    gl_memcg_reclaim_all(o->cgroup);
    gl_vmstat_read(&R->v_fill);
    ktap_check(1, ktap_name("filled %zu pages and reclaimed", pages), "memory.current %lld",
               gl_memcg_read(o->cgroup, "memory.current"));
    ktap_diag("phase reclaimed memory.zswap.current %lld",
              gl_memcg_read(o->cgroup, "memory.zswap.current"));

    if (o->arm_at == ARM_WRITEBACK) {
        arm(o, "before forcing writeback");
    }
    gl_vmstat_read(&R->v_wb0);
    ps0 = gl_memcg_stat(o->cgroup, "pgscan");
    pt0 = gl_memcg_stat(o->cgroup, "pgsteal");
    memset(&R->vr_wb, 0, sizeof(R->vr_wb));
    if (zswap_on && o->wb_rounds > 0) {
        force_writeback(o, R, mem, pages, &R->vr_wb, &before_last);
    } else {
        /* No zswap: fault everything in and reclaim again: a second swap-out. */
        for (int r = 0; r < (o->wb_rounds > 0 ? o->wb_rounds : 1); r++) {
            verify_pages(&pat, mem, 0, pages, 0, NULL, NULL, 0, &R->vr_wb);
            gl_memcg_reclaim_all(o->cgroup);
        }
    }
    if (o->arm_at == ARM_WRITEBACK) {
        disarm(o, "after forced writeback");
    }
    gl_sleep_ms(o->settle_ms);
    gl_vmstat_read(&R->v_wb1);
    R->swapcached_wb = swapcached_pages(o, &R->v_wb1);
    R->pgscan_wb = gl_memcg_stat(o->cgroup, "pgscan") - ps0;
    R->pgsteal_wb = gl_memcg_stat(o->cgroup, "pgsteal") - pt0;
    run_count_verify(R, &R->vr_wb, 0);
    ktap_check(!R->vr_wb.bad && !R->vr_wb.sigbus,
               "writeback phase: pattern intact while refaulting", "%zu bad, %zu SIGBUS",
               R->vr_wb.bad, R->vr_wb.sigbus);
    gl_vmstat_report("phase wb vmstat", &R->v_wb0, &R->v_wb1);
    report_memstat(o, "phase wb memstat");
    ktap_diag("phase wb nr_swapcached_now %lld", R->v_wb1.v[VM_NR_SWAPCACHED]);
    if (o->wb_refaults) {
        refault_written_back(o, R, mem, pages, &before_last);
        slots_free(&before_last);
    }
    if (o->heal_slots) {
        heal_redirtied(o, R, mem, pages);
    }

    if (o->arm_at == ARM_REFAULT) {
        arm(o, "before the refault");
        refault_in_child(o, mem, pages, R);
    }
    for (int r = 1; r <= o->rounds; r++) {
        struct gl_vmstat a, b;

        if (o->arm_at == ARM_REFAULT && r == 1) {
            continue;   /* round 1 was the child's */
        }
        gl_vmstat_read(&a);
        memset(&vr, 0, sizeof(vr));
        verify_pages(&pat, mem, 0, pages, 0, NULL, NULL, 0, &vr);
        run_count_verify(R, &vr, 0);
        R->verified += vr.ok;
        ktap_check(!vr.bad && !vr.sigbus, ktap_name("round %d: %zu pages verified", r, pages),
                   "%zu bad, %zu SIGBUS%s", vr.bad, vr.sigbus, vr.bad ? " (data lost)" : "");
        if (vr.bad) {
            ktap_diag("first bad page %zu", vr.first_bad);
        }
        gl_memcg_reclaim_all(o->cgroup);
        gl_vmstat_read(&b);
        ktap_diag("round %d vmstat pswpout %lld", r, gl_vmstat_delta(&a, &b, VM_PSWPOUT));
        ktap_diag("round %d vmstat workingset_refault_anon %lld", r,
                  gl_vmstat_delta(&a, &b, VM_WS_REFAULT_ANON));
    }
    gl_vmstat_read(&R->v_end);
    R->t1 = gl_now_s();
    R->heal_pswpout = gl_vmstat_delta(&R->v_wb1, &R->v_end, VM_PSWPOUT);
    munmap(mem, o->mem);
}

/* The KTAP results pipeline() reports with these options. */
int pipeline_planned(const struct options *o)
{
    int armed = o->arm_state >= 0, n = 2;    /* filled; writeback phase intact */

    if (o->arm_at == ARM_WRITEBACK) {
        n += armed + (armed && o->disarm);
    }
    if (o->arm_at == ARM_REFAULT) {
        n += armed + 1 + (armed && o->disarm) + 1 + !!o->expect_sigbus;
    }
    return n + o->rounds - (o->arm_at == ARM_REFAULT);
}

