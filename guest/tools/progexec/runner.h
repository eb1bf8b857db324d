/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The coordinator's state while a program runs, shared by run.c (the
 * operations of the actors) and run-env.c (the environment's operations,
 * cgroup moves, tmpfs mounts, refusals before setup).
 */
#ifndef PE_RUNNER_H
#define PE_RUNNER_H

#include <sys/types.h>

#include "model.h"
#include "program.h"
#include "run.h"

/* Content findings of one program beyond which pages are counted, not listed. */
#define PE_RUN_MAX_PAGE_FINDINGS 32

/* An actor as the coordinator sees it. */
struct live {
	pid_t pid;              /* its process (kept once it is gone: to reap it); 0: none */
	int fd;                 /* its socket; -1 when gone */
	const struct pe_op *bg; /* its background operation, until wait */
	struct pe_vset *owed;   /* a pending read's owed sets */
	int cg;                 /* a process: its cgroup (`move`), -1: the executor's */
	int moved_to;           /* a process: the cgroup an object access moved it to, or -1 */
};

struct runner {
	struct pe_program *p;
	struct pe_report *r;
	struct pe_model *m;
	struct live live[PE_MAX_ACTORS];
	pid_t swapoff_pid[PE_MAX_SWAPS];        /* a background swapoff, 0: none */
	int swapoff_fd[PE_MAX_SWAPS];           /* its result (an int), -1: none */
	bool swapoff_timed_out;                 /* a swapoff of this program did */
	bool unmade[PE_MAX_OBJECTS];            /* its anon/memfd/tmpfs call failed (a
						 * finding): later operations on it are skipped */
	bool swapoff_skipped[PE_MAX_SWAPS];     /* a background swapoff skipped with its
						 * OOM-killed process: its wait or kill too */
	int plant_op;                           /* the operation --plant marks, -1: none */
	pid_t hidden;                           /* --plant leak-slot's process */
	long long oom_kills;
	unsigned long long written, read, checked;
	int uffd_unsupported;
	int page_findings;
	bool mounted[PE_TMPFS_POLICIES];
};

void pe_run_relaxed(struct runner *rn, enum pe_relax relax, const struct pe_op *op, int obj,
		    uint32_t page);
/* A call of an actor failed: a finding, or a skip the language allows. */
void pe_run_call_failed(struct runner *rn, const struct pe_op *op, int actor, const char *call,
			int err);
/* Actor @a's process is gone while @op needed it: an OOM kill the kernel
 * counted (the oom-kill relaxation), else a finding. */
void pe_run_actor_died(struct runner *rn, int a, const struct pe_op *op);
/* `cgroup=CG` objects: the process moves into CG for the access, then back. */
void pe_run_cgroup_enter(struct runner *rn, const struct pe_op *op);
void pe_run_cgroup_leave(struct runner *rn, const struct pe_op *op);
/* swapoff, swapon, kill swapoff, move, cgset, knob. */
void pe_run_env_op(struct runner *rn, const struct pe_op *op);
/* Wait for DEV's background swapoff (@op a `wait DEV`); NULL: every one.
 * One that does not return within the swapoff budget is a finding and is
 * killed. */
void pe_run_swapoff_wait(struct runner *rn, const struct pe_op *op);
/* Refusals before anything changes: pinned threads' CPUs, knob operations
 * the kernel lacks. */
int pe_run_precheck(struct runner *rn, char *why, size_t len);
int pe_run_tmpfs_mount(struct runner *rn, char *why, size_t len);
void pe_run_tmpfs_umount(struct runner *rn);

#endif /* PE_RUNNER_H */
