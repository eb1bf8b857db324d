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
}

void gl_vmstat_report(const struct gl_vmstat *before, const struct gl_vmstat *after)
{
    for (int i = 0; i < VM__COUNT; i++) {
        if (after->v[i] < 0) {
            ktap_diag("vmstat %s n/a", vmstat_names[i]);
        } else {
            ktap_diag("vmstat %s %lld", vmstat_names[i], after->v[i] - before->v[i]);
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
