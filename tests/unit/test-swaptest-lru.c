// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest lru's checks (guest/tools/swaptest/swaptest-lru.c) on the writeback phases
 * measured in a guest: with the shrinker off, stores over memory.zswap.max
 * still write back (zswap_store -> shrink_memcg), and the checks that claim
 * the shrinker's writeback must fail on them. swaptest-lru.c is compiled in
 * here (what it measured is static there); the rest of swaptest is linked.
 */
#include "../../guest/tools/swaptest/swaptest-lru.c"

#include <unistd.h>

#include "check-expect.h"

/* The checks judged here read no option. */
static const struct options o;

static void set_hits(int i, long long n)
{
    lp[i].ok = 1;
    lp[i].hist.sum = n;
}

/*
 * A writeback phase as a 6.12 guest measured it: every zswap_writeback_entry
 * call returned 0 (@wb of them, = zswpwb), @shrinker of them by the shrinker
 * and the rest by stores; @scans shrinker scan calls, @walked LRU entries.
 */
static void phase(struct run *R, long long wb, long long shrinker, long long scans,
                  long long walked)
{
    memset(R, 0, sizeof(*R));
    memset(&lw, 0, sizeof(lw));
    R->v_wb1.v[VM_ZSWPWB] = wb;
    set_hits(LP_WB_ENTRY, wb);
    set_hits(LP_WALK, walked);
    set_hits(LP_SCAN, scans);
    lw.ret_ok = 1;
    lw.ret.n = 1;
    lw.ret.ret[0] = 0;
    lw.ret.count[0] = lw.ret.total = wb;
    lw.stack_ok = 1;
    lw.wb_zswap = wb;
    lw.wb_by[WB_SHRINKER] = shrinker;
    lw.wb_by[WB_STORE] = wb - shrinker;
}

int main(void)
{
    struct run R;
    struct check_out out;

    printf("TAP version 13\n1..11\n");

    /* shrinker off, 48 reclaim calls: zswpwb 200, all of them stores' */
    phase(&R, 200, 0, 0, 2365);
    expect(lru_counted(&o, &R, &out), CHECK_FAIL, "shrinker off: stores' 200 returns are not "
           "the shrinker's outcomes");
    expect(lru_ok_is_zswpwb(&o, &R, &out), CHECK_FAIL, "shrinker off: returns 0 = zswpwb 200, "
           "but by the shrinker 0");
    expect(lru_walked(&o, &R, &out), CHECK_FAIL, "shrinker off: no shrinker scan");

    /* shrinker on: zswpwb 888, 618 by the shrinker, 270 by stores */
    phase(&R, 888, 618, 28, 3182);
    expect(lru_counted(&o, &R, &out), CHECK_PASS, "shrinker on: every return counted");
    expect(lru_ok_is_zswpwb(&o, &R, &out), CHECK_PASS, "shrinker on: the shrinker wrote back");
    expect(lru_walked(&o, &R, &out), CHECK_PASS, "shrinker on: the shrinker walked the LRU");

    /* without the stack-keyed kprobe whose writebacks they were is unknown */
    lw.stack_ok = 0;
    expect(lru_ok_is_zswpwb(&o, &R, &out), CHECK_FAIL, "no stack kprobe: not judged, fails");
    expect(lru_counted(&o, &R, &out), CHECK_FAIL, "no stack kprobe: returns not judged either");

    /* 7.2 inlines zswap_writeback_entry: judged from zswpwb, still the shrinker's */
    phase(&R, 4249, 0, 0, 12297);
    lw.inlined = 1;
    lw.ret_ok = 0;
    lp[LP_WB_ENTRY].ok = 0;
    lw.reclaim_fail1 = 1;
    expect(lru_ok_is_zswpwb(&o, &R, &out), CHECK_FAIL, "inlined, stores' writebacks only");
    lw.wb_by[WB_SHRINKER] = 4249;
    expect(lru_ok_is_zswpwb(&o, &R, &out), CHECK_PASS, "inlined, the shrinker's writebacks");
    expect(lru_counted(&o, &R, &out), CHECK_SKIP, "inlined: no kretprobe to count returns");
    printf("# %d of %d failed\n", n_failed, n_tests);
    return n_failed ? 1 : 0;
}
