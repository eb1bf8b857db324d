// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * guestlib-kcov.c on the host: the edge map, its base64, a traced thread,
 * and what a process started with FAULTLINE_KCOV=1 prints at exit (its map
 * on a kernel with kcov, one "unavailable" line without; nothing from a
 * forked child).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guestlib.h"

static int n_tests, n_failed;

static void ok(int cond, const char *what)
{
    n_tests++;
    n_failed += !cond;
    printf("%s %d %s\n", cond ? "ok" : "not ok", n_tests, what);
}

static uint8_t map[GL_KCOV_MAP_BITS / 8];

static void edges(void)
{
    const unsigned long ab[] = { 0xffffffff81000010UL, 0xffffffff81000020UL,
                                 0xffffffff81000010UL, 0xffffffff81000020UL };
    size_t added;

    memset(map, 0, sizeof(map));
    /* (start, a), (a, b), (b, a), then (a, b) again: three edges */
    added = gl_kcov_add_trace(map, ab, 4);
    ok(added == 3 && gl_kcov_map_bits(map) == 3, "a b a b is three edges");
    ok(gl_kcov_add_trace(map, ab, 4) == 0, "the same trace again adds none");
    ok(gl_kcov_add_trace(map, ab + 1, 1) == 1, "b from the start is a new edge");
}

static void base64(void)
{
    static const struct { const char *in; size_t len; const char *out; } v[] = {
        { "", 0, "" }, { "M", 1, "TQ==" }, { "Ma", 2, "TWE=" }, { "Man", 3, "TWFu" },
        { "\xff\xfe\x00\x01", 4, "//4AAQ==" },
    };
    char out[16];

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        gl_kcov_base64((const uint8_t *)v[i].in, v[i].len, out);
        ok(!strcmp(out, v[i].out), "base64 test vector");
    }
}

static void *mark(void *arg)
{
    *(int *)arg = 42;
    return arg;
}

static void traced_thread(void)
{
    pthread_t th;
    int x = 0;
    void *ret = NULL;

    ok(gl_thread_create_traced(&th, mark, &x) == 0 && pthread_join(th, &ret) == 0 &&
       x == 42 && ret == &x, "a traced thread runs its function, its value joins");
}

static int count(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The output of this test run as "child" (or "fork") with FAULTLINE_KCOV=1. */
static char *run_self(const char *mode)
{
    static char buf[32768];
    int fds[2];
    pid_t pid;
    size_t n = 0;
    ssize_t r;

    if (pipe(fds))
        return NULL;
    pid = fork();
    if (pid == 0) {
        char *argv[] = { "test-guestlib-kcov", (char *)mode, NULL };
        char *envp[] = { "FAULTLINE_KCOV=1", NULL };
        dup2(fds[1], 1);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(fds[1]);
    while (n < sizeof(buf) - 1 && (r = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return buf;
}

static void at_exit(void)
{
    char *out = run_self("child");
    int have_kcov = access("/sys/kernel/debug/kcov", R_OK | W_OK) == 0;

    if (have_kcov) {
        long n = -1;
        char *line = out ? strstr(out, "# kcov edges ") : NULL;
        if (line)
            n = strtol(line + strlen("# kcov edges "), NULL, 10);
        ok(n > 0 && strstr(out, "# kcov-map ") != NULL, "kcov: the map of the kernel's edges");
    } else {
        ok(out && strstr(out, "# kcov unavailable: ") != NULL && !strstr(out, "kcov-map"),
           "no kcov here: one 'unavailable' line, no map");
    }
    out = run_self("fork");
    ok(out && strstr(out, "forked\n") && count(out, "# kcov") == (have_kcov ? 2 : 1),
       "a forked child prints nothing, its parent once");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "child")) {
        for (int i = 0; i < 1000; i++)
            getppid();
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "fork")) {
        pid_t pid = fork();
        if (pid == 0)
            exit(0);        /* atexit handlers run here too */
        waitpid(pid, NULL, 0);
        printf("forked\n");
        return 0;
    }
    printf("TAP version 13\n1..11\n");
    edges();
    base64();
    traced_thread();
    at_exit();
    return n_failed ? 1 : 0;
}
