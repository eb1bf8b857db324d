// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaprace: threads of one process fault the same swapped-out pages back
 * at the same time while a pager thread keeps paging them out
 * (MADV_PAGEOUT), and check that no write and no byte is lost.
 *
 *   count  each page holds a counter; worker pairs increment every page in
 *          opposite directions, one pass after another.  At the end every
 *          counter must equal the passes made: a page that came back older
 *          than it was written shows up as a lost increment.
 *   read   each page holds the seeded pattern; workers only read and verify
 *          it.  --wp-toggle adds a thread that write-protects and releases
 *          the whole range with userfaultfd in a loop, which rewrites the
 *          swap PTEs of the pages while they are being faulted in.
 *
 * --swapoff-cycle DEV adds a thread that swaps DEV off and on again in a
 * loop (--discard: swapon with discards, at swapon and as slots are
 * freed); --churn adds a thread that forks short-lived children which
 * fill, page out, verify and exit (their swap entries are freed by exit
 * while swapoff runs; --churners N runs N such threads, --churn-mem SIZE
 * sizes each child; --swapoff-on-exit makes the cycler swap off right after
 * a child exited, as a shutdown does once the processes holding swap are
 * gone).  With --discard, kprobes count how often an allocator found no
 * free cluster and ran the pending discards itself.
 *
 * --pin runs worker i on CPU i mod the online CPUs and the pager on CPU 0.
 * Left to the scheduler, the workers and the pager may share one CPU for
 * long stretches, and their faults on a page then overlap far less;
 * pinned, the workers fault the same pages from different CPUs throughout.
 *
 * Guarantee under test: concurrent swap-in of one page by several threads
 * (and any PTE change during a swap-in) returns the latest data; swapoff
 * finishes and takes nothing with it.
 */
#define _GNU_SOURCE
#include "lib/guestlib.h"
#include "lib/ktap.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SWAP_FLAG_DISCARD
#define SWAP_FLAG_DISCARD 0x10000
#endif

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

enum { MODE_COUNT, MODE_READ };

static struct {
    int mode;
    uint64_t mem;
    int workers;
    int seconds;
    uint64_t seed;
    size_t chunk;
    int wp_toggle;
    const char *swapoff_dev;
    int discard;
    int churn;
    uint64_t churn_mem;
    int swapoff_on_exit;
    int pause_us;
    int swapon_ms;
    int pin;
} o;

static uint8_t *mem;
static size_t pages;
static volatile int stop;
static double deadline;
static long long *passes;          /* per worker, count mode */
static long long reads, bad_reads, pageouts, pageout_errors, wp_toggles, wp_errors;
static long long swapoffs, swapoff_errors, swapon_errors, children, child_failures;
static long long swapoffs_after_exit;
static long long pin_errors;
/* Churn children exits, for --swapoff-on-exit. */
static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cond = PTHREAD_COND_INITIALIZER;
static long long exits;
static double swapoff_max_s, swapoff_total_s;
static long long swapoff_inuse_kb;         /* summed over the swapoffs */
static long long swap_free_min_kb = -1;

/* SwapFree in kB (-1 without swap): the pager tracks how full swap got. */
static long long swap_free_kb(void)
{
    char buf[4096], *p;
    int n = gl_read_file("/proc/meminfo", buf, sizeof(buf));

    if (n < 0 || !(p = strstr(buf, "SwapFree:"))) {
        return -1;
    }
    return strtoll(p + 9, NULL, 10);
}

/* SwapTotal - SwapFree in kB (-1 without /proc/meminfo). */
static long long swap_used_kb(void)
{
    char buf[4096], *p;
    int n = gl_read_file("/proc/meminfo", buf, sizeof(buf));

    if (n < 0 || !(p = strstr(buf, "SwapTotal:"))) {
        return -1;
    }
    return strtoll(p + 10, NULL, 10) - swap_free_kb();
}

/* @n pages of anonymous memory, order-0 folios only. */
static uint8_t *map_pages(size_t n)
{
    uint8_t *m = mmap(NULL, n * GL_PAGE_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED) {
        return NULL;
    }
    madvise(m, n * GL_PAGE_SIZE, MADV_NOHUGEPAGE);
    return m;
}

/*
 * Who ran the pending discards of freed clusters: kprobes on
 * swap_do_scheduled_discard (every run of the pending list) and on
 * swap_discard_work (the discard worker's runs); the difference is the
 * allocators that found no free cluster and ran the list themselves, with
 * the swap lock dropped.  A stack-keyed hist cannot tell them apart: the
 * stack of a kprobe ends at its int3 frame (measured on faultline's 6.12
 * build).
 */
#define DISCARD_GROUP "fl_swaprace"
enum { DP_ALL, DP_WORKER, DP__N };
static const struct {
    const char *event, *sym;
} discard_probe[DP__N] = {
    [DP_ALL] = { "discard_runs", "swap_do_scheduled_discard" },
    [DP_WORKER] = { "discard_worker", "swap_discard_work" },
};
static int discard_probe_ok[DP__N];
/* Kretprobes on the same functions: runs that ended while a swapoff ran. */
static const char *const discard_ret_event[DP__N] = {
    [DP_ALL] = "discard_runs_ret", [DP_WORKER] = "discard_worker_ret",
};
static int discard_ret_ok[DP__N];
static long long allocator_runs_in_swapoff = -1;

/* Returns counted so far by kretprobe @i (-1 if it is not installed). */
static long long discard_returns(int i)
{
    char path[256];
    struct gl_ret_hist h;

    gl_trace_event_path(path, sizeof(path), DISCARD_GROUP, discard_ret_event[i], "hist");
    return discard_ret_ok[i] && gl_hist_read_ret(path, &h) == 0 ? h.total : -1;
}

/* Allocator runs of the pending discards that returned so far (-1: unknown). */
static long long allocator_returns(void)
{
    long long all = discard_returns(DP_ALL), worker = discard_returns(DP_WORKER);

    return all >= 0 && worker >= 0 ? all - worker : -1;
}

static void discard_probe_start(void)
{
    for (int i = 0; i < DP__N; i++) {
        int err;

        gl_kprobe_hist_remove(DISCARD_GROUP, discard_probe[i].event);
        err = gl_kprobe_hist_add(DISCARD_GROUP, discard_probe[i].event, discard_probe[i].sym);
        discard_probe_ok[i] = !err;
        if (err) {
            ktap_diag("kprobe %s not installed: %s", discard_probe[i].sym, strerror(-err));
        }
        gl_kretprobe_hist_remove(DISCARD_GROUP, discard_ret_event[i]);
        discard_ret_ok[i] = !gl_kretprobe_hist_add(DISCARD_GROUP, discard_ret_event[i],
                                                   discard_probe[i].sym);
    }
    if (discard_ret_ok[DP_ALL] && discard_ret_ok[DP_WORKER]) {
        allocator_runs_in_swapoff = 0;
    }
}

static void discard_probe_report(void)
{
    long long n[DP__N];

    for (int i = 0; i < DP__N; i++) {
        char path[256];
        struct gl_hist h;

        gl_trace_event_path(path, sizeof(path), DISCARD_GROUP, discard_probe[i].event, "hist");
        n[i] = discard_probe_ok[i] && gl_hist_read(path, &h) == 0 ? h.sum : -1;
        if (n[i] >= 0) {
            ktap_diag("kprobe %s %lld", discard_probe[i].sym, n[i]);
        }
        gl_kprobe_hist_remove(DISCARD_GROUP, discard_probe[i].event);
        gl_kretprobe_hist_remove(DISCARD_GROUP, discard_ret_event[i]);
    }
    ktap_diag("discard_runs_by_allocator %lld",
              n[DP_ALL] >= 0 && n[DP_WORKER] >= 0 ? n[DP_ALL] - n[DP_WORKER] : -1);
    ktap_diag("discard_runs_by_allocator_ended_in_swapoff %lld", allocator_runs_in_swapoff);
}

/* With --pin, move the calling thread to CPU @cpu mod the online CPUs. */
static void pin_self(int cpu)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;

    if (!o.pin) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu % (ncpu > 0 ? ncpu : 1), &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        __atomic_fetch_add(&pin_errors, 1, __ATOMIC_RELAXED);
    }
}

static size_t first_bad_read = (size_t)-1;
static pthread_mutex_t stat_lock = PTHREAD_MUTEX_INITIALIZER;

static void usage(void)
{
    fprintf(stderr,
            "usage: swaprace [--mode count|read] [--mem SIZE] [--workers N] [--seconds N]\n"
            "                [--seed N] [--pageout-chunk PAGES] [--wp-toggle]\n"
            "                [--swapoff-cycle DEV [--discard] [--swapoff-on-exit]]\n"
            "                [--churn [--churners N] [--churn-mem SIZE]] [--pass-pause-us N]\n"
            "                [--swapon-ms N] [--pin]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "mode", required_argument, NULL, 'M' },
        { "mem", required_argument, NULL, 'm' },
        { "workers", required_argument, NULL, 'w' },
        { "seconds", required_argument, NULL, 't' },
        { "seed", required_argument, NULL, 's' },
        { "pageout-chunk", required_argument, NULL, 'c' },
        { "wp-toggle", no_argument, NULL, 'W' },
        { "swapoff-cycle", required_argument, NULL, 'S' },
        { "discard", no_argument, NULL, 'D' },
        { "churn", no_argument, NULL, 'C' },
        { "churners", required_argument, NULL, 'N' },
        { "churn-mem", required_argument, NULL, 'E' },
        { "swapoff-on-exit", no_argument, NULL, 'X' },
        { "pass-pause-us", required_argument, NULL, 'P' },
        { "swapon-ms", required_argument, NULL, 'O' },
        { "pin", no_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    o = (typeof(o)){ .mode = MODE_COUNT, .mem = 16 << 20, .workers = 4, .seconds = 30,
                     .seed = 1, .chunk = 64, .swapon_ms = 200,
                     .churn_mem = 1024 * GL_PAGE_SIZE };
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'M':
            if (!strcmp(optarg, "count")) {
                o.mode = MODE_COUNT;
            } else if (!strcmp(optarg, "read")) {
                o.mode = MODE_READ;
            } else {
                usage();
            }
            break;
        case 'm': o.mem = gl_parse_size(optarg); break;
        case 'w': o.workers = atoi(optarg); break;
        case 't': o.seconds = atoi(optarg); break;
        case 's': o.seed = strtoull(optarg, NULL, 0); break;
        case 'c': o.chunk = strtoul(optarg, NULL, 0); break;
        case 'W': o.wp_toggle = 1; break;
        case 'S': o.swapoff_dev = optarg; break;
        case 'D': o.discard = 1; break;
        case 'C': o.churn = o.churn ? o.churn : 1; break;
        case 'N': o.churn = atoi(optarg); break;
        case 'E': o.churn_mem = gl_parse_size(optarg); break;
        case 'X': o.swapoff_on_exit = 1; break;
        case 'P': o.pause_us = atoi(optarg); break;
        case 'O': o.swapon_ms = atoi(optarg); break;
        case 'p': o.pin = 1; break;
        default: usage();
        }
    }
    /* Workers come in pairs (one each way); write-protecting pages that
     * count mode writes would block its workers on uffd faults. */
    if (optind != argc || o.mem < 2 * GL_PAGE_SIZE || o.workers < 2 || o.workers % 2 ||
        o.workers > 64 || o.seconds < 1 || !o.chunk || o.pause_us < 0 || o.swapon_ms < 0 ||
        (o.wp_toggle && o.mode != MODE_READ) || (o.discard && !o.swapoff_dev) ||
        o.churn < 0 || o.churn > 2 || o.churn_mem < 2 * GL_PAGE_SIZE ||
        (o.swapoff_on_exit && (!o.swapoff_dev || !o.churn))) {
        usage();
    }
}

static uint64_t page_word(size_t p)
{
    uint64_t x = o.seed ^ (p * 0x9e3779b97f4a7c15ULL);

    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    return x ^ (x >> 29);
}

/* count mode: word 0 the counter, word 1 the page index, the rest a word
 * of the page (a page mapped at the wrong place or torn shows there). */
static void count_fill(void)
{
    size_t n = GL_PAGE_SIZE / sizeof(uint64_t);

    for (size_t p = 0; p < pages; p++) {
        uint64_t *w = (uint64_t *)(mem + p * GL_PAGE_SIZE);

        w[0] = 0;
        w[1] = p;
        for (size_t i = 2; i < n; i++) {
            w[i] = page_word(p);
        }
    }
}

static void *count_worker(void *arg)
{
    int id = (int)(intptr_t)arg;

    pin_self(id);
    while (!stop && gl_now_s() < deadline) {
        for (size_t k = 0; k < pages; k++) {
            size_t p = id % 2 ? pages - 1 - k : k;

            __atomic_fetch_add((uint64_t *)(mem + p * GL_PAGE_SIZE), 1, __ATOMIC_RELAXED);
        }
        passes[id]++;
        /* Leave the pager CPU time: a pass over resident pages is cheap. */
        if (o.pause_us) {
            usleep(o.pause_us);
        }
    }
    return NULL;
}

static void *read_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];
    long long n = 0, bad = 0;
    size_t first = (size_t)-1;

    pin_self(id);
    while (!stop && gl_now_s() < deadline) {
        for (size_t k = 0; k < pages && !stop; k++) {
            size_t p = id % 2 ? pages - 1 - k : k;

            gl_pattern_page(want, p, o.seed);
            if (memcmp(want, mem + p * GL_PAGE_SIZE, GL_PAGE_SIZE)) {
                if (first == (size_t)-1) {
                    first = p;
                }
                bad++;
            }
            n++;
        }
        if (o.pause_us) {
            usleep(o.pause_us);
        }
    }
    pthread_mutex_lock(&stat_lock);
    reads += n;
    bad_reads += bad;
    if (first < first_bad_read) {
        first_bad_read = first;
    }
    pthread_mutex_unlock(&stat_lock);
    return NULL;
}

static void *pager(void *arg)
{
    size_t c = 0;

    pin_self(0);
    while (!stop) {
        size_t n = pages - c < o.chunk ? pages - c : o.chunk;

        if (madvise(mem + c * GL_PAGE_SIZE, n * GL_PAGE_SIZE, MADV_PAGEOUT)) {
            pageout_errors++;
        }
        pageouts++;
        c = c + n >= pages ? 0 : c + n;
        if (pageouts % 8 == 0) {
            long long f = swap_free_kb();

            if (f >= 0 && (swap_free_min_kb < 0 || f < swap_free_min_kb)) {
                swap_free_min_kb = f;
            }
        }
    }
    return NULL;
}

static int uffd = -1;

static int wp_setup(void)
{
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP };
    struct uffdio_register reg = {
        .range = { .start = (uintptr_t)mem, .len = pages * GL_PAGE_SIZE },
        .mode = UFFDIO_REGISTER_MODE_WP,
    };

    uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0) {
        return -errno;
    }
    if (ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg)) {
        return -errno;
    }
    return 0;
}

static void *wp_toggler(void *arg)
{
    struct uffdio_writeprotect wp = {
        .range = { .start = (uintptr_t)mem, .len = pages * GL_PAGE_SIZE },
    };

    while (!stop) {
        wp.mode = wp_toggles % 2 ? 0 : UFFDIO_WRITEPROTECT_MODE_WP;
        if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp)) {
            wp_errors++;
        }
        wp_toggles++;
    }
    /* Leave the range writable. */
    wp.mode = 0;
    ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
    return NULL;
}

/* --swapoff-on-exit: wait (at most 2 s) for the next churn child to exit;
 * 1 if one did. */
static int wait_child_exit(void)
{
    struct timespec ts;
    long long seen;
    int got;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    pthread_mutex_lock(&exit_lock);
    seen = exits;
    while (exits == seen && !stop &&
           pthread_cond_timedwait(&exit_cond, &exit_lock, &ts) == 0) {
    }
    got = exits != seen;
    pthread_mutex_unlock(&exit_lock);
    return got;
}

static void *swapoff_cycler(void *arg)
{
    int flags = o.discard ? SWAP_FLAG_DISCARD : 0;

    while (!stop) {
        long long used, ended;
        double t;

        if (o.swapoff_on_exit && wait_child_exit()) {
            swapoffs_after_exit++;
        }
        used = swap_used_kb();
        ended = allocator_runs_in_swapoff >= 0 ? allocator_returns() : -1;
        t = gl_now_s();

        if (swapoff(o.swapoff_dev)) {
            swapoff_errors++;
            ktap_diag("swapoff %s: %s", o.swapoff_dev, strerror(errno));
            break;
        }
        t = gl_now_s() - t;
        /* Allocator runs of the pending discards that returned while
         * swapoff ran: swapoff overlapped an allocator outside the swap
         * lock (the window swapoff must wait out). */
        if (ended >= 0) {
            long long now = allocator_returns();

            if (now >= ended) {
                allocator_runs_in_swapoff += now - ended;
            }
        }
        if (t > swapoff_max_s) {
            swapoff_max_s = t;
        }
        swapoff_total_s += t;
        swapoff_inuse_kb += used > 0 ? used : 0;
        swapoffs++;
        if (swapon(o.swapoff_dev, flags)) {
            swapon_errors++;
            ktap_diag("swapon %s: %s", o.swapoff_dev, strerror(errno));
            break;
        }
        /* Let the pager put pages on the device again (and, with
         * discards, clusters free up and get discarded meanwhile). */
        gl_sleep_ms(o.swapon_ms);
    }
    return NULL;
}

/* A child of --churn: its own pages out to swap and back, then exit, whose
 * unmap frees the swap entries it still holds. */
static int churn_child(uint64_t seed)
{
    size_t n = o.churn_mem / GL_PAGE_SIZE;
    uint8_t *m = map_pages(n);
    size_t first;

    if (!m) {
        return 3;
    }
    gl_pattern_fill(m, n, seed);
    madvise(m, n * GL_PAGE_SIZE, MADV_PAGEOUT);
    /* Half back in (verified), half left on swap for exit to free. */
    if (gl_pattern_verify(m, n / 2, seed, &first)) {
        return 1;
    }
    madvise(m, n * GL_PAGE_SIZE, MADV_PAGEOUT);
    return 0;
}

static void *churner(void *arg)
{
    while (!stop) {
        long long id = __atomic_fetch_add(&children, 1, __ATOMIC_RELAXED);
        pid_t pid = fork();
        int st;

        if (pid == 0) {
            _exit(churn_child(o.seed + 1000 + id));
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            __atomic_fetch_add(&child_failures, 1, __ATOMIC_RELAXED);
            if (pid > 0) {
                ktap_diag("churn child %lld: %s %d", id,
                          WIFSIGNALED(st) ? "signal" : "exit",
                          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            }
        }
        pthread_mutex_lock(&exit_lock);
        exits++;
        pthread_cond_broadcast(&exit_cond);
        pthread_mutex_unlock(&exit_lock);
    }
    return NULL;
}

/* A counter's delta, 0 where this kernel lacks the counter. */
static long long vm_sum(const struct gl_vmstat *before, const struct gl_vmstat *after, int id)
{
    return after->v[id] < 0 || before->v[id] < 0 ? 0 : gl_vmstat_delta(before, after, id);
}

/* count mode: pages whose counter is not the total of passes, or whose
 * other words are not theirs. */
static size_t count_verify(long long want, long long *lost, size_t *first_bad)
{
    size_t n = GL_PAGE_SIZE / sizeof(uint64_t), bad = 0;

    *lost = 0;
    for (size_t p = 0; p < pages; p++) {
        const uint64_t *w = (const uint64_t *)(mem + p * GL_PAGE_SIZE);
        int ok = w[0] == (uint64_t)want && w[1] == p;

        for (size_t i = 2; ok && i < n; i++) {
            ok = w[i] == page_word(p);
        }
        if (!ok) {
            if (!bad) {
                *first_bad = p;
            }
            bad++;
            if (w[0] < (uint64_t)want) {
                *lost += want - (long long)w[0];
            }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    pthread_t th[68];
    int nth = 0, err = 0;
    struct gl_vmstat before, filled, after;
    size_t bad, first_bad = 0;
    long long want = 0, lost = 0;
    double t0 = gl_now_s();

    parse_args(argc, argv);
    pages = o.mem / GL_PAGE_SIZE;
    ktap_header(5 + !!o.swapoff_dev + !!o.churn);
    ktap_diag("swaprace mode=%s pages=%zu workers=%d seconds=%d seed=%" PRIu64
              " pageout_chunk=%zu wp_toggle=%d pass_pause_us=%d pin=%d",
              o.mode == MODE_COUNT ? "count" : "read", pages, o.workers, o.seconds, o.seed,
              o.chunk, o.wp_toggle, o.pause_us, o.pin);
    gl_vmstat_read(&before);

    /* Order-0 folios only: the skip-swapcache path is the single-page one. */
    mem = map_pages(pages);
    if (!mem) {
        ktap_bail("mmap %zu pages failed", pages);
    }
    if (o.mode == MODE_COUNT) {
        count_fill();
    } else {
        gl_pattern_fill(mem, pages, o.seed);
    }
    /* Only the region may swap: the test's own memory stays resident. */
    if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0) {
        munlock(mem, pages * GL_PAGE_SIZE);
    }
    err = madvise(mem, pages * GL_PAGE_SIZE, MADV_PAGEOUT) ? -errno : 0;
    swap_free_min_kb = swap_free_kb();
    gl_vmstat_read(&filled);
    ktap_check(!err && gl_vmstat_delta(&before, &filled, VM_PSWPOUT) +
                       gl_vmstat_delta(&before, &filled, VM_ZSWPOUT) > 0,
               ktap_name("%zu pages filled and paged out", pages),
               "madvise %d, pswpout +%lld, zswpout +%lld", err,
               gl_vmstat_delta(&before, &filled, VM_PSWPOUT),
               gl_vmstat_delta(&before, &filled, VM_ZSWPOUT));

    if (o.wp_toggle) {
        err = wp_setup();
        if (err) {
            ktap_diag("userfaultfd write-protect setup failed: %s", strerror(-err));
        }
    }
    if (o.discard) {
        discard_probe_start();
    }
    passes = calloc(o.workers, sizeof(*passes));
    deadline = gl_now_s() + o.seconds;
    for (int i = 0; i < o.workers && !err; i++) {
        err = gl_thread_create_traced(&th[nth++], o.mode == MODE_COUNT ? count_worker : read_worker,
                                      (void *)(intptr_t)i);
    }
    if (!err) {
        err = gl_thread_create_traced(&th[nth++], pager, NULL);
    }
    if (!err && o.wp_toggle) {
        err = pthread_create(&th[nth++], NULL, wp_toggler, NULL);
    }
    if (!err && o.swapoff_dev) {
        err = gl_thread_create_traced(&th[nth++], swapoff_cycler, NULL);
    }
    for (int i = 0; i < o.churn && !err; i++) {
        err = gl_thread_create_traced(&th[nth++], churner, NULL);
    }
    /* The workers end at the deadline; then the pager and the toggler. */
    for (int i = 0; i < o.workers && i < nth; i++) {
        pthread_join(th[i], NULL);
    }
    stop = 1;
    for (int i = o.workers; i < nth; i++) {
        pthread_join(th[i], NULL);
    }
    for (int i = 0; i < o.workers; i++) {
        want += passes[i];
    }
    ktap_check(!err && !pageout_errors && !wp_errors && !pin_errors,
               ktap_name("%d workers, a pager%s ran %d s", o.workers,
                         o.wp_toggle ? " and a write-protect toggler" : "", o.seconds),
               "thread error %d, %lld pageouts (%lld failed), %lld wp toggles (%lld failed), "
               "%lld pinning errors",
               err, pageouts, pageout_errors, wp_toggles, wp_errors, pin_errors);

    if (o.mode == MODE_COUNT) {
        ktap_check(want > 0, "workers completed passes", "%lld passes", want);
    } else {
        ktap_check(bad_reads == 0, "every read during the race matched",
                   "%lld of %lld page reads bad, first page %zd", bad_reads, reads,
                   bad_reads ? (ssize_t)first_bad_read : (ssize_t)-1);
    }

    if (o.mode == MODE_COUNT) {
        bad = count_verify(want, &lost, &first_bad);
        ktap_check(bad == 0, ktap_name("final verify of %zu pages", pages),
                   "%zu bad, %lld increments lost, first bad page %zd", bad, lost,
                   bad ? (ssize_t)first_bad : (ssize_t)-1);
    } else {
        bad = gl_pattern_verify(mem, pages, o.seed, &first_bad);
        ktap_check(bad == 0, ktap_name("final verify of %zu pages", pages),
                   "%zu bad, first bad page %zd", bad, bad ? (ssize_t)first_bad : (ssize_t)-1);
    }
    if (o.swapoff_dev) {
        ktap_check(swapoffs > 0 && !swapoff_errors && !swapon_errors,
                   ktap_name("%s swapped off and on%s during the race", o.swapoff_dev,
                             o.discard ? " (discard)" : ""),
                   "%lld swapoffs, longest %.1f s, %lld swapoff and %lld swapon errors",
                   swapoffs, swapoff_max_s, swapoff_errors, swapon_errors);
    }
    if (o.churn) {
        ktap_check(children > 0 && !child_failures, "every churn child verified and exited",
                   "%lld children, %lld failed", children, child_failures);
    }
    gl_vmstat_read(&after);
    /* Without memory pressure an asynchronous device's pages come back
     * from the swap cache (no read): then swapoff is what brought them. */
    ktap_check(gl_vmstat_delta(&filled, &after, VM_PSWPIN) +
               gl_vmstat_delta(&filled, &after, VM_ZSWPIN) > 0 || swapoffs > 0,
               "pages came back from swap during the race",
               "pswpin +%lld, zswpin +%lld, %lld swapoffs",
               gl_vmstat_delta(&filled, &after, VM_PSWPIN),
               gl_vmstat_delta(&filled, &after, VM_ZSWPIN), swapoffs);
    gl_vmstat_report("vmstat", &before, &after);
    /* Every page is back by now, so each write to swap was read back at
     * most once by a fault that mapped it (a zswap writeback is one more
     * write, pswpout, of the same store): reads beyond the writes are
     * swap-ins whose fault failed and dropped its folio (a lower bound:
     * swap-cache hits read nothing). */
    ktap_diag("swapin_excess_reads %lld",
              vm_sum(&before, &after, VM_PSWPIN) + vm_sum(&before, &after, VM_ZSWPIN) -
              vm_sum(&before, &after, VM_PSWPOUT) - vm_sum(&before, &after, VM_ZSWPOUT) +
              vm_sum(&before, &after, VM_ZSWPWB));
    ktap_diag("passes %lld", want);
    ktap_diag("lost_increments %lld", lost);
    ktap_diag("race_reads %lld", reads);
    ktap_diag("pageouts %lld", pageouts);
    ktap_diag("wp_toggles %lld", wp_toggles);
    ktap_diag("swapoff_cycles %lld", swapoffs);
    ktap_diag("swapoff_max_ms %.0f", swapoff_max_s * 1000);
    ktap_diag("swapoff_mean_ms %.0f", swapoffs ? swapoff_total_s * 1000 / swapoffs : 0);
    ktap_diag("swapoff_mean_inuse_kb %lld", swapoffs ? swapoff_inuse_kb / swapoffs : 0);
    ktap_diag("churn_children %lld", children);
    if (o.swapoff_on_exit) {
        ktap_diag("swapoffs_after_exit %lld", swapoffs_after_exit);
    }
    if (swap_free_min_kb >= 0) {
        ktap_diag("swap_free_min_kb %lld", swap_free_min_kb);
    }
    ktap_diag("pages_verified %zu", pages);
    ktap_diag("data_errors %zu", bad + (size_t)bad_reads);
    if (o.discard) {
        discard_probe_report();
    }
    ktap_diag("elapsed %.1fs", gl_now_s() - t0);
    munmap(mem, pages * GL_PAGE_SIZE);
    return ktap_finish();
}
