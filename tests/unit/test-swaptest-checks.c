// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's checks (guest/tools/swaptest/swaptest-checks.c) on planted runs: each
 * check must FAIL on the case issue 18 names for it.  The checks file is
 * compiled in here (its checks are static); the tracing evidence they read
 * (swaptest-trace.c) and the slot maps (swaptest-slots.c) are linked.
 */
#include "../../guest/tools/swaptest/swaptest-checks.c"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* The options the checks are judged with. */
static struct options o;

#include "check-expect.h"

/*
 * What run_check prints for @c on @R is exactly @want: stdout goes to a
 * temporary file meanwhile, so the lines are the real writer's (ktap.c).
 * Returns run_check's count of patch-specific expectations asserted.
 */
static int expect_ktap(const struct check *c, const struct run *R, const char *want,
                       const char *what)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDOUT_FILENO);
    char got[1024];
    size_t n;
    int asserted;

    fflush(stdout);
    dup2(fileno(tmp), STDOUT_FILENO);
    asserted = run_check(c, &o, R);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(tmp);
    n = fread(got, 1, sizeof(got) - 1, tmp);
    got[n] = 0;
    fclose(tmp);
    n_tests++;
    n_failed += strcmp(got, want) != 0;
    printf("%s %d %s\n", strcmp(got, want) ? "not ok" : "ok", n_tests, what);
    if (strcmp(got, want)) {
        printf("# got:\n# %s# want:\n# %s", got, want);
    }
    return asserted;
}

/* A check's name is its CI case id: the same whatever it measured. */
static void expect_name(const struct check_out *out, const char *name, const char *what)
{
    n_tests++;
    n_failed += strcmp(out->name, name) != 0;
    printf("%s %d name of %s is '%s'\n", strcmp(out->name, name) ? "not ok" : "ok", n_tests,
           what, out->name);
}

static void expect_count(size_t got, size_t want, const char *what)
{
    n_tests++;
    n_failed += got != want;
    printf("%s %d %s (%zu, expected %zu)\n", got == want ? "ok" : "not ok", n_tests, what,
           got, want);
}

static void set_ctx(struct probe *p, long long hard, long long soft, long long task)
{
    p->ok = 1;
    p->hist.ctx[GL_CTX_HARDIRQ] = hard;
    p->hist.ctx[GL_CTX_SOFTIRQ] = soft;
    p->hist.ctx[GL_CTX_TASK] = task;
    p->hist.sum = hard + soft + task;
}

/* A slot map of @n pages: "S" swapped out, "C" swapped and in swap cache, "D"
 * swapped with the slot holding the page, "-" present. */
static void slots_from(struct slot_map *m, const char *map)
{
    size_t n = strlen(map);

    memset(m, 0, sizeof(*m));
    m->pages = n;
    m->swapped = calloc(n, 1);
    m->cached = calloc(n, 1);
    m->on_disk = calloc(n, 1);
    m->ok = 1;
    for (size_t p = 0; p < n; p++) {
        m->swapped[p] = map[p] != '-';
        m->cached[p] = map[p] == 'C';
        m->on_disk[p] = map[p] == 'D';
    }
}

static void slots_release(struct slot_map *m)
{
    free(m->swapped);
    free(m->cached);
    free(m->on_disk);
}

static long long track_scan(struct heal_track *t, const char *map)
{
    struct slot_map m;
    long long n;

    slots_from(&m, map);
    n = heal_track_scan(t, &m);
    slots_release(&m);
    return n;
}

/*
 * heal under load: one reclaim pass may leave some redirtied folios in swap
 * cache (8 of 52 beside another VM); each counts as written once any later
 * scan sees it out of swap cache, also when zswap writeback brings it back;
 * one that never leaves is not written.
 */
static void heal_passes(void)
{
    struct heal_track t;
    struct slot_map a;

    /* pages 0-3 redirtied; 4 in swap cache but its slot holds it (written
     * before arming); 5 swapped out and not cached; 6 present */
    slots_from(&a, "CCCCCS-");
    a.on_disk[4] = 1;
    expect_count(heal_track_start(&t, &a), 0, "heal: tracking starts");
    expect_count(t.n_redirtied, 4, "heal: 4 redirtied (cached, slot not holding the page)");
    expect_count(track_scan(&t, "SSCCCS-"), 2, "heal: pass 1 leaves 2 of 4 in swap cache");
    expect_count(track_scan(&t, "CSSCSS-"), 3,
                 "heal: pass 2: page 2 left; page 0 back in swap cache stays written");
    a.ok = 0;
    expect_count(heal_track_scan(&t, &a), 3, "heal: a failed scan changes nothing");
    expect_count(track_scan(&t, "CSSC-S-"), 3, "heal: page 3 never left: not written");
    heal_track_free(&t);
    a.ok = 1;
    slots_release(&a);
    slots_from(&a, "CC");
    a.ok = 0;
    expect_count(heal_track_start(&t, &a) == -EINVAL, 1, "heal: a failed first scan names none");
    expect_count(track_scan(&t, "SS"), 0, "heal: ... and nothing is written");
    slots_release(&a);
}

/* A stack-keyed hist as 6.12 prints it (trace_events_hist.c). */
static const char stack_hist[] =
    "# event histogram\n"
    "#\n"
    "# trigger info: hist:keys=common_stacktrace:vals=hitcount:sort=hitcount:size=2048 "
    "[active]\n"
    "#\n"
    "\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         swap_writepage+0x3c/0xd0\n"
    "         shrink_folio_list+0x8a1/0xc70\n"
    "} hitcount:        900\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         zswap_writeback_entry+0x1f2/0x2d0\n"
    "         shrink_memcg_cb+0x9c/0x130\n"
    "         __list_lru_walk_one+0x6b/0x160\n"
    "         list_lru_walk_one+0x48/0x60\n"
    "         zswap_shrinker_scan.isra.0+0x61/0xb0\n"
    "         do_shrink_slab+0x13b/0x370\n"
    "} hitcount:        120\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         shrink_memcg_cb+0x9c/0x130\n"
    "         list_lru_walk_one+0x48/0x60\n"
    "         zswap_store+0x1c5/0x7e0\n"
    "         swap_writepage+0x2f/0xd0\n"
    "} hitcount:         30\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         shrink_memcg_cb+0x9c/0x130\n"
    "         zswap_shrinker_scan+0x61/0xb0\n"
    "         do_shrink_slab+0x13b/0x370\n"
    "         zswap_store+0x1c5/0x7e0\n"
    "} hitcount:          7\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         shrink_memcg_cb+0x9c/0x130\n"
    "         shrink_worker+0x80/0x120\n"
    "} hitcount:          2\n"
    "{ common_stacktrace:\n"
    "         __swap_writepage+0x5/0x80\n"
    "         shrink_memcg_cbx+0x9c/0x130\n"
    "         zswap_storefoo+0x9c/0x130\n"
    "} hitcount:          1\n"
    "\n"
    "Totals:\n"
    "    Hits: 1060\n"
    "    Entries: 6\n"
    "    Dropped: 0\n";

/*
 * Whose writebacks: the innermost of the walk's callers on each stack (a
 * store that entered reclaim and so the shrinker counts as the shrinker's);
 * a function whose name only starts like one does not count.
 */
static void stack_frames(void)
{
    static const char *const walk[] = { "shrink_memcg_cb" };
    static const char *const by[] = { "zswap_shrinker_scan", "zswap_store", "shrink_worker" };
    char path[] = "/tmp/test-swaptest-stack-XXXXXX";
    long long hits[3], total = 0;
    int fd = mkstemp(path);

    if (fd < 0 || write(fd, stack_hist, sizeof(stack_hist) - 1) != sizeof(stack_hist) - 1) {
        perror("stack hist file");
        exit(1);
    }
    close(fd);
    expect_count(gl_hist_read_frames(path, walk, 1, hits, &total), 0, "stack hist read");
    expect_count(hits[0], 159, "zswap writebacks: stacks through shrink_memcg_cb");
    expect_count(total, 1060, "every event counted in the total");
    gl_hist_read_frames(path, by, 3, hits, NULL);
    expect_count(hits[0], 127, "by the shrinker (its .isra copy, and inside a store)");
    expect_count(hits[1], 30, "by stores over memory.zswap.max");
    expect_count(hits[2], 2, "by the pool limit's worker");
    unlink(path);
    expect_count(gl_hist_read_frames(path, by, 3, hits, NULL) == -ENOENT, 1,
                 "a missing hist is -ENOENT");
}

int main(void)
{
    struct run R;
    struct check_out out;

    printf("TAP version 13\n1..53\n");
    memset(&R, 0, sizeof(R));
    tracing_init(&R.tr);

    /* completion context: the scenario claims one context, all of it */
    o.expect_ctx = "hardirq";
    set_ctx(&R.tr.probes[P_EBW], 1000, 0, 0);
    expect(completion_ctx(&o, &R, &out), CHECK_PASS, "hardirq 100% is hardirq");
    expect_name(&out, "swap write completions all in hardirq context", "a pass");
    set_ctx(&R.tr.probes[P_EBW], 600, 400, 0);
    expect(completion_ctx(&o, &R, &out), CHECK_FAIL, "hardirq 60% + softirq 40% is not hardirq");
    expect_name(&out, "swap write completions all in hardirq context", "its fail");
    o.expect_ctx = "irq";
    set_ctx(&R.tr.probes[P_EBW], 600, 0, 400);
    expect(completion_ctx(&o, &R, &out), CHECK_FAIL, "irq 60% + task 40% is not irq");

    /* a claimed write path whose probe cannot attach fails, never skips */
    o.expect_sync = 1;
    set_ctx(&R.tr.probes[P_SYNC], 0, 0, 500);
    set_ctx(&R.tr.probes[P_EBW], 0, 0, 0);
    expect(write_path(&o, &R, &out), CHECK_PASS, "sync path seen");
    expect_name(&out, "swap write path is synchronous", "a pass");
    R.tr.probes[P_SYNC].ok = 0;
    expect(write_path(&o, &R, &out), CHECK_FAIL, "sync path claimed, probe not attached");
    expect_name(&out, "swap write path is synchronous", "an unprobeable fail");

    /* dropbehind: declared patched, v4 (no helper symbol) is judged by its own probe */
    R.tr.patched = 1;
    R.v0.v[VM_ZSWPWB] = 0;
    R.v_end.v[VM_ZSWPWB] = 1000;
    R.tr.probes[P_DROPBEHIND].ok = 0;
    set_ctx(&R.tr.probes[P_RMR], 0, 0, 990);
    snprintf(R.tr.probes[P_RMR].resolved, sizeof(R.tr.probes[P_RMR].resolved),
             "remove_mapping_reclaim");
    expect(dropped_on_completion(&o, &R, &out), CHECK_PASS, "v4: remove_mapping_reclaim drops");
    expect_name(&out, "zswap writeback folios are dropped on completion (dropbehind)", "a pass");
    R.tr.probes[P_RMR].ok = 0;
    expect(dropped_on_completion(&o, &R, &out), CHECK_FAIL,
           "patched, no drop probe at all: fails (not XFAIL)");
    R.tr.patched = 0;
    expect(dropped_on_completion(&o, &R, &out), CHECK_XFAIL, "stock: baseline only");
    expect_name(&out, "zswap writeback folios are dropped on completion (dropbehind)",
                "an XFAIL");

    /* refault: zswap-only refaults do not count, written-back ones must refault */
    R.v_wb1.v[VM_WS_REFAULT_ANON] = 0;
    R.v_end.v[VM_WS_REFAULT_ANON] = 66180;
    R.wb_marked = 9032;
    R.wb_refaults = 0;
    expect(shadows_survive(&o, &R, &out), CHECK_FAIL,
           "66180 refaults, none of the 9032 written-back pages");
    expect_name(&out, "refaults of written-back pages find workingset shadows", "a fail");
    R.wb_refaults = 9030;
    expect(shadows_survive(&o, &R, &out), CHECK_PASS, "written-back pages refault");
    expect_name(&out, "refaults of written-back pages find workingset shadows", "a pass");
    R.wb_marked = 0;
    expect(shadows_survive(&o, &R, &out), CHECK_FAIL, "nothing written back: nothing judged");

    /* heal: pswpout from zswap's rejects is not the redirtied folios being written */
    R.heal_pswpout = 5000;
    R.redirtied = 800;
    R.redirtied_written = 0;
    expect(rewritten_after_disarm(&o, &R, &out), CHECK_FAIL,
           "pswpout +5000 but no redirtied folio left swap cache");
    R.redirtied_written = 800;
    expect(rewritten_after_disarm(&o, &R, &out), CHECK_PASS, "every redirtied folio written");
    expect_name(&out, "after disarm the redirtied folios were written", "a pass");
    heal_passes();

    stack_frames();

    /* The KTAP lines: the same result line for any count, the count on '# NAME:' */
    memset(&R, 0, sizeof(R));
    tracing_init(&R.tr);
    ktap_num = 0;
    R.v_end.v[VM_PSWPOUT] = 27936;
    expect_ktap(&check_swapped_out, &R, "# pattern was swapped out to the device: pswpout "
                "+27936\nok 1 pattern was swapped out to the device\n", "swapped out: pass");
    R.v_end.v[VM_PSWPOUT] = 0;
    expect_ktap(&check_swapped_out, &R, "# pattern was swapped out to the device: pswpout "
                "+0\nnot ok 2 pattern was swapped out to the device\n", "swapped out: fail");
    o.expect_ctx = "task";
    R.tr.probes[P_EBW].sym = "end_swap_bio_write";
    R.tr.probes[P_FEW].sym = "folio_end_writeback";
    set_ctx(&R.tr.probes[P_EBW], 0, 0, 204800);
    expect_ktap(&check_completion_ctx, &R, "# swap write completions all in task context: "
                "end_swap_bio_write hardirq 0 softirq 0 task 204800\n"
                "ok 3 swap write completions all in task context\n", "context: pass");
    set_ctx(&R.tr.probes[P_EBW], 0, 0, 0);
    set_ctx(&R.tr.probes[P_FEW], 0, 0, 0);
    R.tr.probes[P_EBW].ok = R.tr.probes[P_FEW].ok = 0;
    expect_ktap(&check_completion_ctx, &R, "# swap write completions all in task context: "
                "folio_end_writeback not probeable\n"
                "not ok 4 swap write completions all in task context\n", "context: unprobeable");
    /* stock kernel: XFAIL when not met, SKIP when met; the measured values on '# NAME:' */
    R.tr.patched = 0;
    R.last_call_zswpwb = 100;
    R.swapcached_wb = 80;
#define LINGER_DETAIL "# dropbehind last_reclaim zswpwb 100\n# written-back folios do not " \
    "linger in swap cache: measured swap cache after the writeback phase "
    expect_count(expect_ktap(&check_no_linger, &R, LINGER_DETAIL "80 pages, last reclaim call "
                             "zswpwb 100\nnot ok 5 written-back folios do not linger in swap "
                             "cache # XFAIL stock kernel\n", "linger: XFAIL"), 0,
                 "stock: a patch-specific check is not counted as asserted");
    R.swapcached_wb = 0;
    expect_ktap(&check_no_linger, &R, LINGER_DETAIL "0 pages, last reclaim call zswpwb 100\n"
                "ok 6 written-back folios do not linger in swap cache # SKIP stock kernel: "
                "holds anyway\n", "linger: SKIP");
    /* patched: asserted, and counted for main's "# patch_checks_asserted" */
    R.tr.patched = 1;
    expect_count(expect_ktap(&check_no_linger, &R, LINGER_DETAIL "0 pages, last reclaim call "
                             "zswpwb 100\nok 7 written-back folios do not linger in swap "
                             "cache\n", "linger: asserted"), 1,
                 "patched: the check counts as asserted");
    R.tr.patched = 0;
    expect_count(expect_ktap(&check_swapped_out, &R, "# pattern was swapped out to the device: "
                             "pswpout +0\nnot ok 8 pattern was swapped out to the device\n",
                             "swapped out: fail again"), 0,
                 "a check that is not patch-specific is not counted");

    /* before Linux 6.8 /proc/vmstat has no zswpwb: its checks SKIP, never FAIL or PASS */
    R.v0.v[VM_ZSWPWB] = R.v_end.v[VM_ZSWPWB] = -1;
    expect_ktap(&check_zswap_wrote_back, &R, "# zswap wrote back to the device: zswpwb +0\n"
                "ok 9 zswap wrote back to the device # SKIP no zswpwb in /proc/vmstat: zswap "
                "writeback is not counted before Linux 6.8\n", "zswpwb absent: SKIP");
    R.v0.v[VM_ZSWPWB] = R.v_end.v[VM_ZSWPWB] = 0;
    expect_ktap(&check_zswap_wrote_back, &R, "# zswap wrote back to the device: zswpwb +0\n"
                "not ok 10 zswap wrote back to the device\n", "zswpwb counted: judged");

    /* data_errors: what every data check found, counted the same way */
    memset(&R, 0, sizeof(R));
    run_count_verify(&R, &(struct verify_result){ .ok = 900, .sigbus = 124 }, 1);
    expect_count(run_data_errors(&R), 0, "read-error child: expected SIGBUS is no data error");
    run_count_verify(&R, &(struct verify_result){ .ok = 1000, .bad = 24 }, 1);
    expect_count(run_data_errors(&R), 24, "read-error child: its bad pages are data errors");
    run_count_verify(&R, &(struct verify_result){ .ok = 1020, .sigbus = 4 }, 0);
    expect_count(run_data_errors(&R), 28, "parent after disarm: SIGBUS is a data error");
    printf("# %d of %d failed\n", n_failed, n_tests);
    return n_failed ? 1 : 0;
}
