// SPDX-License-Identifier: GPL-2.0-or-later
/* kprobes, hist triggers and /proc/kallsyms for guest tools; see guestlib.h. */
#define _GNU_SOURCE
#include "guestlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gl_ctx_names[GL_CTX__N] = { "hardirq", "softirq", "task" };

void gl_trace_event_path(char *buf, size_t len, const char *group, const char *event,
                         const char *file)
{
    snprintf(buf, len, GL_TRACEFS "/events/%s/%s/%s", group, event, file);
}

/*
 * Lines such as "{ common_flags: 19 } hitcount:          3" (keys with .hex
 * are printed in hex without "0x"), then a "Hits: N" total.
 */
int gl_hist_read(const char *path, struct gl_hist *h)
{
    FILE *f = fopen(path, "r");
    char line[512];

    memset(h, 0, sizeof(*h));
    h->hits = -1;
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *fl = strstr(line, "common_flags:");
        char *hc = strstr(line, "hitcount:");
        unsigned long long flags, n;

        if (!fl || !hc) {
            if (sscanf(line, " Hits: %llu", &n) == 1) {
                h->hits = n;
            }
            continue;
        }
        flags = strtoull(fl + strlen("common_flags:"), NULL, 16);
        n = strtoull(hc + strlen("hitcount:"), NULL, 10);
        if (flags & GL_TRACE_FLAG_HARDIRQ) {
            h->ctx[GL_CTX_HARDIRQ] += n;
        } else if (flags & GL_TRACE_FLAG_SOFTIRQ) {
            h->ctx[GL_CTX_SOFTIRQ] += n;
        } else {
            h->ctx[GL_CTX_TASK] += n;
        }
        h->sum += n;
    }
    fclose(f);
    return 0;
}

int gl_hist_trigger(const char *group, const char *event, bool on)
{
    char path[256];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    return gl_write_file(path, on ? GL_HIST_CTX_TRIGGER : "!" GL_HIST_CTX_TRIGGER);
}

int gl_kprobe_hist_add(const char *group, const char *event, const char *sym)
{
    char cmd[256];
    int err;

    snprintf(cmd, sizeof(cmd), "p:%s/%s %s", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    return err ? err : gl_hist_trigger(group, event, true);
}

void gl_kprobe_hist_remove(const char *group, const char *event)
{
    char cmd[256];

    gl_hist_trigger(group, event, false);
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

void gl_kallsyms_resolve(const char *const *want, char (*got)[96], size_t n)
{
    FILE *f = fopen("/proc/kallsyms", "r");
    char line[512], addr[32], type[8], name[256];

    for (size_t i = 0; i < n; i++) {
        got[i][0] = '\0';
    }
    if (!f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%31s %7s %255s", addr, type, name) != 3) {
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(want[i]);

            if (strncmp(name, want[i], len)) {
                continue;
            }
            if (!name[len] || (name[len] == '.' && !got[i][0])) {
                snprintf(got[i], sizeof(got[i]), "%.95s", name);
            }
        }
    }
    fclose(f);
}
