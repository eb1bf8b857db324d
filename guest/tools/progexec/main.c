// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * progexec run FILE [--bind DEV=TARGET]... [--allow-failed-read DEV]...
 *                   [--plant drop-write|stale-page|leak-slot] [--gate ON,OFF]
 * progexec serve PORT [--plant drop-write|stale-page|leak-slot]
 * progexec offers
 *
 * run: one program, the report on stdout; exit 0 pass, 1 fail, 2 refused or
 * bad usage (one line on stderr).  --gate: the program's rules were loaded at
 * QEMU start, gated on the engine state (gate.c); a one-sector read of
 * sector ON of every swap device opens the gate once the swap areas are on,
 * of sector OFF closes it after the last operation, and the report has the
 * channel's `ready` and `ops-done` lines around the operations.  serve:
 * serve.c's loop.  offers: the `offers` lines serve sends after its hello,
 * on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcov.h"
#include "offers.h"
#include "program.h"

#define USAGE "usage: progexec run FILE [--bind DEV=TARGET]... [--allow-failed-read DEV]... " \
	      "[--plant drop-write|stale-page|leak-slot] [--gate ON,OFF] | " \
	      "progexec serve PORT [--plant KIND] | progexec offers"
#define MAX_TEXT (1 << 20)

static int usage(const char *why)
{
	fprintf(stderr, "progexec: %s (%s)\n", why, USAGE);
	return 2;
}

/* The file's text, NUL-terminated; NULL with errno. */
static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = malloc(MAX_TEXT + 1);
	size_t n;

	if (!f || !buf) {
		if (f)
			fclose(f);
		free(buf);
		return NULL;
	}
	n = fread(buf, 1, MAX_TEXT + 1, f);
	fclose(f);
	if (n > MAX_TEXT || memchr(buf, 0, n)) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

/* The program's name: the file's base name, in the channel's alphabet. */
static void program_name(const char *path, char out[PE_PROGRAM_NAME_MAX])
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	int i;

	for (i = 0; base[i] && i < PE_PROGRAM_NAME_MAX - 1; i++)
		out[i] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
				base[i]) ? base[i] : '_';
	out[i] = 0;
	if (!i)
		strcpy(out, "program");
}

/* --plant KIND: 0 and *plant set, or -EINVAL for a kind there is not. */
static int parse_plant(const char *kind, enum pe_plant *plant)
{
	static const char *const plants[] = { "", "drop-write", "stale-page", "leak-slot" };
	enum pe_plant k;

	for (k = PE_PLANT_DROP_WRITE; k <= PE_PLANT_LEAK_SLOT; k++)
		if (!strcmp(kind, plants[k])) {
			*plant = k;
			return 0;
		}
	return -EINVAL;
}

/* --gate ON,OFF: two sector numbers. */
struct gate {
	struct pe_program *p;
	struct pe_report *r;
	long on, off;
};

static int parse_gate(const char *arg, struct gate *g)
{
	char *end;

	errno = 0;
	g->on = strtol(arg, &end, 10);
	if (errno || end == arg || *end != ',' || g->on < 0)
		return -EINVAL;
	arg = end + 1;
	g->off = strtol(arg, &end, 10);
	if (errno || end == arg || *end || g->off < 0 || g->off == g->on)
		return -EINVAL;
	return 0;
}

/* The swap areas are on: open the gate; a gate that cannot open refuses the
 * program (its rules would never apply). */
static int gate_ready(void *arg)
{
	struct gate *g = arg;
	char why[512];
	int rc = pe_gate_read(g->p, g->on, why, sizeof(why));

	if (rc) {
		pe_say(g->r, "refused %s %s", g->p->name, why);
		return rc;
	}
	pe_say(g->r, "ready %s", g->p->name);
	return 0;
}

/* The last operation returned: close the gate before the teardown. */
static int gate_ops_done(void *arg)
{
	struct gate *g = arg;
	char why[512];

	pe_say(g->r, "ops-done %s", g->p->name);
	if (pe_gate_read(g->p, g->off, why, sizeof(why)))
		fprintf(stderr, "progexec: %s (the rules stay on for the teardown)\n", why);
	return 0;
}

static int run(int argc, char **argv)
{
	struct pe_report report = { stdout, 0 };
	struct gate gate = { NULL, &report, -1, -1 };
	struct pe_hooks hooks = { gate_ready, gate_ops_done, &gate };
	char name[PE_PROGRAM_NAME_MAX], why[512];
	struct pe_program *p;
	enum pe_plant plant = PE_PLANT_NONE;
	char *text;
	int i, rc;

	if (argc < 3 || argv[2][0] == '-')
		return usage("run: no FILE");
	/* The options first: bad usage says so before anything is read. */
	for (i = 3; i < argc; i++) {
		if (i + 1 >= argc || (strcmp(argv[i], "--bind") && strcmp(argv[i], "--plant") &&
				      strcmp(argv[i], "--allow-failed-read") &&
				      strcmp(argv[i], "--gate")))
			return usage(i + 1 >= argc && argv[i][0] == '-' ? "an option without its value"
									  : "unknown option");
		if (!strcmp(argv[i], "--bind") && !strchr(argv[i + 1], '='))
			return usage("--bind takes DEV=TARGET");
		if (!strcmp(argv[i], "--plant") && parse_plant(argv[i + 1], &plant))
			return usage("--plant: unknown kind");
		if (!strcmp(argv[i], "--gate") && parse_gate(argv[i + 1], &gate))
			return usage("--gate takes ON,OFF: two different sector numbers");
		i++;
	}
	text = read_text(argv[2]);
	if (!text) {
		fprintf(stderr, "progexec: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	program_name(argv[2], name);
	p = pe_program_parse(name, text, why, sizeof(why));
	free(text);
	if (!p) {
		printf("refused %s %s\n", name, why);
		return 2;
	}
	p->plant = plant;
	for (i = 3; i < argc; i += 2) {
		char *eq = strchr(argv[i + 1], '=');

		rc = 0;
		if (!strcmp(argv[i], "--bind")) {
			*eq = 0;
			rc = pe_program_bind(p, argv[i + 1], eq + 1, why, sizeof(why));
		} else if (!strcmp(argv[i], "--allow-failed-read")) {
			rc = pe_program_allow_failed_read(p, argv[i + 1], why, sizeof(why));
		}
		if (rc) {
			pe_program_free(p);
			return usage(why);
		}
	}
	pe_kcov_setup();        /* none: no cover lines */
	gate.p = p;
	rc = pe_program_run(p, gate.on >= 0 ? &hooks : NULL, &report);
	pe_program_free(p);
	return rc == PE_PASS ? 0 : rc == PE_FAIL ? 1 : 2;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return run(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "serve")) {
		/* --plant: every program served runs planted (the fuzzer's self-test). */
		enum pe_plant plant = PE_PLANT_NONE;

		if (argc == 3)
			return pe_serve(argv[2], plant);
		if (argc == 5 && !strcmp(argv[3], "--plant"))
			return parse_plant(argv[4], &plant) ? usage("--plant: unknown kind")
							    : pe_serve(argv[2], plant);
		return usage("serve takes PORT [--plant KIND]");
	}
	if (argc == 2 && !strcmp(argv[1], "offers")) {
		static char offers[1 << 16];

		pe_offers(offers, sizeof(offers));
		fputs(offers, stdout);
		return 0;
	}
	return usage(argc < 2 ? "no command" : "unknown command");
}
