// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's leaf library (pagecheck.h): the pattern, SIGBUS-safe verify,
 * memory locking.
 */
#define _GNU_SOURCE
#include "pagecheck.h"
#include "guestlib.h"
#include "ktap.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------ pattern */

void pattern_page(const struct pattern *pat, uint64_t *w, size_t idx)
{
    gl_pattern_page(w, pat->compressible ? 2 * idx : idx, pat->seed);
}

void pattern_fill(const struct pattern *pat, uint8_t *base, size_t pages)
{
    for (size_t p = 0; p < pages; p++) {
        pattern_page(pat, (uint64_t *)(base + p * GL_PAGE_SIZE), p);
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

void sigbus_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = sigbus_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGBUS, &sa, NULL);
}

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

void verify_pages(const struct pattern *pat, uint8_t *base, size_t first, size_t n,
                  size_t idx0, uint8_t *busmap, const uint8_t *skip, int allow_zero,
                  struct verify_result *r)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)];

    for (size_t i = 0; i < n; i++) {
        size_t p = first + i;

        if (skip && skip[p]) {
            continue;
        }
        pattern_page(pat, want, idx0 + i);
        switch (check_page(base + p * GL_PAGE_SIZE, want, allow_zero)) {
        case 0:
            r->ok++;
            break;
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

/* ------------------------------------------------------------ memory locking */

/*
 * swaptest's own memory is locked (main: mlockall on fault): only the pattern
 * is swappable, so a device that loses or damages data (--mutate) hits pages
 * a check verifies, never swaptest's own heap or stack (a lie there made
 * malloc abort before any metric was reported; read-error's armed read
 * errors there killed swaptest with SIGBUS outside any verify).
 */
void lock_own_memory(void)
{
    if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) {
        ktap_bail("mlockall: %s (swaptest's own memory must not be swapped)",
                  strerror(errno));
    }
}

void pattern_unlock(uint8_t *mem, size_t len)
{
    munlock(mem, len);
    madvise(mem, len, MADV_NOHUGEPAGE);
}

uint8_t *map_pattern(size_t len)
{
    uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED) {
        ktap_bail("mmap %zu bytes failed", len);
    }
    pattern_unlock(mem, len);
    return mem;
}
