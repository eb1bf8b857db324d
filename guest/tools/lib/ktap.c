// SPDX-License-Identifier: GPL-2.0-or-later
/* KTAP writer for faultline guest selftests; see ktap.h. */
#include "ktap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int ktap_planned, ktap_num, ktap_failed;

void ktap_header(int plan)
{
    ktap_planned = plan;
    printf("KTAP version 1\n1..%d\n", plan);
    fflush(stdout);
}

void ktap_diag(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

const char *ktap_name(const char *fmt, ...)
{
    static char name[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    return name;
}

void ktap_result(int ok, const char *directive, const char *name, const char *detail_fmt, ...)
{
    char detail[512] = "";
    va_list ap;

    ktap_num++;
    if (!ok && !directive) {
        ktap_failed++;
    }
    if (detail_fmt) {
        va_start(ap, detail_fmt);
        vsnprintf(detail, sizeof(detail), detail_fmt, ap);
        va_end(ap);
    }
    if (detail[0]) {
        printf("# %s: %s\n", name, detail);
    }
    printf("%s %d %s", ok ? "ok" : "not ok", ktap_num, name);
    if (directive) {
        printf(" # %s", directive);
    }
    printf("\n");
    fflush(stdout);
}

int ktap_finish(void)
{
    while (ktap_num < ktap_planned) {
        ktap_result(0, NULL, ktap_name("test %d not run", ktap_num + 1),
                    "the test stopped early");
    }
    printf("# totals: pass:%d fail:%d\n", ktap_num - ktap_failed, ktap_failed);
    fflush(stdout);
    return ktap_failed ? 1 : 0;
}

void ktap_bail(const char *fmt, ...)
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
