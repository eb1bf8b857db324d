// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest race: worker threads verify, MADV_DONTNEED, refill, munmap/remap
 * and MADV_PAGEOUT the same chunks while memory.zswap.max toggles and
 * memory.reclaim runs, with the fault (e.g. write latency) armed.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

enum { OP_VERIFY, OP_DONTNEED, OP_REFILL, OP_REMAP, OP_PAGEOUT, OP__N };
static const char *const op_names[OP__N] = { "verify", "dontneed", "refill", "remap",
                                             "pageout" };

struct chunk {
    pthread_mutex_t lock;
    uint32_t gen;
    int zero;           /* contents are zero (after DONTNEED / remap) */
};

struct race {
    const struct options *o;
    uint8_t *mem;
    size_t chunks;
    struct chunk *c;
    double deadline;
    volatile int stop;
    long long ops[OP__N];
    struct verify_result vr;    /* the workers' verifies during the race */
    long long remap_fail;
    pthread_mutex_t stat_lock;
};

/* Chunk @c's pattern in its generation @gen. */
static struct pattern chunk_pattern(const struct options *o, size_t c, uint32_t gen)
{
    return (struct pattern){
        .seed = o->seed ^ ((uint64_t)c << 32) ^ ((uint64_t)gen * 0x9e3779b97f4a7c15ULL),
        .compressible = o->compressible,
    };
}

static void chunk_fill(struct race *R, size_t c)
{
    size_t cp = R->o->chunk_pages;
    uint8_t *base = R->mem + c * cp * GL_PAGE_SIZE;
    struct pattern pat;

    R->c[c].gen++;
    pat = chunk_pattern(R->o, c, R->c[c].gen);
    pattern_fill(&pat, base, cp);
    R->c[c].zero = 0;
}

static void chunk_verify(struct race *R, size_t c, struct verify_result *vr)
{
    size_t cp = R->o->chunk_pages;
    uint8_t *base = R->mem + c * cp * GL_PAGE_SIZE;
    struct pattern pat;

    if (R->c[c].zero) {
        static const uint8_t zero[GL_PAGE_SIZE];

        for (size_t i = 0; i < cp; i++) {
            if (memcmp(base + i * GL_PAGE_SIZE, zero, GL_PAGE_SIZE)) {
                vr->bad++;
            } else {
                vr->ok++;
            }
        }
        return;
    }
    pat = chunk_pattern(R->o, c, R->c[c].gen);
    verify_pages(&pat, base, 0, cp, 0, NULL, NULL, 0, vr);
}

static void *race_worker(void *arg)
{
    struct race *R = arg;
    const struct options *o = R->o;
    uint64_t x = (uint64_t)(uintptr_t)pthread_self() ^ o->seed;
    long long ops[OP__N] = { 0 };
    struct verify_result vr = { 0 };
    long long remap_fail = 0;
    size_t clen = (size_t)o->chunk_pages * GL_PAGE_SIZE;

    while (!R->stop && gl_now_s() < R->deadline) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t c = x % R->chunks;
        int op = (x >> 32) % 10;
        uint8_t *base = R->mem + c * clen;

        /* weights: verify 4, dontneed 2, refill 1, remap 1, pageout 2 */
        op = op < 4 ? OP_VERIFY : op < 6 ? OP_DONTNEED : op < 7 ? OP_REFILL :
             op < 8 ? OP_REMAP : OP_PAGEOUT;
        pthread_mutex_lock(&R->c[c].lock);
        switch (op) {
        case OP_VERIFY:
            chunk_verify(R, c, &vr);
            break;
        case OP_DONTNEED:
            chunk_verify(R, c, &vr);
            madvise(base, clen, MADV_DONTNEED);
            R->c[c].zero = 1;
            break;
        case OP_REFILL:
            chunk_fill(R, c);
            break;
        case OP_REMAP:
            munmap(base, clen);
            if (mmap(base, clen, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != base) {
                /* someone took the hole: take it back (MAP_FIXED replaces) */
                remap_fail++;
                mmap(base, clen, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            }
            pattern_unlock(base, clen);
            chunk_fill(R, c);
            break;
        case OP_PAGEOUT:
            madvise(base, clen, MADV_PAGEOUT);
            break;
        }
        pthread_mutex_unlock(&R->c[c].lock);
        ops[op]++;
    }
    pthread_mutex_lock(&R->stat_lock);
    for (int i = 0; i < OP__N; i++) {
        R->ops[i] += ops[i];
    }
    R->vr.bad += vr.bad;
    R->vr.sigbus += vr.sigbus;
    R->remap_fail += remap_fail;
    pthread_mutex_unlock(&R->stat_lock);
    return NULL;
}

/* Toggle memory.zswap.max between tiny and unlimited every 50 ms. */
static void *race_toggler(void *arg)
{
    struct race *R = arg;
    const struct options *o = R->o;
    long long toggles = 0;

    while (!R->stop && gl_now_s() < R->deadline) {
        gl_memcg_set(o->cgroup, "memory.zswap.max", (toggles & 1) ? o->zswap_max : "65536");
        gl_sleep_ms(50);
        toggles++;
    }
    zswap_max_restore(o);
    ktap_diag("race zswap_max_toggles %lld", toggles);
    return NULL;
}

/* memory.reclaim 8M in a loop (it blocks; hence its own thread). */
static void *race_reclaimer(void *arg)
{
    struct race *R = arg;
    const struct options *o = R->o;
    long long calls = 0;

    while (!R->stop && gl_now_s() < R->deadline) {
        gl_memcg_write(o->cgroup, "memory.reclaim", "8M");
        gl_sleep_ms(20);
        calls++;
    }
    ktap_diag("race reclaim_calls %lld", calls);
    return NULL;
}

/* Pages on the memcg's four LRU lists (memory.stat, in bytes); -1 unreadable. */
static long long memcg_lru_pages(const struct options *o)
{
    static const char *const keys[] = { "inactive_anon", "active_anon", "inactive_file",
                                        "active_file" };
    long long sum = 0;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        long long v = gl_memcg_stat(o->cgroup, keys[i]);

        if (v < 0) {
            return -1;
        }
        sum += v;
    }
    return sum / GL_PAGE_SIZE;
}

/*
 * --leak-check: once the pattern is unmapped, nothing of the workload may
 * stay on the memcg's LRU (swaptest's own memory is mlocked, hence
 * unevictable).  Reclaim until the lists are empty, for at most about 5 s
 * (folios may still be under a slow write).  A folio that stays is leaked:
 * charged, on the LRU, and no one's; reclaim skips it only if it is locked
 * or pinned, so a locked folio left behind also shows here.
 */
static void race_leak_check(const struct options *o)
{
    long long left = -1;
    int passes;

    for (passes = 1; passes <= 50; passes++) {
        gl_memcg_write(o->cgroup, "memory.reclaim", "64M");
        left = memcg_lru_pages(o);
        if (left == 0) {
            break;
        }
        gl_sleep_ms(100);
    }
    ktap_diag("lru_left_pages %lld", left);
    ktap_diag("race reclaim_passes %d", passes);
    ktap_check(left == 0, ktap_name("memory comes back: no page left on the memcg's LRU "
                                    "once the pattern is unmapped"),
               "%lld pages left after %d reclaim passes", left, passes);
}

void race(const struct options *o, struct run *Rn)
{
    struct race R = { .o = o };
    size_t clen = (size_t)o->chunk_pages * GL_PAGE_SIZE;
    pthread_t th[66];
    struct verify_result vr = { 0 };
    long long ps0, pt0;

    R.chunks = o->mem / clen;
    R.mem = map_pattern(R.chunks * clen);
    R.c = calloc(R.chunks, sizeof(*R.c));
    pthread_mutex_init(&R.stat_lock, NULL);
    Rn->t0 = gl_now_s();
    gl_vmstat_read(&Rn->v0);
    for (size_t c = 0; c < R.chunks; c++) {
        pthread_mutex_init(&R.c[c].lock, NULL);
        chunk_fill(&R, c);
    }
    gl_memcg_reclaim_all(o->cgroup);
    gl_vmstat_read(&Rn->v_fill);
    ktap_check(1, ktap_name("filled %zu chunks of %d pages and reclaimed", R.chunks,
                            o->chunk_pages), NULL);
    arm(o, "before the race");
    gl_vmstat_read(&Rn->v_wb0);
    ps0 = gl_memcg_stat(o->cgroup, "pgscan");
    pt0 = gl_memcg_stat(o->cgroup, "pgsteal");
    R.deadline = gl_now_s() + o->duration;
    for (int i = 0; i < o->threads; i++) {
        gl_thread_create_traced(&th[i], race_worker, &R);
    }
    pthread_create(&th[o->threads], NULL, race_toggler, &R);
    gl_thread_create_traced(&th[o->threads + 1], race_reclaimer, &R);
    for (int i = 0; i <= o->threads + 1; i++) {
        pthread_join(th[i], NULL);
    }
    disarm(o, "after the race");
    gl_vmstat_read(&Rn->v_wb1);
    Rn->pgscan_wb = gl_memcg_stat(o->cgroup, "pgscan") - ps0;
    Rn->pgsteal_wb = gl_memcg_stat(o->cgroup, "pgsteal") - pt0;
    Rn->swapcached_wb = swapcached_pages(o, &Rn->v_wb1);
    for (int i = 0; i < OP__N; i++) {
        ktap_diag("race op %s %lld", op_names[i], R.ops[i]);
    }
    ktap_diag("race remap_refilled_with_map_fixed %lld", R.remap_fail);
    ktap_check(!R.vr.bad && !R.vr.sigbus,
               ktap_name("race: %d threads for %.0fs: no bad pages, no SIGBUS", o->threads,
                         o->duration), "%zu bad pages, %zu SIGBUS", R.vr.bad, R.vr.sigbus);
    gl_vmstat_report("phase race vmstat", &Rn->v_wb0, &Rn->v_wb1);
    /* Final pass over everything. */
    for (size_t c = 0; c < R.chunks; c++) {
        chunk_verify(&R, c, &vr);
    }
    run_count_verify(Rn, &R.vr, 0);
    run_count_verify(Rn, &vr, 0);
    Rn->verified = vr.ok;
    ktap_check(!vr.bad && !vr.sigbus, ktap_name("final verify of %zu pages",
                                                R.chunks * o->chunk_pages),
               "%zu match, %zu bad, %zu SIGBUS", vr.ok, vr.bad, vr.sigbus);
    gl_vmstat_read(&Rn->v_end);
    Rn->t1 = gl_now_s();
    munmap(R.mem, R.chunks * clen);
    free(R.c);
    if (o->leak_check) {
        race_leak_check(o);
    }
}

/* The KTAP results race() reports: filled, armed, disarmed, race, final verify,
 * leak check. */
int race_planned(const struct options *o)
{
    return 3 + (o->arm_state >= 0) + (o->arm_state >= 0 && o->disarm) + o->leak_check;
}
