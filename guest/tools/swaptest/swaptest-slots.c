// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Where each page of the pattern is, seen from user space, so that checks
 * can name the pages they judge: /proc/self/pagemap gives a swapped-out
 * page's swap slot, mincore() whether that slot's folio is in swap cache,
 * and an O_DIRECT read of the swap device whether the slot holds the
 * page's pattern (it was written to the device, not only to zswap).
 */
#define _GNU_SOURCE
#include "swaptest-slots.h"
#include "../lib/guestlib.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
#define PM_SWAP_TYPE(e) ((e) & 0x1f)
#define PM_SWAP_OFFSET(e) (((e) >> 5) & ((1ULL << 50) - 1))

/* The first active swap device (/proc/swaps, swap type 0). */
static int swap_device_open(void)
{
    FILE *f = fopen("/proc/swaps", "r");
    char line[512], dev[256] = "";
    int fd;

    if (!f) {
        return -errno;
    }
    if (fgets(line, sizeof(line), f) && fgets(line, sizeof(line), f)) {
        sscanf(line, "%255s", dev);
    }
    fclose(f);
    if (!dev[0]) {
        return -ENODEV;
    }
    fd = open(dev, O_RDONLY | O_DIRECT);
    return fd < 0 ? -errno : fd;
}

/* @pat: the pattern the slots are compared with; NULL: the device is not read. */
static int scan(const struct pattern *pat, uint8_t *mem, size_t pages, struct slot_map *m)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];
    unsigned char *vec;
    void *buf = NULL;
    int read_slots = pat != NULL, pm, dev, err = 0;

    memset(m, 0, sizeof(*m));
    m->pages = pages;
    m->swapped = calloc(pages, 1);
    m->cached = calloc(pages, 1);
    m->on_disk = calloc(pages, 1);
    vec = calloc(pages, 1);
    pm = open("/proc/self/pagemap", O_RDONLY);
    dev = read_slots ? swap_device_open() : -1;
    if (!m->swapped || !m->cached || !m->on_disk || !vec || pm < 0 || (read_slots && dev < 0) ||
        posix_memalign(&buf, GL_PAGE_SIZE, GL_PAGE_SIZE) ||
        mincore(mem, pages * GL_PAGE_SIZE, vec)) {
        err = read_slots && dev < 0 ? dev : (errno ? -errno : -ENOMEM);
        ktap_diag("slot scan failed: %s", strerror(-err));
        goto out;
    }
    for (size_t p = 0; p < pages; p++) {
        uint64_t e;

        if (pread(pm, &e, sizeof(e), ((uintptr_t)mem / GL_PAGE_SIZE + p) * sizeof(e)) !=
            sizeof(e)) {
            err = -EIO;
            goto out;
        }
        if ((e & PM_PRESENT) || !(e & PM_SWAPPED) || PM_SWAP_TYPE(e) != 0) {
            continue;
        }
        m->swapped[p] = 1;
        m->n_swapped++;
        m->cached[p] = vec[p] & 1;
        m->n_cached += m->cached[p];
        if (!read_slots || pread(dev, buf, GL_PAGE_SIZE, (off_t)(PM_SWAP_OFFSET(e) * GL_PAGE_SIZE)) !=
            (ssize_t)GL_PAGE_SIZE) {
            continue;
        }
        pattern_page(pat, want, p);
        m->on_disk[p] = !memcmp(buf, want, GL_PAGE_SIZE);
        m->n_on_disk += m->on_disk[p];
    }
out:
    if (pm >= 0) {
        close(pm);
    }
    if (dev >= 0) {
        close(dev);
    }
    free(buf);
    free(vec);
    m->ok = !err;
    return err;
}

int slots_scan(const struct pattern *pat, uint8_t *mem, size_t pages, struct slot_map *m)
{
    return scan(pat, mem, pages, m);
}

int slots_scan_cache(uint8_t *mem, size_t pages, struct slot_map *m)
{
    return scan(NULL, mem, pages, m);
}

void slots_free(struct slot_map *m)
{
    free(m->swapped);
    free(m->cached);
    free(m->on_disk);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ heal's folios */

int heal_track_start(struct heal_track *t, const struct slot_map *a)
{
    memset(t, 0, sizeof(*t));
    if (!a->ok) {
        return -EINVAL;
    }
    t->pages = a->pages;
    t->redirtied = calloc(a->pages, 1);
    t->written = calloc(a->pages, 1);
    if (!t->redirtied || !t->written) {
        heal_track_free(t);
        return -ENOMEM;
    }
    for (size_t p = 0; p < a->pages; p++) {
        t->redirtied[p] = a->swapped[p] && a->cached[p] && !a->on_disk[p];
        t->n_redirtied += t->redirtied[p];
    }
    return 0;
}

long long heal_track_scan(struct heal_track *t, const struct slot_map *now)
{
    for (size_t p = 0; now->ok && t->redirtied && p < t->pages && p < now->pages; p++) {
        if (t->redirtied[p] && !t->written[p] && now->swapped[p] && !now->cached[p]) {
            t->written[p] = 1;
            t->n_written++;
        }
    }
    return t->n_written;
}

void heal_track_free(struct heal_track *t)
{
    free(t->redirtied);
    free(t->written);
    memset(t, 0, sizeof(*t));
}
