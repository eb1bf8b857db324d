// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * `progexec serve PORT`: programs from the host over a virtio-serial port,
 * one after another (docs/programs.md, The executor and its channel).
 *
 * A message the loop does not expect where it comes is answered with
 * `refused NAME REASON` (NAME `-` when no program is open) and the program
 * it belongs to is not run; the loop goes on.  `quit` or the host closing
 * the channel ends it (exit 0).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../lib/guestlib.h"
#include "kcov.h"
#include "offers.h"
#include "program.h"
#include "progexec.h"

#define PORTS_DIR "/sys/class/virtio-ports"
#define PORT_WAIT_MS 10000
#define MAX_BINDS 16
#define MAX_TEXT (1 << 20)
#define MAX_OFFERS (1 << 16)

/* One program as the host sends it, before `end`. */
struct serve_program {
	char name[PE_PROGRAM_NAME_MAX];
	char bind_dev[MAX_BINDS][PE_NAME_MAX], bind_target[MAX_BINDS][80];
	int nbinds;
	char allow_dev[MAX_BINDS][PE_NAME_MAX];
	int nallows;
	char *text;
	size_t len;
	char why[PE_LINE_MAX];  /* the first bad message: refused at `end` */
};

struct serve {
	FILE *in;
	struct pe_report report;
	const char *name;       /* of the program running (the hooks' lines) */
	bool closing;           /* quit or EOF seen: exit after this program */
	bool connected;         /* the host has read our hello */
	enum pe_plant plant;    /* serve --plant: set on every program */
	int fd, kmsg;
};

/*
 * The report's writes: a write to a port whose host is not connected blocks
 * in the kernel, so poll first.  Before the hello the host may not have
 * connected yet: wait for it.  After it, a hang-up means the host is gone:
 * what is left to say is dropped and the loop ends after this program.
 */
static ssize_t port_write(void *cookie, const char *buf, size_t len)
{
	struct serve *s = cookie;
	size_t done = 0;

	while (done < len && !(s->closing && s->connected)) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLOUT };
		ssize_t n;

		if (poll(&pfd, 1, s->connected ? -1 : 100) < 0 && errno != EINTR)
			break;
		if (!(pfd.revents & POLLOUT)) {
			if (s->connected && (pfd.revents & (POLLHUP | POLLERR)))
				s->closing = true;
			else if (!s->connected)
				gl_sleep_ms(50);        /* POLLHUP until the host connects */
			continue;
		}
		n = write(s->fd, buf + done, len - done);
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			break;
		if (n > 0)
			done += n;
	}
	return (ssize_t)len;    /* what cannot be delivered is dropped */
}

/* /dev/NAME of the virtio-serial port named @port_name ("vport0p1"). */
static int find_port(const char *port_name, char *dev, size_t len)
{
	char path[300], name[128];
	struct dirent *d;
	DIR *dir;

	for (int waited = 0; waited <= PORT_WAIT_MS; waited += 100) {
		dir = opendir(PORTS_DIR);
		while (dir && (d = readdir(dir))) {
			snprintf(path, sizeof(path), PORTS_DIR "/%s/name", d->d_name);
			if (d->d_name[0] != '.' && gl_read_file(path, name, sizeof(name)) == 0 &&
			    !strcmp(name, port_name)) {
				snprintf(dev, len, "/dev/%s", d->d_name);
				closedir(dir);
				return 0;
			}
		}
		if (dir)
			closedir(dir);
		/* The port is announced by the device a little after boot. */
		gl_sleep_ms(100);
	}
	return -ENOENT;
}

static void kmsg_say(struct serve *s, const char *name, const char *what)
{
	char line[160];
	int n;

	if (s->kmsg < 0)
		return;
	n = snprintf(line, sizeof(line), "progexec: program %s %s\n", name, what);
	if (write(s->kmsg, line, n) < 0)
		s->kmsg = -1;   /* the console loses the marker, nothing else */
}

/* The next line without its newline: 1, 0 at EOF, -EMSGSIZE for a line
 * over PE_LINE_MAX (the rest of it is skipped). */
static int next_line(struct serve *s, char *buf, size_t len)
{
	size_t n;

	if (!fgets(buf, len, s->in))
		return 0;
	n = strlen(buf);
	if (n && buf[n - 1] == '\n') {
		buf[--n] = '\0';
		return 1;
	}
	if (feof(s->in))
		return 1;       /* a last line without its newline */
	for (int c; (c = fgetc(s->in)) != EOF && c != '\n';)
		;
	return -EMSGSIZE;
}

/* The first word of @line in @word, the rest in *@rest. */
static void split(const char *line, char *word, size_t len, const char **rest)
{
	size_t n = strcspn(line, " ");

	snprintf(word, len, "%.*s", (int)(n < len ? n : len - 1), line);
	*rest = line[n] ? line + n + 1 : "";
}

/* Wait for @want; a quit, EOF or any other message stops the program. */
static int await(struct serve *s, const char *want)
{
	char line[PE_LINE_MAX + 2], word[16];
	const char *rest;
	int n = next_line(s, line, sizeof(line));

	if (n == 0 || s->closing) {
		s->closing = true;
		return -EPIPE;
	}
	split(line, word, sizeof(word), &rest);
	if (n > 0 && !strcmp(word, want))
		return 0;
	if (n > 0 && !strcmp(word, "quit")) {
		s->closing = true;
		return -ECANCELED;
	}
	pe_say(&s->report, "refused %s waiting for %s: %s", s->name, want,
	       n < 0 ? "a line over 4096 bytes" : word);
	return -EPROTO;
}

static int hook_ready(void *arg)
{
	struct serve *s = arg;

	pe_say(&s->report, "ready %s", s->name);
	return await(s, "start");
}

static int hook_ops_done(void *arg)
{
	struct serve *s = arg;

	pe_say(&s->report, "ops-done %s", s->name);
	return await(s, "teardown");
}

static bool valid_program_name(const char *name)
{
	size_t n = strlen(name);

	return n >= 1 && n < PE_PROGRAM_NAME_MAX &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* One message of a program being sent (bind, allow, text); a bad one is
 * remembered and refuses the program at `end`. */
static void collect(struct serve_program *sp, const char *word, const char *rest)
{
	char dev[64], extra[8], kind[32];
	size_t n = strlen(rest);

	if (sp->why[0])
		return;
	if (!strcmp(word, "text")) {
		if (sp->len + n + 2 > MAX_TEXT) {
			snprintf(sp->why, sizeof(sp->why), "the program is over %d bytes", MAX_TEXT);
			return;
		}
		memcpy(sp->text + sp->len, rest, n);
		sp->len += n;
		sp->text[sp->len++] = '\n';
		sp->text[sp->len] = '\0';
	} else if (!strcmp(word, "bind")) {
		char target[80];

		if (sp->nbinds == MAX_BINDS ||
		    sscanf(rest, "%63s %79s %7s", dev, target, extra) != 2 ||
		    strlen(dev) >= PE_NAME_MAX) {
			snprintf(sp->why, sizeof(sp->why), "bad bind: %.200s", rest);
			return;
		}
		snprintf(sp->bind_dev[sp->nbinds], PE_NAME_MAX, "%s", dev);
		snprintf(sp->bind_target[sp->nbinds++], 80, "%s", target);
	} else if (!strcmp(word, "allow")) {
		if (sp->nallows == MAX_BINDS ||
		    sscanf(rest, "%31s %63s %7s", kind, dev, extra) != 2 ||
		    strcmp(kind, "failed-read") || strlen(dev) >= PE_NAME_MAX) {
			snprintf(sp->why, sizeof(sp->why), "bad allow: %.200s", rest);
			return;
		}
		snprintf(sp->allow_dev[sp->nallows++], PE_NAME_MAX, "%s", dev);
	} else {
		snprintf(sp->why, sizeof(sp->why), "unexpected message before end: %.40s", word);
	}
}

/* `end`: parse, bind, run the program. */
static void run_program(struct serve *s, struct serve_program *sp)
{
	struct pe_hooks hooks = { .ready = hook_ready, .ops_done = hook_ops_done, .arg = s };
	char why[PE_LINE_MAX];
	struct pe_program *p;
	enum pe_outcome o;
	int err = 0;

	if (sp->why[0]) {
		pe_say(&s->report, "refused %s %s", sp->name, sp->why);
		return;
	}
	p = pe_program_parse(sp->name, sp->text, why, sizeof(why));
	if (!p) {
		pe_say(&s->report, "refused %s %s", sp->name, why);
		return;
	}
	for (int i = 0; i < sp->nbinds && !err; i++)
		err = pe_program_bind(p, sp->bind_dev[i], sp->bind_target[i], why, sizeof(why));
	for (int i = 0; i < sp->nallows && !err; i++)
		err = pe_program_allow_failed_read(p, sp->allow_dev[i], why, sizeof(why));
	if (err) {
		pe_say(&s->report, "refused %s %s", sp->name, why);
		pe_program_free(p);
		return;
	}
	p->plant = s->plant;
	s->name = sp->name;
	s->report.findings = 0;
	kmsg_say(s, sp->name, "start");
	o = pe_program_run(p, &hooks, &s->report);
	kmsg_say(s, sp->name, o == PE_PASS ? "end pass" : o == PE_FAIL ? "end fail" : "end refused");
	pe_program_free(p);
}

static void program_reset(struct serve_program *sp, const char *name)
{
	char *text = sp->text;

	memset(sp, 0, sizeof(*sp));
	sp->text = text;
	sp->text[0] = '\0';
	snprintf(sp->name, sizeof(sp->name), "%s", name);
}

static int serve_loop(struct serve *s, struct serve_program *sp)
{
	char line[PE_LINE_MAX + 2], word[16];
	bool open_program = false;
	const char *rest;

	while (!s->closing) {
		int n = next_line(s, line, sizeof(line));

		if (n == 0)
			break;
		if (n < 0) {
			/* Too long: the open program (if any) is refused at its end. */
			if (open_program && !sp->why[0])
				snprintf(sp->why, sizeof(sp->why), "a line over %d bytes", PE_LINE_MAX);
			else if (!open_program)
				pe_say(&s->report, "refused - a line over %d bytes", PE_LINE_MAX);
			continue;
		}
		split(line, word, sizeof(word), &rest);
		if (!strcmp(word, "quit"))
			break;
		if (!strcmp(word, "program")) {
			if (open_program)
				pe_say(&s->report, "refused %s no end before the next program",
				       sp->name);
			open_program = valid_program_name(rest);
			if (!open_program)
				pe_say(&s->report, "refused - bad program name: %.80s", rest);
			else
				program_reset(sp, rest);
		} else if (!open_program) {
			pe_say(&s->report, "refused - %.40s outside a program", word);
		} else if (!strcmp(word, "end")) {
			open_program = false;
			run_program(s, sp);
		} else {
			collect(sp, word, rest);
		}
	}
	return 0;
}

int pe_serve(const char *port_name, int plant)
{
	struct serve_program sp = { 0 };
	struct serve s = { .kmsg = -1, .plant = plant };
	char dev[300];
	struct utsname u;
	char *offers;
	int fd, err, noffers;
	FILE *out;

	err = find_port(port_name, dev, sizeof(dev));
	if (err) {
		fprintf(stderr, "progexec: no virtio-serial port named %s under " PORTS_DIR "\n",
			port_name);
		return 2;
	}
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "progexec: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	s.fd = fd;
	s.in = fdopen(fd, "r");
	out = fopencookie(&s, "w", (cookie_io_functions_t){ .write = port_write });
	sp.text = malloc(MAX_TEXT);
	if (!s.in || !out || !sp.text) {
		fprintf(stderr, "progexec: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	s.report.out = out;
	s.kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	uname(&u);
	pe_kcov_setup();        /* none: kcov=0, no cover lines */
	offers = malloc(MAX_OFFERS);
	noffers = offers ? pe_offers(offers, MAX_OFFERS) : 0;
	/* Blocks until the host is connected: then reads see its lines, and a
	 * read of 0 bytes means it has gone. */
	pe_say(&s.report, "hello progexec 1 kernel=%s kcov=%d offers=%d", u.release, pe_kcov_on(),
	       noffers);
	if (noffers) {
		fputs(offers, out);
		fflush(out);
	}
	free(offers);
	s.connected = true;
	err = serve_loop(&s, &sp);
	free(sp.text);
	fclose(out);
	fclose(s.in);
	if (s.kmsg >= 0)
		close(s.kmsg);
	return err ? 1 : 0;
}
