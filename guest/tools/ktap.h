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
/* Print the plan line "1..N" after the results (KTAP allows it last). */
void ktap_plan_at_end(void);
void ktap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report test result; @directive is NULL, "SKIP reason" or "XFAIL reason". */
void ktap_result(int ok, const char *directive, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define ktap_ok(cond, ...) ktap_result(!!(cond), NULL, __VA_ARGS__)
/* Pad the plan with failures if we stopped early, and give the exit code. */
int ktap_finish(void);
void ktap_bail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif /* FAULTLINE_KTAP_H */
