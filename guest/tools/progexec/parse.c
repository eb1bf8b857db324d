// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Canonical program text -> struct pe_program (docs/programs.md).  The host's
 * checker (python/faultline/prog/check.py) has already accepted the text;
 * this parser still refuses, with `LINE: reason`, anything it cannot read,
 * and model.c's dry run (pe_model_validate) refuses what cannot be done.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "program.h"

const char *const pe_verb_names[PE_VERB_COUNT] = {
	"anon", "memfd", "tmpfs", "write", "read", "pwrite", "pread", "madvise", "mprotect",
	"mremap", "munmap", "truncate", "punch", "uffd_wp", "fork", "exit", "kill",
	"kill swapoff", "thread", "wait", "move", "cgset", "reclaim", "swapoff", "swapon",
	"knob", "compact", "drop_caches", "sleep",
};
const char *const pe_advice_names[] = {
	"pageout", "cold", "dontneed", "free", "willneed", "remove", "populate_read",
	"populate_write", NULL,
};
static const char *const prot_names[] = { "rw", "ro", "none", NULL };
static const char *const map_names[] = { "shared", "private", "none", NULL };
static const char *const swap_kinds[] = { "nvme", "syncblk", "virtio-blk", NULL };
static const char *const completions[] = { "task", "irq", "thread", NULL };
static const char *const tmpfs_huge[] = { "never", "always", "within_size", "advise", NULL };
const char *const pe_cgroup_keys[] = {
	"memory.max", "memory.high", "memory.swap.max", "memory.zswap.max",
	"memory.zswap.writeback", NULL,
};

#define MAX_WORDS 16

enum name_kind { N_NONE, N_DEV, N_CG, N_OBJ, N_ACTOR };

struct parser {
	struct pe_program *p;
	int line;
	char *why;
	size_t whylen;
	int cap;
};

static int bad(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ps->why, ps->whylen, "%d: ", ps->line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->whylen)
		vsnprintf(ps->why + n, ps->whylen - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int word_index(const char *const *list, const char *w)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(list[i], w))
			return i;
	return -1;
}

/* 2476K, 16M, 1G or bytes; a multiple of 4K. */
static int parse_size(struct parser *ps, const char *w, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (!isdigit((unsigned char)w[0]))
		return bad(ps, "bad size %s", w);
	errno = 0;
	n = strtoull(w, &end, 10);
	if (errno || n > (1ULL << 40))
		return bad(ps, "size %s is too large", w);
	if (*end == 'K')
		n <<= 10, end++;
	else if (*end == 'M')
		n <<= 20, end++;
	else if (*end == 'G')
		n <<= 30, end++;
	if (*end || n % PE_PAGE)
		return bad(ps, "bad size %s (a multiple of 4K: 4K, 16M, 1G)", w);
	*out = n;
	return 0;
}

static int parse_int(struct parser *ps, const char *w, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(w, &end, 10);
	if (!*w || *end || errno || v < lo || v > hi)
		return bad(ps, "bad number %s (expected %ld to %ld)", w, lo, hi);
	*out = (int)v;
	return 0;
}

static enum name_kind lookup(const struct pe_program *p, const char *name, int *idx)
{
	for (int i = 0; i < p->env.nswap; i++)
		if (!strcmp(p->env.swap[i].name, name))
			return *idx = i, N_DEV;
	for (int i = 0; i < p->env.ncg; i++)
		if (!strcmp(p->env.cg[i].name, name))
			return *idx = i, N_CG;
	for (int i = 0; i < p->nobjs; i++)
		if (!strcmp(p->obj[i].name, name))
			return *idx = i, N_OBJ;
	for (int i = 0; i < p->nactors; i++)
		if (!strcmp(p->actor[i].name, name))
			return *idx = i, N_ACTOR;
	return N_NONE;
}

static int new_name(struct parser *ps, const char *w, char out[PE_NAME_MAX])
{
	int i, len = (int)strlen(w);

	if (len < 1 || len > PE_NAME_MAX - 1 || !islower((unsigned char)w[0]))
		return bad(ps, "bad name %s", w);
	for (i = 1; i < len; i++)
		if (!islower((unsigned char)w[i]) && !isdigit((unsigned char)w[i]) && w[i] != '_')
			return bad(ps, "bad name %s", w);
	if (lookup(ps->p, w, &i) != N_NONE)
		return bad(ps, "%s is defined twice", w);
	memcpy(out, w, len + 1);
	return 0;
}

static int ref(struct parser *ps, const char *w, enum name_kind kind, int *idx)
{
	static const char *const what[] = { "", "device", "cgroup", "object", "process or thread" };

	if (lookup(ps->p, w, idx) != kind)
		return bad(ps, "no %s %s", what[kind], w);
	return 0;
}

/* KEY=VALUE of option word @w whose key is @key; NULL when it is not. */
static const char *opt(const char *w, const char *key)
{
	size_t n = strlen(key);

	return !strncmp(w, key, n) && w[n] == '=' ? w + n + 1 : NULL;
}

static int copy_kv(struct parser *ps, const char *w, char *key, size_t klen, char *val,
		   size_t vlen)
{
	const char *eq = strchr(w, '=');

	if (!eq || eq == w || (size_t)(eq - w) >= klen || strlen(eq + 1) >= vlen || !eq[1])
		return bad(ps, "expected KEY=VALUE, got %s", w);
	memcpy(key, w, eq - w);
	key[eq - w] = 0;
	strcpy(val, eq + 1);
	return 0;
}

/* A cgroup limit value: a size (as decimal bytes) or max. */
static int limit_value(struct parser *ps, const char *key, const char *v, char out[24])
{
	uint64_t n;

	if (!strcmp(key, "memory.zswap.writeback")) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			return bad(ps, "%s=%s: expected 0 or 1", key, v);
		strcpy(out, v);
		return 0;
	}
	if (!strcmp(v, "max")) {
		strcpy(out, "max");
		return 0;
	}
	if (parse_size(ps, v, &n))
		return -EINVAL;
	snprintf(out, 24, "%llu", (unsigned long long)n);
	return 0;
}

static int header_swap(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_swap *s;

	if (n < 3 || e->nswap >= PE_MAX_SWAPS)
		return bad(ps, "swap: expected `swap DEV KIND [options]` (at most %d)", PE_MAX_SWAPS);
	s = &e->swap[e->nswap];
	memset(s, 0, sizeof(*s));
	if (new_name(ps, w[1], s->name))
		return -EINVAL;
	if (word_index(swap_kinds, w[2]) < 0)
		return bad(ps, "swap: unknown kind %s", w[2]);
	strcpy(s->kind, w[2]);
	s->size = 64 << 20;
	s->prio = PE_PRIO_DEFAULT;
	for (int i = 3; i < n; i++) {
		const char *v;

		if ((v = opt(w[i], "size"))) {
			if (parse_size(ps, v, &s->size))
				return -EINVAL;
		} else if ((v = opt(w[i], "prio"))) {
			if (parse_int(ps, v, -1, 32767, &s->prio))
				return -EINVAL;
		} else if ((v = opt(w[i], "completion"))) {
			if (word_index(completions, v) < 0 || strcmp(s->kind, "syncblk"))
				return bad(ps, "swap: bad completion=%s", v);
			strcpy(s->completion, v);
		} else if (!strcmp(w[i], "discard")) {
			s->discard = true;
		} else if (!strcmp(w[i], "rotational")) {
			s->rotational = true;
		} else {
			return bad(ps, "swap: unexpected %s", w[i]);
		}
	}
	if (s->size < (1 << 20))
		return bad(ps, "swap %s: size below 1M", s->name);
	e->nswap++;
	return 0;
}

static int header_cgroup(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_cgroup *c;

	if (n < 2 || e->ncg >= PE_MAX_CGROUPS || n - 2 > PE_MAX_LIMITS)
		return bad(ps, "cgroup: expected `cgroup CG [KEY=V]...` (at most %d)", PE_MAX_CGROUPS);
	c = &e->cg[e->ncg];
	memset(c, 0, sizeof(*c));
	if (new_name(ps, w[1], c->name))
		return -EINVAL;
	for (int i = 2; i < n; i++) {
		char *val;

		if (copy_kv(ps, w[i], c->key[c->nlimits], sizeof(c->key[0]), c->value[c->nlimits],
			    sizeof(c->value[0])))
			return -EINVAL;
		if (word_index(pe_cgroup_keys, c->key[c->nlimits]) < 0)
			return bad(ps, "cgroup: unknown key %s", c->key[c->nlimits]);
		val = c->value[c->nlimits];
		if (limit_value(ps, c->key[c->nlimits], val, val))
			return -EINVAL;
		c->nlimits++;
	}
	e->ncg++;
	return 0;
}

static int header_knob(struct parser *ps, char **w, int n)
{
	struct pe_env *e = &ps->p->env;
	struct pe_knob *k;

	if (n != 2 || e->nknob >= PE_MAX_KNOBS)
		return bad(ps, "knob: expected `knob KEY=VALUE`");
	k = &e->knob[e->nknob];
	if (copy_kv(ps, w[1], k->key, sizeof(k->key), k->value, sizeof(k->value)))
		return -EINVAL;
	for (int i = 0; i < e->nknob; i++)
		if (!strcmp(e->knob[i].key, k->key))
			return bad(ps, "knob %s twice in the header", k->key);
	e->nknob++;
	return 0;
}

/* The object-making operations: anon, memfd, tmpfs. */
static int op_object(struct parser *ps, struct pe_op *op, char **w, int n)
{
	struct pe_program *p = ps->p;
	struct pe_object *o;

	if (n < 3 || p->nobjs >= PE_MAX_OBJECTS)
		return bad(ps, "%s: expected `%s OBJ SIZE [options]` (at most %d objects)", w[0],
			   w[0], PE_MAX_OBJECTS);
	o = &p->obj[p->nobjs];
	memset(o, 0, sizeof(*o));
	if (new_name(ps, w[1], o->name) || parse_size(ps, w[2], &o->size))
		return -EINVAL;
	if (!o->size)
		return bad(ps, "%s: size 0", w[0]);
	o->kind = op->verb == PE_ANON ? PE_KIND_ANON : op->verb == PE_MEMFD ? PE_KIND_MEMFD
									    : PE_KIND_TMPFS;
	o->map = o->kind == PE_KIND_ANON ? PE_MAP_PRIVATE : PE_MAP_SHARED;
	o->cg = -1;
	o->proc = pe_actor_proc(p, op->actor);
	for (int i = 3; i < n; i++) {
		const char *v;

		if (o->kind == PE_KIND_ANON && word_index(map_names, w[i]) >= 0 &&
		    strcmp(w[i], "none")) {
			o->map = word_index(map_names, w[i]);
		} else if (o->kind != PE_KIND_ANON && (v = opt(w[i], "map"))) {
			if (word_index(map_names, v) < 0)
				return bad(ps, "%s: bad map=%s", w[0], v);
			o->map = word_index(map_names, v);
		} else if (o->kind != PE_KIND_TMPFS && (v = opt(w[i], "pages"))) {
			if (strcmp(v, "base") && strcmp(v, "huge"))
				return bad(ps, "%s: bad pages=%s", w[0], v);
			o->pages = v[0];
		} else if (o->kind == PE_KIND_TMPFS && (v = opt(w[i], "huge"))) {
			if (word_index(tmpfs_huge, v) < 0)
				return bad(ps, "tmpfs: bad huge=%s", v);
			strcpy(o->huge, v);
		} else if ((v = opt(w[i], "cgroup"))) {
			if (ref(ps, v, N_CG, &o->cg))
				return -EINVAL;
		} else {
			return bad(ps, "%s: unexpected %s", w[0], w[i]);
		}
	}
	op->obj = p->nobjs++;
	return 0;
}

/* OBJ OFF LEN at w[1..3]. */
static int range(struct parser *ps, struct pe_op *op, char **w, int n, int need)
{
	if (n != need)
		return bad(ps, "%s: expected %d words, got %d", w[0], need, n);
	if (ref(ps, w[1], N_OBJ, &op->obj) || parse_size(ps, w[2], &op->off) ||
	    parse_size(ps, w[3], &op->len))
		return -EINVAL;
	if (!op->len)
		return bad(ps, "%s: length 0", w[0]);
	return 0;
}

static int version(struct parser *ps, struct pe_op *op, const char *w)
{
	const char *v = opt(w, "v");

	if (!v)
		return bad(ps, "expected v=N, got %s", w);
	return parse_int(ps, v, 1, 65535, &op->version);
}

static int new_actor(struct parser *ps, struct pe_op *op, const char *w, bool thread)
{
	struct pe_program *p = ps->p;
	struct pe_actor *a;

	if (p->nactors >= PE_MAX_ACTORS)
		return bad(ps, "too many processes and threads (at most %d)", PE_MAX_ACTORS);
	a = &p->actor[p->nactors];
	if (new_name(ps, w, a->name))
		return -EINVAL;
	a->thread = thread;
	a->proc = thread ? pe_actor_proc(p, op->actor) : p->nactors;
	a->line = ps->line;
	op->target = p->nactors++;
	return 0;
}

static int op_words(struct parser *ps, struct pe_op *op, char **w, int n)
{
	const char *v;

	switch (op->verb) {
	case PE_ANON: case PE_MEMFD: case PE_TMPFS:
		return op_object(ps, op, w, n);
	case PE_WRITE: case PE_PWRITE:
		if (n != 5)
			return bad(ps, "%s: expected `%s OBJ OFF LEN v=N`", w[0], w[0]);
		return range(ps, op, w, 4, 4) || version(ps, op, w[4]) ? -EINVAL : 0;
	case PE_READ: case PE_PREAD: case PE_PUNCH:
		return range(ps, op, w, n, 4);
	case PE_MADVISE:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if ((op->advice = word_index(pe_advice_names, w[4])) < 0)
			return bad(ps, "madvise: unknown advice %s", w[4]);
		return 0;
	case PE_MPROTECT:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if ((op->prot = word_index(prot_names, w[4])) < 0)
			return bad(ps, "mprotect: expected ro, rw or none, got %s", w[4]);
		return 0;
	case PE_UFFD_WP:
		if (range(ps, op, w, n, 5))
			return -EINVAL;
		if (strcmp(w[4], "on") && strcmp(w[4], "off"))
			return bad(ps, "uffd_wp: expected on or off, got %s", w[4]);
		op->on = !strcmp(w[4], "on");
		return 0;
	case PE_MUNMAP:
		if (n == 2) {
			op->whole = true;
			return ref(ps, w[1], N_OBJ, &op->obj);
		}
		return range(ps, op, w, n, 4);
	case PE_MREMAP: case PE_TRUNCATE:
		if (n != 3 || ref(ps, w[1], N_OBJ, &op->obj) || parse_size(ps, w[2], &op->size))
			return n != 3 ? bad(ps, "%s: expected `%s OBJ SIZE`", w[0], w[0]) : -EINVAL;
		if (op->verb == PE_MREMAP && !op->size)
			return bad(ps, "mremap: size 0");
		return 0;
	case PE_FORK: case PE_THREAD:
		if (n < 2 || n > 3 || (n == 3 && op->verb == PE_FORK))
			return bad(ps, "%s: expected one name", w[0]);
		if (new_actor(ps, op, w[1], op->verb == PE_THREAD))
			return -EINVAL;
		if (n == 3 && (!(v = opt(w[2], "cpu")) || parse_int(ps, v, 0, 63, &op->cpu)))
			return v ? -EINVAL : bad(ps, "thread: unexpected %s", w[2]);
		return 0;
	case PE_EXIT: case PE_KILL:
		if (n != 2 || ref(ps, w[1], N_ACTOR, &op->target))
			return n != 2 ? bad(ps, "%s: expected `%s P`", w[0], w[0]) : -EINVAL;
		if (!op->target || ps->p->actor[op->target].thread)
			return bad(ps, "%s: %s is not a forked process", w[0], w[1]);
		return 0;
	case PE_WAIT:
		if (n != 2)
			return bad(ps, "wait: expected `wait P|T|DEV`");
		if (lookup(ps->p, w[1], &op->target) == N_ACTOR)
			return 0;
		op->target = -1;
		return ref(ps, w[1], N_DEV, &op->dev);
	case PE_KILL_SWAPOFF: case PE_SWAPOFF:
		if (n != 2)
			return bad(ps, "%s: expected one device", w[0]);
		return ref(ps, w[1], N_DEV, &op->dev);
	case PE_SWAPON:
		if (n < 2 || ref(ps, w[1], N_DEV, &op->dev))
			return n < 2 ? bad(ps, "swapon: expected a device") : -EINVAL;
		for (int i = 2; i < n; i++) {
			if ((v = opt(w[i], "prio"))) {
				if (parse_int(ps, v, -1, 32767, &op->prio))
					return -EINVAL;
			} else if (!strcmp(w[i], "discard")) {
				op->discard = true;
			} else {
				return bad(ps, "swapon: unexpected %s", w[i]);
			}
		}
		return 0;
	case PE_MOVE:
		return n != 2 ? bad(ps, "move: expected `move CG`") : ref(ps, w[1], N_CG, &op->cg);
	case PE_CGSET:
		if (n != 3 || ref(ps, w[1], N_CG, &op->cg) ||
		    copy_kv(ps, w[2], op->key, sizeof(op->key), op->value, sizeof(op->value)))
			return n != 3 ? bad(ps, "cgset: expected `cgset CG KEY=V`") : -EINVAL;
		if (word_index(pe_cgroup_keys, op->key) < 0)
			return bad(ps, "cgset: unknown key %s", op->key);
		return limit_value(ps, op->key, op->value, op->value);
	case PE_RECLAIM:
		if (n != 3 || ref(ps, w[1], N_CG, &op->cg))
			return n != 3 ? bad(ps, "reclaim: expected `reclaim CG SIZE`") : -EINVAL;
		return parse_size(ps, w[2], &op->size);
	case PE_KNOB:
		if (n != 2)
			return bad(ps, "knob: expected `knob KEY=VALUE`");
		return copy_kv(ps, w[1], op->key, sizeof(op->key), op->value, sizeof(op->value));
	case PE_COMPACT:
		return n != 1 ? bad(ps, "compact takes no values") : 0;
	case PE_DROP_CACHES:
		return n != 2 ? bad(ps, "drop_caches: expected 1, 2 or 3")
			      : parse_int(ps, w[1], 1, 3, &op->num);
	case PE_SLEEP:
		return n != 2 ? bad(ps, "sleep: expected MS") : parse_int(ps, w[1], 1, 10000, &op->num);
	default:
		return bad(ps, "unknown operation %s", w[0]);
	}
}

static bool takes_prefix(enum pe_verb v)
{
	return v != PE_EXIT && v != PE_KILL && v != PE_KILL_SWAPOFF && v != PE_WAIT;
}

static bool may_background(enum pe_verb v)
{
	return v == PE_WRITE || v == PE_READ || v == PE_PWRITE || v == PE_PREAD ||
	       v == PE_MADVISE || v == PE_RECLAIM || v == PE_SWAPOFF || v == PE_COMPACT ||
	       v == PE_DROP_CACHES || v == PE_SLEEP;
}

static int operation(struct parser *ps, char **w, int n)
{
	struct pe_program *p = ps->p;
	struct pe_op *op;
	int verb;

	if (p->nops >= PE_MAX_OPS)
		return bad(ps, "too many operations (at most %d)", PE_MAX_OPS);
	if (p->nops == ps->cap) {
		struct pe_op *more = realloc(p->op, sizeof(*more) * (ps->cap = ps->cap * 2 + 64));

		if (!more)
			return bad(ps, "out of memory");
		p->op = more;
	}
	op = &p->op[p->nops];
	memset(op, 0, sizeof(*op));
	op->line = ps->line;
	op->obj = op->target = op->dev = op->cg = op->cpu = -1;
	op->prio = PE_PRIO_DEFAULT;
	if (w[0][0] == '@') {
		if (strcmp(w[0] + 1, "main") && ref(ps, w[0] + 1, N_ACTOR, &op->actor))
			return -EINVAL;
		w++, n--;
	}
	if (n && !strcmp(w[n - 1], "&"))
		op->bg = true, n--;
	if (!n)
		return bad(ps, "no operation");
	if (!strcmp(w[0], "kill") && n > 1 && !strcmp(w[1], "swapoff")) {
		verb = PE_KILL_SWAPOFF;
		w++, n--;
	} else {
		for (verb = 0; verb < PE_VERB_COUNT; verb++)
			if (!strcmp(pe_verb_names[verb], w[0]))
				break;
	}
	if (verb >= PE_VERB_COUNT)
		return bad(ps, "unknown operation %s", w[0]);
	op->verb = verb;
	if (op->actor && !takes_prefix(verb))
		return bad(ps, "%s takes no @ prefix", w[0]);
	if (op->bg && !may_background(verb))
		return bad(ps, "%s cannot run in the background", w[0]);
	if (op_words(ps, op, w, n))
		return -EINVAL;
	p->nops++;
	return 0;
}

static int statement(struct parser *ps, char *text, bool *in_header, bool *seen_any)
{
	char *w[MAX_WORDS], *save, *hash = strchr(text, '#');
	int n = 0;

	if (hash)
		*hash = 0;
	for (char *t = strtok_r(text, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (n == MAX_WORDS)
			return bad(ps, "too many words");
		w[n++] = t;
	}
	if (!n)
		return 0;
	if (!strcmp(w[0], "program")) {
		if (*seen_any || n != 2 || strcmp(w[1], "v1"))
			return bad(ps, "`program v1` must be the first line");
		*seen_any = true;
		return 0;
	}
	*seen_any = true;
	if (!strcmp(w[0], "rule")) {
		if (!*in_header)
			return bad(ps, "rule after the first operation");
		int dev;

		if (n < 5 || ps->p->nrules >= PE_MAX_RULES)
			return bad(ps, "rule: expected `rule DEV NAME: RULE` (at most %d)", PE_MAX_RULES);
		if (ref(ps, w[1], N_DEV, &dev))
			return -EINVAL;
		ps->p->nrules++;
		return 0;
	}
	if (!strcmp(w[0], "swap") || !strcmp(w[0], "cgroup") || (*in_header && !strcmp(w[0], "knob"))) {
		if (!*in_header)
			return bad(ps, "%s after the first operation", w[0]);
		return w[0][0] == 's' ? header_swap(ps, w, n) : w[0][0] == 'c' ? header_cgroup(ps, w, n)
										 : header_knob(ps, w, n);
	}
	*in_header = false;
	return operation(ps, w, n);
}

struct pe_program *pe_program_parse(const char *name, const char *text, char *why, size_t whylen)
{
	struct pe_program *p = calloc(1, sizeof(*p));
	struct parser ps = { p, 0, why, whylen, 0 };
	bool in_header = true, seen_any = false;
	char *copy = strdup(text), *line, *next;

	if (!p || !copy) {
		snprintf(why, whylen, "0: out of memory");
		goto fail;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	strcpy(p->actor[0].name, "main");
	p->nactors = 1;
	for (line = copy; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		ps.line++;
		if (strlen(line) >= PE_LINE_MAX) {
			bad(&ps, "line longer than %d bytes", PE_LINE_MAX - 1);
			goto fail;
		}
		if (statement(&ps, line, &in_header, &seen_any))
			goto fail;
	}
	if (pe_model_validate(p, why, whylen))
		goto fail;
	free(copy);
	return p;
fail:
	free(copy);
	pe_program_free(p);
	return NULL;
}

int pe_program_bind(struct pe_program *p, const char *dev, const char *target, char *why,
		    size_t whylen)
{
	for (int i = 0; i < p->env.nswap; i++) {
		if (strcmp(p->env.swap[i].name, dev))
			continue;
		if (strlen(target) >= sizeof(p->env.swap[i].target)) {
			snprintf(why, whylen, "bind %s: target too long", dev);
			return -EINVAL;
		}
		strcpy(p->env.swap[i].target, target);
		return 0;
	}
	snprintf(why, whylen, "bind %s: the program has no swap device %s", dev, dev);
	return -ENOENT;
}

int pe_program_allow_failed_read(struct pe_program *p, const char *dev, char *why, size_t whylen)
{
	for (int i = 0; i < p->env.nswap; i++) {
		if (!strcmp(p->env.swap[i].name, dev)) {
			p->allow_failed_read = true;
			p->env.swap[i].fails_reads = true;
			return 0;
		}
	}
	snprintf(why, whylen, "allow failed-read %s: the program has no swap device %s", dev, dev);
	return -ENOENT;
}

void pe_program_free(struct pe_program *p)
{
	if (p)
		free(p->op);
	free(p);
}
