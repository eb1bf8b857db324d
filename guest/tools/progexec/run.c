// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pe_program_run(): the coordinator.  It reads the program, keeps the model,
 * writes the report and runs the environment operations itself; the memory
 * operations go to the actors (run-actor.c) over their sockets.  It is no
 * process of the program and stays out of the program's cgroups, so an OOM
 * kill or a SIGBUS there cannot take the executor down.
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "kcov.h"
#include "model.h"
#include "run.h"
#include "runner.h"

#define END_TIMEOUT_MS 10000    /* a killed process or swapoff must end within this */
/* An operation not back after this long is looked at: throttled over
 * memory.high (the `throttled` relaxation), or left to run.  The host gives
 * the whole program 300 s. */
#define STALL_MS 30000
#define THROTTLE_PROBE_MS 2000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Wait until @pid (a child, or an orphan the subreaper adopted) is gone. */
static void reap_pid(pid_t pid)
{
	for (long long end = now_ms() + END_TIMEOUT_MS; now_ms() < end; gl_sleep_ms(10)) {
		pid_t got;

		errno = 0;
		got = waitpid(pid, NULL, WNOHANG);
		if (got == pid || (got < 0 && errno == ECHILD && kill(pid, 0)))
			return;
	}
}

/* How @pid ended, when the coordinator can learn it (its own child, gone
 * within a second of its socket): " sig=N" or " exit=N", else "". */
static const char *death_of(pid_t pid)
{
	static char how[32];
	int st;

	how[0] = 0;
	for (long long end = now_ms() + 1000; pid > 0 && now_ms() < end; gl_sleep_ms(10)) {
		pid_t got = waitpid(pid, &st, WNOHANG);

		if (got < 0)
			break;          /* not ours: a forked actor's parent reaps it */
		if (got == pid) {
			if (WIFSIGNALED(st))
				snprintf(how, sizeof(how), " sig=%d", WTERMSIG(st));
			else if (WIFEXITED(st))
				snprintf(how, sizeof(how), " exit=%d", WEXITSTATUS(st));
			break;
		}
	}
	return how;
}

/* Wait for EOF on @fd (its process died) for at most @ms; true when it came. */
static bool wait_eof(int fd, int ms)
{
	long long end = now_ms() + ms;
	char buf[4096];

	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		long long left = end - now_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			return false;
		if (read(fd, buf, sizeof(buf)) <= 0)
			return true;
	}
}

static const char *actor_name(struct runner *rn, int a)
{
	return rn->p->actor[a].name;
}

void pe_run_relaxed(struct runner *rn, enum pe_relax relax, const struct pe_op *op, int obj,
		    uint32_t page)
{
	if (obj >= 0 && !pe_model_first_relax(rn->m, relax, obj))
		return;
	pe_say(rn->r, "relaxed %s line=%d obj=%s page=%u", pe_relax_names[relax], op->line,
	       obj >= 0 ? rn->p->obj[obj].name : "-", page);
}

/* The process of actor @a is gone (exit, kill, OOM kill): close its sockets
 * and its threads'; what its background writes were storing stays old|new. */
static void process_gone(struct runner *rn, int proc, enum pe_relax relax)
{
	for (int a = 0; a < rn->p->nactors; a++) {
		struct live *l = &rn->live[a];

		if (rn->p->actor[a].proc != proc || l->fd < 0)
			continue;
		if (l->bg)
			pe_model_end(rn->m, l->bg, NULL, relax);
		free(l->owed);
		l->owed = NULL;
		l->bg = NULL;
		close(l->fd);
		l->fd = -1;
	}
	pe_model_process_gone(rn->m, proc);
}

/* The socket of @a closed while it owed a reply: an OOM kill (the oom-kill
 * relaxation) when the kernel counted one not yet matched to a death, else
 * a finding.  One kill explains one death: two processes killed together
 * are two kills, and the second death must find its own. */
void pe_run_actor_died(struct runner *rn, int a, const struct pe_op *op)
{
	int proc = rn->p->actor[a].proc;
	long long ooms = pe_env_oom_kills(&rn->p->env, -1);

	if (ooms > rn->oom_kills) {
		rn->oom_kills++;
		pe_run_relaxed(rn, PE_RELAX_OOM_KILL, op, op->obj, (uint32_t)(op->off / PE_PAGE));
		process_gone(rn, proc, PE_RELAX_OOM_KILL);
		return;
	}
	pe_finding(rn->r, "content", "line=%d proc=%s why=died%s", op->line, actor_name(rn, a),
		   rn->p->actor[a].thread ? "" : death_of(rn->live[proc].pid));
	process_gone(rn, proc, PE_RELAX_KILLED_WRITER);
}

/* Send @op to its actor; a read carries what each page owes (v[0]) and
 * keeps the whole sets to judge the reply. */
static int send_op(struct runner *rn, const struct pe_op *op, int kind)
{
	struct live *l = &rn->live[op->actor];
	struct pe_cmd cmd = { kind, (int32_t)(op - rn->p->op), 0, 0 };
	struct pe_owed *owed = NULL;
	int err;

	if (kind == PE_CMD_OP && (op->verb == PE_READ || op->verb == PE_PREAD)) {
		cmd.npages = (uint32_t)(op->len / PE_PAGE);
		l->owed = malloc(cmd.npages * sizeof(*l->owed));
		owed = malloc(cmd.npages * sizeof(*owed));
		if (!l->owed || !owed) {
			free(owed);
			return -ENOMEM;
		}
		pe_model_expected(rn->m, op, l->owed);
		for (uint32_t i = 0; i < cmd.npages; i++) {
			const struct pe_vset *s = &l->owed[i];

			owed[i] = (struct pe_owed){ s->v[0], s->v[s->n - 1],
						    s->relax == PE_RELAX_CONCURRENT_WRITE && s->n > 1 };
		}
	}
	if (kind == PE_CMD_OP && rn->plant_op == cmd.op)
		cmd.plant = rn->p->plant;
	err = pe_send(l->fd, &cmd, sizeof(cmd), -1);
	if (!err && owed)
		err = pe_send(l->fd, owed, cmd.npages * sizeof(*owed), -1);
	free(owed);
	return err;
}

static void judge_fault(struct runner *rn, const struct pe_op *op, int a, const struct pe_exc *x)
{
	bool file = op->verb == PE_PREAD || op->verb == PE_PWRITE;

	if (rn->p->allow_failed_read) {
		pe_run_relaxed(rn, PE_RELAX_FAILED_READ, op, op->obj, x->page);
		return;
	}
	if (file)
		pe_finding(rn->r, "io-error", "line=%d proc=%s obj=%s page=%u errno=%s why=eio",
			   op->line, actor_name(rn, a), rn->p->obj[op->obj].name, x->page,
			   strerrorname_np((int)x->word) ?: "?");
	else
		pe_finding(rn->r, "content", "line=%d proc=%s obj=%s page=%u why=sigbus", op->line,
			   actor_name(rn, a), rn->p->obj[op->obj].name, x->page);
}

static void judge_read(struct runner *rn, const struct pe_op *op, int a, const struct pe_exc *x,
		       const struct pe_vset *owed)
{
	char expected[64] = "", seen[16] = "?";
	int n = 0;

	if (x->seen == PE_SEEN_FAULT)
		return judge_fault(rn, op, a, x);
	if ((x->seen >= 0 && pe_vset_has(owed, x->seen)) ||
	    (x->seen == PE_SEEN_TORN && owed->relax == PE_RELAX_CONCURRENT_WRITE)) {
		pe_run_relaxed(rn, (enum pe_relax)owed->relax, op, op->obj, x->page);
		return;
	}
	for (int i = 0; i < owed->n; i++)
		n += snprintf(expected + n, sizeof(expected) - n, "%sv%u", i ? "|" : "", owed->v[i]);
	if (x->seen >= 0)
		snprintf(seen, sizeof(seen), "v%d", x->seen);
	if (++rn->page_findings > PE_RUN_MAX_PAGE_FINDINGS)
		return;         /* the first ones tell; a run of thousands tells nothing more */
	pe_finding(rn->r, "content",
		   "line=%d proc=%s obj=%s page=%u expected=%s seen=%s word=%u got=%016llx want=%016llx",
		   op->line, actor_name(rn, a), rn->p->obj[op->obj].name, x->page, expected, seen,
		   x->word, (unsigned long long)x->got, (unsigned long long)x->want);
}

/* Whether @fd has something to read within @ms. */
static bool readable(int fd, int ms)
{
	struct pollfd pfd = { fd, POLLIN, 0 };

	return poll(&pfd, 1, ms) != 0;
}

/*
 * Wait for @a's reply to @op.  A cgroup over memory.high whose memory
 * cannot be reclaimed (no swap it may use: memory.zswap.max=0 with
 * memory.zswap.writeback=0, say) throttles its processes without end and
 * is never OOM-killed: the kernel does what memory.high says.  An operation
 * stalled that long while a program cgroup's `high` events grow has its
 * process SIGKILLed by the executor (the `throttled` relaxation: gone as by
 * `kill`, its later operations skipped); false then.
 */
static bool await_reply(struct runner *rn, int a, const struct pe_op *op)
{
	int proc = rn->p->actor[a].proc;
	struct live *l = &rn->live[a];
	long long high;

	while (!readable(l->fd, STALL_MS)) {
		high = pe_env_high_events(&rn->p->env);
		if (readable(l->fd, THROTTLE_PROBE_MS))
			break;
		if (pe_env_high_events(&rn->p->env) == high)
			continue;       /* not throttled: it may be slow, the host's budget rules */
		pe_run_relaxed(rn, PE_RELAX_THROTTLED, op, op->obj,
			       op->obj >= 0 ? (uint32_t)(op->off / PE_PAGE) : 0);
		kill(rn->live[proc].pid, SIGKILL);
		if (!wait_eof(l->fd, END_TIMEOUT_MS))
			pe_finding(rn->r, "content", "line=%d proc=%s why=timeout", op->line,
				   actor_name(rn, a));
		pe_model_end(rn->m, op, NULL, PE_RELAX_THROTTLED);
		free(l->owed);
		l->owed = NULL;
		process_gone(rn, proc, PE_RELAX_THROTTLED);
		return false;
	}
	return true;
}

/* Take @a's reply to @op and judge it; false when the actor died. */
static bool take_reply(struct runner *rn, int a, const struct pe_op *op)
{
	struct live *l = &rn->live[a];
	struct pe_reply rep;
	struct pe_exc *exc = NULL;
	uint8_t *faulted = NULL;
	int fd = -1;
	uint32_t first = (uint32_t)(op->off / PE_PAGE);

	if (!await_reply(rn, a, op))
		return false;
	if (pe_recv(l->fd, &rep, sizeof(rep), &fd) || rep.nexc > (1u << 24) ||
	    (rep.nexc && (!(exc = malloc(rep.nexc * sizeof(*exc))) ||
			  pe_recv(l->fd, exc, rep.nexc * sizeof(*exc), NULL)))) {
		free(exc);
		pe_run_actor_died(rn, a, op);
		return false;
	}
	if (op->verb == PE_WRITE || op->verb == PE_PWRITE) {
		rn->written += rep.pages;
		faulted = calloc(op->len / PE_PAGE, 1);
		for (uint32_t i = 0; i < rep.nexc; i++) {
			judge_fault(rn, op, a, &exc[i]);
			if (faulted && exc[i].page - first < op->len / PE_PAGE)
				faulted[exc[i].page - first] = 1;
		}
		pe_model_end(rn->m, op, faulted, PE_RELAX_NONE);
	} else if (op->verb == PE_READ || op->verb == PE_PREAD) {
		rn->read += rep.pages;
		rn->checked += rep.pages;
		for (uint32_t i = 0; i < rep.nexc; i++)
			if (exc[i].page - first < op->len / PE_PAGE)
				judge_read(rn, op, a, &exc[i], &l->owed[exc[i].page - first]);
	} else if (op->verb == PE_FORK || op->verb == PE_THREAD) {
		if (fd >= 0) {
			rn->live[op->target].fd = fd;
			rn->live[op->target].pid = rep.pid;
		}
	}
	if (rep.err)
		pe_run_call_failed(rn, op, a, rep.call, -rep.err);
	free(exc);
	free(faulted);
	free(l->owed);
	l->owed = NULL;
	pe_run_cgroup_leave(rn, op);
	return true;
}

/* An operation of an actor: sent, and unless it runs in the background,
 * its reply taken. */
static void actor_op(struct runner *rn, const struct pe_op *op)
{
	struct live *l = &rn->live[op->actor];

	pe_run_cgroup_enter(rn, op);
	if (send_op(rn, op, PE_CMD_OP)) {
		pe_run_actor_died(rn, op->actor, op);
		return;
	}
	if (op->bg)
		l->bg = op;
	else
		take_reply(rn, op->actor, op);
}

static void end_process(struct runner *rn, const struct pe_op *op)
{
	int p = op->target;
	struct live *l = &rn->live[p];

	if (op->verb == PE_KILL) {
		kill(l->pid, SIGKILL);
	} else {
		struct pe_cmd cmd = { PE_CMD_EXIT, 0, 0, 0 };

		if (pe_send(l->fd, &cmd, sizeof(cmd), -1))
			kill(l->pid, SIGKILL);
	}
	if (!wait_eof(l->fd, END_TIMEOUT_MS)) {
		pe_finding(rn->r, "content", "line=%d proc=%s why=timeout", op->line,
			   actor_name(rn, p));
		kill(l->pid, SIGKILL);
		wait_eof(l->fd, END_TIMEOUT_MS);
	}
	process_gone(rn, p, PE_RELAX_KILLED_WRITER);
	reap();
}

static void wait_op(struct runner *rn, const struct pe_op *op)
{
	if (op->target < 0) {
		pe_run_swapoff_wait(rn, op);
		return;
	}
	if (rn->live[op->target].bg) {
		const struct pe_op *bg = rn->live[op->target].bg;

		rn->live[op->target].bg = NULL;
		take_reply(rn, op->target, bg);
	}
}

static bool actor_alive(struct runner *rn, int a)
{
	return rn->live[a].fd >= 0 && pe_model_alive(rn->m, a);
}

/* Whether @op is skipped: its actor (or the process it names) was OOM-killed,
 * or it waits for or kills a background swapoff skipped for that reason. */
static bool skipped(struct runner *rn, const struct pe_op *op)
{
	bool *swapoff_skipped = op->dev >= 0 ? &rn->swapoff_skipped[op->dev] : NULL;

	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return !actor_alive(rn, op->target);
	case PE_WAIT: case PE_KILL_SWAPOFF:
		if (op->verb == PE_WAIT && op->target >= 0)
			return !actor_alive(rn, op->target);
		if (!*swapoff_skipped)
			return false;
		*swapoff_skipped = false;
		return true;
	case PE_SWAPOFF:
		if (actor_alive(rn, op->actor))
			return false;
		*swapoff_skipped = op->bg;
		return true;
	default:
		/* An object whose making failed (already a finding) has nothing
		 * to operate on. */
		return !actor_alive(rn, op->actor) || (op->obj >= 0 && rn->unmade[op->obj]);
	}
}

static void run_one(struct runner *rn, const struct pe_op *op)
{
	char why[256];

	pe_say(rn->r, "at %d", op->line);
	if (skipped(rn, op))
		return;
	if (pe_model_start(rn->m, op, why, sizeof(why))) {
		pe_finding(rn->r, "content", "line=%d proc=%s why=model detail=\"%s\"", op->line,
			   actor_name(rn, op->actor), why);
		return;
	}
	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return end_process(rn, op);
	case PE_WAIT:
		return wait_op(rn, op);
	case PE_KILL_SWAPOFF: case PE_SWAPON: case PE_MOVE: case PE_CGSET: case PE_KNOB:
	case PE_SWAPOFF:
		/* The coordinator's own operations are the program's coverage too. */
		pe_kcov_op_begin();
		pe_run_env_op(rn, op);
		pe_kcov_op_end();
		return;
	default:
		return actor_op(rn, op);
	}
}

static bool covers(const struct pe_op *op, int obj, uint64_t off)
{
	return op->obj == obj && op->off <= off && off < op->off + op->len;
}

/* The operation --plant marks: the first write through a mapping whose
 * first page a later read of its process checks before anything else
 * writes it (so the plant has a read to catch it). */
static int plant_op(const struct pe_program *p)
{
	if (p->plant != PE_PLANT_DROP_WRITE && p->plant != PE_PLANT_STALE_PAGE)
		return -1;
	for (int i = 0; i < p->nops; i++) {
		const struct pe_op *w = &p->op[i];

		if (w->verb != PE_WRITE)
			continue;
		for (int j = i + 1; j < p->nops; j++) {
			const struct pe_op *o = &p->op[j];

			if (o->verb == PE_READ && covers(o, w->obj, w->off) &&
			    pe_actor_proc(p, o->actor) == pe_actor_proc(p, w->actor))
				return i;
			if (o->obj == w->obj && o->verb != PE_READ && o->verb != PE_PREAD)
				break;
		}
	}
	return -1;
}

static int start_main(struct runner *rn)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -errno;
	}
	if (!pid) {
		close(sv[0]);
		pe_actor_main(rn->p, 0, sv[1]);
	}
	close(sv[1]);
	rn->live[0].fd = sv[0];
	rn->live[0].pid = pid;
	if (rn->p->plant == PE_PLANT_LEAK_SLOT) {
		struct pe_cmd cmd = { PE_CMD_HIDE, 0, 0, 0 };
		struct pe_reply rep;

		if (!pe_send(sv[0], &cmd, sizeof(cmd), -1) && !pe_recv(sv[0], &rep, sizeof(rep), NULL))
			rn->hidden = rep.pid;
	}
	return 0;
}

/* Every process of the program exits; its objects go with it. */
static void end_all(struct runner *rn)
{
	for (int a = 0; a < rn->p->nactors; a++) {
		struct live *l = &rn->live[a];

		if (rn->p->actor[a].thread || l->fd < 0)
			continue;
		for (int t = 0; t < rn->p->nactors; t++)
			if (rn->live[t].bg && rn->p->actor[t].proc == a)
				take_reply(rn, t, rn->live[t].bg);
		if (l->fd >= 0) {
			struct pe_op bye = { .line = 0, .verb = PE_EXIT, .target = a };

			end_process(rn, &bye);
		}
	}
	/* Gone for good, not only their sockets: each is reaped (an orphan of
	 * the program is the subreaper's, ours) before the leak checks. */
	for (int a = 0; a < rn->p->nactors; a++)
		if (!rn->p->actor[a].thread && rn->live[a].pid > 0)
			reap_pid(rn->live[a].pid);
	reap();
}

static void say_stat(struct runner *rn, const struct gl_vmstat *before, long long t0)
{
	struct gl_vmstat after;

	gl_vmstat_read(&after);
	pe_say(rn->r, "stat pages_written=%llu pages_read=%llu pages_checked=%llu swapins=%lld "
		      "uffd_unsupported=%d elapsed_ms=%lld",
	       (unsigned long long)rn->written, (unsigned long long)rn->read,
	       (unsigned long long)rn->checked, gl_vmstat_delta(before, &after, VM_PSWPIN),
	       rn->uffd_unsupported, now_ms() - t0);
}

enum pe_outcome pe_program_run(struct pe_program *p, const struct pe_hooks *hooks,
			       struct pe_report *r)
{
	struct runner rn = { .p = p, .r = r, .hidden = 0 };
	struct gl_vmstat before;
	long long t0 = now_ms();
	int findings0 = r->findings;
	char why[PE_ENV_WHY];

	/* The coordinator's own memory stays out of swap, as each actor's does
	 * (run-actor.c, lock_own_memory): a failed read of it is no page of the
	 * program's.  Not inherited by the actors it forks. */
	mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT);
	for (int a = 0; a < PE_MAX_ACTORS; a++)
		rn.live[a] = (struct live){ 0, -1, NULL, NULL, -1, -1 };
	for (int d = 0; d < PE_MAX_SWAPS; d++)
		rn.swapoff_fd[d] = -1;
	if (pe_run_precheck(&rn, why, sizeof(why)) || pe_env_check(&p->env) ||
	    pe_run_tmpfs_mount(&rn, why, sizeof(why))) {
		pe_say(r, "refused %s %s", p->name, why[0] ? why : p->env.why);
		return PE_REFUSED;
	}
	if (pe_env_setup(&p->env)) {
		pe_say(r, "refused %s %s", p->name, p->env.why);
		pe_env_teardown(&p->env, r);
		pe_run_tmpfs_umount(&rn);
		return PE_REFUSED;
	}
	pe_kcov_program_begin();
	rn.m = pe_model_new(p);
	rn.plant_op = plant_op(p);
	rn.oom_kills = pe_env_oom_kills(&p->env, -1);
	gl_vmstat_read(&before);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* The OOM killer never picks the coordinator (main sets 0 again for
	 * the program's processes); a kernel that refuses leaves it as it was. */
	gl_write_file("/proc/self/oom_score_adj", "-1000");
	/* `ready` comes first: whatever follows it, even main failing to
	 * start, is reported in the order the channel has (ops-done, result). */
	if (!hooks || !hooks->ready || !hooks->ready(hooks->arg)) {
		int err = rn.m ? start_main(&rn) : -ENOMEM;

		if (err)
			pe_finding(r, "content", "line=0 proc=main why=start errno=%s",
				   strerrorname_np(-err) ?: "?");
		for (int i = 0; i < p->nops && !err; i++)
			run_one(&rn, &p->op[i]);
		if (hooks && hooks->ops_done)
			hooks->ops_done(hooks->arg);
	}
	end_all(&rn);
	pe_run_swapoff_wait(&rn, NULL);
	pe_env_teardown(&p->env, r);
	if (rn.hidden > 0) {
		kill(rn.hidden, SIGKILL);
		reap_pid(rn.hidden);
	}
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	pe_run_tmpfs_umount(&rn);
	say_stat(&rn, &before, t0);
	pe_kcov_report(r);
	pe_model_free(rn.m);
	pe_say(r, "result %s %s %d", p->name, r->findings > findings0 ? "fail" : "pass",
	       r->findings - findings0);
	return r->findings > findings0 ? PE_FAIL : PE_PASS;
}
