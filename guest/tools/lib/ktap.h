/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Minimal KTAP writer for faultline guest selftests (same output format as
 * the kernel's tools/testing/selftests/kselftest.h).  The counters live in
 * ktap.c: every file of a tool reports into the same plan.
 */
#ifndef FAULTLINE_KTAP_H
#define FAULTLINE_KTAP_H

/* Tests planned, reported and failed so far (XFAIL and SKIP do not fail). */
extern int ktap_planned, ktap_num, ktap_failed;

void ktap_header(int plan);
void ktap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Report a test result.  @name is the case's id in CI (LAVA, KCIDB): it may
 * hold configuration (a round, a size option) but no measured value, so it
 * is the same in every run and for a pass and a fail.  What was measured
 * goes in @detail_fmt, printed just before the result as "# NAME: detail"
 * (kselftest style; nothing when NULL or empty).  @directive is NULL,
 * "SKIP reason" or "XFAIL reason".
 */
void ktap_result(int ok, const char *directive, const char *name, const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define ktap_check(cond, name, ...) ktap_result(!!(cond), NULL, name, __VA_ARGS__)
/* A name with configuration in it; the buffer is reused by the next call. */
const char *ktap_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Pad the plan with failures if we stopped early, and give the exit code. */
int ktap_finish(void);
void ktap_bail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif /* FAULTLINE_KTAP_H */
