// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swapctx: run a swap workload and check which swap write path the kernel
 * took and in which context the syncblk driver completed the I/O.
 *
 *   swapctx --expect task|irq|thread [--disk syncblk0] [--errors-min N]
 *           -- COMMAND [ARGS...]
 *
 * Counts hits of kprobe events on swap_writepage_bdev_sync (the
 * SWP_SYNCHRONOUS_IO write path) and end_swap_bio_write (the bio end_io of
 * the async path; swap_writepage_bdev_async itself is inlined into
 * __swap_writepage in Debian's 6.12) with tracefs hist triggers keyed on
 * the context flags (they never overflow, unlike the trace buffer), and the
 * driver's completion counters in /sys/block/DISK/ while COMMAND
 * runs.  Before Linux 6.3 there is no swap_writepage_bdev_sync: a disk with
 * ->rw_page is SWP_SYNCHRONOUS_IO and a swap write took the synchronous
 * path when bdev_write_page() returned 0 (counted by a kretprobe keyed on
 * the return value); one that failed there is retried by the kernel with a
 * bio (the ->rw_page contract), so in task mode the async end_io runs once
 * per such failure, in the submitter.  "write_path sync|async_end N" name
 * both paths on every kernel.  Then it checks:
 *   task    sync path only; every completion in the submitting task
 *   irq     async path only; every completion in hardirq (driver counter
 *           and the end_io's trace flags)
 *   thread  async path only; every completion in another task
 * A run that wrote nothing to swap fails: it would prove nothing.
 */
#define _GNU_SOURCE
#include "lib/guestlib.h"
#include "lib/ktap.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KPROBE_GROUP "kprobes"

static const char *const probes[] = {
    "swap_writepage_bdev_sync", "end_swap_bio_write",
};
enum { PROBE_SYNC, PROBE_ASYNC_END, PROBE_NR };
/* The synchronous write path before Linux 6.3: its return 0. */
#define SYNC_RW_PAGE "bdev_write_page"

static const char *const counters[] = {
    "complete_submitter", "complete_hardirq", "complete_softirq",
    "complete_other_task", "ios", "writes", "errors", "timeouts",
};
enum {
    C_SUBMITTER, C_HARDIRQ, C_SOFTIRQ, C_OTHER, C_IOS, C_WRITES, C_ERRORS,
    C_TIMEOUTS, C_NR,
};

static void usage(void)
{
    fprintf(stderr, "usage: swapctx --expect task|irq|thread [--disk NAME]"
            " [--errors-min N] -- COMMAND [ARGS...]\n");
    exit(2);
}

/* Event name for probe @i: "fl_" + a short name. */
static const char *event_name(int i)
{
    return i == PROBE_SYNC ? "fl_swpw_sync" : "fl_swpw_endio";
}

/* Hits of probe @i from its hist file; hits is -1 if it cannot be read. */
static struct gl_hist probe_hits(int i)
{
    char path[256];
    struct gl_hist h;

    gl_trace_event_path(path, sizeof(path), KPROBE_GROUP, event_name(i), "hist");
    gl_hist_read(path, &h);
    return h;
}

/*
 * bdev_write_page() calls (the pre-6.3 sync path) that succeeded, and in
 * @failed those that did not (the kernel retries them with a bio); -1 if
 * unread.
 */
static long long rw_page_writes(long long *failed)
{
    char path[256];
    struct gl_ret_hist h;

    gl_trace_event_path(path, sizeof(path), KPROBE_GROUP, event_name(PROBE_SYNC), "hist");
    if (gl_hist_read_ret(path, &h)) {
        *failed = -1;
        return -1;
    }
    *failed = h.total - gl_ret_hist_count(&h, 0);
    return gl_ret_hist_count(&h, 0);
}

static void read_counters(const char *disk, long long *v)
{
    char path[256];

    for (int i = 0; i < C_NR; i++) {
        snprintf(path, sizeof(path), "/sys/block/%s/%s", disk,
                 counters[i]);
        v[i] = gl_read_u64(path);
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "expect", required_argument, NULL, 'e' },
        { "disk", required_argument, NULL, 'd' },
        { "errors-min", required_argument, NULL, 'm' },
        { NULL, 0, NULL, 0 },
    };
    const char *expect = NULL, *disk = "syncblk0";
    long long before[C_NR], after[C_NR], d[C_NR];
    struct gl_hist hits[PROBE_NR];
    long long errors_min = 0;
    long long retried = 0;      /* ->rw_page failures, retried as bios */
    bool rw_page;
    char symbols[PROBE_NR][96];
    char mode[32], path[256];
    int c, status, want;
    pid_t pid;

    while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
        switch (c) {
        case 'e': expect = optarg; break;
        case 'd': disk = optarg; break;
        case 'm': errors_min = atoll(optarg); break;
        default: usage();
        }
    }
    if (!expect || optind >= argc) {
        usage();
    }
    if (!strcmp(expect, "task")) {
        want = C_SUBMITTER;
    } else if (!strcmp(expect, "irq")) {
        want = C_HARDIRQ;
    } else if (!strcmp(expect, "thread")) {
        want = C_OTHER;
    } else {
        usage();
    }

    snprintf(path, sizeof(path), "/sys/block/%s/mode", disk);
    if (gl_read_file(path, mode, sizeof(mode)) < 0) {
        ktap_bail("cannot read %s", path);
    }
    /*
     * The symbols as this kernel has them: a compiler may have emitted a
     * clone (swap_writepage_bdev_sync.isra.0 in a 7.2 built with
     * gcc 12), and a probe needs the name kallsyms lists.
     */
    gl_kallsyms_resolve(probes, symbols, PROBE_NR);
    rw_page = !symbols[PROBE_SYNC][0];
    for (int i = 0; i < PROBE_NR; i++) {
        const char *target = i == PROBE_SYNC && rw_page ? SYNC_RW_PAGE :
            symbols[i][0] ? symbols[i] : probes[i];
        int err = i == PROBE_SYNC && rw_page ?
            gl_kretprobe_hist_add(KPROBE_GROUP, event_name(i), target) :
            gl_kprobe_hist_add(KPROBE_GROUP, event_name(i), target);

        if (err) {
            ktap_bail("%s on %s: error %d", i == PROBE_SYNC && rw_page ? "kretprobe" :
                      "kprobe", target, err);
        }
    }
    read_counters(disk, before);

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        execvp(argv[optind], argv + optind);
        perror("exec");
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        ktap_bail("cannot run %s", argv[optind]);
    }
    /* Async writeback may still be in flight: wait for it to drain. */
    for (int tries = 0; tries < 100; tries++) {
        read_counters(disk, after);
        if (after[C_SUBMITTER] + after[C_HARDIRQ] + after[C_SOFTIRQ] +
            after[C_OTHER] == after[C_IOS]) {
            break;
        }
        usleep(100 * 1000);
    }

    /* The command printed its own KTAP document; this is a second one. */
    ktap_header(7);
    ktap_diag("swapctx: %s exited %d", argv[optind],
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    ktap_check(!strcmp(mode, expect), ktap_name("driver mode is %s", expect), "mode %s", mode);
    for (int i = 0; i < C_NR; i++) {
        d[i] = after[i] - before[i];
        ktap_diag("syncblk %s %lld", counters[i], d[i]);
    }
    for (int i = 0; i < PROBE_NR; i++) {
        if (i == PROBE_SYNC && rw_page) {
            memset(&hits[i], 0, sizeof(hits[i]));
            hits[i].hits = rw_page_writes(&retried);
            ktap_diag("kretprobe %s=0 %lld", SYNC_RW_PAGE, hits[i].hits);
            /* without ->rw_page (irq, thread) every call fails at once */
            if (want != C_SUBMITTER) {
                retried = 0;
            } else {
                ktap_diag("kretprobe %s!=0 %lld", SYNC_RW_PAGE, retried);
            }
            continue;
        }
        hits[i] = probe_hits(i);
        ktap_diag("kprobe %s %lld", probes[i], hits[i].hits);
        for (int c = 0; c < GL_CTX__N; c++) {
            ktap_diag("kprobe %s %s %lld", probes[i], gl_ctx_names[c], hits[i].ctx[c]);
        }
    }
    ktap_diag("write_path sync %lld", hits[PROBE_SYNC].hits);
    ktap_diag("write_path async_end %lld", hits[PROBE_ASYNC_END].hits);

    ktap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               ktap_name("workload %s passed", argv[optind]), "exit status %d",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (want == C_SUBMITTER) {
        /* before 6.3 the only bios are the kernel's retries of ->rw_page failures */
        ktap_check(hits[PROBE_SYNC].hits > 0 &&
                   hits[PROBE_ASYNC_END].hits == retried,
                   "swap writes took the synchronous path only",
                   "bdev_sync %lld, async end_io %lld, ->rw_page failures retried %lld",
                   hits[PROBE_SYNC].hits, hits[PROBE_ASYNC_END].hits, retried);
    } else {
        ktap_check(hits[PROBE_ASYNC_END].hits > 0 &&
                   hits[PROBE_SYNC].hits == 0,
                   "swap writes took the asynchronous path only",
                   "bdev_sync %lld, async end_io %lld", hits[PROBE_SYNC].hits,
                   hits[PROBE_ASYNC_END].hits);
    }
    {
        const struct gl_hist *e = &hits[PROBE_ASYNC_END];
        long long in_ctx = want == C_HARDIRQ ? e->ctx[GL_CTX_HARDIRQ] :
                           want == C_OTHER || retried ? e->ctx[GL_CTX_TASK] : 0;

        /* The kernel's own view of the end_io context (none for task). */
        ktap_check(in_ctx == e->hits,
                   ktap_name("end_swap_bio_write ran in %s context",
                             want == C_HARDIRQ ? "hardirq" : "task"),
                   "%lld of %lld times (hardirq %lld, softirq %lld, task %lld)", in_ctx,
                   e->hits, e->ctx[GL_CTX_HARDIRQ], e->ctx[GL_CTX_SOFTIRQ],
                   e->ctx[GL_CTX_TASK]);
    }
    ktap_check(d[C_WRITES] > 0 && d[want] == d[C_IOS] && d[C_TIMEOUTS] == 0,
               ktap_name("all completions in %s context", counters[want] + strlen("complete_")),
               "%lld of %lld completions (%lld writes), %lld timeouts", d[want], d[C_IOS],
               d[C_WRITES], d[C_TIMEOUTS]);
    {
        long long others = 0;

        for (int i = C_SUBMITTER; i <= C_OTHER; i++) {
            others += i == want ? 0 : d[i];
        }
        ktap_check(others == 0, "no completion in any other context",
                   "%lld completions elsewhere", others);
    }
    ktap_check(d[C_ERRORS] >= errors_min, ktap_name("at least %lld I/O errors", errors_min),
               "%lld I/O errors", d[C_ERRORS]);
    return ktap_finish();
}
