/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A parsed swap program (parse.c): the header in struct pe_env, the
 * operations with every name resolved to an index.  Actors are the
 * processes and threads (index 0 is `main`); objects are numbered in the
 * order the program makes them (object i is the pattern's O = i + 1).
 */
#ifndef PE_PROGRAM_H
#define PE_PROGRAM_H

#include "progexec.h"

#define PE_MAX_ACTORS 64
#define PE_MAX_OBJECTS 64
#define PE_MAX_RULES 64
#define PE_MAX_OPS 4096

enum pe_verb {
	PE_ANON, PE_MEMFD, PE_TMPFS, PE_WRITE, PE_READ, PE_PWRITE, PE_PREAD, PE_MADVISE,
	PE_MPROTECT, PE_MREMAP, PE_MUNMAP, PE_TRUNCATE, PE_PUNCH, PE_UFFD_WP, PE_FORK,
	PE_EXIT, PE_KILL, PE_KILL_SWAPOFF, PE_THREAD, PE_WAIT, PE_MOVE, PE_CGSET,
	PE_RECLAIM, PE_SWAPOFF, PE_SWAPON, PE_KNOB, PE_COMPACT, PE_DROP_CACHES, PE_SLEEP,
	PE_VERB_COUNT,
};

enum pe_advice {
	PE_PAGEOUT, PE_COLD, PE_DONTNEED, PE_FREE, PE_WILLNEED, PE_REMOVE,
	PE_POPULATE_READ, PE_POPULATE_WRITE,
};

enum pe_prot { PE_RW, PE_RO, PE_NONE };
enum pe_kind { PE_KIND_ANON, PE_KIND_MEMFD, PE_KIND_TMPFS };
enum pe_map { PE_MAP_SHARED, PE_MAP_PRIVATE, PE_MAP_NONE };

/* --plant: a fault the executor makes on purpose, for its self-tests. */
enum pe_plant { PE_PLANT_NONE, PE_PLANT_DROP_WRITE, PE_PLANT_STALE_PAGE, PE_PLANT_LEAK_SLOT };

struct pe_op {
	int line;               /* of the text as sent, from 1 */
	enum pe_verb verb;
	int actor;              /* who runs it (main: 0) */
	bool bg;                /* trailing & */
	int obj;                /* -1 when none */
	int target;             /* fork/thread: the new actor; exit/kill/wait: the actor */
	int dev;                /* swapoff/swapon/kill swapoff/wait DEV; -1 when none */
	int cg;                 /* move/cgset/reclaim; -1 when none */
	uint64_t off, len;      /* ranges (munmap without a range: whole) */
	uint64_t size;          /* mremap, truncate, reclaim */
	bool whole;             /* munmap OBJ */
	int version;            /* write, pwrite */
	int advice;             /* enum pe_advice */
	int prot;               /* enum pe_prot */
	bool on;                /* uffd_wp on|off */
	int cpu;                /* thread cpu=, -1 when not pinned */
	int prio;               /* swapon prio=, PE_PRIO_DEFAULT when absent */
	bool discard;           /* swapon discard */
	int num;                /* drop_caches 1|2|3, sleep MS */
	char key[48], value[32];/* knob, cgset */
};

struct pe_actor {
	char name[PE_NAME_MAX];
	bool thread;
	int proc;               /* the process it belongs to (itself for a process) */
	int line;               /* where it was made; 0 for main */
};

struct pe_object {
	char name[PE_NAME_MAX];
	enum pe_kind kind;
	enum pe_map map;        /* anon: shared or private */
	int pages;              /* 0, 'b' (pages=base) or 'h' (pages=huge) */
	char huge[16];          /* tmpfs huge= ("" when absent) */
	int cg;                 /* cgroup=, -1 when none */
	uint64_t size;
	int proc;               /* the process that made it */
};

struct pe_program {
	char name[PE_PROGRAM_NAME_MAX];
	struct pe_env env;
	int nrules;             /* kept, not interpreted: the host sets them */
	struct pe_actor actor[PE_MAX_ACTORS];
	int nactors;
	struct pe_object obj[PE_MAX_OBJECTS];
	int nobjs;
	struct pe_op *op;
	int nops;
	bool allow_failed_read; /* some device may fail reads (allow failed-read) */
	enum pe_plant plant;
};

extern const char *const pe_verb_names[PE_VERB_COUNT];
extern const char *const pe_advice_names[];
/* The cgroup limit files a program may set (NULL-terminated). */
extern const char *const pe_cgroup_keys[];

/* Whether the object has one content for every process (file or shmem). */
static inline bool pe_object_is_file(const struct pe_object *o)
{
	return o->kind != PE_KIND_ANON || o->map == PE_MAP_SHARED;
}

/* The process an actor's operations run in. */
static inline int pe_actor_proc(const struct pe_program *p, int actor)
{
	return p->actor[actor].proc;
}

#endif /* PE_PROGRAM_H */
