/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Where each page of the pattern is (swaptest-slots.c): swapped out, in
 * swap cache, on the device; and heal's tracking of the folios whose write
 * failed across such scans.
 */
#ifndef FAULTLINE_SWAPTEST_SLOTS_H
#define FAULTLINE_SWAPTEST_SLOTS_H

#include "../lib/pagecheck.h"

#include <stddef.h>
#include <stdint.h>

/* Where the pages are, one byte per page. */
struct slot_map {
    size_t pages, n_swapped, n_cached, n_on_disk;
    uint8_t *swapped;       /* the PTE is a swap entry (of swap type 0) */
    uint8_t *cached;        /* ... whose folio is in swap cache (mincore) */
    uint8_t *on_disk;       /* ... whose device slot holds the page's pattern */
    int ok;
};
int slots_scan(const struct pattern *pat, uint8_t *mem, size_t pages, struct slot_map *m);
/* As slots_scan, without reading the device (on_disk stays 0): a cheap rescan. */
int slots_scan_cache(uint8_t *mem, size_t pages, struct slot_map *m);
void slots_free(struct slot_map *m);

/*
 * heal: the folios whose write failed, named by the slot scan after the
 * disarm (swapped out, in swap cache, slot not holding the page), and those
 * of them seen out of swap cache by any later scan: written (nothing else
 * touches the pattern, so only reclaim, having written a folio, frees it;
 * zswap writeback may bring one back into swap cache later, still written).
 */
struct heal_track {
    size_t pages;
    uint8_t *redirtied, *written;   /* one byte per page */
    long long n_redirtied, n_written;
};
/* Name the redirtied folios of scan @a; -ENOMEM, or -EINVAL for a failed scan. */
int heal_track_start(struct heal_track *t, const struct slot_map *a);
/* Fold in a later scan (a failed one is ignored); returns n_written. */
long long heal_track_scan(struct heal_track *t, const struct slot_map *now);
void heal_track_free(struct heal_track *t);

#endif /* FAULTLINE_SWAPTEST_SLOTS_H */
