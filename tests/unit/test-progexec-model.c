// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * progexec's oracle (guest/tools/progexec/model.c) and parser on the host:
 * the page pattern's vectors (the same as tests/unit/test_prog.py's, from
 * python/faultline/prog/pattern.py), its undo, and a table of the kernel's
 * rulings: each case runs a program through the model and compares what a
 * read of one page owes with what the kernel does (docs/programs.md).
 * TAP: one line per case, PASS as `ok`, FAIL as `not ok`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../guest/tools/progexec/model.h"
#include "../../guest/tools/progexec/program.h"

static int n_tests, n_failed;

static void expect(int ok, const char *what, const char *detail)
{
	n_tests++;
	n_failed += !ok;
	printf("%s %d %s%s%s\n", ok ? "ok" : "not ok", n_tests, what, ok ? "" : ": ", ok ? "" : detail);
}

static void test_pattern(void)
{
	static const struct {
		int obj, page, version;
		uint64_t w[3];
	} vec[] = {
		{ 1, 0, 1, { 0xd08bf4eccba8d3a1ULL, 0xcbdcc9bfd4caf901ULL, 0xcbaf07f172b33958ULL } },
		{ 2, 5, 65535, { 0x091e304b6cfbbf66ULL, 0x8754ffb10c1b44bfULL, 0xe70b410daeb52488ULL } },
		{ 65535, 1000, 7, { 0x4f1d49cd077159f5ULL, 0x00838f19ec22bb17ULL, 0xaa7ac36b05023416ULL } },
	};
	uint64_t page[PE_WORDS], zeros[PE_WORDS] = { 0 };
	char name[96];

	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		pe_pattern_fill(page, vec[i].obj, vec[i].page, vec[i].version);
		snprintf(name, sizeof(name), "pattern (%d,%d,%d) words 0-2", vec[i].obj, vec[i].page,
			 vec[i].version);
		expect(!memcmp(page, vec[i].w, sizeof(vec[i].w)) &&
			       pe_pattern_word(vec[i].obj, vec[i].page, vec[i].version, 2) == vec[i].w[2],
		       name, "words differ from pattern.py's");
		snprintf(name, sizeof(name), "identify (%d,%d,%d)", vec[i].obj, vec[i].page,
			 vec[i].version);
		expect(pe_pattern_version_of(page, vec[i].obj, vec[i].page) == vec[i].version &&
			       pe_pattern_version_of(page, vec[i].obj, vec[i].page + 1) == -1 &&
			       pe_pattern_version_of(page, vec[i].obj + 1, vec[i].page) == -1,
		       name, "not named, or named for another page");
	}
	expect(pe_pattern_version_of(zeros, 1, 0) == 0, "identify zeros as v0", "");
	pe_pattern_fill(page, 3, 4, 5);
	page[PE_WORDS - 1] ^= 1;
	expect(pe_pattern_version_of(page, 3, 4) == -1, "a page with one wrong word holds no version",
	       "named");
	for (uint64_t x = 1; x < (1ULL << 63); x = x * 3 + 7)
		if (pe_unmix64(pe_mix64(x)) != x)
			return expect(0, "unmix64 undoes mix64", "a value did not come back");
	expect(1, "unmix64 undoes mix64", "");
}

/* Run @text through the model as the coordinator would (every background
 * operation pending until its wait; a kill leaves it killed-writer). */
static struct pe_model *replay(const char *text, struct pe_program **pp, char *why, size_t len)
{
	struct pe_program *p = pe_program_parse("case", text, why, len);
	const struct pe_op *bg[PE_MAX_ACTORS] = { 0 };
	struct pe_model *m;

	*pp = p;
	if (!p || !(m = pe_model_new(p)))
		return NULL;
	for (int i = 0; i < p->nops; i++) {
		const struct pe_op *op = &p->op[i];

		if (op->verb == PE_KILL)
			for (int a = 0; a < p->nactors; a++)
				if (bg[a] && p->actor[a].proc == op->target)
					pe_model_end(m, bg[a], NULL, PE_RELAX_KILLED_WRITER), bg[a] = NULL;
		if (pe_model_start(m, op, why, len)) {
			pe_model_free(m);
			return NULL;
		}
		if (op->verb == PE_WAIT && op->target >= 0 && bg[op->target]) {
			pe_model_end(m, bg[op->target], NULL, PE_RELAX_NONE);
			bg[op->target] = NULL;
		} else if (op->bg) {
			bg[op->actor] = op;
		} else {
			pe_model_end(m, op, NULL, PE_RELAX_NONE);
		}
	}
	return m;
}

static int find_actor(const struct pe_program *p, const char *name)
{
	for (int a = 0; a < p->nactors; a++)
		if (!strcmp(p->actor[a].name, name))
			return a;
	return -1;
}

/* What page @page of the program's last object owes to a read by @actor
 * (through the file with @pread), as `v1` or `v1|v0`, into @out. */
static void owed(const struct pe_program *p, struct pe_model *m, const char *actor, int page,
		 bool pread, char *out, size_t len)
{
	struct pe_op op = { .verb = pread ? PE_PREAD : PE_READ, .actor = find_actor(p, actor),
			    .obj = p->nobjs - 1, .off = (uint64_t)page * PE_PAGE, .len = PE_PAGE };
	struct pe_vset s;
	int n = 0;

	pe_model_expected(m, &op, &s);
	out[0] = 0;
	for (int i = 0; i < s.n; i++)
		n += snprintf(out + n, len - n, "%sv%u", i ? "|" : "", s.v[i]);
	if (s.relax)
		snprintf(out + n, len - n, " %s", pe_relax_names[s.relax]);
}

/* The kernel's semantics, one ruling a case: a program, then what a read of
 * one page by one process owes. */
static const struct rule_case {
	const char *name, *text, *actor;
	int page;
	bool pread;
	const char *want;
} rules[] = {
	{ "fork: private anon is copy on write (parent)",
	  "anon a 8K\nwrite a 0 8K v=1\nfork p\n@p write a 0 4K v=2\n", "main", 0, false, "v1" },
	{ "fork: private anon is copy on write (child)",
	  "anon a 8K\nwrite a 0 8K v=1\nfork p\n@p write a 0 4K v=2\n", "p", 0, false, "v2" },
	{ "shared anon: one content for every process",
	  "anon a 8K shared\nfork p\n@p write a 0 4K v=2\n", "main", 0, false, "v2" },
	{ "map=private sees the file until it writes the page",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 0 4K v=2\npwrite m 0 8K v=3\n",
	  "main", 1, false, "v3" },
	{ "map=private: a written page is its own copy",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 0 4K v=2\npwrite m 0 8K v=3\n",
	  "main", 0, false, "v2" },
	{ "map=private: a write does not reach the file",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 0 4K v=2\n", "main", 0, true, "v1" },
	{ "dontneed of a private file mapping drops the COW copy",
	  "memfd m 8K map=private\nwrite m 0 4K v=2\npwrite m 0 8K v=3\nmadvise m 0 4K dontneed\n",
	  "main", 0, false, "v3" },
	{ "truncate drops private COW copies past the end",
	  "memfd m 8K map=private\nwrite m 0 8K v=1\ntruncate m 0\ntruncate m 8K\n", "main", 1,
	  false, "v0" },
	{ "punch zeros the file, keeps private COW copies",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 0 4K v=2\npunch m 0 8K\n", "main", 0,
	  false, "v2" },
	{ "punch zeros the views that follow the file",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 0 4K v=2\npunch m 0 8K\n", "main", 1,
	  false, "v0" },
	{ "dontneed of private anon: zeros",
	  "anon a 8K\nwrite a 0 8K v=1\nmadvise a 0 8K dontneed\n", "main", 0, false, "v0" },
	{ "dontneed of shared anon: shmem keeps the content",
	  "anon a 8K shared\nwrite a 0 8K v=1\nmadvise a 0 8K dontneed\n", "main", 0, false, "v1" },
	{ "free: the old version or zeros (madv-free)",
	  "anon a 8K\nwrite a 0 8K v=1\nmadvise a 0 8K free\n", "main", 0, false, "v1|v0 madv-free" },
	{ "free then write: the write's version only",
	  "anon a 8K\nwrite a 0 8K v=1\nmadvise a 0 8K free\nwrite a 0 4K v=2\n", "main", 0, false,
	  "v2" },
	{ "remove punches the shared file",
	  "tmpfs t 8K\nwrite t 0 8K v=1\nmadvise t 0 4K remove\n", "main", 0, true, "v0" },
	{ "populate_write makes the COW copy: a later pwrite is not seen",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nmadvise m 0 8K populate_write\n"
	  "pwrite m 0 8K v=2\n", "main", 0, false, "v1" },
	{ "populate_read makes no copy: a later pwrite is seen",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nmadvise m 0 8K populate_read\n"
	  "pwrite m 0 8K v=2\n", "main", 0, false, "v2" },
	{ "pageout changes where a page lives, not what it holds",
	  "anon a 8K\nwrite a 0 8K v=1\nmadvise a 0 8K pageout\nmadvise a 0 8K cold\n", "main", 1,
	  false, "v1" },
	{ "mremap grow of private anon: new pages are zeros",
	  "anon a 8K\nwrite a 0 8K v=1\nmremap a 16K\n", "main", 3, false, "v0" },
	{ "mremap shrink and grow of a private file mapping: COW lost, the file's",
	  "memfd m 8K map=private\npwrite m 0 8K v=1\nwrite m 4K 4K v=2\nmremap m 4K\nmremap m 8K\n",
	  "main", 1, false, "v1" },
	{ "fork keeps a private file mapping's COW copies",
	  "memfd m 8K map=private\nwrite m 0 4K v=2\nfork p\npwrite m 0 4K v=3\n", "p", 0, false,
	  "v2" },
	{ "fork: a map=private page not yet written follows the file in the child",
	  "memfd m 8K map=private\nfork p\npwrite m 0 8K v=3\n", "p", 1, false, "v3" },
	{ "a background write: old or new until wait (concurrent-write)",
	  "memfd m 8K\nfork p\n@p write m 0 8K v=2 &\n", "main", 0, false, "v0|v2 concurrent-write" },
	{ "a background write after wait: the new version",
	  "memfd m 8K\nfork p\n@p write m 0 8K v=2 &\nwait p\n", "main", 0, false, "v2" },
	{ "a killed writer of shared memory: old or new (killed-writer)",
	  "memfd m 8K\nfork p\n@p write m 0 8K v=2 &\nkill p\n", "main", 1, false,
	  "v0|v2 killed-writer" },
	{ "a killed writer's private anon is its own",
	  "anon a 8K\nwrite a 0 8K v=1\nfork p\n@p write a 0 8K v=2 &\nkill p\n", "main", 1, false,
	  "v1" },
	{ "mprotect and uffd_wp change no content",
	  "anon a 8K\nwrite a 0 8K v=1\nmprotect a 0 8K ro\nuffd_wp a 0 8K on\n", "main", 0, false,
	  "v1" },
	{ "a fresh object is zeros", "tmpfs t 8K map=none\n", "main", 1, true, "v0" },
};

/* Programs the model refuses (the guest assumes nothing of its text). */
static const struct bad_case {
	const char *text, *why;
} bad[] = {
	{ "anon a 4K\nread a 4K 4K\n", "2: read: range ends past 1 pages" },
	{ "anon a 8K\nmunmap a 0 4K\nread a 0 8K\n", "3: read: page 0 is unmapped" },
	{ "anon a 8K\nmprotect a 0 4K ro\nwrite a 0 4K v=1\n", "3: write: page 0's protection" },
	{ "anon a 8K shared\nmadvise a 0 4K free\n", "2: madvise: free is for private" },
	{ "anon a 8K\nmadvise a 0 4K remove\n", "2: madvise: remove needs a shared mapping" },
	{ "anon a 8K\nmprotect a 0 4K ro\nmremap a 16K\n", "3: mremap: the mapping of a is not whole" },
	{ "fork p\nwait p\n", "2: wait: p has no background operation" },
	{ "fork p\nexit p\n@p sleep 1\n", "3: sleep: p has ended" },
	{ "anon a 8K\nmunmap a\nread a 0 4K\n", "3: read: a is not in process main" },
	{ "anon a 8K\nfork p\n@p write a 0 4K v=1 &\n@p read a 0 4K\n", "4: read: p runs a background" },
	{ "memfd m 8K\nfork p\n@p write m 0 4K v=1 &\nwrite m 0 4K v=2\n", "4: write: p's background write" },
	{ "memfd m 8K\ntruncate m 4K\npread m 0 8K\n", "3: pread: range past the file's end" },
	{ "anon a 8K\npread a 0 4K\n", "2: pread: a is not a file" },
	{ "anon a 4K\nwrite a 0 4K v=0\n", "2: bad number 0" },
	{ "anon a 4Q\n", "1: bad size 4Q" },
	{ "frob a\n", "1: unknown operation frob" },
	{ "anon a 4K\nanon a 4K\n", "2: a is defined twice" },
	{ "@q read a 0 4K\n", "1: no process or thread q" },
	{ "anon a 4K\nswap s0 nvme\n", "2: swap after the first operation" },
};

int main(void)
{
	char why[256], got[64], name[160];

	test_pattern();
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const struct rule_case *c = &rules[i];
		struct pe_program *p;
		struct pe_model *m = replay(c->text, &p, why, sizeof(why));

		if (!m) {
			expect(0, c->name, why);
		} else {
			owed(p, m, c->actor, c->page, c->pread, got, sizeof(got));
			snprintf(name, sizeof(name), "%s (got %s, want %s)", c->name, got, c->want);
			expect(!strcmp(got, c->want), name, "the model disagrees with the kernel");
			pe_model_free(m);
		}
		pe_program_free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pe_program *p = pe_program_parse("case", bad[i].text, why, sizeof(why));

		snprintf(name, sizeof(name), "refused: %s", bad[i].why);
		expect(!p && !strncmp(why, bad[i].why, strlen(bad[i].why)), name, p ? "accepted" : why);
		pe_program_free(p);
	}
	printf("1..%d\n", n_tests);
	return n_failed != 0;
}
