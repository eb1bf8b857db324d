// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swapstress: fill anonymous memory with a seeded per-page pattern inside a
 * memcg smaller than the pattern, force reclaim, and verify every page.
 * Reports vmstat deltas as KTAP diagnostics; fails on any lost byte or when
 * nothing was swapped out (a test that never swapped proves nothing).
 */
#define _GNU_SOURCE
#include "lib/guestlib.h"
#include "lib/ktap.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct options {
    uint64_t mem;
    uint64_t memcg_max;
    uint64_t seed;
    int rounds;
    const char *cgroup;
};

static void usage(void)
{
    fprintf(stderr,
            "usage: swapstress [--mem SIZE] [--memcg-max SIZE] [--rounds N]\n"
            "                  [--seed N] [--cgroup NAME]\n");
    exit(2);
}

static void parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "mem", required_argument, NULL, 'm' },
        { "memcg-max", required_argument, NULL, 'M' },
        { "rounds", required_argument, NULL, 'r' },
        { "seed", required_argument, NULL, 's' },
        { "cgroup", required_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    *o = (struct options){ .mem = 192 << 20, .memcg_max = 64 << 20,
                           .seed = 1, .rounds = 2, .cgroup = "swapstress" };
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->mem = gl_parse_size(optarg); break;
        case 'M': o->memcg_max = gl_parse_size(optarg); break;
        case 'r': o->rounds = atoi(optarg); break;
        case 's': o->seed = strtoull(optarg, NULL, 0); break;
        case 'c': o->cgroup = optarg; break;
        default: usage();
        }
    }
    if (!o->mem || !o->memcg_max || o->rounds < 1 || optind != argc) {
        usage();
    }
}

int main(int argc, char **argv)
{
    struct options o;
    struct gl_vmstat before, after;
    size_t pages, bad, bad_total = 0, first_bad = 0;
    uint8_t *mem;
    double t0 = gl_now_s();
    int err;

    parse_args(argc, argv, &o);
    pages = o.mem / GL_PAGE_SIZE;
    ktap_header(3 + o.rounds);
    ktap_diag("swapstress mem=%" PRIu64 " memcg_max=%" PRIu64 " seed=%" PRIu64
              " pages=%zu", o.mem, o.memcg_max, o.seed, pages);

    err = gl_memcg_enter(o.cgroup, o.memcg_max);
    ktap_check(!err, ktap_name("memcg %s created and joined", o.cgroup), NULL);
    if (err) {
        ktap_diag("memcg error %d", err);
        return ktap_finish();
    }
    gl_vmstat_read(&before);

    mem = mmap(NULL, o.mem, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        ktap_bail("mmap %" PRIu64 " bytes failed", o.mem);
    }
    madvise(mem, o.mem, MADV_NOHUGEPAGE);
    gl_pattern_fill(mem, pages, o.seed);
    /* Push what is still resident out as well, so every page has a swap slot. */
    gl_memcg_write(o.cgroup, "memory.reclaim", "1G");
    ktap_check(1, ktap_name("filled %zu pages", pages), NULL);

    for (int r = 1; r <= o.rounds; r++) {
        bad = gl_pattern_verify(mem, pages, o.seed, &first_bad);
        bad_total += bad;
        ktap_check(bad == 0, ktap_name("round %d: %zu pages verified", r, pages), "%zu bad%s",
                   bad, bad ? " (data lost)" : "");
        if (bad) {
            ktap_diag("first bad page %zu", first_bad);
        }
        gl_memcg_write(o.cgroup, "memory.reclaim", "1G");
    }

    gl_vmstat_read(&after);
    gl_vmstat_report("vmstat", &before, &after);
    ktap_check(after.v[VM_PSWPOUT] > before.v[VM_PSWPOUT],
               "pattern was swapped out to the device", "pswpout +%lld",
               after.v[VM_PSWPOUT] - before.v[VM_PSWPOUT]);
    ktap_diag("pages_verified %zu", pages * o.rounds);
    /* Bad pages over all rounds, like swaptest's (the judge and --mutate). */
    ktap_diag("data_errors %zu", bad_total);
    ktap_diag("elapsed %.1fs", gl_now_s() - t0);
    munmap(mem, o.mem);
    gl_memcg_leave(o.cgroup);
    return ktap_finish();
}
