/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The oracle (docs/programs.md, What the kernel owes): for every object and
 * every process's mapping of it, the versions each 4K page may hold; and the
 * page pattern those versions are written with.
 */
#ifndef PE_MODEL_H
#define PE_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct pe_program;
struct pe_op;

#define PE_WORDS (4096 / 8)
#define PE_VSET_MAX 4

/* The relaxations of docs/programs.md, by the name reports give them. */
enum pe_relax {
	PE_RELAX_NONE, PE_RELAX_MADV_FREE, PE_RELAX_FAILED_READ, PE_RELAX_KILLED_WRITER,
	PE_RELAX_CONCURRENT_WRITE, PE_RELAX_OOM_KILL, PE_RELAX_THROTTLED, PE_RELAX_COUNT,
};
extern const char *const pe_relax_names[PE_RELAX_COUNT];

/* The versions a page may hold: v[0] is the one owed without relaxations,
 * the others are what relaxation @relax allows besides it. */
struct pe_vset {
	uint16_t v[PE_VSET_MAX];
	uint8_t n;
	uint8_t relax;
};

bool pe_vset_has(const struct pe_vset *s, int version);

/* ---- the pattern: version @version of page @page of object @obj (O, from 1) */
uint64_t pe_mix64(uint64_t z);
uint64_t pe_unmix64(uint64_t z);
uint64_t pe_pattern_word(int obj, uint64_t page, int version, int i);
void pe_pattern_fill(uint64_t *w, int obj, uint64_t page, int version);
/* The version of (@obj, @page) that @w holds (0: zeros), -1 for none. */
int pe_pattern_version_of(const uint64_t *w, int obj, uint64_t page);

/* ---- the model */
struct pe_model;

struct pe_model *pe_model_new(const struct pe_program *p);
void pe_model_free(struct pe_model *m);
/* Operation @op starts: -EINVAL with `LINE: reason` in @why when the program
 * cannot do it here (a name ended, a range outside the mapping...), else its
 * effect is applied (a write's pages may hold old or new until it ends). */
int pe_model_start(struct pe_model *m, const struct pe_op *op, char *why, size_t whylen);
/* Write/pwrite @op ended: its pages hold its version, except those in
 * @faulted (one byte a page of the range, NULL: none) that a failed read
 * left unwritten; @killed: its writer died (PE_RELAX_KILLED_WRITER or
 * PE_RELAX_OOM_KILL): old or new stay allowed. */
void pe_model_end(struct pe_model *m, const struct pe_op *op, const uint8_t *faulted,
		  enum pe_relax killed);
/* What read/pread @op owes, page by page of its range, into @out. */
void pe_model_expected(const struct pe_model *m, const struct pe_op *op, struct pe_vset *out);
/* The first `relaxed` line of @relax for object @obj: true once. */
bool pe_model_first_relax(struct pe_model *m, enum pe_relax relax, int obj);
/* Process @proc ended (exit, kill, OOM kill): its mappings are gone. */
void pe_model_process_gone(struct pe_model *m, int proc);
/* Whether actor @a still lives (its process was not ended). */
bool pe_model_alive(const struct pe_model *m, int actor);

/* A dry run of every operation (parse.c): 0, or -EINVAL and `LINE: reason`. */
int pe_model_validate(const struct pe_program *p, char *why, size_t whylen);

#endif /* PE_MODEL_H */
