// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Kernel coverage of a tool's own threads (kcov), for faultline explore's
 * feedback: with FAULTLINE_KCOV=1 in the environment (run.sh exports it for
 * a scenario with [vm] kcov) the main thread traces from before main() and
 * workers started by gl_thread_create_traced().  Direct reclaim under a memcg
 * limit and swap-in faults run in these threads, so their trace covers the
 * swap paths the test drives; kswapd and completion interrupts are not
 * covered.
 *
 * A collector thread turns each traced thread's PC buffer into edges (two
 * consecutive PCs), hashed into a 64 Ki-bit map, and restarts the buffer.
 * It polls: what a thread traces while its buffer is full is lost, so the
 * map is a sample that grows with the run, not an exact edge set.  At exit
 * the process prints the map as two KTAP diagnostics:
 *   # kcov edges N          (bits set)
 *   # kcov-map BASE64       (the 8 KiB map)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kcov.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guestlib.h"

#define KCOV_PATH "/sys/kernel/debug/kcov"
/* Words per thread (1 MiB): the PCs of about one poll interval of reclaim. */
#define KCOV_WORDS (1UL << 17)
#define KCOV_POLL_MS 10
#define KCOV_MAX_THREADS 16

static struct {
    pthread_mutex_t lock;
    bool on;
    pid_t pid;              /* the process that prints (not a forked child) */
    unsigned long *area[KCOV_MAX_THREADS];
    int n;
    uint8_t map[GL_KCOV_MAP_BITS / 8];
    const char *why_off;    /* FAULTLINE_KCOV set but no kcov: said once */
} kc = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Hash a PC into the map's index space (Fibonacci hashing). */
static uint32_t pc_slot(unsigned long pc)
{
    return (uint32_t)(((uint64_t)pc * 0x9E3779B97F4A7C15ULL) >> 48);
}

size_t gl_kcov_add_trace(uint8_t *map, const unsigned long *pcs, size_t n)
{
    uint32_t prev = 0;
    size_t added = 0;

    for (size_t i = 0; i < n; i++) {
        uint32_t cur = pc_slot(pcs[i]);
        uint32_t e = (cur ^ (prev >> 1)) & (GL_KCOV_MAP_BITS - 1);
        if (!(map[e / 8] & (1u << (e % 8)))) {
            map[e / 8] |= 1u << (e % 8);
            added++;
        }
        prev = cur;
    }
    return added;
}

static void drain(unsigned long *area)
{
    unsigned long n = __atomic_load_n(&area[0], __ATOMIC_RELAXED);

    if (n > KCOV_WORDS - 1)
        n = KCOV_WORDS - 1;
    gl_kcov_add_trace(kc.map, area + 1, n);
    /* The kernel appends at area[0] + 1: restart the buffer.  A PC written
     * between the load and this store is lost (the map is a sample). */
    __atomic_store_n(&area[0], 0, __ATOMIC_RELAXED);
}

static void drain_all(void)
{
    pthread_mutex_lock(&kc.lock);
    for (int i = 0; i < kc.n; i++)
        drain(kc.area[i]);
    pthread_mutex_unlock(&kc.lock);
}

static void *collector(void *arg)
{
    for (;;) {
        gl_sleep_ms(KCOV_POLL_MS);
        drain_all();
    }
    return NULL;
}

int gl_kcov_thread_begin(void)
{
    int fd, err;
    unsigned long *area;

    if (!kc.on || getpid() != kc.pid)
        return 0;
    fd = open(KCOV_PATH, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (ioctl(fd, KCOV_INIT_TRACE, KCOV_WORDS)) {
        err = -errno;
        close(fd);
        return err;
    }
    area = mmap(NULL, KCOV_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE,
                MAP_SHARED, fd, 0);
    if (area == MAP_FAILED) {
        err = -errno;
        close(fd);
        return err;
    }
    pthread_mutex_lock(&kc.lock);
    if (kc.n == KCOV_MAX_THREADS) {
        pthread_mutex_unlock(&kc.lock);
        munmap(area, KCOV_WORDS * sizeof(unsigned long));
        close(fd);
        return -ENOSPC;
    }
    kc.area[kc.n++] = area;
    pthread_mutex_unlock(&kc.lock);
    /* The trace belongs to the calling thread until it exits; the fd is not
     * needed for that, and the mapping stays for the collector. */
    if (ioctl(fd, KCOV_ENABLE, KCOV_TRACE_PC)) {
        err = -errno;
        close(fd);
        return err;
    }
    close(fd);
    return 0;
}

struct traced_start {
    void *(*fn)(void *);
    void *arg;
};

static void *traced_main(void *p)
{
    struct traced_start start = *(struct traced_start *)p;

    free(p);
    (void)gl_kcov_thread_begin();    /* coverage is a sample: a failure costs it */
    return start.fn(start.arg);
}

int gl_thread_create_traced(pthread_t *th, void *(*fn)(void *), void *arg)
{
    struct traced_start *start = malloc(sizeof(*start));
    int err;

    if (!start)
        return ENOMEM;
    start->fn = fn;
    start->arg = arg;
    err = pthread_create(th, NULL, traced_main, start);
    if (err)
        free(start);
    return err;
}

size_t gl_kcov_map_bits(const uint8_t *map)
{
    size_t n = 0;

    for (size_t i = 0; i < GL_KCOV_MAP_BITS / 8; i++)
        n += (size_t)__builtin_popcount(map[i]);
    return n;
}

void gl_kcov_base64(const uint8_t *in, size_t len, char *out)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? tab[v & 63] : '=';
    }
    out[o] = '\0';
}

static void report(void)
{
    static char text[(GL_KCOV_MAP_BITS / 8 + 2) / 3 * 4 + 1];

    if (getpid() != kc.pid)
        return;             /* a forked child: its parent reports */
    if (kc.why_off) {
        printf("# kcov unavailable: %s\n", kc.why_off);
        return;
    }
    drain_all();
    gl_kcov_base64(kc.map, sizeof(kc.map), text);
    printf("# kcov edges %zu\n# kcov-map %s\n", gl_kcov_map_bits(kc.map), text);
    fflush(stdout);
}

__attribute__((constructor)) static void kcov_start(void)
{
    const char *env = getenv("FAULTLINE_KCOV");
    pthread_t th;
    sigset_t all, old;
    int err;

    if (!env || strcmp(env, "1"))
        return;
    kc.pid = getpid();
    kc.on = true;
    atexit(report);
    err = gl_kcov_thread_begin();
    if (err) {
        kc.why_off = strerror(-err);
        kc.on = false;
        return;
    }
    /* The collector takes no signal: the tool's handlers and alarms stay
     * with its own threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&th, NULL, collector, NULL))
        kc.why_off = "no collector thread";
    else
        pthread_detach(th);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
