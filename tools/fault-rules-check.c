/*
 * fault-rules-check: validate fault rule files with the engine's own parser
 * (hw/fault/fault-parse.c), on the host, without QEMU.
 *
 *   fault-rules-check FILE...     ("-" reads standard input)
 *
 * Prints "FILE: LINE:COL: message" for every file the fault-injector would
 * reject, nothing for good ones.  Exit status: 0 all valid, 1 some file
 * has a rule error, 2 usage or I/O error.  The launcher runs it on every
 * scenario's rules before it builds or boots anything.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault-engine.h"

/* Larger than any rules file the fault-injector property should be fed. */
#define RULES_MAX (16u << 20)

/*
 * Read all of @f into a NUL-terminated buffer; NULL with errno set on
 * failure (EFBIG: larger than RULES_MAX).  *@nul is the offset of the first
 * NUL byte in the data, or @len when there is none.
 */
static char *read_all(FILE *f, size_t *len, size_t *nul)
{
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap + 1), *bigger;

    if (!buf) {
        return NULL;
    }
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            if (cap >= RULES_MAX) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            bigger = realloc(buf, cap + 1);
            if (!bigger) {
                free(buf);
                return NULL;
            }
            buf = bigger;
        }
    }
    if (ferror(f)) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    *nul = strlen(buf);
    return buf;
}

/* Line and column (1-based) of byte @off in @text. */
static void position(const char *text, size_t off, size_t *line, size_t *col)
{
    size_t i;

    *line = 1;
    *col = 1;
    for (i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* 0 valid, 1 rule error (printed), 2 I/O error (printed). */
static int check_file(const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    char err[256];
    size_t len, nul, line, col;
    char *text;

    if (!f) {
        fprintf(stderr, "fault-rules-check: %s: %s\n", path, strerror(errno));
        return 2;
    }
    text = read_all(f, &len, &nul);
    if (f != stdin) {
        fclose(f);
    }
    if (!text) {
        fprintf(stderr, "fault-rules-check: %s: %s\n", path,
                errno == EFBIG ? "larger than 16 MiB" : strerror(errno));
        return 2;
    }
    if (nul < len) {
        /* The property is a C string: the engine would never see the rest. */
        position(text, nul, &line, &col);
        printf("%s: %zu:%zu: NUL byte in rule text\n", path, line, col);
        free(text);
        return 1;
    }
    if (fe_engine_check_rules(text, err, sizeof(err)) < 0) {
        printf("%s: %s\n", path, err);
        free(text);
        return 1;
    }
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    int i, worst = 0, r;

    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: fault-rules-check FILE... (\"-\" reads stdin)\n"
                "Prints FILE: LINE:COL: message for each invalid rules file; "
                "exit 0 valid, 1 invalid, 2 error.\n");
        return argc < 2 ? 2 : 0;
    }
    for (i = 1; i < argc; i++) {
        r = check_file(argv[i]);
        worst = r > worst ? r : worst;
    }
    fflush(stdout);
    return worst;
}
