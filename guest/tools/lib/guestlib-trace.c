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

/*
 * A kretprobe whose hist is keyed on the return value: "r:GROUP/EVENT SYM
 * ret=$retval:s32" and "hist:keys=ret". Its hist lines read
 * "{ ret:        -12 } hitcount:          3".
 */
#define GL_HIST_RET_TRIGGER "hist:keys=ret"

int gl_kretprobe_hist_add(const char *group, const char *event, const char *sym)
{
    char cmd[256], path[256];
    int err;

    snprintf(cmd, sizeof(cmd), "r:%s/%s %s ret=$retval:s32", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    if (err) {
        return err;
    }
    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    return gl_write_file(path, GL_HIST_RET_TRIGGER);
}

void gl_kretprobe_hist_remove(const char *group, const char *event)
{
    char cmd[256], path[256];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    gl_write_file(path, "!" GL_HIST_RET_TRIGGER);
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

int gl_hist_read_ret(const char *path, struct gl_ret_hist *h)
{
    FILE *f = fopen(path, "r");
    char line[512];

    memset(h, 0, sizeof(*h));
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *k = strstr(line, "{ ret:");
        char *hc = strstr(line, "hitcount:");
        long long n, ret;

        /* not the "# trigger info: hist:keys=ret:vals=hitcount..." header */
        if (line[0] == '#' || !k || !hc) {
            continue;
        }
        ret = strtoll(k + strlen("{ ret:"), NULL, 10);
        n = strtoll(hc + strlen("hitcount:"), NULL, 10);
        h->total += n;
        if (h->n < GL_RET_HIST_MAX) {
            h->ret[h->n] = ret;
            h->count[h->n] = n;
            h->n++;
        } else {
            h->dropped += n;
        }
    }
    fclose(f);
    return 0;
}

long long gl_ret_hist_count(const struct gl_ret_hist *h, long long ret)
{
    for (int i = 0; i < h->n; i++) {
        if (h->ret[i] == ret) {
            return h->count[i];
        }
    }
    return 0;
}

/*
 * The stack key's name: "common_stacktrace" since 6.5, which still takes
 * "stacktrace" (the only name before it).
 */
static const char *const stack_triggers[] = {
    "hist:keys=common_stacktrace", "hist:keys=stacktrace",
};

int gl_kprobe_stack_add(const char *group, const char *event, const char *sym)
{
    char cmd[256], path[256];
    int err;

    snprintf(cmd, sizeof(cmd), "p:%s/%s %s", group, event, sym);
    err = gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
    if (err) {
        return err;
    }
    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    for (size_t i = 0; i < sizeof(stack_triggers) / sizeof(stack_triggers[0]); i++) {
        err = gl_write_file(path, stack_triggers[i]);
        if (!err) {
            break;
        }
    }
    return err;
}

void gl_kprobe_stack_remove(const char *group, const char *event)
{
    char cmd[256], path[256], trig[64];

    gl_trace_event_path(path, sizeof(path), group, event, "trigger");
    for (size_t i = 0; i < sizeof(stack_triggers) / sizeof(stack_triggers[0]); i++) {
        snprintf(trig, sizeof(trig), "!%s", stack_triggers[i]);
        gl_write_file(path, trig);
    }
    snprintf(cmd, sizeof(cmd), "-:%s/%s", group, event);
    gl_write_file(GL_TRACEFS "/kprobe_events", cmd);
}

/* A frame line "  zswap_store+0x1c5/0x7e0" (or "NAME.isra.0+0x...") is of @fn. */
static bool frame_is(const char *line, const char *fn)
{
    size_t len = strlen(fn);

    line += strspn(line, " \t");
    return !strncmp(line, fn, len) && (line[len] == '+' || line[len] == '.');
}

/*
 * Entries read
 *   { common_stacktrace:
 *            __swap_writepage+0x5/0x80
 *            ...
 *   } hitcount:          3
 * innermost frame first, one a line (at most 16).
 */
int gl_hist_read_frames(const char *path, const char *const *frames, size_t n,
                        long long *hits, long long *total)
{
    FILE *f = fopen(path, "r");
    char line[512];
    bool in_entry = false;
    long first = -1;        /* the entry's innermost frame among @frames */

    for (size_t i = 0; i < n; i++) {
        hits[i] = 0;
    }
    if (total) {
        *total = 0;
    }
    if (!f) {
        return -errno;
    }
    while (fgets(line, sizeof(line), f)) {
        char *hc = strstr(line, "hitcount:");

        if (line[0] == '{') {
            in_entry = true;
            first = -1;
        } else if (in_entry && line[0] == '}' && hc) {
            long long c = strtoll(hc + strlen("hitcount:"), NULL, 10);

            if (first >= 0) {
                hits[first] += c;
            }
            if (total) {
                *total += c;
            }
            in_entry = false;
        } else if (in_entry && first < 0) {
            for (size_t i = 0; i < n && first < 0; i++) {
                if (frame_is(line, frames[i])) {
                    first = i;
                }
            }
        }
    }
    fclose(f);
    return 0;
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
