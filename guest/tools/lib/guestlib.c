// SPDX-License-Identifier: GPL-2.0-or-later
/* Helpers shared by faultline guest tools; see guestlib.h. */
#define _GNU_SOURCE
#include "guestlib.h"
#include "ktap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gl_write_file(const char *path, const char *val)
{
    int fd = open(path, O_WRONLY);
    ssize_t n;
    int err;

    if (fd < 0) {
        return -errno;
    }
    n = write(fd, val, strlen(val));
    err = n < 0 ? -errno : 0;
    close(fd);
    return err;
}

int gl_read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n;

    if (fd < 0) {
        return -errno;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return -errno;
    }
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
    }
    return 0;
}

long long gl_read_u64(const char *path)
{
    char buf[64];

    if (gl_read_file(path, buf, sizeof(buf)) < 0) {
        return -1;
    }
    return strtoll(buf, NULL, 0);
}

uint64_t gl_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);

    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    return *end ? 0 : v;
}

double gl_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void gl_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

#define ZSWAP_WRITTEN_BACK "/sys/kernel/debug/zswap/written_back_pages"

static const char *const vmstat_names[VM__COUNT] = {
    [VM_PSWPIN] = "pswpin",
    [VM_PSWPOUT] = "pswpout",
    [VM_ZSWPIN] = "zswpin",
    [VM_ZSWPOUT] = "zswpout",
    [VM_ZSWPWB] = "zswpwb",
    [VM_PGROTATED] = "pgrotated",
    [VM_NR_SWAPCACHED] = "nr_swapcached",
    [VM_WS_REFAULT_ANON] = "workingset_refault_anon",
    [VM_WS_ACTIVATE_ANON] = "workingset_activate_anon",
    [VM_WS_RESTORE_ANON] = "workingset_restore_anon",
    [VM_SWAP_RA] = "swap_ra",
    [VM_SWAP_RA_HIT] = "swap_ra_hit",
};

const char *gl_vmstat_name(int id)
{
    return vmstat_names[id];
}

void gl_vmstat_read(struct gl_vmstat *s)
{
    FILE *f = fopen("/proc/vmstat", "r");
    char name[64];
    long long val;

    for (int i = 0; i < VM__COUNT; i++) {
        s->v[i] = -1;
    }
    if (!f) {
        return;
    }
    while (fscanf(f, "%63s %lld", name, &val) == 2) {
        for (int i = 0; i < VM__COUNT; i++) {
            if (!strcmp(name, vmstat_names[i])) {
                s->v[i] = val;
            }
        }
    }
    fclose(f);
    /*
     * zswpwb is in /proc/vmstat since Linux 6.8; before, zswap counts the
     * pages it wrote back in debugfs only (both are global counts).
     */
    if (s->v[VM_ZSWPWB] < 0 && gl_read_file(ZSWAP_WRITTEN_BACK, name, sizeof(name)) == 0) {
        s->v[VM_ZSWPWB] = strtoll(name, NULL, 10);
    }
}

long long gl_vmstat_delta(const struct gl_vmstat *before, const struct gl_vmstat *after,
                          int id)
{
    return after->v[id] - before->v[id];
}

void gl_vmstat_report(const char *prefix, const struct gl_vmstat *before,
                      const struct gl_vmstat *after)
{
    for (int i = 0; i < VM__COUNT; i++) {
        if (after->v[i] < 0) {
            ktap_diag("%s %s n/a", prefix, vmstat_names[i]);
        } else {
            ktap_diag("%s %s %lld", prefix, vmstat_names[i], after->v[i] - before->v[i]);
        }
    }
}

static void memcg_path(char *buf, size_t len, const char *name, const char *file)
{
    snprintf(buf, len, "/sys/fs/cgroup/%s%s%s", name, file ? "/" : "", file ? file : "");
}

int gl_memcg_write(const char *name, const char *file, const char *val)
{
    char path[256];

    memcg_path(path, sizeof(path), name, file);
    return gl_write_file(path, val);
}

long long gl_memcg_read(const char *name, const char *file)
{
    char path[256];

    memcg_path(path, sizeof(path), name, file);
    return gl_read_u64(path);
}

void gl_memcg_set(const char *name, const char *file, const char *val)
{
    int err = gl_memcg_write(name, file, val);

    if (err) {
        ktap_diag("write %s=%s: %s", file, val, strerror(-err));
    }
}

void gl_memcg_reclaim_all(const char *name)
{
    char val[32];

    for (int i = 0; i < 3; i++) {
        long long cur = gl_memcg_read(name, "memory.current");

        if (cur < (long long)(1 << 20)) {
            break;
        }
        snprintf(val, sizeof(val), "%lld", cur);
        if (gl_memcg_write(name, "memory.reclaim", val) == 0) {
            break;
        }
    }
}

void gl_memcg_report(const char *name, const char *prefix, const char *const *keys,
                     size_t nkeys)
{
    for (size_t i = 0; i < nkeys; i++) {
        long long v = gl_memcg_stat(name, keys[i]);

        if (v >= 0) {
            ktap_diag("%s %s %lld", prefix, keys[i], v);
        }
    }
    ktap_diag("%s memory.current %lld", prefix, gl_memcg_read(name, "memory.current"));
    ktap_diag("%s memory.zswap.current %lld", prefix,
              gl_memcg_read(name, "memory.zswap.current"));
}

int gl_memcg_enter(const char *name, uint64_t max)
{
    char path[256], val[32];
    int err;

    memcg_path(path, sizeof(path), name, NULL);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        return -errno;
    }
    snprintf(val, sizeof(val), "%" PRIu64, max);
    err = gl_memcg_write(name, "memory.max", val);
    if (!err) {
        err = gl_memcg_write(name, "memory.swap.max", "max");
    }
    if (!err) {
        snprintf(val, sizeof(val), "%d", getpid());
        err = gl_memcg_write(name, "cgroup.procs", val);
    }
    return err;
}

int gl_memcg_leave(const char *name)
{
    char path[256], val[32];

    snprintf(val, sizeof(val), "%d", getpid());
    gl_write_file("/sys/fs/cgroup/cgroup.procs", val);
    memcg_path(path, sizeof(path), name, NULL);
    return rmdir(path) < 0 ? -errno : 0;
}

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/*
 * Even pages: one 64-bit value repeated (compresses to almost nothing);
 * odd pages: pseudo-random words (incompressible, zswap may reject them).
 * Every page starts with its own index so misplaced pages are caught too.
 */
void gl_pattern_page(uint64_t *w, size_t idx, uint64_t seed)
{
    uint64_t k = mix64(seed ^ (idx * 0x100000001b3ULL));
    size_t n = GL_PAGE_SIZE / sizeof(uint64_t);

    w[0] = idx;
    if (idx & 1) {
        for (size_t i = 1; i < n; i++) {
            w[i] = mix64(k + i);
        }
    } else {
        for (size_t i = 1; i < n; i++) {
            w[i] = k;
        }
    }
}

void gl_pattern_fill(uint8_t *base, size_t pages, uint64_t seed)
{
    for (size_t p = 0; p < pages; p++) {
        gl_pattern_page((uint64_t *)(base + p * GL_PAGE_SIZE), p, seed);
    }
}

size_t gl_pattern_verify(const uint8_t *base, size_t pages, uint64_t seed,
                         size_t *first_bad)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];
    size_t bad = 0;

    for (size_t p = 0; p < pages; p++) {
        gl_pattern_page(want, p, seed);
        if (memcmp(want, base + p * GL_PAGE_SIZE, GL_PAGE_SIZE)) {
            if (!bad && first_bad) {
                *first_bad = p;
            }
            bad++;
        }
    }
    return bad;
}

long long gl_memcg_stat(const char *name, const char *key)
{
    char path[256], k[64];
    long long val, ret = -1;
    FILE *f;

    memcg_path(path, sizeof(path), name, "memory.stat");
    f = fopen(path, "r");
    if (!f) {
        return -1;
    }
    while (fscanf(f, "%63s %lld", k, &val) == 2) {
        if (!strcmp(k, key)) {
            ret = val;
            break;
        }
    }
    fclose(f);
    return ret;
}

int gl_kmsg_open(void)
{
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

    if (fd >= 0) {
        lseek(fd, 0, SEEK_END);
    }
    return fd;
}

static const char *const splat_markers[] = {
    "BUG:", "kernel BUG", "WARNING:", "Oops", "lockdep", "general protection fault",
    "sleeping function called from invalid context", "possible circular locking",
    "INFO: task", "Call Trace",
};

void gl_kmsg_scan(int fd, struct gl_kmsg_counts *k)
{
    char rec[8192];
    ssize_t n;
    int shown = 0;

    memset(k, 0, sizeof(*k));
    if (fd < 0) {
        ktap_diag("kmsg unavailable");
        return;
    }
    for (;;) {
        char *msg, *nl;

        n = read(fd, rec, sizeof(rec) - 1);
        if (n < 0 && errno == EPIPE) {
            continue;   /* overwritten records: keep reading */
        }
        if (n <= 0) {
            break;
        }
        rec[n] = '\0';
        msg = strchr(rec, ';');
        msg = msg ? msg + 1 : rec;
        nl = strchr(msg, '\n');
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
    close(fd);
}
