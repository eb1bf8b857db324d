// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * iocheck: O_DIRECT block I/O checker on io_uring, KTAP output.
 *
 * Check mode (default): COUNT I/Os one at a time (queue depth 1), the i-th
 * (1-based) at OFFSET + (i-1) * STRIDE, each reported as
 *   # io I write off O len L res R errno NAME lat_us U
 * then checked: every I/O succeeds except those named by --expect-err.
 *
 *   iocheck DEV --op write --offset 512M --len 4K --count 8 \
 *           --expect-err 3=ENODATA --lat-us 1900-20000
 *
 * --expect-err I=ERR   the I-th I/O fails with errno ERR (name or number);
 *                      repeatable
 * --lat-us MIN-MAX     the median latency of the successful I/Os is in
 *                      [MIN, MAX] microseconds
 * --stride BYTES       distance between consecutive I/Os (default: len)
 * --verify             write: read every successful write back and compare
 * --planted-bug I,J,...  a planted bug for `faultline minimize`'s self-test:
 *                      any I/O may fail, and the one result fails only if
 *                      all the listed I/Os failed (only failures are printed)
 *
 * Per-CPU mode: --per-cpu-sq SQ: one writer per CPU, pinned to it
 * (sched_setaffinity), each doing COUNT O_DIRECT writes (pwrite, one at a
 * time) into its own stretch, OFFSET + cpu * COUNT * STRIDE.  blk-mq sends
 * a CPU's I/O to the hardware queue whose /sys/block/DEV/mq/N/cpu_list
 * holds it, and the NVMe driver gives hardware queue N submission queue
 * N + 1 (nvme_init_hctx).  Every write of a CPU served by SQ must fail
 * with EIO; every other CPU's writes must succeed and read back
 * byte-exact.  Checks that SQ serves some CPUs and not all.
 * --per-cpu-fail-cpu C: the same with every online CPU, where CPU C's
 * writes must fail (a cpu= rule, e.g. on syncblk).
 *
 * Load mode: --bench SECONDS: random 4K (--len) writes (--op) at queue
 * depth --qd (default 32) over [OFFSET, OFFSET + --range), for SECONDS;
 * prints "# iops N".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <liburing.h>

#include "lib/guestlib.h"
#include "lib/ktap.h"

#define MAX_EXPECT 64

static struct {
    const char *dev;
    bool write;
    uint64_t offset, len, stride, range;
    unsigned int count, qd;
    double bench_s;
    bool verify;
    int nexp;
    unsigned int exp_idx[MAX_EXPECT];
    int exp_err[MAX_EXPECT];
    bool lat;
    uint64_t lat_min, lat_max;
    int nplanted;
    unsigned int planted[MAX_EXPECT];
    unsigned int per_cpu_sq;    /* 0: not per-CPU mode */
    int fail_cpu;               /* --per-cpu-fail-cpu, or -1 */
} o = { .len = 4096, .count = 1, .qd = 32, .range = 64 << 20,
        .fail_cpu = -1 };

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static const struct { const char *name; int err; } errnames[] = {
    { "OK", 0 }, { "EIO", EIO }, { "ENODATA", ENODATA },
    { "ENOSPC", ENOSPC }, { "ETIMEDOUT", ETIMEDOUT },
    { "ENOLINK", ENOLINK }, { "EREMOTEIO", EREMOTEIO },
    { "EILSEQ", EILSEQ }, { "EAGAIN", EAGAIN }, { "ECANCELED", ECANCELED },
    { "EBADE", EBADE }, { "ENOMEM", ENOMEM }, { "EINVAL", EINVAL },
};

static const char *errname(int err)
{
    static char buf[16];

    for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++) {
        if (errnames[i].err == err) {
            return errnames[i].name;
        }
    }
    snprintf(buf, sizeof(buf), "%d", err);
    return buf;
}

static int parse_err(const char *s)
{
    char *end;
    long v;

    for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++) {
        if (!strcmp(errnames[i].name, s)) {
            return errnames[i].err;
        }
    }
    v = strtol(s, &end, 0);
    return *end ? -1 : (int)v;
}

static void usage(void)
{
    fprintf(stderr, "usage: iocheck DEV [--op read|write] [--offset B] "
            "[--len B] [--stride B] [--count N] [--expect-err I=ERR]... "
            "[--lat-us MIN-MAX] [--verify] [--planted-bug I,J,...] | "
            "[--bench S --qd N --range B] | [--per-cpu-sq SQ | "
            "--per-cpu-fail-cpu C]\n");
    exit(2);
}

static uint64_t size_arg(const char *s)
{
    uint64_t v = gl_parse_size(s);

    if (!v && strcmp(s, "0")) {
        fprintf(stderr, "iocheck: bad size '%s'\n", s);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv)
{
    if (argc < 2) {
        usage();
    }
    o.dev = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--verify")) {
            o.verify = true;
            continue;
        }
        if (!v) {
            usage();
        }
        i++;
        if (!strcmp(a, "--op")) {
            o.write = !strcmp(v, "write");
            if (!o.write && strcmp(v, "read")) {
                usage();
            }
        } else if (!strcmp(a, "--offset")) {
            o.offset = size_arg(v);
        } else if (!strcmp(a, "--len")) {
            o.len = size_arg(v);
        } else if (!strcmp(a, "--stride")) {
            o.stride = size_arg(v);
        } else if (!strcmp(a, "--range")) {
            o.range = size_arg(v);
        } else if (!strcmp(a, "--count")) {
            o.count = strtoul(v, NULL, 0);
        } else if (!strcmp(a, "--per-cpu-sq")) {
            o.per_cpu_sq = strtoul(v, NULL, 0);
            if (!o.per_cpu_sq) {
                usage();
            }
        } else if (!strcmp(a, "--per-cpu-fail-cpu")) {
            char *end;

            o.fail_cpu = (int)strtol(v, &end, 10);
            if (*end || o.fail_cpu < 0) {
                usage();
            }
        } else if (!strcmp(a, "--qd")) {
            o.qd = strtoul(v, NULL, 0);
        } else if (!strcmp(a, "--bench")) {
            o.bench_s = strtod(v, NULL);
        } else if (!strcmp(a, "--expect-err")) {
            const char *eq = strchr(v, '=');

            if (!eq || o.nexp == MAX_EXPECT) {
                usage();
            }
            o.exp_idx[o.nexp] = strtoul(v, NULL, 0);
            o.exp_err[o.nexp] = parse_err(eq + 1);
            if (o.exp_err[o.nexp] < 0) {
                usage();
            }
            o.nexp++;
        } else if (!strcmp(a, "--planted-bug")) {
            char *p = (char *)v, *end;

            do {
                if (o.nplanted == MAX_EXPECT) {
                    usage();
                }
                o.planted[o.nplanted] = strtoul(p, &end, 10);
                if (end == p || !o.planted[o.nplanted]) {
                    usage();
                }
                o.nplanted++;
                p = end + 1;
            } while (*end == ',');
            if (*end) {
                usage();
            }
        } else if (!strcmp(a, "--lat-us")) {
            if (sscanf(v, "%" SCNu64 "-%" SCNu64, &o.lat_min,
                       &o.lat_max) != 2) {
                usage();
            }
            o.lat = true;
        } else {
            usage();
        }
    }
    if (!o.stride) {
        o.stride = o.len;
    }
    if (o.per_cpu_sq && o.fail_cpu >= 0) {
        usage();
    }
    if (o.per_cpu_sq || o.fail_cpu >= 0) {
        o.write = true;     /* writers, which read back what they wrote */
    }
    if (!o.len || o.len % 512 || !o.qd || o.qd > 256) {
        usage();
    }
}

static int expected_err(unsigned int idx)
{
    for (int i = 0; i < o.nexp; i++) {
        if (o.exp_idx[i] == idx) {
            return o.exp_err[i];
        }
    }
    return 0;
}

static int one_io(struct io_uring *ring, int fd, bool write, void *buf,
                  uint64_t off, uint64_t *lat_ns)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    struct io_uring_cqe *cqe;
    uint64_t t0;
    int res;

    if (write) {
        io_uring_prep_write(sqe, fd, buf, o.len, off);
    } else {
        io_uring_prep_read(sqe, fd, buf, o.len, off);
    }
    t0 = now_ns();
    io_uring_submit(ring);
    res = io_uring_wait_cqe(ring, &cqe);
    *lat_ns = now_ns() - t0;
    if (res < 0) {
        ktap_bail("io_uring_wait_cqe: %s", strerror(-res));
    }
    res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/*
 * The planted bug: every I/O is issued whatever happened before (no retry,
 * so the I/O sequence never depends on the faults), and the result fails
 * only if every listed I/O failed.  Its text names no counts, so every
 * failing run fails with the same line.
 */
static int planted_mode(int fd, struct io_uring *ring)
{
    bool *failed = calloc(o.count + 1, sizeof(*failed));
    unsigned int nfailed = 0;
    char names[256];
    size_t pos = 0;
    uint8_t *buf;
    bool all = true;

    if (posix_memalign((void **)&buf, 4096, o.len) || !failed) {
        ktap_bail("out of memory");
    }
    ktap_header(1);
    for (unsigned int i = 1; i <= o.count; i++) {
        uint64_t off = o.offset + (uint64_t)(i - 1) * o.stride, lat;
        int res;

        memset(buf, (int)(i & 0xff) ^ 0x5a, o.len);
        res = one_io(ring, fd, o.write, buf, off, &lat);
        if (res != (int)o.len) {
            failed[i] = true;
            nfailed++;
            ktap_diag("io %u %s off %" PRIu64 " failed: res %d", i,
                      o.write ? "write" : "read", off, res);
        }
    }
    ktap_diag("io_errors %u", nfailed);
    for (int k = 0; k < o.nplanted; k++) {
        all &= o.planted[k] <= o.count && failed[o.planted[k]];
        pos += snprintf(names + pos, pos < sizeof(names) ? sizeof(names) - pos
                        : 0, "%s%u", k ? (k + 1 == o.nplanted ? " and " : ", ")
                        : "", o.planted[k]);
    }
    ktap_check(!all, ktap_name("planted bug: I/Os %s not all failed", names),
               "%u I/O errors", nfailed);
    free(failed);
    return ktap_finish();
}

static int check_mode(int fd, struct io_uring *ring)
{
    uint8_t *buf, *rbuf;
    uint64_t *lats = calloc(o.count, sizeof(*lats));
    unsigned int nlat = 0, bad = 0, verified = 0, mismatched = 0;

    if (posix_memalign((void **)&buf, 4096, o.len) ||
        posix_memalign((void **)&rbuf, 4096, o.len) || !lats) {
        ktap_bail("out of memory");
    }
    ktap_header(1 + (o.lat ? 1 : 0) + (o.verify ? 1 : 0));
    for (unsigned int i = 1; i <= o.count; i++) {
        uint64_t off = o.offset + (uint64_t)(i - 1) * o.stride, lat;
        int res, err, want = expected_err(i);

        memset(buf, (int)(i & 0xff) ^ 0x5a, o.len);
        memcpy(buf, &off, sizeof(off));
        res = one_io(ring, fd, o.write, buf, off, &lat);
        err = res < 0 ? -res : 0;
        if (res >= 0 && (uint64_t)res != o.len) {
            err = EIO;      /* short I/O */
        }
        ktap_diag("io %u %s off %" PRIu64 " len %" PRIu64 " res %d errno %s "
                  "lat_us %" PRIu64, i, o.write ? "write" : "read", off,
                  o.len, res, errname(err), lat / 1000);
        if (err != want) {
            ktap_diag("io %u: expected %s, got %s", i, errname(want),
                      errname(err));
            bad++;
        }
        if (!err) {
            lats[nlat++] = lat;
            if (o.write && o.verify) {
                uint64_t l2;
                int r = one_io(ring, fd, false, rbuf, off, &l2);

                verified++;
                if (r != (int)o.len || memcmp(buf, rbuf, o.len)) {
                    mismatched++;
                    ktap_diag("io %u: read back differs (res %d)", i, r);
                }
            }
        }
    }
    ktap_diag("ios_failed_as_expected %d", o.nexp);
    ktap_check(!bad, ktap_name("%u %s I/Os: each failed exactly as expected (%d expected "
                               "failures)", o.count, o.write ? "write" : "read", o.nexp),
               "%u I/Os did otherwise", bad);
    if (o.lat) {
        uint64_t med = 0;

        if (nlat) {
            qsort(lats, nlat, sizeof(*lats), cmp_u64);
            med = lats[nlat / 2] / 1000;
        }
        ktap_diag("lat_median_us %" PRIu64, med);
        ktap_diag("lat_min_us %" PRIu64, nlat ? lats[0] / 1000 : 0);
        ktap_diag("lat_max_us %" PRIu64, nlat ? lats[nlat - 1] / 1000 : 0);
        ktap_check(nlat && med >= o.lat_min && med <= o.lat_max,
                   ktap_name("median latency in [%" PRIu64 ", %" PRIu64 "] us", o.lat_min,
                             o.lat_max),
                   "%" PRIu64 " us over %u I/Os", med, nlat);
    }
    if (o.verify) {
        ktap_check(!mismatched, "writes read back intact", "%u of %u writes read back intact",
                   verified - mismatched, verified);
    }
    return ktap_finish();
}

#define MAX_CPUS 64

/* What one pinned writer saw. */
struct cpu_result {
    unsigned int writes, ok, eio, other, verified, mismatched, moved;
    int other_errno;
};

/* map[c] = @val for every CPU c of a sysfs CPU list ("0, 1", "0-3"). */
static void parse_cpu_list(char *p, int *map, int val)
{
    char *end;

    while (*p) {
        unsigned long lo, hi;

        lo = hi = strtoul(p, &end, 10);
        if (end == p) {
            break;
        }
        if (*end == '-') {
            p = end + 1;
            hi = strtoul(p, &end, 10);
        }
        for (unsigned long c = lo; c <= hi && c < MAX_CPUS; c++) {
            map[c] = val;
        }
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n') {
            p++;
        }
    }
}

/*
 * The hardware queue of each CPU from /sys/block/DEV/mq/N/cpu_list; -1
 * for a CPU no queue lists.  Returns the number of queues.  With
 * --per-cpu-fail-cpu: every online CPU, queue 0 (a bio-based disk has
 * no mq/).
 */
static int read_cpu_queues(const char *dev, int *hctx_of)
{
    const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
    char path[256], list[1024];
    int n;

    for (int c = 0; c < MAX_CPUS; c++) {
        hctx_of[c] = -1;
    }
    if (o.fail_cpu >= 0) {
        if (gl_read_file("/sys/devices/system/cpu/online", list,
                         sizeof(list)) >= 0) {
            parse_cpu_list(list, hctx_of, 0);
        }
        return 1;
    }
    for (n = 0;; n++) {
        snprintf(path, sizeof(path), "/sys/block/%s/mq/%d/cpu_list", name, n);
        if (gl_read_file(path, list, sizeof(list)) < 0) {
            return n;
        }
        parse_cpu_list(list, hctx_of, n);
    }
}

/* The writes of @cpu must fail: its queue is SQ, or it is the CPU. */
static bool cpu_targeted(int cpu, const int *hctx_of)
{
    return o.fail_cpu >= 0 ? cpu == o.fail_cpu
                           : hctx_of[cpu] == (int)o.per_cpu_sq - 1;
}

/* The writer of @cpu, in a child pinned there. */
static void cpu_writer(int fd, int cpu, struct cpu_result *r)
{
    uint64_t base = o.offset + (uint64_t)cpu * o.count * o.stride;
    uint8_t *buf, *rbuf;
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0 ||
        posix_memalign((void **)&buf, 4096, o.len) ||
        posix_memalign((void **)&rbuf, 4096, o.len)) {
        r->other_errno = errno ? errno : ENOMEM;
        return;
    }
    for (unsigned int i = 0; i < o.count; i++) {
        uint64_t off = base + (uint64_t)i * o.stride;
        ssize_t res;

        /* Distinct per CPU and per write, so a misplaced block shows. */
        memset(buf, (int)((cpu * 31 + i) & 0xff) ^ 0xa5, o.len);
        memcpy(buf, &off, sizeof(off));
        r->moved += sched_getcpu() != cpu;
        res = pwrite(fd, buf, o.len, (off_t)off);
        r->writes++;
        if (res == (ssize_t)o.len) {
            r->ok++;
            res = pread(fd, rbuf, o.len, (off_t)off);
            r->verified++;
            if (res != (ssize_t)o.len || memcmp(buf, rbuf, o.len)) {
                r->mismatched++;
            }
        } else if (res < 0 && errno == EIO) {
            r->eio++;
        } else {
            r->other++;
            r->other_errno = res < 0 ? errno : EIO;
        }
    }
}

/* " (SQ N)" in --per-cpu-sq mode, else "". */
static const char *queue_label(int cpu, const int *hctx_of)
{
    static char buf[32];

    if (o.fail_cpu >= 0) {
        return "";
    }
    snprintf(buf, sizeof(buf), " (SQ %d)", hctx_of[cpu] + 1);
    return buf;
}

static int per_cpu_mode(int fd)
{
    int hctx_of[MAX_CPUS], nq = read_cpu_queues(o.dev, hctx_of);
    int ncpu = 0, nt = 0;
    int cpus[MAX_CPUS];
    unsigned int failed = 0, verified = 0;
    struct cpu_result *res;

    for (int c = 0; c < MAX_CPUS; c++) {
        if (hctx_of[c] >= 0) {
            cpus[ncpu++] = c;
            nt += cpu_targeted(c, hctx_of);
        }
    }
    res = mmap(NULL, sizeof(*res) * MAX_CPUS, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        ktap_bail("mmap: %s", strerror(errno));
    }
    memset(res, 0, sizeof(*res) * MAX_CPUS);
    ktap_header(1 + ncpu);
    for (int k = 0; k < ncpu && o.per_cpu_sq; k++) {
        ktap_diag("cpu %d hw_queue %d sq %d", cpus[k], hctx_of[cpus[k]],
                  hctx_of[cpus[k]] + 1);
    }
    if (o.fail_cpu >= 0) {
        ktap_check(nt == 1 && ncpu > 1,
                   ktap_name("cpu %d is one of several online CPUs", o.fail_cpu),
                   "%d online CPUs", ncpu);
    } else {
        ktap_check(nq > 1 && nt > 0 && nt < ncpu,
                   ktap_name("SQ %u serves some but not all CPUs", o.per_cpu_sq),
                   "%d hw queues; SQ %u serves %d of %d CPUs", nq, o.per_cpu_sq, nt,
                   ncpu);
    }
    /* All writers at once: the queues are busy side by side. */
    for (int k = 0; k < ncpu; k++) {
        pid_t pid = fork();

        if (pid < 0) {
            ktap_bail("fork: %s", strerror(errno));
        }
        if (pid == 0) {
            cpu_writer(fd, cpus[k], &res[cpus[k]]);
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {
        continue;
    }
    for (int k = 0; k < ncpu; k++) {
        int c = cpus[k];
        struct cpu_result *r = &res[c];
        bool hit = cpu_targeted(c, hctx_of);

        ktap_diag("cpu %d writes %u ok %u eio %u other %u (%s) verified %u "
                  "mismatched %u moved %u", c, r->writes, r->ok, r->eio,
                  r->other, errname(r->other_errno), r->verified,
                  r->mismatched, r->moved);
        if (hit) {
            failed += r->eio;
            ktap_check(r->writes == o.count && r->eio == o.count && !r->moved,
                       ktap_name("cpu %d%s: every one of %u writes failed with EIO",
                                 c, queue_label(c, hctx_of), o.count),
                       "%u writes, %u EIO, %u moved", r->writes, r->eio, r->moved);
        } else {
            verified += r->verified - r->mismatched;
            ktap_check(r->writes == o.count && r->ok == o.count &&
                       r->verified == o.count && !r->mismatched && !r->moved,
                       ktap_name("cpu %d%s: every one of %u writes succeeded and "
                                 "read back byte-exact", c, queue_label(c, hctx_of),
                                 o.count),
                       "%u writes, %u ok, %u verified, %u mismatched, %u moved",
                       r->writes, r->ok, r->verified, r->mismatched, r->moved);
        }
    }
    ktap_diag("targeted_writes_failed %u", failed);
    ktap_diag("other_writes_verified %u", verified);
    munmap(res, sizeof(*res) * MAX_CPUS);
    return ktap_finish();
}

static int bench_mode(int fd, struct io_uring *ring)
{
    uint8_t *bufs;
    uint64_t blocks = o.range / o.len, x = 0x9e3779b97f4a7c15ull;
    uint64_t t0, t_end, done = 0, errors = 0;
    unsigned int inflight = 0;

    if (!blocks || posix_memalign((void **)&bufs, 4096, o.len * o.qd)) {
        ktap_bail("bad range or out of memory");
    }
    memset(bufs, 0xa5, o.len * o.qd);
    ktap_header(1);
    t0 = now_ns();
    t_end = t0 + (uint64_t)(o.bench_s * 1e9);
    for (;;) {
        bool more = now_ns() < t_end;
        struct io_uring_cqe *cqe;

        while (more && inflight < o.qd) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            uint64_t blk;

            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            blk = x % blocks;
            if (o.write) {
                io_uring_prep_write(sqe, fd, bufs + inflight * o.len, o.len,
                                    o.offset + blk * o.len);
            } else {
                io_uring_prep_read(sqe, fd, bufs + inflight * o.len, o.len,
                                   o.offset + blk * o.len);
            }
            inflight++;
        }
        if (!inflight) {
            break;
        }
        io_uring_submit_and_wait(ring, 1);
        while (io_uring_peek_cqe(ring, &cqe) == 0) {
            if (cqe->res != (int)o.len) {
                errors++;
            }
            done++;
            inflight--;
            io_uring_cqe_seen(ring, cqe);
        }
    }
    {
        double s = (now_ns() - t0) / 1e9;

        ktap_diag("bench %s qd %u len %" PRIu64 " seconds %.2f ios %" PRIu64,
                  o.write ? "randwrite" : "randread", o.qd, o.len, s, done);
        ktap_diag("iops %" PRIu64, (uint64_t)(done / s));
        ktap_diag("errors %" PRIu64, errors);
        ktap_check(done && !errors, "benchmark ran without errors",
                   "%" PRIu64 " I/Os, %" PRIu64 " errors", done, errors);
    }
    return ktap_finish();
}

int main(int argc, char **argv)
{
    struct io_uring ring;
    int fd, ret;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse(argc, argv);
    fd = open(o.dev, (o.write ? O_RDWR : O_RDONLY) | O_DIRECT);
    if (fd < 0) {
        printf("Bail out! open %s: %s\n", o.dev, strerror(errno));
        return 1;
    }
    ret = io_uring_queue_init(o.qd < 8 ? 8 : o.qd * 2, &ring, 0);
    if (ret < 0) {
        printf("Bail out! io_uring_queue_init: %s\n", strerror(-ret));
        return 1;
    }
    ret = o.per_cpu_sq || o.fail_cpu >= 0 ? per_cpu_mode(fd)
        : o.bench_s > 0 ? bench_mode(fd, &ring)
        : o.nplanted ? planted_mode(fd, &ring) : check_mode(fd, &ring);
    io_uring_queue_exit(&ring);
    close(fd);
    return ret;
}
