/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progexec: the guest executor of swap programs (docs/programs.md).
 *
 * The pieces, each in its own file (program.h: the parsed program):
 *   parse.c    canonical program text -> struct pe_program
 *   run.c      the coordinator: the operations, the model, the report
 *   run-actor.c the processes and threads that do the operations (run.h)
 *   run-env.c  the coordinator's environment operations (runner.h)
 *   run-io.c   their sockets
 *   model.c    what every page owes (the oracle; model.h)
 *   pattern.c  the page pattern and its undo
 *   env.c      swap devices, knobs, cgroups, leak checks (pe-env.h)
 *   report.c   the report lines (one format for both modes)
 *   kcov.c     the program's kernel coverage (`cover` lines; kcov.h)
 *   offers.c   what the kernel offers a program (`offers` lines; offers.h)
 *   gate.c     the rules' gate of a run without the host (run --gate, prog c)
 *   serve.c    the virtio-serial loop (`progexec serve PORT`)
 *   main.c     `progexec run FILE` and `progexec serve PORT`
 *
 * One return convention: 0 or a negative errno; a failure that needs words
 * leaves one line in the caller's `why` buffer.
 */
#ifndef PROGEXEC_H
#define PROGEXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pe-env.h"

#define PE_PAGE 4096
#define PE_NAME_MAX 17          /* [a-z][a-z0-9_]{0,15} and a NUL */
#define PE_PROGRAM_NAME_MAX 65
#define PE_LINE_MAX 4096

/* Where report lines go: stdout (run) or the channel (serve). */
struct pe_report {
	FILE *out;
	int findings;
};

/* `finding CHECK ...`: @fmt holds the KEY=VALUE words; counts the finding. */
void pe_finding(struct pe_report *r, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Any other report line (`at`, `relaxed`, `stat`, `cover`, ...), flushed. */
void pe_say(struct pe_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct pe_program;              /* parse.c */

/* The serve loop's turns inside a run; NULL members are no-ops (run mode). */
struct pe_hooks {
	int (*ready)(void *arg);        /* after setup: 0 to start, <0 to stop */
	int (*ops_done)(void *arg);     /* after the last operation: 0 to tear down */
	void *arg;
};

/* Outcome of pe_program_run(). */
enum pe_outcome {
	PE_PASS = 0,
	PE_FAIL = 1,            /* at least one finding */
	PE_REFUSED = 2,         /* not run: why says which knob/device/line */
};

/* Parse canonical text (lines joined by '\n'); NULL with `LINE: reason` in why. */
struct pe_program *pe_program_parse(const char *name, const char *text, char *why, size_t whylen);
/* Bind program device @dev (its name) to @target (`nvme:SERIAL`...). */
int pe_program_bind(struct pe_program *p, const char *dev, const char *target, char *why,
		    size_t whylen);
/* Let the failed-read relaxation apply (`allow failed-read DEV`). */
int pe_program_allow_failed_read(struct pe_program *p, const char *dev, char *why, size_t whylen);
/* Set up, run, tear down; reports through @r and ends with the `result` line
 * (or `refused`). */
enum pe_outcome pe_program_run(struct pe_program *p, const struct pe_hooks *hooks,
			       struct pe_report *r);
void pe_program_free(struct pe_program *p);

/* gate.c: a one-sector direct read of @sector on each of the program's swap
 * devices, which moves the state of the injectors' gated rules (--gate). */
int pe_gate_read(const struct pe_program *p, long sector, char *why, size_t whylen);

/* serve.c: `progexec serve PORT`; returns the process exit code.  @plant (an
 * enum pe_plant, program.h) is set on every program served: self-tests only. */
int pe_serve(const char *port_name, int plant);

#endif /* PROGEXEC_H */
