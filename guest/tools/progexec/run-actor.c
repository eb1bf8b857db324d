// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The actors: the program's processes (`main`, each `fork P`) and threads
 * (`thread T`).  Each runs commands from the coordinator on its own socket
 * and replies there; none writes the report.  A process's objects (address,
 * length, fd) are this file's globals: a fork copies them, its threads
 * share them.  Forks are real (COW is the kernel's), threads are pthreads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kcov.h"
#include "model.h"
#include "run.h"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 14)
#endif

char pe_tmpfs_dir[PE_TMPFS_POLICIES][64];

int pe_tmpfs_policy(const char *huge)
{
	static const char *const names[PE_TMPFS_POLICIES] = { "", "never", "always",
							       "within_size", "advise" };

	for (int i = 0; i < PE_TMPFS_POLICIES; i++)
		if (!strcmp(names[i], huge))
			return i;
	return 0;
}

static const struct pe_program *prog;
static int self_proc;
static struct handle {
	uint8_t *addr;          /* NULL: not mapped */
	size_t len;
	int fd;                 /* -1: none (anon private) */
	uint8_t *gone;          /* pages a partial munmap took, one byte a page (NULL: none) */
} obj[PE_MAX_OBJECTS];
static int chan[PE_MAX_ACTORS];         /* sockets this process holds: its own, its threads' */
static int uffd = -1;
/* Read by the SIGBUS handler, which the compiler does not see: volatile, or
 * setting it before a guarded loop is a dead store it drops (then every
 * SIGBUS of a guarded store killed the actor: `why=died sig=7`). */
static __thread sigjmp_buf *volatile fault_jmp;
/* And the guarded accesses stay between arming and disarming it. */
#define GUARD_BARRIER() __asm__ __volatile__("" ::: "memory")

/* ---- SIGBUS: a failed swap read faults the accessing thread */

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (fault_jmp)
		siglongjmp(*fault_jmp, 1);
	signal(SIGBUS, SIG_DFL);        /* not ours: die of it, the coordinator reports */
	raise(SIGBUS);
}

/* Store version @v of page @pg into @dst; -EFAULT on SIGBUS. */
static int guarded_store(uint64_t *dst, int o, uint64_t pg, int v)
{
	sigjmp_buf jb;
	uint64_t base = ((uint64_t)o << 48 | pg << 16 | (uint64_t)v) * 0x9E3779B97F4A7C15ULL;

	/* SA_NODEFER: the handler leaves SIGBUS unblocked, no mask to restore. */
	if (sigsetjmp(jb, 0)) {
		fault_jmp = NULL;
		return -EFAULT;
	}
	fault_jmp = &jb;
	GUARD_BARRIER();
	for (int i = 0; i < PE_WORDS; i++)
		dst[i] = pe_mix64(base + (uint64_t)i);
	GUARD_BARRIER();
	fault_jmp = NULL;
	return 0;
}

static int guarded_copy(void *dst, const void *src)
{
	sigjmp_buf jb;

	if (sigsetjmp(jb, 0)) {
		fault_jmp = NULL;
		return -EFAULT;
	}
	fault_jmp = &jb;
	GUARD_BARRIER();
	memcpy(dst, src, PE_PAGE);
	GUARD_BARRIER();
	fault_jmp = NULL;
	return 0;
}

/* ---- replies */

struct out {
	struct pe_reply r;
	struct pe_exc *exc;
	uint32_t cap;
	int fd;
};

static void fail(struct out *o, const char *call)
{
	o->r.err = -errno;
	snprintf(o->r.call, sizeof(o->r.call), "%s", call);
}

static void add_exc(struct out *o, uint32_t page, int seen, uint32_t word, uint64_t got,
		    uint64_t want)
{
	if (o->r.nexc == o->cap) {
		struct pe_exc *more = realloc(o->exc, sizeof(*more) * (o->cap = o->cap * 2 + 16));

		if (!more)
			return;
		o->exc = more;
	}
	o->exc[o->r.nexc++] = (struct pe_exc){ page, seen, word, 0, got, want };
}

/* A page written while it was read: each word the old one's or the new one's. */
static bool torn(const uint64_t *buf, const uint64_t *w, int o, uint32_t pg, int alt)
{
	uint64_t a[PE_WORDS];

	pe_pattern_fill(a, o, pg, alt);
	for (int i = 0; i < PE_WORDS; i++)
		if (buf[i] != w[i] && buf[i] != a[i])
			return false;
	return true;
}

/* Page @pg of @o read into @buf: an exception unless it holds what it owes. */
static void check_page(struct out *out, const uint64_t *buf, int o, uint32_t pg,
		       const struct pe_owed *owed)
{
	uint64_t w[PE_WORDS];
	int i, seen;

	pe_pattern_fill(w, o, pg, owed->v);
	if (!memcmp(w, buf, PE_PAGE))
		return;
	for (i = 0; i < PE_WORDS && w[i] == buf[i]; i++)
		;
	seen = pe_pattern_version_of(buf, o, pg);
	if (seen < 0 && owed->torn && torn(buf, w, o, pg, owed->alt))
		seen = PE_SEEN_TORN;
	add_exc(out, pg, seen, (uint32_t)i, buf[i], w[i]);
}

/* ---- the actor's own memory
 *
 * The actor's own pages (stack, heap, its copy of the program) are charged
 * to the program's cgroup with its objects and would go to swap with them;
 * a rule that fails reads would then fault the executor where no guard
 * stands (it dies: `why=died`) instead of a page of an object.  So they are
 * locked as they are faulted in (MCL_ONFAULT: nothing is populated), and
 * every object's mapping is unlocked as it is made: the objects alone are
 * the program's to swap. */
static void unlock_object(void *addr, size_t len)
{
	if (addr && len)
		munlock(addr, len);
}

static void lock_own_memory(void)
{
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT))
		return;         /* no locking here: the actor runs as before */
	for (int i = 0; i < PE_MAX_OBJECTS; i++)
		unlock_object(obj[i].addr, obj[i].len);    /* a forked actor's inherited objects */
}

/* ---- the operations */

static void make_object(const struct pe_op *op, struct out *out)
{
	const struct pe_object *o = &prog->obj[op->obj];
	struct handle *h = &obj[op->obj];
	int flags = MAP_SHARED;

	h->fd = -1;
	h->len = o->size;
	if (o->kind == PE_KIND_MEMFD) {
		h->fd = memfd_create(o->name, 0);
	} else if (o->kind == PE_KIND_TMPFS) {
		char path[128];

		snprintf(path, sizeof(path), "%s/%s", pe_tmpfs_dir[pe_tmpfs_policy(o->huge)], o->name);
		h->fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (h->fd >= 0)
			unlink(path);   /* the open file is the object: nothing left behind */
	}
	if (o->kind != PE_KIND_ANON && (h->fd < 0 || ftruncate(h->fd, (off_t)o->size)))
		return fail(out, "create");
	if (o->map == PE_MAP_NONE)
		return;
	if (o->map == PE_MAP_PRIVATE)
		flags = MAP_PRIVATE;
	if (o->kind == PE_KIND_ANON)
		flags |= MAP_ANONYMOUS;
	h->addr = mmap(NULL, h->len, PROT_READ | PROT_WRITE, flags, h->fd, 0);
	if (h->addr == MAP_FAILED) {
		h->addr = NULL;
		return fail(out, "mmap");
	}
	unlock_object(h->addr, h->len);
	if (o->pages)
		madvise(h->addr, h->len, o->pages == 'h' ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}

static void do_write(const struct pe_op *op, const struct pe_cmd *cmd, struct out *out)
{
	struct handle *h = &obj[op->obj];
	int o = op->obj + 1;
	uint64_t first = op->off / PE_PAGE, n = op->len / PE_PAGE;
	uint64_t buf[PE_WORDS], old[PE_WORDS];
	bool stale = cmd->plant == PE_PLANT_STALE_PAGE && !guarded_copy(old, h->addr + op->off);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t pg = first + i;

		out->r.pages++;
		pe_kcov_poll();
		if (i == 0 && cmd->plant == PE_PLANT_DROP_WRITE)
			continue;       /* planted: a store lost */
		if (op->verb == PE_PWRITE) {
			pe_pattern_fill(buf, o, pg, op->version);
			if (pwrite(h->fd, buf, PE_PAGE, (off_t)(pg * PE_PAGE)) != PE_PAGE)
				add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, (uint32_t)errno, 0, 0);
		} else if (guarded_store((uint64_t *)(h->addr + pg * PE_PAGE), o, pg, op->version)) {
			add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, EFAULT, 0, 0);
		}
	}
	if (stale) {
		/* Planted: an older copy of the first page mapped over the live one. */
		void *at = mmap(h->addr + op->off, PE_PAGE, PROT_READ | PROT_WRITE,
				MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (at != MAP_FAILED) {
			unlock_object(at, PE_PAGE);
			memcpy(at, old, PE_PAGE);
		}
	}
}

static void do_read(const struct pe_op *op, const struct pe_owed *owed, struct out *out)
{
	struct handle *h = &obj[op->obj];
	uint64_t first = op->off / PE_PAGE, n = op->len / PE_PAGE;
	uint64_t buf[PE_WORDS];

	for (uint64_t i = 0; i < n; i++) {
		uint64_t pg = first + i;

		out->r.pages++;
		pe_kcov_poll();
		if (op->verb == PE_PREAD) {
			if (pread(h->fd, buf, PE_PAGE, (off_t)(pg * PE_PAGE)) != PE_PAGE) {
				add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, (uint32_t)errno, 0, 0);
				continue;
			}
		} else if (guarded_copy(buf, h->addr + pg * PE_PAGE)) {
			add_exc(out, (uint32_t)pg, PE_SEEN_FAULT, EFAULT, 0, 0);
			continue;
		}
		check_page(out, buf, op->obj + 1, (uint32_t)pg, &owed[i]);
	}
}

static void do_madvise(const struct pe_op *op, struct out *out)
{
	static const int advice[] = {
		[PE_PAGEOUT] = MADV_PAGEOUT, [PE_COLD] = MADV_COLD, [PE_DONTNEED] = MADV_DONTNEED,
		[PE_FREE] = MADV_FREE, [PE_WILLNEED] = MADV_WILLNEED, [PE_REMOVE] = MADV_REMOVE,
		[PE_POPULATE_READ] = MADV_POPULATE_READ, [PE_POPULATE_WRITE] = MADV_POPULATE_WRITE,
	};

	out->r.pages = (uint32_t)(op->len / PE_PAGE);
	if (madvise(obj[op->obj].addr + op->off, op->len, advice[op->advice]))
		fail(out, "madvise");
}

/* The uffd handler: a write to a write-protected page waits for it; the
 * handler lifts the protection of that page, which wakes the writer. */
static void *uffd_handler(void *arg)
{
	struct pollfd pfd = { uffd, POLLIN, 0 };
	struct uffd_msg msg;

	for (;;) {
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return NULL;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event == UFFD_EVENT_PAGEFAULT) {
			struct uffdio_writeprotect wp = {
				{ msg.arg.pagefault.address & ~(uint64_t)(PE_PAGE - 1), PE_PAGE }, 0 };

			ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
		}
	}
}

static int uffd_open(void)
{
	static const uint64_t features[] = {
		UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_UNPOPULATED,
		UFFD_FEATURE_WP_HUGETLBFS_SHMEM, 0,
	};
	pthread_t t;

	for (int i = 0; uffd < 0 && i < 3; i++) {
		struct uffdio_api api = { UFFD_API, features[i], 0 };
		int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);

		if (fd < 0)
			fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return -errno;
		if (!ioctl(fd, UFFDIO_API, &api))
			uffd = fd;
		else
			close(fd);
	}
	if (uffd < 0)
		return -EINVAL;
	if (pthread_create(&t, NULL, uffd_handler, NULL)) {
		close(uffd);
		uffd = -1;
		return -EAGAIN;
	}
	pthread_detach(t);
	return 0;
}

static void do_uffd_wp(const struct pe_op *op, struct out *out)
{
	uint64_t start = (uint64_t)(uintptr_t)(obj[op->obj].addr + op->off);
	struct uffdio_register reg = { { start, op->len }, UFFDIO_REGISTER_MODE_WP, 0 };
	struct uffdio_writeprotect wp = { { start, op->len }, 0 };

	if (uffd < 0 && (errno = -uffd_open()))
		return fail(out, "userfaultfd");
	if (op->on) {
		if (ioctl(uffd, UFFDIO_REGISTER, &reg))
			return fail(out, "uffd-register");
		wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
	}
	/* Lifting what was never registered is ENOENT/EINVAL: nothing to lift. */
	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) && op->on)
		fail(out, "uffd-wp");
}

static void actor_loop(int fd, int self) __attribute__((noreturn));

struct thread_start {
	int fd, self, cpu;
};

static void *thread_main(void *arg)
{
	struct thread_start ts = *(struct thread_start *)arg;

	free(arg);
	if (ts.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(ts.cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	actor_loop(ts.fd, ts.self);
}

static void new_actor(const struct pe_op *op, struct out *out)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return fail(out, "socketpair");
	if (op->verb == PE_THREAD) {
		struct thread_start *ts = malloc(sizeof(*ts));
		pthread_t t;

		if (!ts || (*ts = (struct thread_start){ sv[1], op->target, op->cpu },
			    errno = pthread_create(&t, NULL, thread_main, ts))) {
			free(ts);
			close(sv[0]);
			close(sv[1]);
			return fail(out, "pthread_create");
		}
		pthread_detach(t);
		chan[op->target] = sv[1];
		out->r.pid = getpid();
		out->fd = sv[0];
		return;
	}
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return fail(out, "fork");
	}
	if (!pid) {
		/* The child: none of its parent's sockets (their EOF tells the
		 * coordinator who died), no uffd context (a fork without
		 * UFFD_FEATURE_EVENT_FORK drops the protection). */
		for (int i = 0; i < PE_MAX_ACTORS; i++)
			if (chan[i] >= 0)
				close(chan[i]), chan[i] = -1;
		if (uffd >= 0)
			close(uffd), uffd = -1;
		close(sv[0]);
		pe_actor_main(prog, op->target, sv[1]);
	}
	close(sv[1]);
	out->r.pid = pid;
	out->fd = sv[0];
}

/* --plant leak-slot: a process the program does not know keeps a shmem
 * object, paged out (to swap when there is some), past the program. */
static void hide(struct out *out)
{
	pid_t pid = fork();

	if (pid < 0)
		return fail(out, "fork");
	if (!pid) {
		size_t len = 4 << 20;
		int fd = memfd_create("leak-slot", 0);
		uint8_t *a;

		for (int i = 0; i < PE_MAX_ACTORS; i++)
			if (chan[i] >= 0)
				close(chan[i]);
		if (fd < 0 || ftruncate(fd, (off_t)len) ||
		    (a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
			_exit(1);
		memset(a, 0x5a, len);
		madvise(a, len, MADV_PAGEOUT);
		for (;;)
			pause();
	}
	out->r.pid = pid;
}

/* munmap of the pages of [off, off + len) still mapped: what a partial
 * munmap freed may hold another object's mapping by now. */
static void unmap_part(struct handle *h, uint64_t off, uint64_t len, struct out *out)
{
	uint64_t first = off / PE_PAGE, end = (off + len) / PE_PAGE;

	if (!h->addr)
		return;
	if (!h->gone && !(h->gone = calloc(h->len / PE_PAGE, 1)))
		return fail(out, "calloc");
	for (uint64_t pg = first; pg < end;) {
		uint64_t run = pg;

		while (run < end && !h->gone[run])
			run++;
		if (run > pg && munmap(h->addr + pg * PE_PAGE, (run - pg) * PE_PAGE))
			return fail(out, "munmap");
		memset(h->gone + pg, 1, run - pg);
		pg = run + 1;
	}
}

static void run_op(const struct pe_cmd *cmd, const struct pe_owed *owed, struct out *out)
{
	const struct pe_op *op = &prog->op[cmd->op];
	struct handle *h = op->obj >= 0 ? &obj[op->obj] : NULL;

	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return make_object(op, out);
	case PE_WRITE: case PE_PWRITE:
		return do_write(op, cmd, out);
	case PE_READ: case PE_PREAD:
		return do_read(op, owed, out);
	case PE_MADVISE:
		return do_madvise(op, out);
	case PE_MPROTECT: {
		static const int prot[] = { PROT_READ | PROT_WRITE, PROT_READ, PROT_NONE };

		if (mprotect(h->addr + op->off, op->len, prot[op->prot]))
			fail(out, "mprotect");
		return;
	}
	case PE_MREMAP: {
		void *a;

		/* mremap moves one VMA: a uffd registration split the mapping, so
		 * it goes first (mremap drops a uffd context without
		 * UFFD_FEATURE_EVENT_REMAP anyway). */
		if (uffd >= 0) {
			struct uffdio_range r = { (uint64_t)(uintptr_t)h->addr, h->len };

			ioctl(uffd, UFFDIO_UNREGISTER, &r);
		}
		a = mremap(h->addr, h->len, op->size, MREMAP_MAYMOVE);

		if (a == MAP_FAILED)
			return fail(out, "mremap");
		h->addr = a;
		h->len = op->size;
		unlock_object(h->addr, h->len);         /* its grown part is new */
		free(h->gone);  /* a whole mapping: nothing was gone */
		h->gone = NULL;
		return;
	}
	case PE_MUNMAP:
		if (!op->whole)
			return unmap_part(h, op->off, op->len, out);
		unmap_part(h, 0, h->len, out);
		if (h->fd >= 0)
			close(h->fd);
		free(h->gone);
		*h = (struct handle){ NULL, 0, -1, NULL };
		return;
	case PE_TRUNCATE:
		if (ftruncate(h->fd, (off_t)op->size))
			fail(out, "ftruncate");
		return;
	case PE_PUNCH:
		if (fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->off,
			      (off_t)op->len))
			fail(out, "fallocate");
		return;
	case PE_UFFD_WP:
		return do_uffd_wp(op, out);
	case PE_FORK: case PE_THREAD:
		return new_actor(op, out);
	case PE_RECLAIM:
		if ((errno = -pe_env_reclaim((struct pe_env *)&prog->env, op->cg, op->size)))
			fail(out, "reclaim");
		return;
	case PE_COMPACT:
		if ((errno = -pe_env_compact((struct pe_env *)&prog->env)))
			fail(out, "compact");
		return;
	case PE_DROP_CACHES:
		if ((errno = -pe_env_drop_caches((struct pe_env *)&prog->env, op->num)))
			fail(out, "drop_caches");
		return;
	case PE_SLEEP:
		usleep((useconds_t)op->num * 1000);
		return;
	default:
		errno = EINVAL;
		return fail(out, "verb");
	}
}

static void actor_loop(int fd, int self)
{
	for (;;) {
		struct pe_cmd cmd;
		struct out out = { .fd = -1 };
		struct pe_owed *owed = NULL;

		if (pe_recv(fd, &cmd, sizeof(cmd), NULL) || cmd.kind == PE_CMD_EXIT ||
		    (cmd.kind == PE_CMD_OP && (cmd.op < 0 || cmd.op >= prog->nops))) {
			if (prog->actor[self].thread)
				pthread_exit(NULL);     /* the coordinator let go of the thread */
			_exit(0);
		}
		if (cmd.npages && (!(owed = malloc(cmd.npages * sizeof(*owed))) ||
				   pe_recv(fd, owed, cmd.npages * sizeof(*owed), NULL)))
			_exit(1);
		out.r.op = cmd.op;
		if (cmd.kind == PE_CMD_HIDE)
			hide(&out);
		else {
			pe_kcov_op_begin();
			run_op(&cmd, owed, &out);
			pe_kcov_op_end();
		}
		free(owed);
		out.r.has_fd = out.fd >= 0;
		if (pe_send(fd, &out.r, sizeof(out.r), out.fd) ||
		    (out.r.nexc && pe_send(fd, out.exc, out.r.nexc * sizeof(*out.exc), -1)))
			_exit(1);
		if (out.fd >= 0)
			close(out.fd);
		free(out.exc);
	}
}

void pe_actor_main(const struct pe_program *p, int self, int fd)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };
	static bool first = true;

	prog = p;
	self_proc = self;
	if (first) {
		for (int i = 0; i < PE_MAX_OBJECTS; i++)
			obj[i] = (struct handle){ NULL, 0, -1, NULL };
		first = false;
	}
	for (int i = 0; i < PE_MAX_ACTORS; i++)
		chan[i] = -1;
	chan[self] = fd;
	sigaction(SIGBUS, &sa, NULL);
	/* The coordinator shields itself from the OOM killer; the program's
	 * processes are fair game (the oom-kill relaxation). */
	if (!self) {
		int adj = open("/proc/self/oom_score_adj", O_WRONLY);

		if (adj >= 0) {
			if (write(adj, "0", 1) < 0) {
				/* an old kernel: nothing was changed to undo */
			}
			close(adj);
		}
	}
	/* Children of an actor are reaped by the kernel; orphans go to the
	 * coordinator (a child subreaper). */
	signal(SIGCHLD, SIG_IGN);
	lock_own_memory();
	actor_loop(fd, self);
}
