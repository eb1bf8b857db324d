// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest: faultline's guest selftest for the kernel swap paths the seed
 * patches touch (zswap writeback, dropbehind on writeback completion, redirty
 * on swap write error, read errors, workingset shadows, completion context).
 *
 *   swaptest MODE [options]
 *
 * MODE: writeback | completion | write-error | heal | read-error | refault | race |
 * readahead | lru
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
#include "guestlib-nvme.h"
#include "swaptest.h"
#include "ktap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KPROBE_GROUP "faultline"
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define ZSWAP_DEBUGFS "/sys/kernel/debug/zswap"
#define NVME_CTRL "/dev/nvme0"

/* ------------------------------------------------------------ modes */

/*
 * A mode: the options it implies (in swaptest's own syntax; options given on
 * the command line override them), what it runs and the checks it asserts
 * afterwards (swaptest-checks.c).
 */
struct mode {
    const char *name;
    const char *presets;
    void (*run)(struct run *R);
    int (*planned)(void);       /* KTAP results of run() */
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
};
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* ------------------------------------------------------------ options */

struct options o;
static const struct mode *mode;

static void usage(void)
{
    fprintf(stderr,
"usage: swaptest MODE [options]\n"
"  MODE: writeback completion write-error heal read-error refault race readahead lru\n"
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
"  --threads N --duration SECONDS --chunk-pages N   (race)\n"
"  --page-cluster N --expect-ra zero|some   (readahead)\n");
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
    { NULL, 0, NULL, 0 },
};

/* Apply options argv[1..argc-1] to o (the mode's presets, then the user's). */
static void apply_options(int argc, char **argv)
{
    int c;

    optind = 0;     /* full getopt reset: called once per option vector */
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o.mem = gl_parse_size(optarg); break;
        case 'M': o.memcg_max = gl_parse_size(optarg); break;
        case 's': o.seed = strtoull(optarg, NULL, 0); break;
        case 'c': o.cgroup = optarg; break;
        case 'r': o.rounds = atoi(optarg); break;
        case 'z': o.zswap = on_off(optarg); break;
        case 'S': o.shrinker = on_off(optarg); break;
        case 'x': o.zswap_max = optarg; break;
        case 'w': o.zswap_writeback = on_off(optarg); break;
        case 'W': o.wb_rounds = atoi(optarg); break;
        case 'T': o.settle_ms = atoi(optarg); break;
        case 'a': o.arm_state = strtol(optarg, NULL, 0); break;
        case 'A':
            o.arm_at = one_of(optarg, "writeback", "refault") ? ARM_REFAULT : ARM_WRITEBACK;
            break;
        case 'd': o.disarm = 1; break;
        case 'D': o.fault_dev = optarg; break;
        case 'k': o.kernel_mode = optarg; break;
        case 'C': o.expect_ctx = optarg; break;
        case 1: o.expect_sync = 1; break;
        case 2: o.expect_sync = 0; break;
        case 3: o.fill_writeback = on_off(optarg); break;
        case 4: o.wb_refaults = on_off(optarg); break;
        case 5: o.heal_slots = on_off(optarg); break;
        case 6: o.disarm = 0; break;
        case 7: o.device_lost = 1; break;
        case 'e': o.expect_errors = 1; break;
        case 'b': o.expect_sigbus = 1; break;
        case 't': o.threads = atoi(optarg); break;
        case 'u': o.duration = atof(optarg); break;
        case 'p': o.chunk_pages = atoi(optarg); break;
        case 10: o.page_cluster = atoi(optarg); break;
        case 11:
            one_of(optarg, "zero", "some");
            o.expect_ra = optarg;
            break;
        case 'B': o.wb_limit = one_of(optarg, "shrinker", "limit"); break;
        case 'R': o.wb_reclaims = atoi(optarg); break;
        case 'P': o.compressible = one_of(optarg, "half", "compressible"); break;
        default: usage();
        }
    }
    if (optind != argc) {
        usage();
    }
}

/* The mode's presets as an argv ("swaptest" then the words). */
static void apply_presets(const char *presets)
{
    char *words = strdup(presets), *save = NULL;
    char *argv[32] = { "swaptest" };
    int argc = 1;

    for (char *w = strtok_r(words, " ", &save); w && argc < 31;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = w;
    }
    apply_options(argc, argv);
    /* o's strings from presets point into words: keep it */
}

static void parse_args(int argc, char **argv)
{
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
    o = (struct options){
        .mode = argv[1], .mem = 128 << 20, .memcg_max = 64 << 20, .seed = 1,
        .cgroup = "swaptest", .zswap = -1, .shrinker = -1, .zswap_max = "max",
        .zswap_writeback = 1, .wb_rounds = 2, .rounds = 1, .arm_state = -1,
        .arm_at = ARM_NONE, .fault_dev = "auto",
        .kernel_mode = getenv("FAULTLINE_KERNEL_MODE") ? getenv("FAULTLINE_KERNEL_MODE") :
                       "auto",
        .expect_sync = -1, .settle_ms = 500, .threads = 4, .duration = 30,
        .chunk_pages = 64, .wb_reclaims = 4, .fill_writeback = 1, .page_cluster = -1,
    };
    apply_presets(mode->presets);
    apply_options(argc - 1, argv + 1);
    if (o.arm_state >= 0 && o.arm_at == ARM_NONE) {
        o.arm_at = ARM_WRITEBACK;
    }
    if (o.device_lost) {
        o.disarm = 0;   /* nothing left to disarm */
    }
    if (strcmp(o.kernel_mode, "auto") && strcmp(o.kernel_mode, "stock") &&
        strcmp(o.kernel_mode, "patched")) {
        usage();
    }
    if (!o.mem || !o.memcg_max || o.rounds < 1 || o.wb_rounds < 0 ||
        o.threads < 1 || o.threads > 64 || o.chunk_pages < 1 || o.page_cluster < -1 || o.page_cluster > 31) {
        usage();
    }
}

/* ------------------------------------------------------------ feature probes */

struct feature {
    const char *name;   /* diagnostic name */
    const char *sym;    /* /proc/kallsyms symbol that marks it */
    int dropbehind;     /* evidence of the swap dropbehind patch */
    int present;
};

/*
 * Several probes of the dropbehind patch, any one enough: v3's helper and
 * its static workqueue callbacks (each may be inlined or become a
 * .isra/.constprop copy; the resolver accepts "NAME.suffix" copies of NAME
 * only), and v4's remove_mapping_reclaim (v4 has no helper symbol: it drops
 * from folio_end_writeback). A rebase that renames all of them is judged
 * stock under auto: scenarios that know better declare kernel_mode.
 */
static struct feature features[] = {
    { "dropbehind_v3", "swap_writeback_dropbehind_folio", 1, 0 },
    { "dropbehind_v3_work", "swap_dropbehind_workfn", 1, 0 },
    { "dropbehind_v3_drop", "swap_dropbehind_drop_folio", 1, 0 },
    { "dropbehind_v4", "remove_mapping_reclaim", 1, 0 },
    { "bio_complete_in_task", "__bio_complete_in_task", 0, 0 },
    { "folio_end_dropbehind", "folio_end_dropbehind", 0, 0 },
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))

int patched;

static void probe_features(void)
{
    const char *want[N_FEATURES];
    char got[N_FEATURES][96];
    int found = 0;

    for (size_t i = 0; i < N_FEATURES; i++) {
        want[i] = features[i].sym;
    }
    gl_kallsyms_resolve(want, got, N_FEATURES);
    for (size_t i = 0; i < N_FEATURES; i++) {
        features[i].present = got[i][0] != '\0';
        found += features[i].present && features[i].dropbehind;
        ktap_diag("feature %s %d (%s)", features[i].name, features[i].present,
                  features[i].present ? got[i] : features[i].sym);
    }
    ktap_diag("patch_probes_found %d", found);
    if (!strcmp(o.kernel_mode, "patched")) {
        patched = 1;
    } else if (!strcmp(o.kernel_mode, "stock")) {
        patched = 0;
    } else {
        patched = found > 0;
    }
    ktap_diag("kernel_mode %s%s (patch-specific checks %s)", patched ? "patched" : "stock",
              strcmp(o.kernel_mode, "auto") ? " (declared)" : " (detected)",
              patched ? "asserted" : "reported as baseline");
}

/* ------------------------------------------------------------ tracing */

struct probe probes[P__N] = {
    [P_EBW] = { .sym = "end_swap_bio_write" },
    [P_FEW] = { .sym = "folio_end_writeback" },
    [P_SYNC] = { .sym = "swap_writepage_bdev_sync" },
    [P_ASYNC] = { .sym = "swap_writepage_bdev_async" },
    [P_SWP_WRITEPAGE] = { .sym = "__swap_writepage" },
    [P_ZSWAP_WB] = { .sym = "zswap_writeback_entry" },
    [P_EBR] = { .sym = "end_swap_bio_read" },
    [P_RSYNC] = { .sym = "swap_read_folio_bdev_sync" },
    [P_DROPBEHIND] = { .sym = "swap_writeback_dropbehind_folio" },
    [P_RMR] = { .sym = "remove_mapping_reclaim" },
    [P_FEDB] = { .sym = "folio_end_dropbehind" },
};

int blk_err_ok;
long long blk_errors;

/* Event name of a probe: "fl_" + its symbol without leading underscores. */
static void probe_event(const struct probe *p, char *buf, size_t len)
{
    const char *s = p->sym;

    while (*s == '_') {
        s++;
    }
    snprintf(buf, len, "fl_%s", s);
}

static void tracing_cleanup(void)
{
    char ev[96];

    for (size_t i = 0; i < P__N; i++) {
        probe_event(&probes[i], ev, sizeof(ev));
        gl_kprobe_hist_remove(KPROBE_GROUP, ev);
    }
    gl_hist_trigger("block", "block_rq_error", false);
}

static void tracing_start(void)
{
    const char *want[P__N];
    char got[P__N][96], ev[96];
    int err;

    tracing_cleanup();      /* leftovers of an earlier test in this VM */
    for (size_t i = 0; i < P__N; i++) {
        want[i] = probes[i].sym;
    }
    gl_kallsyms_resolve(want, got, P__N);
    for (size_t i = 0; i < P__N; i++) {
        struct probe *p = &probes[i];

        if (!got[i][0]) {
            continue;
        }
        snprintf(p->resolved, sizeof(p->resolved), "%.95s", got[i]);
        if (strcmp(got[i], p->sym)) {
            ktap_diag("kprobe %s resolved to %s", p->sym, got[i]);
        }
        probe_event(p, ev, sizeof(ev));
        err = gl_kprobe_hist_add(KPROBE_GROUP, ev, p->resolved);
        p->ok = !err;
        if (err) {
            ktap_diag("kprobe %s not installed: %s", p->sym, strerror(-err));
        }
    }
    err = gl_hist_trigger("block", "block_rq_error", true);
    blk_err_ok = !err;
    if (err) {
        ktap_diag("block_rq_error hist trigger not installed: %s", strerror(-err));
    }
}

static void tracing_collect(void)
{
    char ev[96], path[256];
    struct gl_hist h;

    for (size_t i = 0; i < P__N; i++) {
        struct probe *p = &probes[i];

        if (!p->ok) {
            continue;
        }
        probe_event(p, ev, sizeof(ev));
        gl_trace_event_path(path, sizeof(path), KPROBE_GROUP, ev, "hist");
        if (gl_hist_read(path, &p->hist) < 0) {
            p->ok = 0;
        }
    }
    if (blk_err_ok) {
        gl_trace_event_path(path, sizeof(path), "block", "block_rq_error", "hist");
        if (gl_hist_read(path, &h) == 0) {
            blk_errors = h.sum;
        }
    }
    tracing_cleanup();
}

static void tracing_report(void)
{
    for (size_t i = 0; i < P__N; i++) {
        struct probe *p = &probes[i];

        if (!p->ok) {
            ktap_diag("kprobe %s n/a", p->sym);
            continue;
        }
        ktap_diag("kprobe %s %lld", p->sym, p->hist.sum);
        for (int c = 0; c < GL_CTX__N; c++) {
            ktap_diag("ctx %s %s %lld", p->sym, gl_ctx_names[c], p->hist.ctx[c]);
        }
    }
    if (blk_err_ok) {
        ktap_diag("block_rq_error %lld", blk_errors);
    } else {
        ktap_diag("block_rq_error n/a");
    }
}

/* ------------------------------------------------------------ counters */

static const char *const memstat_keys[] = {
    "anon", "swapcached", "zswap", "zswapped", "zswpin", "zswpout", "zswpwb",
    "pswpin", "pswpout", "pgscan", "pgsteal", "workingset_refault_anon",
    "workingset_activate_anon", "workingset_restore_anon",
};
#define N_MEMSTAT (sizeof(memstat_keys) / sizeof(memstat_keys[0]))

void report_memstat(const char *prefix)
{
    gl_memcg_report(o.cgroup, prefix, memstat_keys, N_MEMSTAT);
}

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

/* ------------------------------------------------------------ fault arming */

static int fault_dev_is_syncblk(void)
{
    struct stat st;

    if (!strcmp(o.fault_dev, "syncblk")) {
        return 1;
    }
    if (!strcmp(o.fault_dev, "nvme")) {
        return 0;
    }
    return stat("/sys/block/syncblk0", &st) == 0;
}

static int syncblk_state_path(char *buf, size_t len)
{
    static const char *const cands[] = {
        "/sys/block/syncblk0/fault_state",
        "/sys/block/syncblk0/device/fault_state",
        "/sys/block/syncblk0/queue/fault_state",
    };
    struct stat st;

    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
        if (stat(cands[i], &st) == 0) {
            snprintf(buf, len, "%s", cands[i]);
            return 0;
        }
    }
    return -ENOENT;
}

/*
 * Set the device's fault-engine state: NVMe through faultctl's library call
 * (vendor feature 0xC0, prints "# nvme state N (was M)"), syncblk through its
 * sysfs file.
 */
static int fault_set_state(long state)
{
    char num[24], path[256];
    int ret, fd;

    if (fault_dev_is_syncblk()) {
        snprintf(num, sizeof(num), "%ld", state);
        ret = syncblk_state_path(path, sizeof(path));
        if (!ret) {
            ret = gl_write_file(path, num);
        }
        if (ret) {
            ktap_diag("syncblk fault_state: %s", strerror(-ret));
            return ret;
        }
        ktap_diag("fault state %ld set via %s", state, path);
        return 0;
    }
    fd = open(NVME_CTRL, O_RDONLY);
    if (fd < 0) {
        ret = -errno;
        ktap_diag("open " NVME_CTRL ": %s", strerror(-ret));
        return ret;
    }
    ret = gl_faultctl_set_state(fd, (uint32_t)state);
    close(fd);
    if (ret) {
        ktap_diag("NVMe Set Features 0xC0 failed: %s", ret < 0 ? strerror(-ret) :
                  "device returned an NVMe status (no fault layer?)");
        return ret < 0 ? ret : -EIO;
    }
    ktap_diag("fault state %ld set by faultctl", state);
    return 0;
}

/* The rule hits after a disarm ("# rule NAME hits N"), as `faultctl hits`. */
static void fault_hits_report(void)
{
    int fd;

    if (fault_dev_is_syncblk()) {
        return;
    }
    fd = open(NVME_CTRL, O_RDONLY);
    if (fd >= 0) {
        gl_faultctl_print_hits(fd);
        close(fd);
    }
}

static int armed;

void arm(const char *where)
{
    int err;

    if (o.arm_state < 0) {
        return;
    }
    err = fault_set_state(o.arm_state);
    ktap_check(!err, ktap_name("fault state %ld armed %s", o.arm_state, where),
               err ? "error %d" : NULL, err);
    armed = !err;
}

void disarm(const char *where)
{
    int err;

    if (o.arm_state < 0 || !o.disarm) {
        return;
    }
    err = fault_set_state(0);
    ktap_check(!err, ktap_name("fault state 0 (disarmed) %s", where), err ? "error %d" : NULL,
               err);
    armed = 0;
    fault_hits_report();
}

/* ------------------------------------------------------------ setup/teardown */

static char old_thp[64], old_zswap[8], old_shrinker[8];
char wb_shrinker[8] = "Y";

static void global_setup(void)
{
    char buf[256], *s, *e;

    /* THP: "always [madvise] never" -> remember the bracketed one. */
    if (gl_read_file(THP_ENABLED, buf, sizeof(buf)) == 0 && (s = strchr(buf, '[')) &&
        (e = strchr(s, ']'))) {
        *e = '\0';
        snprintf(old_thp, sizeof(old_thp), "%s", s + 1);
    }
    gl_write_file(THP_ENABLED, "never");
    gl_read_file(ZSWAP_PARAM "enabled", old_zswap, sizeof(old_zswap));
    gl_read_file(ZSWAP_PARAM "shrinker_enabled", old_shrinker, sizeof(old_shrinker));
    if (o.zswap >= 0) {
        gl_write_file(ZSWAP_PARAM "enabled", o.zswap ? "Y" : "N");
    }
    if (o.shrinker >= 0) {
        gl_write_file(ZSWAP_PARAM "shrinker_enabled", o.shrinker ? "Y" : "N");
    }
    gl_read_file(ZSWAP_PARAM "shrinker_enabled", wb_shrinker, sizeof(wb_shrinker));
    gl_read_file(ZSWAP_PARAM "enabled", buf, sizeof(buf));
    ktap_diag("zswap enabled %s shrinker %s", buf,
              gl_read_file(ZSWAP_PARAM "shrinker_enabled", buf + 8, 8) == 0 ? buf + 8 : "?");
}

static void global_teardown(void)
{
    if (old_thp[0]) {
        gl_write_file(THP_ENABLED, old_thp);
    }
    if (old_zswap[0]) {
        gl_write_file(ZSWAP_PARAM "enabled", old_zswap);
    }
    if (old_shrinker[0]) {
        gl_write_file(ZSWAP_PARAM "shrinker_enabled", old_shrinker);
    }
}

static int memcg_setup(void)
{
    int err = gl_memcg_enter(o.cgroup, o.memcg_max);

    ktap_check(!err, ktap_name("memcg %s created and joined (memory.max %" PRIu64 ")", o.cgroup,
                               o.memcg_max), NULL);
    if (err) {
        ktap_diag("memcg error %s", strerror(-err));
        return err;
    }
    zswap_max_restore();
    gl_memcg_set(o.cgroup, "memory.zswap.writeback", o.zswap_writeback ? "1" : "0");
    return 0;
}

int main(int argc, char **argv)
{
    struct run R;
    struct zdebug z0, z1;
    double t0 = gl_now_s();
    int kmsg_fd;

    memset(&R, 0, sizeof(R));
    parse_args(argc, argv);
    lock_own_memory();      /* only the pattern swaps (map_pattern) */
    /* memcg joined, the mode's run and checks, no splat */
    ktap_header(1 + mode->planned() + checks_planned(mode->checks) + 1);
    ktap_diag("swaptest %s mem=%" PRIu64 " memcg_max=%" PRIu64 " seed=%" PRIu64
              " pattern=%s", o.mode, o.mem, o.memcg_max, o.seed,
              o.compressible ? "compressible" : "half");
    kmsg_fd = gl_kmsg_open();
    sigbus_install();
    probe_features();
    global_setup();
    tracing_start();
    zswap_debugfs_read(&z0);
    if (memcg_setup() == 0) {
        mode->run(&R);
        report_memstat("memstat");
        tracing_collect();
        zswap_debugfs_read(&z1);
        gl_vmstat_report("vmstat", &R.v0, &R.v_end);
        zswap_debugfs_report(&z0, &z1);
        tracing_report();
        gl_kmsg_scan(kmsg_fd, &R.kmsg);
        run_checks(mode->checks, &R);
        report_metrics(&R);
        run_check(&check_no_splat, &R);
        if (armed && o.arm_state >= 0) {
            ktap_diag("note: fault state left armed (no --disarm)");
        }
        gl_memcg_leave(o.cgroup);
    } else {
        tracing_cleanup();
    }
    global_teardown();
    ktap_diag("patch_checks_asserted %d", patch_checks_asserted);
    ktap_diag("elapsed %.1fs", gl_now_s() - t0);
    return ktap_finish();
}
