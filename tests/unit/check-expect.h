/* The TAP counters and the check-result expectation shared by the swaptest
 * check tests (include after swaptest-checks.h's enum check_result). */
#ifndef CHECK_EXPECT_H
#define CHECK_EXPECT_H

#include <stdio.h>

static int n_tests, n_failed;

static void expect(enum check_result got, enum check_result want, const char *what)
{
    static const char *const names[] = { "PASS", "FAIL", "SKIP", "XFAIL" };

    n_tests++;
    n_failed += got != want;
    printf("%s %d %s (%s, expected %s)\n", got == want ? "ok" : "not ok", n_tests, what,
           names[got], names[want]);
}

#endif
