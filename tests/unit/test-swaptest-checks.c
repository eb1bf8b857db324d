// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's checks (guest/tools/swaptest-checks.c) on planted runs: each
 * check must FAIL on the case issue 18 names for it.  The checks file is
 * compiled in here with the globals swaptest.c would define.
 */
#include "../../guest/tools/swaptest-checks.c"

#include <stdlib.h>
#include <unistd.h>

struct options o;
struct probe probes[P__N];
int patched;
char wb_shrinker[8] = "Y";
int blk_err_ok;
long long blk_errors;

static int n_tests, n_failed;

static void expect(enum check_result got, enum check_result want, const char *what)
{
    static const char *const names[] = { "PASS", "FAIL", "SKIP", "XFAIL" };

    n_tests++;
    n_failed += got != want;
    printf("%s %d %s (%s, expected %s)\n", got == want ? "ok" : "not ok", n_tests, what,
           names[got], names[want]);
}

/*
 * What run_check prints for @c on @R is exactly @want: stdout goes to a
 * temporary file meanwhile, so the lines are the real writer's (ktap.c).
 */
static void expect_ktap(const struct check *c, const struct run *R, const char *want,
                        const char *what)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDOUT_FILENO);
    char got[1024];
    size_t n;

    fflush(stdout);
    dup2(fileno(tmp), STDOUT_FILENO);
    run_check(c, R);
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

int main(void)
{
    struct run R;
    struct check_out out;

    printf("TAP version 13\n1..33\n");
    memset(&R, 0, sizeof(R));

    /* completion context: the scenario claims one context, all of it */
    o.expect_ctx = "hardirq";
    set_ctx(&probes[P_EBW], 1000, 0, 0);
    expect(completion_ctx(&R, &out), CHECK_PASS, "hardirq 100% is hardirq");
    expect_name(&out, "swap write completions all in hardirq context", "a pass");
    set_ctx(&probes[P_EBW], 600, 400, 0);
    expect(completion_ctx(&R, &out), CHECK_FAIL, "hardirq 60% + softirq 40% is not hardirq");
    expect_name(&out, "swap write completions all in hardirq context", "its fail");
    o.expect_ctx = "irq";
    set_ctx(&probes[P_EBW], 600, 0, 400);
    expect(completion_ctx(&R, &out), CHECK_FAIL, "irq 60% + task 40% is not irq");

    /* a claimed write path whose probe cannot attach fails, never skips */
    o.expect_sync = 1;
    set_ctx(&probes[P_SYNC], 0, 0, 500);
    set_ctx(&probes[P_EBW], 0, 0, 0);
    expect(write_path(&R, &out), CHECK_PASS, "sync path seen");
    expect_name(&out, "swap write path is synchronous", "a pass");
    probes[P_SYNC].ok = 0;
    expect(write_path(&R, &out), CHECK_FAIL, "sync path claimed, probe not attached");
    expect_name(&out, "swap write path is synchronous", "an unprobeable fail");

    /* dropbehind: declared patched, v4 (no helper symbol) is judged by its own probe */
    patched = 1;
    R.v0.v[VM_ZSWPWB] = 0;
    R.v_end.v[VM_ZSWPWB] = 1000;
    probes[P_DROPBEHIND].ok = 0;
    set_ctx(&probes[P_RMR], 0, 0, 990);
    snprintf(probes[P_RMR].resolved, sizeof(probes[P_RMR].resolved), "remove_mapping_reclaim");
    expect(dropped_on_completion(&R, &out), CHECK_PASS, "v4: remove_mapping_reclaim drops");
    expect_name(&out, "zswap writeback folios are dropped on completion (dropbehind)", "a pass");
    probes[P_RMR].ok = 0;
    expect(dropped_on_completion(&R, &out), CHECK_FAIL,
           "patched, no drop probe at all: fails (not XFAIL)");
    patched = 0;
    expect(dropped_on_completion(&R, &out), CHECK_XFAIL, "stock: baseline only");
    expect_name(&out, "zswap writeback folios are dropped on completion (dropbehind)",
                "an XFAIL");

    /* refault: zswap-only refaults do not count, written-back ones must refault */
    R.v_wb1.v[VM_WS_REFAULT_ANON] = 0;
    R.v_end.v[VM_WS_REFAULT_ANON] = 66180;
    R.wb_marked = 9032;
    R.wb_refaults = 0;
    expect(shadows_survive(&R, &out), CHECK_FAIL,
           "66180 refaults, none of the 9032 written-back pages");
    expect_name(&out, "refaults of written-back pages find workingset shadows", "a fail");
    R.wb_refaults = 9030;
    expect(shadows_survive(&R, &out), CHECK_PASS, "written-back pages refault");
    expect_name(&out, "refaults of written-back pages find workingset shadows", "a pass");
    R.wb_marked = 0;
    expect(shadows_survive(&R, &out), CHECK_FAIL, "nothing written back: nothing judged");

    /* heal: pswpout from zswap's rejects is not the redirtied folios being written */
    R.heal_pswpout = 5000;
    R.redirtied = 800;
    R.redirtied_written = 0;
    expect(rewritten_after_disarm(&R, &out), CHECK_FAIL,
           "pswpout +5000 but no redirtied folio left swap cache");
    R.redirtied_written = 800;
    expect(rewritten_after_disarm(&R, &out), CHECK_PASS, "every redirtied folio written");
    expect_name(&out, "after disarm the redirtied folios were written", "a pass");

    /* The KTAP lines: the same result line for any count, the count on '# NAME:' */
    memset(&R, 0, sizeof(R));
    ktap_num = 0;
    R.v_end.v[VM_PSWPOUT] = 27936;
    expect_ktap(&check_swapped_out, &R, "# pattern was swapped out to the device: pswpout "
                "+27936\nok 1 pattern was swapped out to the device\n", "swapped out: pass");
    R.v_end.v[VM_PSWPOUT] = 0;
    expect_ktap(&check_swapped_out, &R, "# pattern was swapped out to the device: pswpout "
                "+0\nnot ok 2 pattern was swapped out to the device\n", "swapped out: fail");
    o.expect_ctx = "task";
    probes[P_EBW].sym = "end_swap_bio_write";
    probes[P_FEW].sym = "folio_end_writeback";
    set_ctx(&probes[P_EBW], 0, 0, 204800);
    expect_ktap(&check_completion_ctx, &R, "# swap write completions all in task context: "
                "end_swap_bio_write hardirq 0 softirq 0 task 204800\n"
                "ok 3 swap write completions all in task context\n", "context: pass");
    set_ctx(&probes[P_EBW], 0, 0, 0);
    set_ctx(&probes[P_FEW], 0, 0, 0);
    probes[P_EBW].ok = probes[P_FEW].ok = 0;
    expect_ktap(&check_completion_ctx, &R, "# swap write completions all in task context: "
                "folio_end_writeback not probeable\n"
                "not ok 4 swap write completions all in task context\n", "context: unprobeable");
    /* stock kernel: XFAIL when not met, SKIP when met; the measured values on '# NAME:' */
    patched = 0;
    R.last_call_zswpwb = 100;
    R.swapcached_wb = 80;
#define LINGER_DETAIL "# dropbehind last_reclaim zswpwb 100\n# written-back folios do not " \
    "linger in swap cache: measured swap cache after the writeback phase "
    expect_ktap(&check_no_linger, &R, LINGER_DETAIL "80 pages, last reclaim call zswpwb 100\n"
                "not ok 5 written-back folios do not linger in swap cache # XFAIL stock kernel\n",
                "linger: XFAIL");
    R.swapcached_wb = 0;
    expect_ktap(&check_no_linger, &R, LINGER_DETAIL "0 pages, last reclaim call zswpwb 100\n"
                "ok 6 written-back folios do not linger in swap cache # SKIP stock kernel: "
                "holds anyway\n", "linger: SKIP");

    /* before Linux 6.8 /proc/vmstat has no zswpwb: its checks SKIP, never FAIL or PASS */
    R.v0.v[VM_ZSWPWB] = R.v_end.v[VM_ZSWPWB] = -1;
    expect_ktap(&check_zswap_wrote_back, &R, "# zswap wrote back to the device: zswpwb +0\n"
                "ok 7 zswap wrote back to the device # SKIP no zswpwb in /proc/vmstat: zswap "
                "writeback is not counted before Linux 6.8\n", "zswpwb absent: SKIP");
    R.v0.v[VM_ZSWPWB] = R.v_end.v[VM_ZSWPWB] = 0;
    expect_ktap(&check_zswap_wrote_back, &R, "# zswap wrote back to the device: zswpwb +0\n"
                "not ok 8 zswap wrote back to the device\n", "zswpwb counted: judged");

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
