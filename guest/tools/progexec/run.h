/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Between the coordinator (run.c: reads the program, keeps the model, writes
 * the report) and the actors (run-actor.c: the program's processes and
 * threads, each a command loop on a socket).  Commands and replies are
 * fixed-size headers with an array after them; a fork's or thread's reply
 * carries the coordinator's end of the new actor's socket (SCM_RIGHTS).
 */
#ifndef PE_RUN_H
#define PE_RUN_H

#include <stdint.h>
#include <sys/types.h>

#include "program.h"

enum pe_cmd_kind {
	PE_CMD_OP,              /* run operation `op` */
	PE_CMD_EXIT,            /* the process exits (no reply: its socket closes) */
	PE_CMD_HIDE,            /* --plant leak-slot: fork the hidden process */
};

struct pe_cmd {
	int32_t kind;
	int32_t op;             /* index in the program */
	int32_t plant;          /* enum pe_plant for this operation, or 0 */
	uint32_t npages;        /* read: struct pe_owed follow, one a page */
};

/* What a page owes a read: @v, or (@torn) a page written meanwhile whose
 * words are each @v's or @alt's (concurrent-write). */
struct pe_owed {
	uint16_t v, alt;
	uint32_t torn;
};

#define PE_SEEN_TORN (-3)       /* every word @v's or @alt's, the page neither */
#define PE_SEEN_NONE (-1)       /* the page holds no version of its (O, P) */
#define PE_SEEN_FAULT (-2)      /* SIGBUS (mapping) or an I/O error (file); word: errno */

/* A page that did not hold what the command said it owes (read), or whose
 * access faulted (read or write). */
struct pe_exc {
	uint32_t page;          /* in the object */
	int32_t seen;           /* version, PE_SEEN_NONE or PE_SEEN_FAULT */
	uint32_t word;          /* first wrong word, or errno of a fault */
	uint32_t pad;
	uint64_t got, want;
};

struct pe_reply {
	int32_t op;
	int32_t err;            /* 0 or -errno of the call named in `call` */
	char call[16];
	uint32_t nexc;          /* struct pe_exc follow */
	int32_t pid;            /* fork, thread, hide: the process */
	uint32_t pages;         /* pages the operation touched */
	int32_t has_fd;         /* an fd rides along (SCM_RIGHTS) */
};

/* Where tmpfs objects are made: one mount a huge= policy ("" the default). */
#define PE_TMPFS_POLICIES 5
extern char pe_tmpfs_dir[PE_TMPFS_POLICIES][64];
int pe_tmpfs_policy(const char *huge);

/* run-actor.c: become actor @self (a process) on socket @fd; never returns. */
void pe_actor_main(const struct pe_program *p, int self, int fd) __attribute__((noreturn));

/* Whole-buffer socket I/O: 0, or -errno (-EPIPE at EOF). */
int pe_send(int fd, const void *buf, size_t len, int pass_fd);
int pe_recv(int fd, void *buf, size_t len, int *got_fd);

#endif /* PE_RUN_H */
