// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's swapoff mode: the seeded pattern in anonymous memory (--mem)
 * and in a shmem file (memfd, --shmem), both charged to the memcg and
 * reclaimed to the swap device; then the fault state is armed (the
 * device's reads fail) and swapoff runs on the device (--swapoff-dev).
 *
 * What the kernel owes when a swap read fails during swapoff: swapoff
 * finishes (it may fail, with an errno, but it must return); a page whose
 * read failed is never handed back with other data in it: an anonymous
 * page faults with SIGBUS when touched, a shmem page's read() fails with
 * EIO. Those are the honest outcomes of a failing disk and are counted
 * apart (sigbus_pages_swapoff, shmem_eio_pages); a page that reads back
 * anything but its pattern is a data error.
 *
 * swapoff runs in a child process; when the swap area's use has not
 * dropped for --swapoff-stall seconds the child is killed and the run
 * counts swapoff_stuck: a kernel that retries a failed read for ever
 * shows here, without waiting for the scenario's watchdog.
 */
#define _GNU_SOURCE
#include "swaptest.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

/* Free page frames get this byte before swapoff (see scrub_free_memory). */
#define SCRUB_BYTE 0xa5
/* How long a killed swapoff may take to return. */
#define KILL_WAIT_S 10

/* KiB of @dev in use per /proc/swaps, -1 when it is not listed. */
static long long swap_used_kb(const char *dev)
{
    FILE *f = fopen("/proc/swaps", "r");
    char line[512], name[256];
    long long size, used, ret = -1;

    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%255s %*s %lld %lld", name, &size, &used) == 3 &&
            !strcmp(name, dev)) {
            ret = used;
        }
    }
    if (f) {
        fclose(f);
    }
    return ret;
}

/*
 * Freed page frames keep what they held: a frame that held page X and is
 * taken again for X's failed read would hold X's pattern by luck. Fill
 * that much memory with SCRUB_BYTE and free it, so a page mapped without
 * its data shows as a data error.
 */
static void scrub_free_memory(size_t len)
{
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED) {
        ktap_diag("scrub: mmap %zu bytes: %s", len, strerror(errno));
        return;
    }
    memset(m, SCRUB_BYTE, len);
    munmap(m, len);
}

/*
 * Run swapoff on @dev in a child process, at most @stall_s seconds
 * without the area's use dropping: then kill it. A process, not a thread:
 * a swapoff that never even sees the signal (a loop without a signal
 * check) must not keep this process from reporting and exiting. Returns
 * 1 when swapoff had to be killed; *@err is its errno (0: it succeeded;
 * -1: it never returned).
 */
static int bounded_swapoff(const char *dev, int stall_s, int shmem_fd, int *err, double *secs,
                           long long *left_kb)
{
    double t0 = gl_now_s(), progress = t0, killed = 0;
    long long used = swap_used_kb(dev);
    int stuck = 0, st;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        /* The file must not outlive the parent's close() through us. */
        close(shmem_fd);
        _exit(swapoff(dev) ? errno : 0);
    }
    *err = -1;
    if (pid < 0) {
        *err = errno;
        *secs = 0;
        *left_kb = used;
        return 0;
    }
    for (;;) {
        long long now_kb;

        if (waitpid(pid, &st, WNOHANG) == pid) {
            *err = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
            break;
        }
        gl_sleep_ms(200);
        now_kb = swap_used_kb(dev);
        if (now_kb != used) {
            used = now_kb;
            progress = gl_now_s();
        }
        if (!stuck && gl_now_s() - progress > stall_s) {
            stuck = 1;
            killed = gl_now_s();
            ktap_diag("swapoff %s: %lld KiB still in use, no progress for %d s: killing it",
                      dev, used, stall_s);
            kill(pid, SIGKILL);
        }
        if (stuck && gl_now_s() - killed > KILL_WAIT_S) {
            ktap_diag("swapoff %s: still running %d s after SIGKILL: left behind", dev,
                      KILL_WAIT_S);
            break;
        }
    }
    *secs = gl_now_s() - t0;
    *left_kb = used;
    return stuck;
}

/* Page @p of the shmem file: 0 match, 1 wrong data, -EIO or another -errno. */
static int shmem_page_check(int fd, const struct pattern *pat, size_t p, size_t idx)
{
    uint64_t want[GL_PAGE_SIZE / sizeof(uint64_t)], got[GL_PAGE_SIZE / sizeof(uint64_t)];
    ssize_t n = pread(fd, got, GL_PAGE_SIZE, (off_t)(p * GL_PAGE_SIZE));

    if (n < 0) {
        return -errno;
    }
    if (n != (ssize_t)GL_PAGE_SIZE) {
        return 1;               /* the file lost its tail */
    }
    pattern_page(pat, want, idx);
    return memcmp(want, got, GL_PAGE_SIZE) ? 1 : 0;
}

void swapoff_run(const struct options *o, struct run *R)
{
    const struct pattern pat = { o->seed, o->compressible };
    size_t pages = o->mem / GL_PAGE_SIZE, spages = o->shmem / GL_PAGE_SIZE;
    size_t s_ok = 0, s_eio = 0, s_bad = 0, s_other = 0;
    struct verify_result vr = { 0 };
    int swapoff_err;
    uint64_t w[GL_PAGE_SIZE / sizeof(uint64_t)];
    long long used_before, left_kb = -1;
    double secs = 0;
    uint8_t *mem;
    int fd, stuck, swapon_err = 0;

    mem = map_pattern(o->mem);
    /* swapoff's child process gets no copy: its swap entries stay this
     * process's alone, and the child can be left behind. */
    madvise(mem, o->mem, MADV_DONTFORK);
    fd = memfd_create("swaptest-shmem", 0);
    if (fd < 0) {
        ktap_bail("memfd_create: %s", strerror(errno));
    }
    R->t0 = gl_now_s();
    gl_vmstat_read(&R->v0);
    pattern_fill(&pat, mem, pages);
    /* The shmem pages continue the anonymous pages' pattern (pages+i):
     * no page of one can pass for a page of the other. */
    for (size_t p = 0; p < spages; p++) {
        pattern_page(&pat, w, pages + p);
        if (pwrite(fd, w, GL_PAGE_SIZE, (off_t)(p * GL_PAGE_SIZE)) != (ssize_t)GL_PAGE_SIZE) {
            ktap_bail("shmem write of page %zu: %s", p, strerror(errno));
        }
    }
    gl_memcg_reclaim_all(o->cgroup);
    gl_vmstat_read(&R->v_fill);
    used_before = swap_used_kb(o->swapoff_dev);
    ktap_check(used_before > 0,
               ktap_name("filled %zu anonymous and %zu shmem pages and reclaimed them to %s",
                         pages, spages, o->swapoff_dev),
               "memory.current %lld, %s %lld KiB in use, memcg swapcached %lld",
               gl_memcg_read(o->cgroup, "memory.current"), o->swapoff_dev, used_before,
               gl_memcg_stat(o->cgroup, "swapcached"));
    ktap_diag("swap_used_kb_before_swapoff %lld", used_before);

    /* swapoff brings everything back in, charged to this memcg: lift its
     * limit so that the charges do not fail (ENOMEM is not the point). */
    gl_memcg_set(o->cgroup, "memory.max", "max");
    scrub_free_memory(o->mem + o->shmem);

    /* The metrics' "writeback phase" is swapoff here. */
    gl_vmstat_read(&R->v_wb0);
    arm(o, "before swapoff");
    stuck = bounded_swapoff(o->swapoff_dev, o->swapoff_stall, fd, &swapoff_err, &secs, &left_kb);
    disarm(o, "after swapoff");
    gl_vmstat_read(&R->v_wb1);
    ktap_diag("swapoff_ms %lld", (long long)(secs * 1000 + 0.5));
    ktap_diag("swapoff_errno %d", swapoff_err);
    ktap_diag("swapoff_stuck %d", stuck);
    ktap_check(!stuck, ktap_name("swapoff %s returned (no %d s without progress)",
                                 o->swapoff_dev, o->swapoff_stall),
               "%.1f s, %s%s, %lld KiB left in use", secs,
               swapoff_err ? "failed: " : "succeeded",
               swapoff_err < 0 ? "never returned" : swapoff_err ? strerror(swapoff_err) : "",
               swapoff_err ? left_kb : 0);

    /* Anonymous pages: the pattern or SIGBUS, nothing else. */
    verify_pages(&pat, mem, 0, pages, 0, NULL, NULL, 0, &vr);
    run_count_verify(R, &vr, 1);
    R->verified += vr.ok;
    ktap_diag("sigbus_pages_swapoff %zu", vr.sigbus);
    ktap_check(!vr.bad,
               ktap_name("every anonymous page (%zu) was read back or faulted with SIGBUS", pages),
               "%zu match, %zu SIGBUS, %zu wrong%s", vr.ok, vr.sigbus, vr.bad,
               vr.bad ? " (data lost)" : "");
    if (vr.bad) {
        ktap_diag("first bad anonymous page %zu", vr.first_bad);
    }

    /* shmem pages: the pattern or EIO, nothing else. */
    for (size_t p = 0; p < spages; p++) {
        int r = shmem_page_check(fd, &pat, p, pages + p);

        if (r == 0) {
            s_ok++;
        } else if (r == -EIO) {
            s_eio++;
        } else if (r == 1) {
            if (!s_bad) {
                ktap_diag("first bad shmem page %zu", p);
            }
            s_bad++;
        } else {
            if (!s_other) {
                ktap_diag("shmem page %zu: read failed: %s", p, strerror(-r));
            }
            s_other++;
        }
    }
    /* A wrong page or a read failing otherwise than EIO is a data error. */
    R->bad += s_bad + s_other;
    R->verified += s_ok;
    ktap_diag("shmem_eio_pages %zu", s_eio);
    ktap_check(!s_bad && !s_other,
               ktap_name("every shmem page (%zu) was read back or failed with EIO", spages),
               "%zu match, %zu EIO, %zu wrong, %zu other errors", s_ok, s_eio, s_bad, s_other);

    /* Leave swap as the scenario set it up (its own swapoff comes last).
     * The file goes first: on a kernel that keeps a failed shmem entry its
     * removal is what frees the slot. */
    close(fd);
    if (!swapoff_err) {
        swapon_err = swapon(o->swapoff_dev, 0) ? errno : 0;
    }
    ktap_check(!swapon_err, ktap_name("%s in use as swap again", o->swapoff_dev),
               swapon_err ? "swapon: %s" : "%s", swapon_err ? strerror(swapon_err) :
               (swapoff_err ? "swapoff had not finished: still on" : "swapon succeeded"));
    gl_vmstat_read(&R->v_end);
    R->t1 = gl_now_s();
    munmap(mem, o->mem);
}

/* filled; armed, returned, disarmed; anonymous and shmem verified; swap on again */
int swapoff_planned(const struct options *o)
{
    int armed = o->arm_state >= 0;

    return 1 + armed + 1 + (armed && o->disarm) + 2 + 1;
}
