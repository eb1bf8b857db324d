// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The oracle's model (docs/programs.md, What the kernel owes).  Every object
 * has, when it is a file (memfd, tmpfs) or shared anonymous memory (a shmem
 * object), one content for all processes: `file`.  Every process holding the
 * object has a mapping: its pages' protection, and for private mappings the
 * process's own copies (`own`).  Each ruling on the kernel's semantics is a
 * comment where it is applied.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "program.h"

const char *const pe_relax_names[PE_RELAX_COUNT] = {
	"none", "madv-free", "failed-read", "killed-writer", "concurrent-write", "oom-kill",
	"throttled",
};

/* ---- version sets */

bool pe_vset_has(const struct pe_vset *s, int version)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == version)
			return true;
	return false;
}

static struct pe_vset only(int version)
{
	struct pe_vset s = { { (uint16_t)version }, 1, PE_RELAX_NONE };

	return s;
}

/* @s, or @version too under relaxation @relax (v[0] stays the owed one). */
static void widen(struct pe_vset *s, int version, enum pe_relax relax)
{
	if (!pe_vset_has(s, version)) {
		if (s->n == PE_VSET_MAX)
			s->n--;         /* the oldest alternative goes: v[0] is kept */
		s->v[s->n++] = (uint16_t)version;
	}
	s->relax = (uint8_t)relax;
}

/* ---- the model's state */

enum page_state { UNMAPPED, MAPPED, COW };

struct mapping {
	bool held;              /* the process has the object (mapped or its fd) */
	bool mapped;            /* false: map=none, or munmap'd whole */
	uint32_t npages;
	uint8_t *state;         /* enum page_state */
	uint8_t *prot;          /* enum pe_prot */
	struct pe_vset *own;    /* private mappings: the process's copies */
};

struct object {
	bool made;
	uint32_t fpages;        /* file objects: the file's (shmem object's) size */
	struct pe_vset *file;
};

struct pe_model {
	const struct pe_program *p;
	struct object obj[PE_MAX_OBJECTS];
	struct mapping *map[PE_MAX_ACTORS];     /* [process][object]; NULL: process gone */
	bool ended[PE_MAX_ACTORS];
	const struct pe_op *busy[PE_MAX_ACTORS];
	bool swapoff_bg[PE_MAX_SWAPS];
	bool relaxed[PE_RELAX_COUNT][PE_MAX_OBJECTS];
};

/* Objects the executor models: up to 16G each (4M pages). */
#define MODEL_MAX_PAGES (1u << 22)

static int refuse(char *why, size_t whylen, const struct pe_op *op, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(char *why, size_t whylen, const struct pe_op *op, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(why, whylen, "%d: %s: ", op->line, pe_verb_names[op->verb]);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < whylen)
		vsnprintf(why + n, whylen - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

struct pe_model *pe_model_new(const struct pe_program *p)
{
	struct pe_model *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->p = p;
	m->map[0] = calloc(PE_MAX_OBJECTS, sizeof(struct mapping));
	if (!m->map[0]) {
		free(m);
		return NULL;
	}
	return m;
}

static void mapping_free(struct mapping *mp)
{
	free(mp->state);
	free(mp->prot);
	free(mp->own);
	memset(mp, 0, sizeof(*mp));
}

void pe_model_process_gone(struct pe_model *m, int proc)
{
	if (!m->map[proc])
		return;
	for (int i = 0; i < PE_MAX_OBJECTS; i++)
		mapping_free(&m->map[proc][i]);
	free(m->map[proc]);
	m->map[proc] = NULL;
	for (int a = 0; a < m->p->nactors; a++) {
		if (m->p->actor[a].proc == proc) {
			m->ended[a] = true;
			m->busy[a] = NULL;
		}
	}
}

void pe_model_free(struct pe_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < PE_MAX_ACTORS; i++)
		pe_model_process_gone(m, i);
	for (int i = 0; i < PE_MAX_OBJECTS; i++)
		free(m->obj[i].file);
	free(m);
}

bool pe_model_alive(const struct pe_model *m, int actor)
{
	return !m->ended[actor] && m->map[m->p->actor[actor].proc];
}

bool pe_model_first_relax(struct pe_model *m, enum pe_relax relax, int obj)
{
	bool first = !m->relaxed[relax][obj];

	m->relaxed[relax][obj] = true;
	return first;
}

/* Resize @mp to @n pages; new pages mapped with @prot, own copies zero. */
static int mapping_resize(struct mapping *mp, uint32_t n, int prot)
{
	uint8_t *state = realloc(mp->state, n), *pr = realloc(mp->prot, n);
	struct pe_vset *own = realloc(mp->own, n * sizeof(*own));

	if (state)
		mp->state = state;
	if (pr)
		mp->prot = pr;
	if (own)
		mp->own = own;
	if (!state || !pr || !own)
		return -ENOMEM;
	for (uint32_t i = mp->npages; i < n; i++) {
		mp->state[i] = MAPPED;
		mp->prot[i] = (uint8_t)prot;
		mp->own[i] = only(0);
	}
	mp->npages = n;
	return 0;
}

static int file_resize(struct object *o, uint32_t n)
{
	struct pe_vset *f = realloc(o->file, (n ? n : 1) * sizeof(*f));

	if (!f)
		return -ENOMEM;
	o->file = f;
	/* Pages past the old end are a hole: zeros when the file grows again. */
	for (uint32_t i = o->fpages; i < n; i++)
		f[i] = only(0);
	o->fpages = n;
	return 0;
}

static bool is_private_file(const struct pe_object *o)
{
	return o->kind != PE_KIND_ANON && o->map == PE_MAP_PRIVATE;
}

/* The set a write through @proc's mapping of @obj changes at page @pg: its
 * own copy (private anon; private file, whose write makes the copy), or the
 * one content (shared).  NULL when that process is gone. */
static struct pe_vset *write_target(struct pe_model *m, int proc, int obj, uint32_t pg,
				    bool through_file)
{
	const struct pe_object *o = &m->p->obj[obj];
	struct mapping *mp = m->map[proc] ? &m->map[proc][obj] : NULL;

	if (through_file || (pe_object_is_file(o) && !is_private_file(o)))
		return pg < m->obj[obj].fpages ? &m->obj[obj].file[pg] : NULL;
	if (!mp || !mp->held || pg >= mp->npages)
		return NULL;
	if (is_private_file(o) && mp->state[pg] != COW) {
		/* A private file mapping's first write copies the page (COW). */
		mp->own[pg] = pg < m->obj[obj].fpages ? m->obj[obj].file[pg] : only(0);
		mp->state[pg] = COW;
	}
	return &mp->own[pg];
}

/* What a read of page @pg through @proc's mapping (or the file) owes. */
static struct pe_vset read_owed(const struct pe_model *m, int proc, int obj, uint32_t pg,
				bool through_file)
{
	const struct pe_object *o = &m->p->obj[obj];
	const struct mapping *mp = &m->map[proc][obj];

	if (!through_file && (!pe_object_is_file(o) || (is_private_file(o) && mp->state[pg] == COW)))
		return mp->own[pg];
	return pg < m->obj[obj].fpages ? m->obj[obj].file[pg] : only(0);
}

void pe_model_expected(const struct pe_model *m, const struct pe_op *op, struct pe_vset *out)
{
	int proc = pe_actor_proc(m->p, op->actor);
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	for (uint32_t i = 0; i < n; i++)
		out[i] = read_owed(m, proc, op->obj, first + i, op->verb == PE_PREAD);
}

void pe_model_end(struct pe_model *m, const struct pe_op *op, const uint8_t *faulted,
		  enum pe_relax killed)
{
	int proc = pe_actor_proc(m->p, op->actor);
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	if (op->verb != PE_WRITE && op->verb != PE_PWRITE)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct pe_vset *s = write_target(m, proc, op->obj, first + i, op->verb == PE_PWRITE);

		if (!s || !pe_vset_has(s, op->version))
			continue;       /* truncated or unmapped meanwhile, or the process is gone */
		if (killed)
			widen(s, op->version, killed);
		else if (faulted && faulted[i])
			/* A failed swap read stopped the store: the old version, or
			 * the new one if the store landed before the fault. */
			widen(s, op->version, PE_RELAX_FAILED_READ);
		else
			*s = only(op->version);
	}
}

/* ---- checks of an operation against what exists (the dry run's too) */

static const struct pe_object *need_object(struct pe_model *m, const struct pe_op *op,
					   int proc, struct mapping **mp, char *why, size_t len)
{
	if (!m->obj[op->obj].made) {
		refuse(why, len, op, "%s is not made yet", m->p->obj[op->obj].name);
		return NULL;
	}
	*mp = &m->map[proc][op->obj];
	if (!(*mp)->held) {
		refuse(why, len, op, "%s is not in process %s", m->p->obj[op->obj].name,
		       m->p->actor[proc].name);
		return NULL;
	}
	return &m->p->obj[op->obj];
}

/* A range through the mapping: inside @limit pages, mapped, protections in @prots. */
static int mapped_range(struct pe_model *m, const struct pe_op *op, struct mapping *mp,
			uint32_t limit, const char *prots, char *why, size_t len)
{
	uint64_t end = op->off + op->len;

	if (!mp->mapped)
		return refuse(why, len, op, "%s has no mapping here", m->p->obj[op->obj].name);
	if (end > (uint64_t)limit * PE_PAGE || end < op->off)
		return refuse(why, len, op, "range ends past %u pages", limit);
	for (uint64_t pg = op->off / PE_PAGE; pg < end / PE_PAGE; pg++) {
		if (op->verb == PE_MUNMAP)
			continue;
		if (mp->state[pg] == UNMAPPED)
			return refuse(why, len, op, "page %llu is unmapped", (unsigned long long)pg);
		if (prots && !strchr(prots, '0' + mp->prot[pg]))
			return refuse(why, len, op, "page %llu's protection forbids it",
				      (unsigned long long)pg);
	}
	return 0;
}

/* Only a read (pread) may run beside another actor's background write of
 * the same object (concurrent-write); nothing else may touch it. */
static int in_use(struct pe_model *m, const struct pe_op *op, int proc, char *why, size_t len)
{
	for (int a = 0; a < m->p->nactors; a++) {
		const struct pe_op *b = m->busy[a];

		if (!b || b->obj != op->obj || a == op->actor)
			continue;
		if (pe_actor_proc(m->p, a) != proc && !pe_object_is_file(&m->p->obj[op->obj]))
			continue;       /* private anonymous memory of another process */
		if ((op->verb == PE_READ || op->verb == PE_PREAD) &&
		    (b->verb == PE_WRITE || b->verb == PE_PWRITE))
			continue;
		return refuse(why, len, op, "%s's background %s (line %d) uses %s",
			      m->p->actor[a].name, pe_verb_names[b->verb], b->line,
			      m->p->obj[op->obj].name);
	}
	return 0;
}

static int make_object(struct pe_model *m, const struct pe_op *op, int proc, char *why,
		       size_t len)
{
	const struct pe_object *o = &m->p->obj[op->obj];
	struct mapping *mp = &m->map[proc][op->obj];
	uint32_t n = (uint32_t)(o->size / PE_PAGE);

	if (o->size / PE_PAGE > MODEL_MAX_PAGES)
		return refuse(why, len, op, "%s is larger than 16G", o->name);
	/* A fresh object is zeros; a file's size is its size for every process
	 * (a shared anonymous mapping's shmem object keeps its first size). */
	m->obj[op->obj].made = true;
	if (pe_object_is_file(o) && file_resize(&m->obj[op->obj], n))
		return refuse(why, len, op, "out of memory");
	mp->held = true;
	mp->mapped = o->map != PE_MAP_NONE;
	if (mp->mapped && mapping_resize(mp, n, PE_RW))
		return refuse(why, len, op, "out of memory");
	return 0;
}

static void madvise_effect(struct pe_model *m, const struct pe_op *op, int proc,
			   struct mapping *mp)
{
	const struct pe_object *o = &m->p->obj[op->obj];
	struct object *ob = &m->obj[op->obj];
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);

	for (uint32_t pg = first; pg < first + n; pg++) {
		switch (op->advice) {
		case PE_DONTNEED:
			/* Private anon: zeros.  Private file: the COW copy is
			 * dropped, the file shows again.  Shared: the page cache
			 * (shmem) keeps the content. */
			if (!pe_object_is_file(o))
				mp->own[pg] = only(0);
			else if (is_private_file(o) && mp->state[pg] == COW)
				mp->state[pg] = MAPPED;
			break;
		case PE_FREE:
			/* Lazy free: the old version until reclaim drops it, then
			 * zeros; a write cancels it (madv-free). */
			if (!pe_object_is_file(o))
				widen(&mp->own[pg], 0, PE_RELAX_MADV_FREE);
			break;
		case PE_REMOVE:
			/* MADV_REMOVE punches the backing file (shmem): zeros for
			 * every shared view; COW copies stay, as for punch. */
			if (pg < ob->fpages)
				ob->file[pg] = only(0);
			break;
		case PE_POPULATE_WRITE:
			/* Write faults without a store: a private file mapping gets
			 * its COW copy of what the file holds now, and no longer
			 * sees later pwrite/punch there.  Past EOF it fails. */
			if (is_private_file(o) && mp->state[pg] != COW && pg < ob->fpages) {
				mp->own[pg] = ob->file[pg];
				mp->state[pg] = COW;
			}
			break;
		default:
			/* pageout, cold, willneed, populate_read: where the page
			 * lives, never what it holds. */
			break;
		}
	}
}

static int resize_file(struct pe_model *m, const struct pe_op *op, uint32_t n, char *why,
		       size_t len)
{
	struct object *ob = &m->obj[op->obj];

	if (op->size / PE_PAGE > MODEL_MAX_PAGES)
		return refuse(why, len, op, "larger than 16G");
	/* Truncate drops the pages past the new end everywhere, the private
	 * COW copies too (the kernel unmaps even_cows); growing again reads
	 * zeros. */
	if (n < ob->fpages)
		ob->fpages = n;
	for (int pr = 0; pr < PE_MAX_ACTORS; pr++) {
		struct mapping *mp = m->map[pr] ? &m->map[pr][op->obj] : NULL;

		for (uint32_t pg = n; mp && mp->held && pg < mp->npages; pg++)
			if (mp->state[pg] == COW)
				mp->state[pg] = MAPPED;
	}
	return file_resize(ob, n) ? refuse(why, len, op, "out of memory") : 0;
}

/* No page unmapped, one protection: what mremap needs. */
static bool whole(const struct mapping *mp)
{
	for (uint32_t i = 0; i < mp->npages; i++)
		if (mp->state[i] == UNMAPPED || mp->prot[i] != mp->prot[0])
			return false;
	return true;
}

static int object_op(struct pe_model *m, const struct pe_op *op, int proc, char *why, size_t len)
{
	const struct pe_object *o;
	struct mapping *mp;
	struct object *ob = &m->obj[op->obj];
	uint32_t first = (uint32_t)(op->off / PE_PAGE), n = (uint32_t)(op->len / PE_PAGE);
	uint32_t limit;
	bool file_op = op->verb == PE_PWRITE || op->verb == PE_PREAD || op->verb == PE_PUNCH ||
		       op->verb == PE_TRUNCATE;

	if (!(o = need_object(m, op, proc, &mp, why, len)) || in_use(m, op, proc, why, len))
		return -EINVAL;
	if (file_op && o->kind == PE_KIND_ANON)
		return refuse(why, len, op, "%s is not a file", o->name);
	if (file_op && op->verb != PE_TRUNCATE && op->off + op->len > (uint64_t)ob->fpages * PE_PAGE)
		return refuse(why, len, op, "range past the file's end");
	/* Through a file or shmem mapping, no further than the file's end
	 * (SIGBUS past it). */
	limit = mp->npages;
	if (pe_object_is_file(o) && (op->verb == PE_READ || op->verb == PE_WRITE) &&
	    ob->fpages < limit)
		limit = ob->fpages;

	switch (op->verb) {
	case PE_WRITE:
		if (mapped_range(m, op, mp, limit, "0", why, len))
			return -EINVAL;
		/* Until the write ends, a reader may see the old or the new. */
		for (uint32_t i = 0; i < n; i++) {
			struct pe_vset *s = write_target(m, proc, op->obj, first + i, false);

			if (s)
				widen(s, op->version, PE_RELAX_CONCURRENT_WRITE);
		}
		return 0;
	case PE_PWRITE:
		for (uint32_t i = 0; i < n; i++)
			widen(&ob->file[first + i], op->version, PE_RELAX_CONCURRENT_WRITE);
		return 0;
	case PE_READ:
		return mapped_range(m, op, mp, limit, "01", why, len);
	case PE_PREAD:
		return 0;
	case PE_PUNCH:
		/* Zeros in the file and every view that follows it; private
		 * COW copies stay (the kernel's punch keeps even_cows off). */
		for (uint32_t i = 0; i < n; i++)
			ob->file[first + i] = only(0);
		return 0;
	case PE_TRUNCATE:
		return resize_file(m, op, (uint32_t)(op->size / PE_PAGE), why, len);
	case PE_MADVISE: {
		static const char *const need[] = {
			[PE_POPULATE_READ] = "01", [PE_POPULATE_WRITE] = "0",
		};
		const char *prots = op->advice == PE_POPULATE_READ || op->advice == PE_POPULATE_WRITE
					    ? need[op->advice] : NULL;

		if (op->advice == PE_FREE && pe_object_is_file(o))
			return refuse(why, len, op, "free is for private anonymous memory");
		if (op->advice == PE_REMOVE && o->map != PE_MAP_SHARED)
			return refuse(why, len, op, "remove needs a shared mapping");
		if (mapped_range(m, op, mp, mp->npages, prots, why, len))
			return -EINVAL;
		madvise_effect(m, op, proc, mp);
		return 0;
	}
	case PE_MPROTECT:
		if (mapped_range(m, op, mp, mp->npages, NULL, why, len))
			return -EINVAL;
		memset(mp->prot + first, op->prot, n);
		return 0;
	case PE_UFFD_WP:
		/* Write protection delays a write until the handler lifts it;
		 * what the page holds does not change. */
		return mapped_range(m, op, mp, mp->npages, NULL, why, len);
	case PE_MREMAP:
		if (!mp->mapped || !whole(mp))
			return refuse(why, len, op, "the mapping of %s is not whole with one protection",
				      o->name);
		if (op->size / PE_PAGE > MODEL_MAX_PAGES)
			return refuse(why, len, op, "larger than 16G");
		/* Shrinking drops the pages past the new end (COW copies too);
		 * growing maps new pages: zeros for private anon, the file's
		 * (its current content) for a file mapping. */
		if ((uint32_t)(op->size / PE_PAGE) < mp->npages)
			mp->npages = (uint32_t)(op->size / PE_PAGE);
		if (mapping_resize(mp, (uint32_t)(op->size / PE_PAGE), mp->npages ? mp->prot[0] : PE_RW))
			return refuse(why, len, op, "out of memory");
		return 0;
	case PE_MUNMAP:
		if (op->whole) {
			/* The process's mapping and its file are gone; the file's
			 * content lives on for the processes that hold it. */
			mapping_free(mp);
			return 0;
		}
		if (mapped_range(m, op, mp, mp->npages, NULL, why, len))
			return -EINVAL;
		for (uint32_t i = first; i < first + n; i++) {
			mp->state[i] = UNMAPPED;
			mp->own[i] = only(0);
		}
		return 0;
	default:
		return 0;
	}
}

static int alive_actor(struct pe_model *m, const struct pe_op *op, int a, char *why, size_t len)
{
	if (!pe_model_alive(m, a))
		return refuse(why, len, op, "%s has ended", m->p->actor[a].name);
	return 0;
}

static int end_process_op(struct pe_model *m, const struct pe_op *op, char *why, size_t len)
{
	int p = op->target;

	if (alive_actor(m, op, p, why, len))
		return -EINVAL;
	for (int a = 0; op->verb == PE_EXIT && a < m->p->nactors; a++)
		if (m->p->actor[a].proc == p && m->busy[a])
			return refuse(why, len, op, "%s's background operation runs",
				      m->p->actor[a].name);
	pe_model_process_gone(m, p);
	return 0;
}

int pe_model_start(struct pe_model *m, const struct pe_op *op, char *why, size_t len)
{
	const struct pe_program *p = m->p;
	int proc = pe_actor_proc(p, op->actor);

	switch (op->verb) {
	case PE_EXIT: case PE_KILL:
		return end_process_op(m, op, why, len);
	case PE_WAIT:
		if (op->target < 0) {
			if (!m->swapoff_bg[op->dev])
				return refuse(why, len, op, "no background swapoff of %s",
					      p->env.swap[op->dev].name);
			m->swapoff_bg[op->dev] = false;
		} else if (!m->busy[op->target]) {
			return refuse(why, len, op, "%s has no background operation",
				      p->actor[op->target].name);
		}
		if (op->target >= 0)
			m->busy[op->target] = NULL;
		return 0;
	case PE_KILL_SWAPOFF:
		if (!m->swapoff_bg[op->dev])
			return refuse(why, len, op, "no background swapoff of %s", p->env.swap[op->dev].name);
		m->swapoff_bg[op->dev] = false;
		return 0;
	default:
		break;
	}
	if (alive_actor(m, op, op->actor, why, len))
		return -EINVAL;
	if (m->busy[op->actor])
		return refuse(why, len, op, "%s runs a background operation", p->actor[op->actor].name);
	if (op->bg && !op->actor && op->verb != PE_SWAPOFF)
		return refuse(why, len, op, "main never runs in the background");
	if ((op->verb == PE_SWAPOFF || op->verb == PE_SWAPON) && m->swapoff_bg[op->dev])
		return refuse(why, len, op, "a background swapoff of %s runs", p->env.swap[op->dev].name);
	if (op->verb == PE_SWAPOFF && op->bg)
		m->swapoff_bg[op->dev] = true;
	else if (op->bg)
		m->busy[op->actor] = op;
	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return make_object(m, op, proc, why, len);
	case PE_FORK: {
		/* fork: the child has every mapping of its parent; private pages
		 * are copies on write, so the child's copies start equal. */
		struct mapping *child = calloc(PE_MAX_OBJECTS, sizeof(*child));

		for (int a = 0; a < p->nactors; a++)
			if (m->busy[a] && p->actor[a].proc == proc)
				return free(child), refuse(why, len, op, "a background operation runs in %s",
							   p->actor[proc].name);
		if (!child)
			return refuse(why, len, op, "out of memory");
		for (int i = 0; i < PE_MAX_OBJECTS; i++) {
			const struct mapping *from = &m->map[proc][i];

			child[i].held = from->held;
			child[i].mapped = from->mapped;
			if (from->held && from->mapped) {
				if (mapping_resize(&child[i], from->npages, PE_RW))
					return refuse(why, len, op, "out of memory");
				memcpy(child[i].state, from->state, from->npages);
				memcpy(child[i].prot, from->prot, from->npages);
				memcpy(child[i].own, from->own, from->npages * sizeof(*from->own));
			}
		}
		m->map[op->target] = child;
		return 0;
	}
	default:
		return op->obj >= 0 ? object_op(m, op, proc, why, len) : 0;
	}
}

int pe_model_validate(const struct pe_program *p, char *why, size_t whylen)
{
	struct pe_model *m = pe_model_new(p);
	int err = 0;

	if (!m) {
		snprintf(why, whylen, "0: out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < p->nops && !err; i++) {
		err = pe_model_start(m, &p->op[i], why, whylen);
		pe_model_end(m, &p->op[i], NULL, PE_RELAX_NONE);
	}
	pe_model_free(m);
	return err;
}
