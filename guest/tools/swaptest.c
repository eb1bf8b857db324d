// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest: faultline's guest selftest for the kernel swap paths the seed
 * patches touch (zswap writeback, dropbehind on writeback completion, redirty
 * on swap write error, read errors, workingset shadows, completion context).
 *
 *   swaptest MODE [options]
 *
 * MODE: writeback | completion | write-error | heal | read-error | refault | race
 * (docs/scenarios.md describes each, its options and what it asserts).
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
#include "guestlib.h"
#include "ktap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/nvme_ioctl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define TRACEFS "/sys/kernel/tracing"
#define KPROBE_GROUP "faultline"
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define ZSWAP_PARAM "/sys/module/zswap/parameters/"
#define ZSWAP_DEBUGFS "/sys/kernel/debug/zswap"

/* ------------------------------------------------------------ options */

enum arm_point { ARM_NONE, ARM_WRITEBACK, ARM_REFAULT };

struct options {
    const char *mode;
    uint64_t mem, memcg_max, seed;
    const char *cgroup;
    int zswap;              /* -1: leave as configured, 0 off, 1 on */
    int shrinker;           /* -1: leave */
    const char *zswap_max;  /* memory.zswap.max during the test */
    int zswap_writeback;    /* memory.zswap.writeback */
    int wb_rounds;          /* forced-writeback rounds */
    int rounds;             /* verify rounds after writeback */
    long arm_state;         /* -1: no arming */
    enum arm_point arm_at;
    int disarm;
    const char *fault_dev;  /* auto | nvme | syncblk */
    const char *kernel_mode;/* auto | stock | patched */
    const char *expect_ctx; /* hardirq | softirq | irq | task | NULL */
    int expect_sync;        /* 1: sync bdev path, 0: async, -1: don't care */
    int expect_errors;      /* write/read errors must be seen */
    int expect_sigbus;
    int dropbehind_checks;
    int refault_checks;
    int settle_ms;
    int threads;
    double duration;
    int chunk_pages;
    int compressible;       /* every page compressible (default: half) */
    int wb_limit;           /* force writeback by lowering memory.zswap.max */
    int wb_reclaims;        /* memory.reclaim calls per round (shrinker) */
    int fill_writeback;     /* 0: no zswap writeback before the writeback phase */
};

static struct options o;

static void usage(void)
{
    fprintf(stderr,
"usage: swaptest MODE [options]\n"
"  MODE: writeback completion write-error heal read-error refault race\n"
"  --mem SIZE --memcg-max SIZE --seed N --cgroup NAME --rounds N\n"
"  --zswap on|off --shrinker on|off --zswap-max SIZE|max --zswap-writeback 0|1\n"
"  --wb-rounds N --wb-method shrinker|limit --wb-reclaims N --settle-ms N\n"
"  --fill-writeback on|off\n"
"  --arm-state N [--arm-at writeback|refault] [--disarm] [--fault-dev auto|nvme|syncblk]\n"
"  --kernel-mode auto|stock|patched\n"
"  --expect-ctx hardirq|softirq|irq|task --expect-sync --expect-async\n"
"  --expect-errors --expect-sigbus\n"
"  --pattern half|compressible\n"
"  --threads N --duration SECONDS --chunk-pages N   (race)\n");
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

static void parse_args(int argc, char **argv)
{
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
        { "pattern", required_argument, NULL, 'P' },
        { "wb-method", required_argument, NULL, 'B' },
        { "wb-reclaims", required_argument, NULL, 'R' },
        { "fill-writeback", required_argument, NULL, 3 },
        { NULL, 0, NULL, 0 },
    };
    int c;

    if (argc < 2 || argv[1][0] == '-') {
        usage();
    }
    o = (struct options){
        .mode = argv[1], .mem = 128 << 20, .memcg_max = 64 << 20, .seed = 1,
        .cgroup = "swaptest", .zswap = -1, .shrinker = -1, .zswap_max = "max",
        .zswap_writeback = 1, .wb_rounds = 2, .rounds = 1, .arm_state = -1,
        .arm_at = ARM_NONE, .fault_dev = "auto", .kernel_mode = "auto",
        .expect_sync = -1, .settle_ms = 500, .threads = 4, .duration = 30,
        .chunk_pages = 64, .wb_reclaims = 4, .fill_writeback = 1,
    };
    /* Mode presets; options given afterwards override them. */
    if (!strcmp(o.mode, "writeback")) {
        o.zswap = 1;
        o.dropbehind_checks = 1;
        o.fill_writeback = 0;
    } else if (!strcmp(o.mode, "completion")) {
        o.zswap = 1;
    } else if (!strcmp(o.mode, "write-error")) {
        o.expect_errors = 1;
        o.arm_at = ARM_WRITEBACK;
        o.disarm = 1;
    } else if (!strcmp(o.mode, "heal")) {
        o.expect_errors = 1;
        o.arm_at = ARM_WRITEBACK;
        o.disarm = 1;
        o.rounds = 2;
    } else if (!strcmp(o.mode, "read-error")) {
        o.zswap = 0;
        o.arm_at = ARM_REFAULT;
        o.disarm = 1;
    } else if (!strcmp(o.mode, "refault")) {
        o.zswap = 1;
        o.refault_checks = 1;
        o.rounds = 2;
    } else if (!strcmp(o.mode, "race")) {
        o.zswap = 1;
        o.arm_at = ARM_WRITEBACK;
    } else {
        usage();
    }
    optind = 2;
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
            if (!strcmp(optarg, "writeback")) {
                o.arm_at = ARM_WRITEBACK;
            } else if (!strcmp(optarg, "refault")) {
                o.arm_at = ARM_REFAULT;
            } else {
                usage();
            }
            break;
        case 'd': o.disarm = 1; break;
        case 'D': o.fault_dev = optarg; break;
        case 'k': o.kernel_mode = optarg; break;
        case 'C': o.expect_ctx = optarg; break;
        case 1: o.expect_sync = 1; break;
        case 2: o.expect_sync = 0; break;
        case 3: o.fill_writeback = on_off(optarg); break;
        case 'e': o.expect_errors = 1; break;
        case 'b': o.expect_sigbus = 1; break;
        case 't': o.threads = atoi(optarg); break;
        case 'u': o.duration = atof(optarg); break;
        case 'p': o.chunk_pages = atoi(optarg); break;
        case 'B':
            if (!strcmp(optarg, "limit")) {
                o.wb_limit = 1;
            } else if (!strcmp(optarg, "shrinker")) {
                o.wb_limit = 0;
            } else {
                usage();
            }
            break;
        case 'R': o.wb_reclaims = atoi(optarg); break;
        case 'P':
            if (!strcmp(optarg, "compressible")) {
                o.compressible = 1;
            } else if (!strcmp(optarg, "half")) {
                o.compressible = 0;
            } else {
                usage();
            }
            break;
        default: usage();
        }
    }
    if (o.arm_state >= 0 && o.arm_at == ARM_NONE) {
        o.arm_at = ARM_WRITEBACK;
    }
    if (!o.mem || !o.memcg_max || o.rounds < 1 || o.wb_rounds < 0 ||
        o.threads < 1 || o.threads > 64 || o.chunk_pages < 1 || optind != argc) {
        usage();
    }
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ feature probes */

struct feature {
    const char *name;   /* diagnostic name */
    const char *sym;    /* /proc/kallsyms symbol that marks it */
    int present;
};

static struct feature features[] = {
    { "dropbehind_v3", "swap_writeback_dropbehind_folio", 0 },
    { "bio_complete_in_task", "__bio_complete_in_task", 0 },
    { "folio_end_dropbehind", "folio_end_dropbehind", 0 },
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))

/*
 * One pass over /proc/kallsyms resolving every symbol in @want: the exact name,
 * or else a compiler clone ("name.isra.0", "name.constprop.0") into @got.
 */
static void kallsyms_resolve(const char *const *want, char (*got)[96], size_t n)
{
    FILE *f = fopen("/proc/kallsyms", "r");
    char line[512], addr[32], type[8], name[256];

    for (size_t i = 0; i < n; i++) {
        got[i][0] = '\0';
    }
    if (!f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%31s %7s %255s", addr, type, name) != 3) {
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(want[i]);

            if (strncmp(name, want[i], len)) {
                continue;
            }
            if (!name[len]) {
                snprintf(got[i], sizeof(got[i]), "%.95s", name);
            } else if (name[len] == '.' && !got[i][0]) {
                snprintf(got[i], sizeof(got[i]), "%.95s", name);
            }
        }
    }
    fclose(f);
}

static int patched;     /* patch-specific expectations are asserted */

static void probe_features(void)
{
    const char *want[N_FEATURES];
    char got[N_FEATURES][96];

    for (size_t i = 0; i < N_FEATURES; i++) {
        want[i] = features[i].sym;
    }
    kallsyms_resolve(want, got, N_FEATURES);
    for (size_t i = 0; i < N_FEATURES; i++) {
        /* exact names only: a clone of an unrelated symbol proves nothing */
        features[i].present = !strcmp(got[i], features[i].sym);
        ktap_diag("feature %s %d (%s)", features[i].name, features[i].present,
                  features[i].sym);
    }
    if (!strcmp(o.kernel_mode, "patched")) {
        patched = 1;
    } else if (!strcmp(o.kernel_mode, "stock")) {
        patched = 0;
    } else {
        patched = features[0].present;
    }
    ktap_diag("kernel_mode %s (patch-specific checks %s)", patched ? "patched" : "stock",
              patched ? "asserted" : "reported as baseline");
}

/* Report a patch-specific expectation: asserted on a patched kernel, XFAIL
 * with the measured values on a stock one. */
static void patch_check(int cond, const char *what, const char *measured)
{
    char dir[256];

    if (patched) {
        ktap_ok(cond, "%s (measured %s)", what, measured);
    } else if (cond) {
        ktap_result(1, "SKIP stock kernel: holds anyway", "%s (measured %s)", what, measured);
    } else {
        snprintf(dir, sizeof(dir), "XFAIL stock kernel: measured %s", measured);
        ktap_result(0, dir, "%s", what);
    }
}

/* ------------------------------------------------------------ kmsg scan */

static int kmsg_fd = -1;

static void kmsg_start(void)
{
    kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    if (kmsg_fd >= 0) {
        lseek(kmsg_fd, 0, SEEK_END);
    }
}

static const char *const splat_markers[] = {
    "BUG:", "kernel BUG", "WARNING:", "Oops", "lockdep", "general protection fault",
    "sleeping function called from invalid context", "possible circular locking",
    "INFO: task", "Call Trace",
};

struct kmsg_counts {
    int splats, write_errors, read_errors, io_errors, lines;
};

static void kmsg_scan(struct kmsg_counts *k)
{
    char rec[8192];
    ssize_t n;
    int shown = 0;

    memset(k, 0, sizeof(*k));
    if (kmsg_fd < 0) {
        ktap_diag("kmsg unavailable");
        return;
    }
    for (;;) {
        n = read(kmsg_fd, rec, sizeof(rec) - 1);
        if (n < 0 && errno == EPIPE) {
            continue;   /* overwritten records: keep reading */
        }
        if (n <= 0) {
            break;
        }
        rec[n] = '\0';
        char *msg = strchr(rec, ';');
        msg = msg ? msg + 1 : rec;
        char *nl = strchr(msg, '\n');
        if (nl) {
            *nl = '\0';
        }
        k->lines++;
        if (strstr(msg, "Write-error on swap-device")) {
            k->write_errors++;
        }
        if (strstr(msg, "Read-error on swap-device")) {
            k->read_errors++;
        }
        if (strstr(msg, "I/O error") || strstr(msg, "critical medium error")) {
            k->io_errors++;
        }
        for (size_t i = 0; i < sizeof(splat_markers) / sizeof(splat_markers[0]); i++) {
            if (strstr(msg, splat_markers[i])) {
                k->splats++;
                if (shown++ < 10) {
                    ktap_diag("kmsg splat: %.200s", msg);
                }
                break;
            }
        }
    }
    close(kmsg_fd);
    kmsg_fd = -1;
}

/* ------------------------------------------------------------ tracing */

enum { CTX_HARDIRQ, CTX_SOFTIRQ, CTX_TASK, CTX__N };
static const char *const ctx_names[CTX__N] = { "hardirq", "softirq", "task" };

struct probe {
    const char *sym;
    char resolved[96];          /* kallsyms name probed (may be a .isra clone) */
    int ok;                     /* kprobe and hist trigger installed */
    long long ctx[CTX__N];
    long long total;
};

static struct probe probes[] = {
    { .sym = "end_swap_bio_write" }, { .sym = "folio_end_writeback" },
    { .sym = "swap_writepage_bdev_sync" }, { .sym = "swap_writepage_bdev_async" },
    { .sym = "__swap_writepage" }, { .sym = "zswap_writeback_entry" },
    { .sym = "end_swap_bio_read" }, { .sym = "swap_read_folio_bdev_sync" },
    { .sym = "swap_writeback_dropbehind_folio" }, { .sym = "folio_end_dropbehind" },
};
#define N_PROBES (sizeof(probes) / sizeof(probes[0]))
enum { P_EBW, P_FEW, P_SYNC, P_ASYNC, P_SWP_WRITEPAGE, P_ZSWAP_WB, P_EBR, P_RSYNC,
       P_DROPBEHIND, P_FEDB };

#define HIST_TRIGGER "hist:keys=common_flags.hex"

static int blk_err_ok;
static long long blk_errors;

static void probe_event(const struct probe *p, char *buf, size_t len)
{
    const char *s = p->sym;

    while (*s == '_') {
        s++;
    }
    snprintf(buf, len, "fl_%s", s);
}

static void trigger_path(char *buf, size_t len, const char *group, const char *ev,
                         const char *file)
{
    snprintf(buf, len, TRACEFS "/events/%s/%s/%s", group, ev, file);
}

static void tracing_cleanup(int quiet)
{
    char ev[96], path[256], cmd[160];

    for (size_t i = 0; i < N_PROBES; i++) {
        probe_event(&probes[i], ev, sizeof(ev));
        trigger_path(path, sizeof(path), KPROBE_GROUP, ev, "trigger");
        gl_write_file(path, "!" HIST_TRIGGER);
        snprintf(cmd, sizeof(cmd), "-:%s/%s", KPROBE_GROUP, ev);
        gl_write_file(TRACEFS "/kprobe_events", cmd);
    }
    trigger_path(path, sizeof(path), "block", "block_rq_error", "trigger");
    gl_write_file(path, "!" HIST_TRIGGER);
    (void)quiet;
}

static void tracing_start(void)
{
    char ev[96], path[256], cmd[256];
    int err;

    const char *want[N_PROBES];
    char got[N_PROBES][96];

    tracing_cleanup(1);     /* leftovers of an earlier test in this VM */
    for (size_t i = 0; i < N_PROBES; i++) {
        want[i] = probes[i].sym;
    }
    kallsyms_resolve(want, got, N_PROBES);
    for (size_t i = 0; i < N_PROBES; i++) {
        struct probe *p = &probes[i];

        if (!got[i][0]) {
            continue;
        }
        snprintf(p->resolved, sizeof(p->resolved), "%.95s", got[i]);
        if (strcmp(got[i], p->sym)) {
            ktap_diag("kprobe %s resolved to %s", p->sym, got[i]);
        }
        probe_event(p, ev, sizeof(ev));
        snprintf(cmd, sizeof(cmd), "p:%s/%s %s", KPROBE_GROUP, ev, p->resolved);
        err = gl_write_file(TRACEFS "/kprobe_events", cmd);
        if (!err) {
            trigger_path(path, sizeof(path), KPROBE_GROUP, ev, "trigger");
            err = gl_write_file(path, HIST_TRIGGER);
        }
        p->ok = !err;
        if (err) {
            ktap_diag("kprobe %s not installed: %s", p->sym, strerror(-err));
        }
    }
    trigger_path(path, sizeof(path), "block", "block_rq_error", "trigger");
    err = gl_write_file(path, HIST_TRIGGER);
    blk_err_ok = !err;
    if (err) {
        ktap_diag("block_rq_error hist trigger not installed: %s", strerror(-err));
    }
}

/* Sum a hist file keyed by common_flags into hardirq/softirq/task. */
static int read_hist(const char *path, long long ctx[CTX__N])
{
    FILE *f = fopen(path, "r");
    char line[512];

    memset(ctx, 0, sizeof(long long) * CTX__N);
    if (!f) {
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        char *fl = strstr(line, "common_flags:");
        char *hc = strstr(line, "hitcount:");
        unsigned long long flags, hits;

        if (!fl || !hc) {
            continue;
        }
        /* keys=common_flags.hex prints the key in hex without "0x". */
        flags = strtoull(fl + strlen("common_flags:"), NULL, 16);
        hits = strtoull(hc + strlen("hitcount:"), NULL, 0);
        if (flags & 0x08) {
            ctx[CTX_HARDIRQ] += hits;
        } else if (flags & 0x10) {
            ctx[CTX_SOFTIRQ] += hits;
        } else {
            ctx[CTX_TASK] += hits;
        }
    }
    fclose(f);
    return 0;
}

static void tracing_collect(void)
{
    char ev[96], path[256];
    long long ctx[CTX__N];

    for (size_t i = 0; i < N_PROBES; i++) {
        struct probe *p = &probes[i];

        if (!p->ok) {
            continue;
        }
        probe_event(p, ev, sizeof(ev));
        trigger_path(path, sizeof(path), KPROBE_GROUP, ev, "hist");
        if (read_hist(path, p->ctx) < 0) {
            p->ok = 0;
            continue;
        }
        p->total = p->ctx[0] + p->ctx[1] + p->ctx[2];
    }
    if (blk_err_ok) {
        trigger_path(path, sizeof(path), "block", "block_rq_error", "hist");
        if (read_hist(path, ctx) == 0) {
            blk_errors = ctx[0] + ctx[1] + ctx[2];
        }
    }
    tracing_cleanup(0);
}

static void tracing_report(void)
{
    for (size_t i = 0; i < N_PROBES; i++) {
        struct probe *p = &probes[i];

        if (!p->ok) {
            ktap_diag("kprobe %s n/a", p->sym);
            continue;
        }
        ktap_diag("kprobe %s %lld", p->sym, p->total);
        for (int c = 0; c < CTX__N; c++) {
            ktap_diag("ctx %s %s %lld", p->sym, ctx_names[c], p->ctx[c]);
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

static void report_vmstat(const char *prefix, const struct gl_vmstat *a,
                          const struct gl_vmstat *b)
{
    for (int i = 0; i < VM__COUNT; i++) {
        if (b->v[i] < 0) {
            ktap_diag("%s %s n/a", prefix, gl_vmstat_name(i));
        } else {
            ktap_diag("%s %s %lld", prefix, gl_vmstat_name(i), b->v[i] - a->v[i]);
        }
    }
}

static long long vm_delta(const struct gl_vmstat *a, const struct gl_vmstat *b, int id)
{
    return b->v[id] - a->v[id];
}

static void report_memstat(const char *prefix)
{
    for (size_t i = 0; i < N_MEMSTAT; i++) {
        long long v = gl_memcg_stat(o.cgroup, memstat_keys[i]);

        if (v >= 0) {
            ktap_diag("%s %s %lld", prefix, memstat_keys[i], v);
        }
    }
    ktap_diag("%s memory.current %lld", prefix, gl_memcg_read(o.cgroup, "memory.current"));
    ktap_diag("%s memory.zswap.current %lld", prefix,
              gl_memcg_read(o.cgroup, "memory.zswap.current"));
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

static int run_cmd(char *const argv[])
{
    pid_t pid;
    int st;

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) < 0) {
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

static int nvme_admin(int fd, uint8_t opcode, uint32_t cdw10, uint32_t cdw11,
                      uint32_t *result)
{
    struct nvme_admin_cmd cmd;
    int ret;

    memset(&cmd, 0, sizeof(cmd));
    cmd.opcode = opcode;
    cmd.cdw10 = cdw10;
    cmd.cdw11 = cdw11;
    ret = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
    if (ret < 0) {
        return -errno;
    }
    if (result) {
        *result = cmd.result;
    }
    return ret;     /* > 0: NVMe status */
}

/* Set the device's fault-engine state: faultctl, then sysfs / NVMe vendor feature. */
static int fault_set_state(long state)
{
    char num[24], path[256];
    struct stat st;
    int sync = fault_dev_is_syncblk();
    int ret;

    snprintf(num, sizeof(num), "%ld", state);
    /* NVMe: vendor feature C0h through faultctl; syncblk: its sysfs file. */
    if (!sync && stat("/bin/faultctl", &st) == 0) {
        char *argv[] = { "/bin/faultctl", "nvme", "/dev/nvme0", "state", num, NULL };

        if (run_cmd(argv) == 0) {
            ktap_diag("fault state %ld set by faultctl", state);
            return 0;
        }
        ktap_diag("faultctl could not set state %ld; trying the built-in fallback", state);
    }
    if (sync) {
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
    int fd = open("/dev/nvme0", O_RDONLY);
    uint32_t got = ~0u;

    if (fd < 0) {
        ktap_diag("open /dev/nvme0: %s", strerror(errno));
        return -errno;
    }
    ret = nvme_admin(fd, 0x09, 0xC0, (uint32_t)state, NULL);
    if (ret == 0) {
        ret = nvme_admin(fd, 0x0A, 0xC0, 0, &got);
    }
    close(fd);
    if (ret) {
        ktap_diag("NVMe Set/Get Features 0xC0 failed: %s", ret < 0 ? strerror(-ret) :
                  "device returned an NVMe status (no fault layer?)");
        if (ret > 0) {
            ktap_diag("nvme status 0x%x", ret);
        }
        return ret < 0 ? ret : -EIO;
    }
    if (got != (uint32_t)state) {
        ktap_diag("NVMe Get Features 0xC0 returned %u, wanted %ld", got, state);
        return -EIO;
    }
    ktap_diag("fault state %ld set via NVMe Set Features 0xC0", state);
    return 0;
}

static void fault_hits_report(void)
{
    struct stat st;

    if (stat("/bin/faultctl", &st) == 0 && !fault_dev_is_syncblk()) {
        char *a[] = { "/bin/faultctl", "nvme", "/dev/nvme0", "hits", NULL };

        run_cmd(a);
    }
}

static int armed;

static void arm(const char *where)
{
    int err;

    if (o.arm_state < 0) {
        return;
    }
    err = fault_set_state(o.arm_state);
    ktap_ok(!err, "fault state %ld armed %s", o.arm_state, where);
    armed = !err;
}

static void disarm(const char *where)
{
    int err;

    if (o.arm_state < 0 || !o.disarm) {
        return;
    }
    err = fault_set_state(0);
    ktap_ok(!err, "fault state 0 (disarmed) %s", where);
    armed = 0;
    fault_hits_report();
}

/* ------------------------------------------------------------ pattern */

/*
 * guestlib's pattern: even pages compress well, odd pages do not. With
 * --pattern compressible page i gets the (compressible) even page 2i, so
 * every page is stored in zswap and every swap write is a zswap writeback.
 */
static void pattern_page(uint64_t *w, size_t idx, uint64_t seed)
{
    gl_pattern_page(w, o.compressible ? 2 * idx : idx, seed);
}

static void pattern_fill(uint8_t *base, size_t pages, uint64_t seed)
{
    for (size_t p = 0; p < pages; p++) {
        pattern_page((uint64_t *)(base + p * GL_PAGE_SIZE), p, seed);
    }
}

/* ------------------------------------------------------------ SIGBUS-safe access */

static __thread sigjmp_buf bus_env;
static __thread volatile int bus_armed;

static void sigbus_handler(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    if (bus_armed) {
        bus_armed = 0;
        siglongjmp(bus_env, 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void sigbus_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = sigbus_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGBUS, &sa, NULL);
}

struct verify_result {
    size_t bad, sigbus, first_bad, zero;
};

/*
 * Compare pages [first, first+n) of @base with the pattern (page index idx0+i,
 * @seed); a SIGBUS while reading a page is counted and the page skipped.
 * @busmap (optional, one byte per page) marks pages that raised SIGBUS;
 * @skip (optional) pages not to touch at all. @allow_zero: a zero page is ok.
 */
/* Compare one page; returns 0 same, 1 different, 2 zero (and allowed), -1 SIGBUS. */
static __attribute__((noinline)) int check_page(const uint8_t *page, const uint64_t *want,
                                                int allow_zero)
{
    static const uint64_t zero[GL_PAGE_SIZE / sizeof(uint64_t)];
    volatile int ret = 0;

    if (sigsetjmp(bus_env, 0)) {
        return -1;
    }
    bus_armed = 1;
    if (memcmp(want, page, GL_PAGE_SIZE)) {
        ret = allow_zero && !memcmp(zero, page, GL_PAGE_SIZE) ? 2 : 1;
    }
    bus_armed = 0;
    return ret;
}

static void verify_pages(uint8_t *base, size_t first, size_t n, size_t idx0, uint64_t seed,
                         uint8_t *busmap, const uint8_t *skip, int allow_zero,
                         struct verify_result *r)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];

    for (size_t i = 0; i < n; i++) {
        size_t p = first + i;

        if (skip && skip[p]) {
            continue;
        }
        pattern_page(want, idx0 + i, seed);
        switch (check_page(base + p * GL_PAGE_SIZE, want, allow_zero)) {
        case -1:
            r->sigbus++;
            if (busmap) {
                busmap[p] = 1;
            }
            break;
        case 1:
            if (!r->bad) {
                r->first_bad = p;
            }
            r->bad++;
            break;
        case 2:
            r->zero++;
            break;
        }
    }
}

/* ------------------------------------------------------------ memcg helpers */

static void memcg_set(const char *file, const char *val)
{
    int err = gl_memcg_write(o.cgroup, file, val);

    if (err) {
        ktap_diag("write %s=%s: %s", file, val, strerror(-err));
    }
}

/* memory.reclaim everything charged to the memcg (EAGAIN when it cannot). */
static void reclaim_all(void)
{
    char val[32];

    for (int i = 0; i < 3; i++) {
        long long cur = gl_memcg_read(o.cgroup, "memory.current");

        if (cur < (long long)(1 << 20)) {
            break;
        }
        snprintf(val, sizeof(val), "%lld", cur);
        if (gl_memcg_write(o.cgroup, "memory.reclaim", val) == 0) {
            break;
        }
    }
}

static void zswap_max_restore(void)
{
    memcg_set("memory.zswap.max", o.zswap_max);
}

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
static struct gl_vmstat v_last0;  /* before the last memory.reclaim of the wb phase */
static long long last_call_zswpwb; /* zswpwb of that call */
static int wb_calls;               /* memory.reclaim calls made by the shrinker method */
static char wb_shrinker[8] = "Y";  /* shrinker_enabled for the writeback phase */

/* No zswap writeback: shrinker off, memory.zswap.max unlimited. memory.zswap.
 * writeback stays as configured: 6.12+ keeps pages zswap rejects in memory
 * when it is 0, and 7.2 stores incompressible pages as-is only when it is 1. */
static void zswap_quiet(void)
{
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", "N");
    memcg_set("memory.zswap.max", "max");
}

static void zswap_drain_start(void)
{
    gl_write_file(ZSWAP_PARAM "shrinker_enabled", wb_shrinker);
    memcg_set("memory.zswap.max", "0");
}

static void force_writeback(uint8_t *mem, size_t pages, struct verify_result *vr)
{
    char val[32];

    gl_vmstat_read(&v_last0);
    for (int r = 0; r < o.wb_rounds; r++) {
        if (o.wb_limit) {
            long long zc = gl_memcg_read(o.cgroup, "memory.zswap.current");

            snprintf(val, sizeof(val), "%lld", zc > 8192 ? zc / 2 : 4096);
            memcg_set("memory.zswap.max", val);
        } else {
            if (!o.fill_writeback) {
                zswap_drain_start();
            }
            for (int i = 0; i < o.wb_reclaims; i++) {
                long long cur = gl_memcg_read(o.cgroup, "memory.current");
                struct gl_vmstat a, b;

                if (!o.fill_writeback && gl_memcg_stat(o.cgroup, "zswapped") == 0) {
                    break;  /* drained */
                }
                snprintf(val, sizeof(val), "%lld", cur > 4096 ? cur : 4096);
                gl_vmstat_read(&a);
                gl_memcg_write(o.cgroup, "memory.reclaim", val);
                gl_vmstat_read(&b);
                wb_calls++;
                if (r + 1 == o.wb_rounds) {
                    v_last0 = a;
                    last_call_zswpwb = vm_delta(&a, &b, VM_ZSWPWB);
                }
                ktap_diag("wb round %d call %d zswpwb %lld", r + 1, i + 1,
                          vm_delta(&a, &b, VM_ZSWPWB));
            }
        }
        if (r + 1 < o.wb_rounds || o.wb_limit) {
            verify_pages(mem, 0, pages, 0, o.seed, NULL, NULL, 0, vr);
            if (!o.fill_writeback) {
                zswap_quiet();
            }
            reclaim_all();
        }
    }
    zswap_max_restore();
}

/* ------------------------------------------------------------ setup/teardown */

static char old_thp[64], old_zswap[8], old_shrinker[8];

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

    ktap_ok(!err, "memcg %s created and joined (memory.max %" PRIu64 ")", o.cgroup,
            o.memcg_max);
    if (err) {
        ktap_diag("memcg error %s", strerror(-err));
        return err;
    }
    zswap_max_restore();
    memcg_set("memory.zswap.writeback", o.zswap_writeback ? "1" : "0");
    return 0;
}

static uint8_t *map_pattern(size_t len)
{
    uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED) {
        ktap_bail("mmap %zu bytes failed", len);
    }
    madvise(mem, len, MADV_NOHUGEPAGE);
    return mem;
}

/* ------------------------------------------------------------ the swap pipeline */

struct run {
    struct gl_vmstat v0, v_fill, v_wb0, v_wb1, v_end;
    struct verify_result vr_wb;
    size_t verified, bad, sigbus_child, sigbus_parent, sigbus_unexpected;
    size_t sigbus_verify;       /* SIGBUS where none may happen */
    long long heal_pswpout;
    long long swapcached_wb;    /* memcg swap-cache pages right after the wb phase */
    long long pgscan_wb, pgsteal_wb;    /* memcg deltas over the wb phase */
    double t0, t1;              /* workload start/end */
};

/* read-error: a child touches every page while the fault is armed. */
static void refault_in_child(uint8_t *mem, size_t pages, struct run *R)
{
    uint8_t *busmap = mmap(NULL, pages, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct verify_result vc = { 0 }, vp = { 0 };
    pid_t pid;
    int st = 0;

    if (busmap == MAP_FAILED) {
        ktap_bail("mmap busmap failed");
    }
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        verify_pages(mem, 0, pages, 0, o.seed, busmap, NULL, 0, &vc);
        /* exit code: 0 all fine, 1 data mismatch (never acceptable) */
        _exit(vc.bad ? 1 : 0);
    }
    waitpid(pid, &st, 0);
    for (size_t p = 0; p < pages; p++) {
        R->sigbus_child += busmap[p];
    }
    ktap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
            "child refaulted %zu pages with the fault armed: %zu SIGBUS, no bad data%s",
            pages, R->sigbus_child, WIFSIGNALED(st) ? " (child killed by a signal)" : "");
    ktap_diag("sigbus_pages_child %zu", R->sigbus_child);
    disarm("after the child's refault");
    /* The parent verifies what the child could read; pages that failed in the
     * child may fail again (not uptodate in swap cache) but nothing else may. */
    uint8_t *pbus = calloc(pages, 1);

    verify_pages(mem, 0, pages, 0, o.seed, pbus, NULL, 0, &vp);
    for (size_t p = 0; p < pages; p++) {
        if (pbus[p] && !busmap[p]) {
            R->sigbus_unexpected++;
        }
    }
    R->sigbus_parent = vp.sigbus;
    R->bad += vp.bad;
    R->verified += pages - vp.sigbus;
    ktap_diag("sigbus_pages_parent %zu", vp.sigbus);
    ktap_ok(!vp.bad && !R->sigbus_unexpected,
            "parent verified %zu pages: %zu bad, %zu SIGBUS (%zu not seen by the child)",
            pages - vp.sigbus, vp.bad, vp.sigbus, R->sigbus_unexpected);
    if (o.expect_sigbus) {
        ktap_ok(R->sigbus_child > 0, "the read error reached the task as SIGBUS");
    }
    free(pbus);
    munmap(busmap, pages);
}

static void pipeline(struct run *R)
{
    size_t pages = o.mem / GL_PAGE_SIZE;
    uint8_t *mem = map_pattern(o.mem);
    struct verify_result vr;
    long long ps0, pt0, sc;
    int zswap_on;
    char buf[8];

    zswap_on = gl_read_file(ZSWAP_PARAM "enabled", buf, sizeof(buf)) == 0 && buf[0] == 'Y';
    if (zswap_on && !o.fill_writeback) {
        zswap_quiet();
        ktap_diag("phase fill: zswap shrinker off, memory.zswap.max max (no writeback before "
                  "the writeback phase)");
    }
    R->t0 = now_s();
    gl_vmstat_read(&R->v0);
    pattern_fill(mem, pages, o.seed);
    ktap_diag("phase fill memory.current %lld", gl_memcg_read(o.cgroup, "memory.current"));
    reclaim_all();
    gl_vmstat_read(&R->v_fill);
    ktap_ok(1, "filled %zu pages and reclaimed (memory.current %lld)", pages,
            gl_memcg_read(o.cgroup, "memory.current"));
    ktap_diag("phase reclaimed memory.zswap.current %lld",
              gl_memcg_read(o.cgroup, "memory.zswap.current"));

    if (o.arm_at == ARM_WRITEBACK) {
        arm("before forcing writeback");
    }
    gl_vmstat_read(&R->v_wb0);
    ps0 = gl_memcg_stat(o.cgroup, "pgscan");
    pt0 = gl_memcg_stat(o.cgroup, "pgsteal");
    memset(&R->vr_wb, 0, sizeof(R->vr_wb));
    if (zswap_on && o.wb_rounds > 0) {
        force_writeback(mem, pages, &R->vr_wb);
    } else {
        /* No zswap: fault everything in and reclaim again: a second swap-out. */
        for (int r = 0; r < (o.wb_rounds > 0 ? o.wb_rounds : 1); r++) {
            verify_pages(mem, 0, pages, 0, o.seed, NULL, NULL, 0, &R->vr_wb);
            reclaim_all();
        }
    }
    if (o.arm_at == ARM_WRITEBACK) {
        disarm("after forced writeback");
    }
    sleep_ms(o.settle_ms);
    gl_vmstat_read(&R->v_wb1);
    sc = gl_memcg_stat(o.cgroup, "swapcached");
    R->swapcached_wb = sc >= 0 ? sc / (long long)GL_PAGE_SIZE : R->v_wb1.v[VM_NR_SWAPCACHED];
    R->pgscan_wb = gl_memcg_stat(o.cgroup, "pgscan") - ps0;
    R->pgsteal_wb = gl_memcg_stat(o.cgroup, "pgsteal") - pt0;
    R->sigbus_verify += R->vr_wb.sigbus;
    ktap_ok(!R->vr_wb.bad && !R->vr_wb.sigbus,
            "writeback phase: pattern intact while refaulting (%zu bad, %zu SIGBUS)",
            R->vr_wb.bad, R->vr_wb.sigbus);
    R->bad += R->vr_wb.bad;
    report_vmstat("phase wb vmstat", &R->v_wb0, &R->v_wb1);
    report_memstat("phase wb memstat");
    ktap_diag("phase wb nr_swapcached_now %lld", R->v_wb1.v[VM_NR_SWAPCACHED]);

    if (o.arm_at == ARM_REFAULT) {
        arm("before the refault");
        refault_in_child(mem, pages, R);
    }
    for (int r = 1; r <= o.rounds; r++) {
        struct gl_vmstat a, b;

        if (o.arm_at == ARM_REFAULT && r == 1) {
            continue;   /* round 1 was the child's */
        }
        gl_vmstat_read(&a);
        memset(&vr, 0, sizeof(vr));
        verify_pages(mem, 0, pages, 0, o.seed, NULL, NULL, 0, &vr);
        R->bad += vr.bad;
        R->sigbus_verify += vr.sigbus;
        R->verified += pages;
        ktap_ok(!vr.bad && !vr.sigbus, "round %d: %zu pages verified, %zu bad, %zu SIGBUS%s",
                r, pages, vr.bad, vr.sigbus, vr.bad ? " (data lost)" : "");
        if (vr.bad) {
            ktap_diag("first bad page %zu", vr.first_bad);
        }
        reclaim_all();
        gl_vmstat_read(&b);
        ktap_diag("round %d vmstat pswpout %lld", r, vm_delta(&a, &b, VM_PSWPOUT));
        ktap_diag("round %d vmstat workingset_refault_anon %lld", r,
                  vm_delta(&a, &b, VM_WS_REFAULT_ANON));
    }
    gl_vmstat_read(&R->v_end);
    R->t1 = now_s();
    R->heal_pswpout = vm_delta(&R->v_wb1, &R->v_end, VM_PSWPOUT);
    munmap(mem, o.mem);
}

/* ------------------------------------------------------------ race mode */

enum { OP_VERIFY, OP_DONTNEED, OP_REFILL, OP_REMAP, OP_PAGEOUT, OP__N };
static const char *const op_names[OP__N] = { "verify", "dontneed", "refill", "remap",
                                             "pageout" };

struct chunk {
    pthread_mutex_t lock;
    uint32_t gen;
    int zero;           /* contents are zero (after DONTNEED / remap) */
};

struct race {
    uint8_t *mem;
    size_t chunks;
    struct chunk *c;
    double deadline;
    volatile int stop;
    long long ops[OP__N];
    long long bad, sigbus, remap_fail;
    pthread_mutex_t stat_lock;
};

static uint64_t chunk_seed(size_t c, uint32_t gen)
{
    return o.seed ^ ((uint64_t)c << 32) ^ ((uint64_t)gen * 0x9e3779b97f4a7c15ULL);
}

static void chunk_fill(struct race *R, size_t c)
{
    size_t cp = o.chunk_pages;
    uint8_t *base = R->mem + c * cp * GL_PAGE_SIZE;

    R->c[c].gen++;
    for (size_t i = 0; i < cp; i++) {
        pattern_page((uint64_t *)(base + i * GL_PAGE_SIZE), i, chunk_seed(c, R->c[c].gen));
    }
    R->c[c].zero = 0;
}

static void chunk_verify(struct race *R, size_t c, struct verify_result *vr)
{
    size_t cp = o.chunk_pages;
    uint8_t *base = R->mem + c * cp * GL_PAGE_SIZE;

    if (R->c[c].zero) {
        static const uint8_t zero[GL_PAGE_SIZE];

        for (size_t i = 0; i < cp; i++) {
            if (memcmp(base + i * GL_PAGE_SIZE, zero, GL_PAGE_SIZE)) {
                vr->bad++;
            }
        }
        return;
    }
    verify_pages(base, 0, cp, 0, chunk_seed(c, R->c[c].gen), NULL, NULL, 0, vr);
}

static void *race_worker(void *arg)
{
    struct race *R = arg;
    uint64_t x = (uint64_t)(uintptr_t)pthread_self() ^ o.seed;
    long long ops[OP__N] = { 0 };
    struct verify_result vr = { 0 };
    long long remap_fail = 0;
    size_t clen = (size_t)o.chunk_pages * GL_PAGE_SIZE;

    while (!R->stop && now_s() < R->deadline) {
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
            madvise(base, clen, MADV_NOHUGEPAGE);
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
    R->bad += vr.bad;
    R->sigbus += vr.sigbus;
    R->remap_fail += remap_fail;
    pthread_mutex_unlock(&R->stat_lock);
    return NULL;
}

/* Toggle memory.zswap.max between tiny and unlimited every 50 ms. */
static void *race_toggler(void *arg)
{
    struct race *R = arg;
    long long toggles = 0;

    while (!R->stop && now_s() < R->deadline) {
        memcg_set("memory.zswap.max", (toggles & 1) ? o.zswap_max : "65536");
        sleep_ms(50);
        toggles++;
    }
    zswap_max_restore();
    ktap_diag("race zswap_max_toggles %lld", toggles);
    return NULL;
}

/* memory.reclaim 8M in a loop (it blocks; hence its own thread). */
static void *race_reclaimer(void *arg)
{
    struct race *R = arg;
    long long calls = 0;

    while (!R->stop && now_s() < R->deadline) {
        gl_memcg_write(o.cgroup, "memory.reclaim", "8M");
        sleep_ms(20);
        calls++;
    }
    ktap_diag("race reclaim_calls %lld", calls);
    return NULL;
}

static void race(struct run *Rn)
{
    struct race R = { 0 };
    size_t clen = (size_t)o.chunk_pages * GL_PAGE_SIZE;
    pthread_t th[66];
    struct verify_result vr = { 0 };
    long long ps0, pt0, sc;

    R.chunks = o.mem / clen;
    R.mem = map_pattern(R.chunks * clen);
    R.c = calloc(R.chunks, sizeof(*R.c));
    pthread_mutex_init(&R.stat_lock, NULL);
    Rn->t0 = now_s();
    gl_vmstat_read(&Rn->v0);
    for (size_t c = 0; c < R.chunks; c++) {
        pthread_mutex_init(&R.c[c].lock, NULL);
        chunk_fill(&R, c);
    }
    reclaim_all();
    gl_vmstat_read(&Rn->v_fill);
    ktap_ok(1, "filled %zu chunks of %d pages and reclaimed", R.chunks, o.chunk_pages);
    arm("before the race");
    gl_vmstat_read(&Rn->v_wb0);
    ps0 = gl_memcg_stat(o.cgroup, "pgscan");
    pt0 = gl_memcg_stat(o.cgroup, "pgsteal");
    R.deadline = now_s() + o.duration;
    for (int i = 0; i < o.threads; i++) {
        pthread_create(&th[i], NULL, race_worker, &R);
    }
    pthread_create(&th[o.threads], NULL, race_toggler, &R);
    pthread_create(&th[o.threads + 1], NULL, race_reclaimer, &R);
    for (int i = 0; i <= o.threads + 1; i++) {
        pthread_join(th[i], NULL);
    }
    disarm("after the race");
    gl_vmstat_read(&Rn->v_wb1);
    Rn->pgscan_wb = gl_memcg_stat(o.cgroup, "pgscan") - ps0;
    Rn->pgsteal_wb = gl_memcg_stat(o.cgroup, "pgsteal") - pt0;
    sc = gl_memcg_stat(o.cgroup, "swapcached");
    Rn->swapcached_wb = sc >= 0 ? sc / (long long)GL_PAGE_SIZE : Rn->v_wb1.v[VM_NR_SWAPCACHED];
    for (int i = 0; i < OP__N; i++) {
        ktap_diag("race op %s %lld", op_names[i], R.ops[i]);
    }
    ktap_diag("race remap_refilled_with_map_fixed %lld", R.remap_fail);
    ktap_ok(!R.bad && !R.sigbus, "race: %d threads for %.0fs: %lld bad pages, %lld SIGBUS",
            o.threads, o.duration, R.bad, R.sigbus);
    report_vmstat("phase race vmstat", &Rn->v_wb0, &Rn->v_wb1);
    /* Final pass over everything. */
    for (size_t c = 0; c < R.chunks; c++) {
        chunk_verify(&R, c, &vr);
    }
    Rn->bad = R.bad + vr.bad;
    Rn->sigbus_verify = R.sigbus + vr.sigbus;
    Rn->verified = R.chunks * o.chunk_pages;
    ktap_ok(!vr.bad && !vr.sigbus, "final verify of %zu pages: %zu bad, %zu SIGBUS",
            Rn->verified, vr.bad, vr.sigbus);
    gl_vmstat_read(&Rn->v_end);
    Rn->t1 = now_s();
    munmap(R.mem, R.chunks * clen);
    free(R.c);
}

/* ------------------------------------------------------------ checks */

static int ctx_matches(const struct probe *p, const char *want)
{
    long long irq = p->ctx[CTX_HARDIRQ] + p->ctx[CTX_SOFTIRQ];

    if (!p->total) {
        return 0;
    }
    if (!strcmp(want, "hardirq")) {
        return p->ctx[CTX_HARDIRQ] * 2 > p->total;
    }
    if (!strcmp(want, "softirq")) {
        return p->ctx[CTX_SOFTIRQ] * 2 > p->total;
    }
    if (!strcmp(want, "irq")) {
        return irq * 2 > p->total;
    }
    return p->ctx[CTX_TASK] * 2 > p->total;
}

static void final_checks(struct run *R, const struct kmsg_counts *k)
{
    long long zswpwb = vm_delta(&R->v0, &R->v_end, VM_ZSWPWB);
    long long pswpout = vm_delta(&R->v0, &R->v_end, VM_PSWPOUT);
    long long rot = vm_delta(&R->v0, &R->v_end, VM_PGROTATED);
    long long wb_zswpwb = vm_delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB);
    long long wb_pswpout = vm_delta(&R->v_wb0, &R->v_wb1, VM_PSWPOUT);
    long long wb_rot = vm_delta(&R->v_wb0, &R->v_wb1, VM_PGROTATED);
    char m[256];

    ktap_ok(pswpout > 0, "pattern was swapped out to the device (pswpout +%lld)", pswpout);
    if (!strcmp(o.mode, "writeback") || !strcmp(o.mode, "completion") ||
        !strcmp(o.mode, "refault")) {
        ktap_ok(zswpwb > 0, "zswap wrote back to the device (zswpwb +%lld)", zswpwb);
    }
    ktap_diag("pages_verified %zu", R->verified);
    ktap_diag("pages_bad %zu", R->bad);

    /* Completion context of the swap write path. */
    if (o.expect_ctx) {
        const struct probe *p = probes[P_EBW].total ? &probes[P_EBW] : &probes[P_FEW];

        snprintf(m, sizeof(m), "%s hardirq %lld softirq %lld task %lld", p->sym,
                 p->ctx[CTX_HARDIRQ], p->ctx[CTX_SOFTIRQ], p->ctx[CTX_TASK]);
        ktap_ok(ctx_matches(p, o.expect_ctx), "swap write completions mostly in %s context "
                "(%s)", o.expect_ctx, m);
    }
    if (o.expect_sync >= 0) {
        /* swap_writepage_bdev_async is often inlined; its bio callback
         * end_swap_bio_write is what only the async path calls. */
        const struct probe *s = &probes[P_SYNC];
        const struct probe *a = probes[P_ASYNC].ok ? &probes[P_ASYNC] : &probes[P_EBW];

        if (!s->ok || !a->ok) {
            ktap_result(1, "SKIP swap_writepage_bdev_sync or end_swap_bio_write not probeable",
                        "swap write path is %s", o.expect_sync ? "sync" : "async");
        } else {
            ktap_ok(o.expect_sync ? s->total > 0 && a->total == 0 :
                    a->total > 0 && s->total == 0,
                    "swap write path is %s (swap_writepage_bdev_sync %lld, %s %lld)",
                    o.expect_sync ? "synchronous" : "asynchronous", s->total, a->sym,
                    a->total);
        }
    }

    /* Errors that had to be injected. */
    if (o.expect_errors) {
        ktap_diag("kmsg write_error_lines %d read_error_lines %d io_error_lines %d",
                  k->write_errors, k->read_errors, k->io_errors);
        ktap_ok(blk_errors > 0 || k->write_errors > 0 || k->read_errors > 0,
                "the device reported I/O errors (block_rq_error %lld, Write-error lines %d)",
                blk_errors, k->write_errors);
    }
    if (!strcmp(o.mode, "heal")) {
        ktap_ok(R->heal_pswpout > 0, "after disarm the pattern was written again "
                "(pswpout +%lld after the writeback phase)", R->heal_pswpout);
    }

    /* Patch-specific: dropbehind of zswap writeback folios. */
    if (o.dropbehind_checks) {
        /* Rotations beyond what ordinary pageout explains (pswpout - zswpwb). */
        long long excess = wb_rot - (wb_pswpout - wb_zswpwb);
        long long db = probes[P_DROPBEHIND].ok ? probes[P_DROPBEHIND].total : -1;

        ktap_diag("dropbehind wb_phase zswpwb %lld pswpout %lld pgrotated %lld",
                  wb_zswpwb, wb_pswpout, wb_rot);
        ktap_diag("dropbehind rotated_excess %lld", excess);
        ktap_diag("dropbehind total pgrotated %lld zswpwb %lld", rot, zswpwb);
        snprintf(m, sizeof(m), "pgrotated %lld, zswpwb %lld, direct pageouts %lld, excess %lld",
                 wb_rot, wb_zswpwb, wb_pswpout - wb_zswpwb, excess);
        patch_check(wb_zswpwb > 0 && excess * 10 <= wb_zswpwb,
                    "zswap writeback folios are not rotated on writeback completion", m);
        snprintf(m, sizeof(m), "swap_writeback_dropbehind_folio %lld, zswpwb %lld", db, zswpwb);
        patch_check(db >= 0 && zswpwb > 0 && db * 2 >= zswpwb,
                    "zswap writeback folios are dropped on completion (dropbehind)", m);
        /* Swap-cache residency right after the writeback phase (memcg
         * swapcached, after --settle-ms): on stock the folios the last
         * memory.reclaim call wrote back stay in swap cache until a later
         * reclaim; dropbehind frees them on writeback completion. */
        ktap_diag("dropbehind last_reclaim zswpwb %lld", last_call_zswpwb);
        snprintf(m, sizeof(m), "swap cache after the writeback phase %lld pages, last "
                 "reclaim call zswpwb %lld", R->swapcached_wb, last_call_zswpwb);
        patch_check(last_call_zswpwb > 0 && R->swapcached_wb * 4 <= last_call_zswpwb,
                    "written-back folios do not linger in swap cache", m);
    }
    /* Workingset shadows survive writeback. */
    if (o.refault_checks) {
        long long refault = vm_delta(&R->v_wb1, &R->v_end, VM_WS_REFAULT_ANON);
        long long swapins = vm_delta(&R->v_wb1, &R->v_end, VM_PSWPIN) +
                            vm_delta(&R->v_wb1, &R->v_end, VM_ZSWPIN);
        long long wbref = vm_delta(&R->v_wb0, &R->v_wb1, VM_WS_REFAULT_ANON);

        ktap_diag("refault after_wb workingset_refault_anon %lld swapins %lld", refault,
                  swapins);
        ktap_ok(refault > 0, "refaults after writeback find workingset shadows "
                "(workingset_refault_anon %lld for %lld swap-ins)", refault, swapins);
        ktap_diag("refault wb_phase workingset_refault_anon %lld zswpwb %lld", wbref, wb_zswpwb);
    }
}

/*
 * The named metrics of a run, for `faultline compare`: one `# NAME VALUE` line
 * each, printed once (docs/scenarios.md, "Metrics"). vmstat/memcg counters are
 * writeback-phase deltas (v_wb0..v_wb1: the forced writeback plus the settle
 * time; race mode: the race); data_errors and workload_ms cover the whole run.
 */
static void report_metrics(const struct run *R)
{
    ktap_diag("metrics: writeback phase deltas unless noted");
    ktap_diag("pgrotated %lld", vm_delta(&R->v_wb0, &R->v_wb1, VM_PGROTATED));
    ktap_diag("zswpwb %lld", vm_delta(&R->v_wb0, &R->v_wb1, VM_ZSWPWB));
    ktap_diag("pswpout %lld", vm_delta(&R->v_wb0, &R->v_wb1, VM_PSWPOUT));
    ktap_diag("pgscan %lld", R->pgscan_wb);
    ktap_diag("pgsteal %lld", R->pgsteal_wb);
    ktap_diag("nr_swapcached_after_writeback %lld", R->swapcached_wb);
    ktap_diag("fill_zswpwb %lld", vm_delta(&R->v0, &R->v_fill, VM_ZSWPWB));
    ktap_diag("wb_reclaim_calls %d", wb_calls);
    ktap_diag("data_errors %zu", R->bad + R->sigbus_verify + R->sigbus_unexpected);
    ktap_diag("workload_ms %lld", (long long)((R->t1 - R->t0) * 1000 + 0.5));
}

int main(int argc, char **argv)
{
    struct run R;
    struct kmsg_counts k;
    struct zdebug z0, z1;
    double t0 = now_s();

    memset(&R, 0, sizeof(R));
    parse_args(argc, argv);
    printf("KTAP version 1\n");
    ktap_diag("swaptest %s mem=%" PRIu64 " memcg_max=%" PRIu64 " seed=%" PRIu64
              " pattern=%s", o.mode, o.mem, o.memcg_max, o.seed,
              o.compressible ? "compressible" : "half");
    kmsg_start();
    sigbus_install();
    probe_features();
    global_setup();
    tracing_start();
    zswap_debugfs_read(&z0);
    if (memcg_setup() == 0) {
        if (!strcmp(o.mode, "race")) {
            race(&R);
        } else {
            pipeline(&R);
        }
        report_memstat("memstat");
        tracing_collect();
        zswap_debugfs_read(&z1);
        report_vmstat("vmstat", &R.v0, &R.v_end);
        zswap_debugfs_report(&z0, &z1);
        tracing_report();
        kmsg_scan(&k);
        final_checks(&R, &k);
        report_metrics(&R);
        ktap_ok(k.splats == 0, "no BUG/WARNING/Oops/lockdep splat in the kernel log "
                "(%d splat lines)", k.splats);
        if (armed && o.arm_state >= 0) {
            ktap_diag("note: fault state left armed (no --disarm)");
        }
        gl_memcg_leave(o.cgroup);
    } else {
        tracing_cleanup(1);
    }
    global_teardown();
    ktap_diag("elapsed %.1fs", now_s() - t0);
    printf("1..%d\n", ktap_num);
    ktap_planned = ktap_num;
    return ktap_finish();
}
