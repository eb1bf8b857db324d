/*
 * host-cooling: how much slower a fixed walk over a working set runs
 * after this thread spun for a while than back to back.  No QEMU, no
 * guest: on a host whose caches other tenants share, it shows what any
 * work pays after a wait of that length (faultline bench, idle rows).
 *
 *   host-cooling KIB IDLE_US...
 * prints one line per idle: "idle_us N median_ns M"
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RUNS_SHORT 1000
#define RUNS_LONG 200           /* idles of 10 ms and more */
#define LINE 64

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static uint64_t took[RUNS_SHORT];
    volatile unsigned sink = 0;
    unsigned char *buf;
    size_t size, lines, i;
    int a;

    if (argc < 3 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: host-cooling KIB IDLE_US...\n");
        return 2;
    }
    size = (size_t)atoi(argv[1]) << 10;
    lines = size / LINE;
    buf = malloc(size);
    if (!buf) {
        fprintf(stderr, "host-cooling: no memory for %zu bytes\n", size);
        return 1;
    }
    for (i = 0; i < size; i++) {
        buf[i] = (unsigned char)i;
    }
    for (a = 2; a < argc; a++) {
        long idle_us = atol(argv[a]);
        int runs = idle_us >= 10000 ? RUNS_LONG : RUNS_SHORT, r;

        for (r = 0; r < runs; r++) {
            uint64_t t0 = now_ns(), t1;

            while (now_ns() - t0 < (uint64_t)idle_us * 1000) {
                ;
            }
            t1 = now_ns();
            /* A stride of a prime number of lines: no prefetcher follows it. */
            for (i = 0; i < lines; i++) {
                sink += buf[(i * 7919 % lines) * LINE];
            }
            took[r] = now_ns() - t1;
        }
        qsort(took, runs, sizeof(took[0]), cmp_u64);
        printf("idle_us %ld median_ns %llu\n", idle_us,
               (unsigned long long)took[runs / 2]);
    }
    free(buf);
    return 0;
}
