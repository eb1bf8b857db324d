// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest: faultline's guest selftest for the kernel swap paths the seed
 * patches touch (zswap writeback, dropbehind on writeback completion, redirty
 * on swap write error, read errors, workingset shadows, completion context).
 *
 *   swaptest MODE [options]
 *
 * MODE: writeback | completion | write-error | heal | read-error | refault | race |
 * readahead | lru | swapoff
 * (docs/scenarios.md describes each, its options and what it asserts; the
 * table of modes below gives each one's presets, run and checks).
 *
 * Every mode runs in its own memcg with THP off, fills anonymous memory with
 * the seeded per-page pattern (half compressible), forces reclaim with
 * memory.reclaim (and zswap writeback by lowering memory.zswap.max), verifies
 * every page, and prints evidence as KTAP diagnostics (`# key value`):
 * vmstat/memory.stat deltas, zswap debugfs, block_rq_error counts, kprobe hit
 * counts and the completion-context histogram of the swap write path. It
 * fails on a lost byte, an unexpected SIGBUS, or a BUG/WARNING/Oops/lockdep
 * splat in /dev/kmsg since the test started.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZSWAP_DEBUGFS "/sys/kernel/debug/zswap"

/* ------------------------------------------------------------ modes */

/*
 * A mode: the options it implies (in swaptest's own syntax; options given on
 * the command line override them), what it runs and the checks it asserts
 * afterwards (swaptest-checks.c).
 */
struct mode {
    const char *name;
    const char *presets;
    void (*run)(const struct options *o, struct run *R);
    int (*planned)(const struct options *o);    /* KTAP results of run() */
    const struct check *const *checks;
};

static const struct mode modes[] = {
    { "writeback", "--zswap on --fill-writeback off", pipeline, pipeline_planned,
      writeback_checks },
    { "completion", "--zswap on", pipeline, pipeline_planned, completion_checks },
    { "write-error", "--expect-errors --arm-at writeback --disarm", pipeline,
      pipeline_planned, write_error_checks },
    { "heal", "--expect-errors --arm-at writeback --disarm --rounds 2 --heal-check on",
      pipeline, pipeline_planned, heal_checks },
    { "read-error", "--zswap off --arm-at refault --disarm", pipeline, pipeline_planned,
      read_error_checks },
    { "refault", "--zswap on --rounds 2 --wb-refaults on", pipeline, pipeline_planned,
      refault_checks },
    { "race", "--zswap on --arm-at writeback", race, race_planned, race_checks },
    { "readahead", "--pattern compressible", readahead_run, readahead_planned,
      readahead_checks },
    { "lru", "--zswap on --wb-rounds 1 --wb-reclaims 12", lru_run, lru_planned, lru_checks },
    { "swapoff", "--zswap off --disarm", swapoff_run, swapoff_planned, swapoff_checks },
};
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* ------------------------------------------------------------ options */

static void usage(void)
{
    fprintf(stderr,
"usage: swaptest MODE [options]\n"
"  MODE: writeback completion write-error heal read-error refault race readahead lru swapoff\n"
"  --mem SIZE --memcg-max SIZE --seed N --cgroup NAME --rounds N\n"
"  --zswap on|off --shrinker on|off --zswap-max SIZE|max --zswap-writeback 0|1\n"
"  --wb-rounds N --wb-method shrinker|limit --wb-reclaims N --settle-ms N\n"
"  --fill-writeback on|off\n"
"  --arm-state N [--arm-at writeback|refault] [--disarm|--no-disarm]\n"
"  --fault-dev auto|nvme|syncblk\n"
"  --kernel-mode auto|stock|patched   (default: $FAULTLINE_KERNEL_MODE, else auto)\n"
"  --wb-refaults on|off --heal-check on|off\n"
"  --expect-ctx hardirq|softirq|irq|task --expect-sync --expect-async\n"
"  --expect-errors --expect-sigbus --device-lost\n"
"  --pattern half|compressible\n"
"  --threads N --duration SECONDS --chunk-pages N --leak-check   (race)\n"
"  --page-cluster N --expect-ra zero|some   (readahead)\n"
"  --swapoff-dev DEV [--shmem SIZE] [--swapoff-stall SECONDS]   (swapoff)\n");
    exit(2);
}

static int on_off(const char *s)
{
    if (!strcmp(s, "on") || !strcmp(s, "1") || !strcmp(s, "Y")) {
        return 1;
    }
    if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "N")) {
        return 0;
    }
    usage();
    return 0;
}

/* 0 for @first, 1 for @second, else usage. */
static int one_of(const char *s, const char *first, const char *second)
{
    if (strcmp(s, first) && strcmp(s, second)) {
        usage();
    }
    return !strcmp(s, second);
}

static const struct option longopts[] = {
    { "mem", required_argument, NULL, 'm' },
    { "memcg-max", required_argument, NULL, 'M' },
    { "seed", required_argument, NULL, 's' },
    { "cgroup", required_argument, NULL, 'c' },
    { "rounds", required_argument, NULL, 'r' },
    { "zswap", required_argument, NULL, 'z' },
    { "shrinker", required_argument, NULL, 'S' },
    { "zswap-max", required_argument, NULL, 'x' },
    { "zswap-writeback", required_argument, NULL, 'w' },
    { "wb-rounds", required_argument, NULL, 'W' },
    { "settle-ms", required_argument, NULL, 'T' },
    { "arm-state", required_argument, NULL, 'a' },
    { "arm-at", required_argument, NULL, 'A' },
    { "disarm", no_argument, NULL, 'd' },
    { "fault-dev", required_argument, NULL, 'D' },
    { "kernel-mode", required_argument, NULL, 'k' },
    { "expect-ctx", required_argument, NULL, 'C' },
    { "expect-sync", no_argument, NULL, 1 },
    { "expect-async", no_argument, NULL, 2 },
    { "expect-errors", no_argument, NULL, 'e' },
    { "expect-sigbus", no_argument, NULL, 'b' },
    { "threads", required_argument, NULL, 't' },
    { "duration", required_argument, NULL, 'u' },
    { "chunk-pages", required_argument, NULL, 'p' },
    { "page-cluster", required_argument, NULL, 10 },
    { "expect-ra", required_argument, NULL, 11 },
    { "pattern", required_argument, NULL, 'P' },
    { "wb-method", required_argument, NULL, 'B' },
    { "wb-reclaims", required_argument, NULL, 'R' },
    { "fill-writeback", required_argument, NULL, 3 },
    { "wb-refaults", required_argument, NULL, 4 },
    { "heal-check", required_argument, NULL, 5 },
    { "no-disarm", no_argument, NULL, 6 },
    { "device-lost", no_argument, NULL, 7 },
    { "leak-check", no_argument, NULL, 8 },
    { "shmem", required_argument, NULL, 12 },
    { "swapoff-dev", required_argument, NULL, 13 },
    { "swapoff-stall", required_argument, NULL, 14 },
    { NULL, 0, NULL, 0 },
};

/* Apply options argv[1..argc-1] to @o (the mode's presets, then the user's). */
static void apply_options(struct options *o, int argc, char **argv)
{
    int c;

    optind = 0;     /* full getopt reset: called once per option vector */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->mem = gl_parse_size(optarg); break;
        case 'M': o->memcg_max = gl_parse_size(optarg); break;
        case 's': o->seed = strtoull(optarg, NULL, 0); break;
        case 'c': o->cgroup = optarg; break;
        case 'r': o->rounds = atoi(optarg); break;
        case 'z': o->zswap = on_off(optarg); break;
        case 'S': o->shrinker = on_off(optarg); break;
        case 'x': o->zswap_max = optarg; break;
        case 'w': o->zswap_writeback = on_off(optarg); break;
        case 'W': o->wb_rounds = atoi(optarg); break;
        case 'T': o->settle_ms = atoi(optarg); break;
        case 'a': o->arm_state = strtol(optarg, NULL, 0); break;
        case 'A':
            o->arm_at = one_of(optarg, "writeback", "refault") ? ARM_REFAULT : ARM_WRITEBACK;
            break;
        case 'd': o->disarm = 1; break;
        case 'D': o->fault_dev = optarg; break;
        case 'k': o->kernel_mode = optarg; break;
        case 'C': o->expect_ctx = optarg; break;
        case 1: o->expect_sync = 1; break;
        case 2: o->expect_sync = 0; break;
        case 3: o->fill_writeback = on_off(optarg); break;
        case 4: o->wb_refaults = on_off(optarg); break;
        case 5: o->heal_slots = on_off(optarg); break;
        case 6: o->disarm = 0; break;
        case 7: o->device_lost = 1; break;
        case 8: o->leak_check = 1; break;
        case 12: o->shmem = gl_parse_size(optarg); break;
        case 13: o->swapoff_dev = optarg; break;
        case 14: o->swapoff_stall = atoi(optarg); break;
        case 'e': o->expect_errors = 1; break;
        case 'b': o->expect_sigbus = 1; break;
        case 't': o->threads = atoi(optarg); break;
        case 'u': o->duration = atof(optarg); break;
        case 'p': o->chunk_pages = atoi(optarg); break;
        case 10: o->page_cluster = atoi(optarg); break;
        case 11:
            one_of(optarg, "zero", "some");
            o->expect_ra = optarg;
            break;
        case 'B': o->wb_limit = one_of(optarg, "shrinker", "limit"); break;
        case 'R': o->wb_reclaims = atoi(optarg); break;
        case 'P': o->compressible = one_of(optarg, "half", "compressible"); break;
        default: usage();
        }
    }
    if (optind != argc) {
        usage();
    }
}

/* The mode's presets as an argv ("swaptest" then the words). */
static void apply_presets(struct options *o, const char *presets)
{
    char *words = strdup(presets), *save = NULL;
    char *argv[32] = { "swaptest" };
    int argc = 1;

    for (char *w = strtok_r(words, " ", &save); w && argc < 31;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = w;
    }
    apply_options(o, argc, argv);
    /* @o's strings from presets point into words: keep it */
}

/* The mode argv names, its options in @o (usage() on bad input). */
static const struct mode *parse_args(int argc, char **argv, struct options *o)
{
    const struct mode *mode = NULL;

    if (argc < 2 || argv[1][0] == '-') {
        usage();
    }
    for (size_t i = 0; i < N_MODES; i++) {
        if (!strcmp(argv[1], modes[i].name)) {
            mode = &modes[i];
        }
    }
    if (!mode) {
        usage();
    }
    *o = (struct options){
        .mode = argv[1], .mem = 128 << 20, .memcg_max = 64 << 20, .seed = 1,
        .cgroup = "swaptest", .zswap = -1, .shrinker = -1, .zswap_max = "max",
        .zswap_writeback = 1, .wb_rounds = 2, .rounds = 1, .arm_state = -1,
        .arm_at = ARM_NONE, .fault_dev = "auto",
        .kernel_mode = getenv("FAULTLINE_KERNEL_MODE") ? getenv("FAULTLINE_KERNEL_MODE") :
                       "auto",
        .expect_sync = -1, .settle_ms = 500, .threads = 4, .duration = 30,
        .chunk_pages = 64, .wb_reclaims = 4, .fill_writeback = 1, .page_cluster = -1,
        .shmem = 16 << 20, .swapoff_stall = 30,
    };
    apply_presets(o, mode->presets);
    apply_options(o, argc - 1, argv + 1);
    if (o->arm_state >= 0 && o->arm_at == ARM_NONE) {
        o->arm_at = ARM_WRITEBACK;
    }
    if (o->device_lost) {
        o->disarm = 0;   /* nothing left to disarm */
    }
    if (strcmp(o->kernel_mode, "auto") && strcmp(o->kernel_mode, "stock") &&
        strcmp(o->kernel_mode, "patched")) {
        usage();
    }
    /* swapoff needs its device; it fills and checks only what it swapped */
    if (!strcmp(o->mode, "swapoff") && (!o->swapoff_dev || !o->shmem || o->swapoff_stall < 1)) {
        usage();
    }
    if (!o->mem || !o->memcg_max || o->rounds < 1 || o->wb_rounds < 0 ||
        o->threads < 1 || o->threads > 64 || o->chunk_pages < 1 || o->page_cluster < -1 || o->page_cluster > 31) {
        usage();
    }
    return mode;
}

/* ------------------------------------------------------------ counters */

#define MAX_DEBUGFS 32
struct zdebug {
    int n;
    char name[MAX_DEBUGFS][48];
    long long v[MAX_DEBUGFS];
};

static void zswap_debugfs_read(struct zdebug *z)
{
    DIR *d = opendir(ZSWAP_DEBUGFS);
    struct dirent *e;
    char path[320];

    z->n = 0;
    if (!d) {
        return;
    }
    while ((e = readdir(d)) && z->n < MAX_DEBUGFS) {
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), ZSWAP_DEBUGFS "/%s", e->d_name);
        snprintf(z->name[z->n], sizeof(z->name[0]), "%.47s", e->d_name);
        z->v[z->n] = gl_read_u64(path);
        z->n++;
    }
    closedir(d);
}

static void zswap_debugfs_report(const struct zdebug *a, const struct zdebug *b)
{
    if (!b->n) {
        ktap_diag("zswap_debugfs n/a");
    }
    for (int i = 0; i < b->n; i++) {
        long long before = 0;

        for (int j = 0; j < a->n; j++) {
            if (!strcmp(a->name[j], b->name[i])) {
                before = a->v[j];
            }
        }
        ktap_diag("zswap_debugfs %s %lld", b->name[i], b->v[i] - before);
    }
}

/* ------------------------------------------------------------ setup */

static int memcg_setup(const struct options *o)
{
    int err = gl_memcg_enter(o->cgroup, o->memcg_max);

    ktap_check(!err, ktap_name("memcg %s created and joined (memory.max %" PRIu64 ")", o->cgroup,
                               o->memcg_max), NULL);
    if (err) {
        ktap_diag("memcg error %s", strerror(-err));
        return err;
    }
    zswap_max_restore(o);
    gl_memcg_set(o->cgroup, "memory.zswap.writeback", o->zswap_writeback ? "1" : "0");
    return 0;
}

int main(int argc, char **argv)
{
    struct options opts;
    const struct options *o = &opts;
    const struct mode *mode;
    struct run R;
    struct zdebug z0, z1;
    double t0 = gl_now_s();
    int kmsg_fd, patch_checks_asserted = 0;

    memset(&R, 0, sizeof(R));
    tracing_init(&R.tr);
    mode = parse_args(argc, argv, &opts);
    lock_own_memory();      /* only the pattern swaps (map_pattern) */
    /* memcg joined, the mode's run and checks, no splat */
    ktap_header(1 + mode->planned(o) + checks_planned(mode->checks, o) + 1);
    ktap_diag("swaptest %s mem=%" PRIu64 " memcg_max=%" PRIu64 " seed=%" PRIu64
              " pattern=%s", o->mode, o->mem, o->memcg_max, o->seed,
              o->compressible ? "compressible" : "half");
    kmsg_fd = gl_kmsg_open();
    sigbus_install();
    probe_features(&R.tr, o->kernel_mode);
    global_setup(o, &R.env);
    tracing_start(&R.tr);
    zswap_debugfs_read(&z0);
    if (memcg_setup(o) == 0) {
        mode->run(o, &R);
        report_memstat(o, "memstat");
        tracing_collect(&R.tr);
        zswap_debugfs_read(&z1);
        gl_vmstat_report("vmstat", &R.v0, &R.v_end);
        zswap_debugfs_report(&z0, &z1);
        tracing_report(&R.tr);
        gl_kmsg_scan(kmsg_fd, &R.kmsg);
        patch_checks_asserted += run_checks(mode->checks, o, &R);
        report_metrics(&R);
        patch_checks_asserted += run_check(&check_no_splat, o, &R);
        if (fault_left_armed() && o->arm_state >= 0) {
            ktap_diag("note: fault state left armed (no --disarm)");
        }
        gl_memcg_leave(o->cgroup);
    } else {
        tracing_cleanup(&R.tr);
    }
    global_teardown(&R.env);
    ktap_diag("patch_checks_asserted %d", patch_checks_asserted);
    ktap_diag("elapsed %.1fs", gl_now_s() - t0);
    return ktap_finish();
}
