/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Minimal KTAP writer for faultline guest selftests (same output format as
 * the kernel's tools/testing/selftests/kselftest.h).
 */
#ifndef FAULTLINE_KTAP_H
#define FAULTLINE_KTAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int ktap_planned, ktap_num, ktap_failed;

static inline void ktap_header(int plan)
{
    ktap_planned = plan;
    printf("KTAP version 1\n1..%d\n", plan);
    fflush(stdout);
}

static inline void ktap_diag(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Report test result; @directive is NULL, "SKIP reason" or "XFAIL reason". */
static inline void ktap_result(int ok, const char *directive, const char *fmt, ...)
{
    va_list ap;

    ktap_num++;
    if (!ok && !directive) {
        ktap_failed++;
    }
    printf("%s %d ", ok ? "ok" : "not ok", ktap_num);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (directive) {
        printf(" # %s", directive);
    }
    printf("\n");
    fflush(stdout);
}

#define ktap_ok(cond, ...) ktap_result(!!(cond), NULL, __VA_ARGS__)

/* Pad the plan with failures if we stopped early, and give the exit code. */
static inline int ktap_finish(void)
{
    while (ktap_num < ktap_planned) {
        ktap_result(0, NULL, "not run (test stopped early)");
    }
    printf("# totals: pass:%d fail:%d\n", ktap_num - ktap_failed, ktap_failed);
    fflush(stdout);
    return ktap_failed ? 1 : 0;
}

static inline void ktap_bail(const char *fmt, ...)
{
    va_list ap;

    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

#endif /* FAULTLINE_KTAP_H */
