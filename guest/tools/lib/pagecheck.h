/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The guest library's page checks (swaptest's --pattern): the seeded page
 * pattern, its SIGBUS-safe verification, and the memory locking that leaves
 * only the pattern swappable. It knows nothing of swaptest's options or
 * modes: the caller passes what it needs.
 */
#ifndef FAULTLINE_PAGECHECK_H
#define FAULTLINE_PAGECHECK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Which pattern: guestlib's (even pages compress well, odd pages do not),
 * or with @compressible every page the compressible one (page i gets even
 * page 2i), so every page is stored in zswap.
 */
struct pattern {
    uint64_t seed;
    int compressible;
};

/* Fill one page (@w, GL_PAGE_SIZE bytes) with the pattern of page @idx. */
void pattern_page(const struct pattern *pat, uint64_t *w, size_t idx);
/* Pages [0, @pages) of @base get the pattern of pages 0.. */
void pattern_fill(const struct pattern *pat, uint8_t *base, size_t pages);

struct verify_result {
    size_t ok, bad, sigbus, first_bad, zero;    /* ok: pages that matched */
};

/* Catch SIGBUS during verify_pages() (once per process, before any verify). */
void sigbus_install(void);
/*
 * Compare pages [first, first+n) of @base with the pattern (page index idx0+i);
 * a SIGBUS while reading a page is counted and the page skipped. @busmap
 * (optional, one byte per page) marks pages that raised SIGBUS; @skip
 * (optional) pages not to touch at all. @allow_zero: a zero page is ok.
 */
void verify_pages(const struct pattern *pat, uint8_t *base, size_t first, size_t n,
                  size_t idx0, uint8_t *busmap, const uint8_t *skip, int allow_zero,
                  struct verify_result *r);

/* Lock the process's memory (bails out on failure): the pattern alone swaps. */
void lock_own_memory(void);
/* Map @len bytes of anonymous memory that may swap (bails out on failure). */
uint8_t *map_pattern(size_t len);
/* Let [mem, mem+len) swap again, without huge pages. */
void pattern_unlock(uint8_t *mem, size_t len);

#endif /* FAULTLINE_PAGECHECK_H */
