/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Kernel coverage of a program (kcov.c): every actor thread, and the
 * coordinator around its own environment operations, traces the kernel's
 * PCs (KCOV_TRACE_PC) while it runs an operation; the edges (consecutive PC
 * pairs, hashed as guestlib-kcov.c hashes them) gather in a map shared by
 * every process of the program, reported as `cover` lines before `result`.
 * Without kcov in the kernel every call is a no-op.
 */
#ifndef PE_KCOV_H
#define PE_KCOV_H

#include <stdbool.h>

struct pe_report;

/* Once, in the executor before any program: whether this kernel traces
 * (debugfs kcov opens, takes a buffer and enables), and the shared map.
 * 0, or -errno (coverage stays off; FAULTLINE_KCOV=0 turns it off). */
int pe_kcov_setup(void);
bool pe_kcov_on(void);
/* A new program: the map is emptied. */
void pe_kcov_program_begin(void);
/* Around one operation in the calling thread (a forked process opens its
 * own trace on first use). */
void pe_kcov_op_begin(void);
void pe_kcov_op_end(void);
/* Inside a long operation: take the buffer's PCs before it fills. */
void pe_kcov_poll(void);
/* `cover N HEX...` lines of the program's distinct edges (none when off). */
void pe_kcov_report(struct pe_report *r);

#endif /* PE_KCOV_H */
