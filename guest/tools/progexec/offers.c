// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What this kernel and machine offer a program (the `offers` lines after
 * `hello`, docs/programs.md): the same tests pe_env_knob_check() and
 * env_cgroups_check() refuse a program by, asked of every value the
 * language has, so a generator that keeps to the offers writes programs
 * this guest runs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "env-internal.h"
#include "offers.h"
#include "program.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define MAX_MTHP 16

/* The language's values of the knobs whose answer is the kernel's write. */
static const char *const compressors[] = { "lzo", "lzo-rle", "lz4", "lz4hc", "zstd", "deflate",
					   "842", NULL };
static const char *const zpools[] = { "zsmalloc", "zbud", "z3fold", NULL };
static const char *const plain_knobs[] = {
	"zswap.enabled", "zswap.shrinker_enabled", "zswap.max_pool_percent",
	"zswap.accept_threshold_percent", "zswap.compressor", "zswap.zpool", "vm.page-cluster",
	"vm.swappiness", "thp.enabled", "thp.defrag", "thp.shmem_enabled", NULL,
};
static const char *const thp_choices[] = { "thp.enabled", "thp.defrag", "thp.shmem_enabled",
					   NULL };

struct lines {
	char *buf;
	size_t len, used;
	int n;
	char line[PE_LINE_MAX];
	size_t at;              /* bytes in line */
};

static void line_start(struct lines *l, const char *key)
{
	l->at = (size_t)snprintf(l->line, sizeof(l->line), "offers %s", key);
}

static void line_word(struct lines *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->at >= sizeof(l->line) - 1)
		return;
	l->line[l->at++] = ' ';
	va_start(ap, fmt);
	n = vsnprintf(l->line + l->at, sizeof(l->line) - l->at, fmt, ap);
	va_end(ap);
	if (n > 0 && l->at + (size_t)n < sizeof(l->line))
		l->at += (size_t)n;
	else
		l->line[--l->at] = '\0';        /* a word that does not fit is left out */
}

static void line_end(struct lines *l)
{
	int n = snprintf(l->buf + l->used, l->len - l->used, "%s\n", l->line);

	if (n > 0 && l->used + (size_t)n < l->len) {
		l->used += (size_t)n;
		l->n++;
	}
}

/* A choice file's words, brackets off: `offers KEY WORD...`. */
static void choice_line(struct lines *l, const char *key)
{
	char path[160], text[512], word[64];
	int n;

	if (env_knob_path(key, path, sizeof(path)) || gl_read_file(path, text, sizeof(text)))
		return;
	line_start(l, key);
	for (const char *p = text; sscanf(p, "%63s%n", word, &n) == 1; p += n) {
		size_t w = strlen(word);

		if (word[0] == '[' && w > 2 && word[w - 1] == ']')
			line_word(l, "%.*s", (int)w - 2, word + 1);
		else
			line_word(l, "%s", word);
	}
	line_end(l);
}

/* The values of @key the kernel takes, as pe_env_knob_check() decides. */
static void tried_line(struct lines *l, const char *key, const char *const *values)
{
	static struct pe_env scratch;
	char path[160];

	if (env_knob_path(key, path, sizeof(path)) || access(path, R_OK))
		return;
	line_start(l, key);
	for (int i = 0; values[i]; i++)
		if (!pe_env_knob_check(&scratch, key, values[i]))
			line_word(l, "%s", values[i]);
	line_end(l);
}

static int by_size(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The anonymous mTHP sizes (hugepages-SIZEkB/enabled; a size with only
 * shmem_enabled is no mthp.SIZE.enabled knob), ascending, in kB. */
static int mthp_sizes(int *kb, int max)
{
	DIR *d = opendir(THP_DIR);
	struct dirent *e;
	int n = 0, size;
	char tail[8], path[300];

	while (d && (e = readdir(d)) && n < max) {
		if (sscanf(e->d_name, "hugepages-%dkB%7s", &size, tail) != 1)
			continue;
		snprintf(path, sizeof(path), THP_DIR "/%s/enabled", e->d_name);
		if (!access(path, R_OK))
			kb[n++] = size;
	}
	if (d)
		closedir(d);
	qsort(kb, (size_t)n, sizeof(*kb), by_size);
	return n;
}

static void cgroup_line(struct lines *l)
{
	char probe[64], path[160], text[256], cur[64];

	line_start(l, "cgroup.files");
	if (!gl_read_file(PE_CGROUP_ROOT "/cgroup.subtree_control", text, sizeof(text)) &&
	    !env_choice_parse(text, "memory", cur, sizeof(cur))) {
		/* A new child cgroup shows which limit files this kernel has. */
		snprintf(probe, sizeof(probe), PE_CGROUP_ROOT "/pe-offers-%d", (int)getpid());
		if (!mkdir(probe, 0755) || errno == EEXIST) {
			for (int i = 0; pe_cgroup_keys[i]; i++) {
				snprintf(path, sizeof(path), "%s/%s", probe, pe_cgroup_keys[i]);
				if (!access(path, W_OK))
					line_word(l, "%s", pe_cgroup_keys[i]);
			}
			rmdir(probe);
		}
	}
	line_end(l);
}

static long long mem_total_kb(void)
{
	char text[4096];
	const char *p;

	if (gl_read_file("/proc/meminfo", text, sizeof(text)) || !(p = strstr(text, "MemTotal:")))
		return 0;
	return strtoll(p + 9, NULL, 10);
}

int pe_offers(char *buf, size_t len)
{
	struct lines l = { .buf = buf, .len = len };
	int kb[MAX_MTHP], nsizes = mthp_sizes(kb, MAX_MTHP);
	char key[48], path[160];

	buf[0] = '\0';
	line_start(&l, "knobs");
	for (int i = 0; plain_knobs[i]; i++)
		if (!env_knob_path(plain_knobs[i], path, sizeof(path)) && !access(path, R_OK))
			line_word(&l, "%s", plain_knobs[i]);
	for (int i = 0; i < nsizes; i++)
		line_word(&l, "mthp.%dkB.enabled", kb[i]);
	line_end(&l);
	tried_line(&l, "zswap.compressor", compressors);
	tried_line(&l, "zswap.zpool", zpools);
	for (int i = 0; thp_choices[i]; i++)
		choice_line(&l, thp_choices[i]);
	line_start(&l, "mthp.sizes");
	for (int i = 0; i < nsizes; i++)
		line_word(&l, "%dkB", kb[i]);
	line_end(&l);
	for (int i = 0; i < nsizes; i++) {
		snprintf(key, sizeof(key), "mthp.%dkB.enabled", kb[i]);
		choice_line(&l, key);
	}
	cgroup_line(&l);
	line_start(&l, "cpus");
	line_word(&l, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
	line_end(&l);
	line_start(&l, "memory");
	line_word(&l, "%lld", mem_total_kb() * 1024);
	line_end(&l);
	return l.n;
}
