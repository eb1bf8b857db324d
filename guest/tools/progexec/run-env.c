// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The coordinator's own operations: swapoff (in a child process when it runs
 * in the background, so `kill swapoff` can SIGKILL it), swapon, knob, move,
 * cgset; the cgroup moves around `cgroup=CG` objects; the tmpfs mounts; the
 * refusals before setup; calls of the actors that failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "kcov.h"
#include "run.h"
#include "runner.h"

#define SWAPOFF_KILL_MS 10000   /* docs/programs.md: a killed swapoff ends within 10 s */
/* A swapoff waited for (without `&`, or by `wait DEV`) that has not
 * returned after this long is a finding, then killed: try_to_unuse()
 * retries without end when it cannot bring a slot back, and the host gives
 * the whole program 300 s.  The kernel's own hung-task limit is 120 s, but
 * a retrying swapoff is not in D state.  Once one swapoff of the program
 * timed out, the next ones are killed at once: the host's budget holds one
 * such wait, not several.  A background swapoff nothing waited for gets
 * SWAPOFF_END_MS at the end, within the host's budget for the result. */
#define SWAPOFF_FOREGROUND_MS 120000
#define SWAPOFF_END_MS 10000

static const char *err_name(int err)
{
	return strerrorname_np(err) ?: "?";
}

static const char *proc_name(struct runner *rn, const struct pe_op *op)
{
	return rn->p->actor[op->actor].name;
}

void pe_run_call_failed(struct runner *rn, const struct pe_op *op, int actor, const char *call,
			int err)
{
	/* Advice the kernel lacks (EINVAL), populate past a file's end
	 * (EFAULT), a busy page (EAGAIN): madvise only asks. */
	if (op->verb == PE_MADVISE)
		return;
	/* A kernel without write-protect for this memory: the operation is
	 * skipped and counted (stat uffd_unsupported). */
	if (op->verb == PE_UFFD_WP && (err == EINVAL || err == EPERM || err == ENOSYS)) {
		rn->uffd_unsupported++;
		return;
	}
	/* memory.reclaim may not reach its target: EAGAIN is done. */
	if (op->verb == PE_RECLAIM && err == EAGAIN)
		return;
	if (op->verb == PE_ANON || op->verb == PE_MEMFD || op->verb == PE_TMPFS)
		rn->unmade[op->obj] = true;
	pe_finding(rn->r, "content", "line=%d proc=%s%s%s why=%s errno=%s", op->line,
		   rn->p->actor[actor].name, op->obj >= 0 ? " obj=" : "",
		   op->obj >= 0 ? rn->p->obj[op->obj].name : "", call, err_name(err));
}

/* The cgroup an access to @op's object runs in, or -1 when it has none. */
static int object_cgroup(struct runner *rn, const struct pe_op *op)
{
	if (op->obj < 0 || rn->p->obj[op->obj].cg < 0)
		return -1;
	return rn->p->obj[op->obj].cg;
}

void pe_run_cgroup_enter(struct runner *rn, const struct pe_op *op)
{
	int cg = object_cgroup(rn, op), proc = rn->p->actor[op->actor].proc, err;
	struct live *l = &rn->live[proc];

	if (cg < 0 || l->cg == cg || l->pid <= 0)
		return;
	err = pe_env_move(&rn->p->env, cg, l->pid);
	/* A process the OOM killer took is no failure of the move: the
	 * operation's send finds it gone and judges the death. */
	if (!err)
		l->moved_to = cg;
	else if (err != -ESRCH)
		pe_finding(rn->r, "content", "line=%d proc=%s why=move detail=\"%s\"", op->line,
			   proc_name(rn, op), rn->p->env.why);
}

void pe_run_cgroup_leave(struct runner *rn, const struct pe_op *op)
{
	int proc = rn->p->actor[op->actor].proc;
	struct live *l = &rn->live[proc];

	if (l->moved_to < 0 || l->pid <= 0)
		return;
	/* Back where `move` put it: the pages it charged stay charged to CG. */
	pe_env_move(&rn->p->env, l->cg, l->pid);
	l->moved_to = -1;
}

/* swapoff's check: 0, or ENOMEM (no room to bring the pages back), or
 * EINTR (killed). */
static void judge_swapoff(struct runner *rn, const struct pe_op *op, int dev, int rc)
{
	struct pe_env *e = &rn->p->env;

	e->swap[dev].on = pe_env_swap_listed(e, dev);
	if (rc && rc != -ENOMEM && rc != -EINTR)
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s errno=%s", op ? op->line : 0,
			   e->swap[dev].name, err_name(-rc));
}

static void swapoff_bg(struct runner *rn, const struct pe_op *op)
{
	int pfd[2], dev = op->dev;
	pid_t pid;

	if (pipe(pfd)) {
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=pipe errno=%s", op->line,
			   rn->p->env.swap[dev].name, err_name(errno));
		return;
	}
	fflush(NULL);
	pid = fork();
	if (!pid) {
		int rc;

		pe_kcov_op_begin();
		rc = pe_env_swapoff(&rn->p->env, dev);
		pe_kcov_op_end();

		close(pfd[0]);
		if (write(pfd[1], &rc, sizeof(rc)) != sizeof(rc))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		judge_swapoff(rn, op, dev, -errno);
		return;
	}
	rn->swapoff_pid[dev] = pid;
	rn->swapoff_fd[dev] = pfd[0];
}

/* The result of @dev's background swapoff; -ETIMEDOUT after @ms (<0: none). */
static int swapoff_result(struct runner *rn, int dev, int ms)
{
	struct pollfd pfd = { rn->swapoff_fd[dev], POLLIN, 0 };
	int rc = -EINTR;        /* killed before it could say */

	if (poll(&pfd, 1, ms) == 0)
		return -ETIMEDOUT;
	if (read(rn->swapoff_fd[dev], &rc, sizeof(rc)) != sizeof(rc))
		rc = -EINTR;
	close(rn->swapoff_fd[dev]);
	rn->swapoff_fd[dev] = -1;
	rn->swapoff_pid[dev] = 0;
	return rc;
}

static void kill_swapoff_of(struct runner *rn, const struct pe_op *op, int dev)
{
	int rc;

	if (rn->swapoff_fd[dev] < 0)
		return;
	kill(rn->swapoff_pid[dev], SIGKILL);
	rc = swapoff_result(rn, dev, SWAPOFF_KILL_MS);
	if (rc == -ETIMEDOUT) {
		pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=timeout", op ? op->line : 0,
			   rn->p->env.swap[dev].name);
		/* Still stuck, and SIGKILL cannot end it: nothing waits for it
		 * again (the device stays as it is). */
		close(rn->swapoff_fd[dev]);
		rn->swapoff_fd[dev] = -1;
		rn->swapoff_pid[dev] = 0;
		return;
	}
	/* Killed before or after it finished: DEV may be on or off. */
	judge_swapoff(rn, op, dev, rc);
}

static void kill_swapoff(struct runner *rn, const struct pe_op *op)
{
	kill_swapoff_of(rn, op, op->dev);
}

/* Wait for @dev's swapoff child: a swapoff that never returns is a
 * finding and is killed, not a silent guest.  A swapoff without `&`, a
 * `wait DEV` and the end of the program wait alike. */
static void swapoff_wait(struct runner *rn, const struct pe_op *op, int dev)
{
	int ms = rn->swapoff_timed_out ? 0 : op ? SWAPOFF_FOREGROUND_MS : SWAPOFF_END_MS, rc;

	if (rn->swapoff_fd[dev] < 0)
		return;         /* no child: swapoff_bg judged it, or nothing waits */
	rc = swapoff_result(rn, dev, ms);
	if (rc != -ETIMEDOUT) {
		judge_swapoff(rn, op, dev, rc);
		return;
	}
	rn->swapoff_timed_out = true;
	pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=timeout ms=%d", op ? op->line : 0,
		   rn->p->env.swap[dev].name, ms);
	kill_swapoff_of(rn, op, dev);
}

void pe_run_swapoff_wait(struct runner *rn, const struct pe_op *op)
{
	for (int dev = 0; dev < rn->p->env.nswap; dev++)
		if (!op || op->dev == dev)
			swapoff_wait(rn, op, dev);
}

void pe_run_env_op(struct runner *rn, const struct pe_op *op)
{
	struct pe_env *e = &rn->p->env;
	int proc = rn->p->actor[op->actor].proc, rc = 0;
	const char *what = pe_verb_names[op->verb];

	switch (op->verb) {
	case PE_SWAPOFF:
		/* After a killed swapoff the device may already be off. */
		if (!pe_env_swap_listed(e, op->dev)) {
			e->swap[op->dev].on = false;
			return;
		}
		swapoff_bg(rn, op);
		if (!op->bg)
			swapoff_wait(rn, op, op->dev);
		return;
	case PE_KILL_SWAPOFF:
		return kill_swapoff(rn, op);
	case PE_SWAPON:
		if (pe_env_swap_listed(e, op->dev)) {
			e->swap[op->dev].on = true;
			return;
		}
		rc = pe_env_swapon(e, op->dev, op->prio, op->discard);
		/* swapon reads the swap header: where the rules fail reads it may
		 * fail with EIO, and the device stays off. */
		if (rc == -EIO && e->swap[op->dev].fails_reads)
			pe_run_relaxed(rn, PE_RELAX_FAILED_READ, op, -1, 0);
		else if (rc)
			pe_finding(rn->r, "swapoff", "line=%d proc=main dev=%s why=swapon errno=%s",
				   op->line, e->swap[op->dev].name, err_name(-rc));
		return;
	case PE_MOVE:
		rc = pe_env_move(e, op->cg, rn->live[proc].pid);
		if (rc == -ESRCH) {             /* gone before its move */
			pe_run_actor_died(rn, op->actor, op);
			return;
		}
		if (!rc)
			rn->live[proc].cg = op->cg;
		break;
	case PE_CGSET:
		rc = pe_env_cgset(e, op->cg, op->key, op->value);
		break;
	case PE_KNOB:
		rc = pe_env_knob(e, op->key, op->value);
		break;
	default:
		return;
	}
	if (rc)
		pe_finding(rn->r, "content", "line=%d proc=%s why=%s errno=%s detail=\"%s\"", op->line,
			   proc_name(rn, op), what, err_name(-rc), e->why);
}

/* An object larger than the machine's memory and the program's swap
 * together: the kernel's overcommit heuristic refuses such an mmap, and a
 * program the VM cannot hold is one it lacks the size for (refused). */
static bool machine_refuses_size(struct runner *rn, char *why, size_t len)
{
	char text[4096];
	const char *p;
	uint64_t room = 0;

	if (gl_read_file("/proc/meminfo", text, sizeof(text)) || !(p = strstr(text, "MemTotal:")))
		return false;
	room = strtoull(p + 9, NULL, 10) * 1024;
	for (int d = 0; d < rn->p->env.nswap; d++)
		room += rn->p->env.swap[d].size;
	for (int i = 0; i < rn->p->nobjs; i++) {
		if (rn->p->obj[i].size <= room)
			continue;
		snprintf(why, len, "%s %llu bytes: more than this machine's memory and the program's "
			 "swap (%llu bytes)", rn->p->obj[i].name,
			 (unsigned long long)rn->p->obj[i].size, (unsigned long long)room);
		return true;
	}
	return false;
}

int pe_run_precheck(struct runner *rn, char *why, size_t len)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int sv[2];

	why[0] = 0;
	/* The program's processes talk to the coordinator over socket pairs. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		int err = errno;

		snprintf(why, len, "this kernel has no AF_UNIX socket pairs (%s): the executor's "
			 "processes need them (CONFIG_NET, CONFIG_UNIX)", strerror(err));
		return -err;
	}
	close(sv[0]);
	close(sv[1]);
	if (machine_refuses_size(rn, why, len))
		return -ENOMEM;
	for (int i = 0; i < rn->p->nops; i++) {
		const struct pe_op *op = &rn->p->op[i];

		if (op->verb == PE_THREAD && op->cpu >= 0 && op->cpu >= cpus) {
			snprintf(why, len, "line %d: thread %s cpu=%d: this machine has %ld CPUs",
				 op->line, rn->p->actor[op->target].name, op->cpu, cpus);
			return -ENODEV;
		}
		/* A knob the kernel lacks is refused as the header's are: the
		 * program never starts, rather than failing halfway. */
		if (op->verb == PE_KNOB && pe_env_knob_check(&rn->p->env, op->key, op->value)) {
			snprintf(why, len, "line %d: %s", op->line, rn->p->env.why);
			return -ENOENT;
		}
	}
	return 0;
}

/* One tmpfs mount for each huge= policy the program's tmpfs objects use. */
int pe_run_tmpfs_mount(struct runner *rn, char *why, size_t len)
{
	static const char *const opts[PE_TMPFS_POLICIES] = {
		"mode=0700", "mode=0700,huge=never", "mode=0700,huge=always",
		"mode=0700,huge=within_size", "mode=0700,huge=advise",
	};

	why[0] = 0;
	for (int i = 0; i < rn->p->nobjs; i++) {
		int pol = pe_tmpfs_policy(rn->p->obj[i].huge);
		char *dir = pe_tmpfs_dir[pol];

		if (rn->p->obj[i].kind != PE_KIND_TMPFS || rn->mounted[pol])
			continue;
		snprintf(dir, sizeof(pe_tmpfs_dir[0]), "/tmp/progexec-tmpfs-XXXXXX");
		if (!mkdtemp(dir) || mount("progexec", dir, "tmpfs", 0, opts[pol])) {
			snprintf(why, len, "tmpfs %s: %s %s: %s", rn->p->obj[i].name, dir, opts[pol],
				 strerror(errno));
			if (dir[0])
				rmdir(dir);
			pe_run_tmpfs_umount(rn);
			return -errno;
		}
		rn->mounted[pol] = true;
	}
	return 0;
}

void pe_run_tmpfs_umount(struct runner *rn)
{
	for (int pol = 0; pol < PE_TMPFS_POLICIES; pol++) {
		if (!rn->mounted[pol])
			continue;
		umount2(pe_tmpfs_dir[pol], MNT_DETACH);
		rmdir(pe_tmpfs_dir[pol]);
		rn->mounted[pol] = false;
	}
}
