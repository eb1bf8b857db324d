// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swaptest's environment (swaptest-env.h): the memcg and zswap settings a
 * run changes and restores, the counters it reports, and the fault state
 * it arms and disarms on the device.
 */
#define _GNU_SOURCE
#include "swaptest-env.h"
#include "../lib/guestlib.h"
#include "../lib/guestlib-nvme.h"
#include "../lib/ktap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define NVME_CTRL "/dev/nvme0"

/* ------------------------------------------------------------ counters */

static const char *const memstat_keys[] = {
    "anon", "swapcached", "zswap", "zswapped", "zswpin", "zswpout", "zswpwb",
    "pswpin", "pswpout", "pgscan", "pgsteal", "workingset_refault_anon",
    "workingset_activate_anon", "workingset_restore_anon",
};
#define N_MEMSTAT (sizeof(memstat_keys) / sizeof(memstat_keys[0]))

void report_memstat(const struct options *o, const char *prefix)
{
    gl_memcg_report(o->cgroup, prefix, memstat_keys, N_MEMSTAT);
}

long long swapcached_pages(const struct options *o, const struct gl_vmstat *now)
{
    long long sc = gl_memcg_stat(o->cgroup, "swapcached");

    return sc >= 0 ? sc / (long long)GL_PAGE_SIZE : now->v[VM_NR_SWAPCACHED];
}

void zswap_max_restore(const struct options *o)
{
    gl_memcg_set(o->cgroup, "memory.zswap.max", o->zswap_max);
}

/* ------------------------------------------------------------ fault arming */

static int fault_dev_is_syncblk(const struct options *o)
{
    struct stat st;

    if (!strcmp(o->fault_dev, "syncblk")) {
        return 1;
    }
    if (!strcmp(o->fault_dev, "nvme")) {
        return 0;
    }
    return stat("/sys/block/syncblk0", &st) == 0;
}

static int syncblk_state_path(char *buf, size_t len)
{
    static const char *const cands[] = {
        "/sys/block/syncblk0/fault_state",
        "/sys/block/syncblk0/device/fault_state",
        "/sys/block/syncblk0/queue/fault_state",
    };
    struct stat st;

    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
        if (stat(cands[i], &st) == 0) {
            snprintf(buf, len, "%s", cands[i]);
            return 0;
        }
    }
    return -ENOENT;
}

/*
 * Set the device's fault-engine state: NVMe through faultctl's library call
 * (vendor feature 0xC0, prints "# nvme state N (was M)"), syncblk through its
 * sysfs file.
 */
static int fault_set_state(const struct options *o, long state)
{
    char num[24], path[256];
    int ret, fd;

    if (fault_dev_is_syncblk(o)) {
        snprintf(num, sizeof(num), "%ld", state);
        ret = syncblk_state_path(path, sizeof(path));
        if (!ret) {
            ret = gl_write_file(path, num);
        }
        if (ret) {
            ktap_diag("syncblk fault_state: %s", strerror(-ret));
            return ret;
        }
        ktap_diag("fault state %ld set via %s", state, path);
        return 0;
    }
    fd = open(NVME_CTRL, O_RDONLY);
    if (fd < 0) {
        ret = -errno;
        ktap_diag("open " NVME_CTRL ": %s", strerror(-ret));
        return ret;
    }
    ret = gl_faultctl_set_state(fd, (uint32_t)state);
    close(fd);
    if (ret) {
        ktap_diag("NVMe Set Features 0xC0 failed: %s", ret < 0 ? strerror(-ret) :
                  "device returned an NVMe status (no fault layer?)");
        return ret < 0 ? ret : -EIO;
    }
    ktap_diag("fault state %ld set by faultctl", state);
    return 0;
}

/* The rule hits after a disarm ("# rule NAME hits N"), as `faultctl hits`. */
static void fault_hits_report(const struct options *o)
{
    int fd;

    if (fault_dev_is_syncblk(o)) {
        return;
    }
    fd = open(NVME_CTRL, O_RDONLY);
    if (fd >= 0) {
        gl_faultctl_print_hits(fd);
        close(fd);
    }
}

static int armed;

int fault_left_armed(void)
{
    return armed;
}

void arm(const struct options *o, const char *where)
{
    int err;

    if (o->arm_state < 0) {
        return;
    }
    err = fault_set_state(o, o->arm_state);
    ktap_check(!err, ktap_name("fault state %ld armed %s", o->arm_state, where),
               err ? "error %d" : NULL, err);
    armed = !err;
}

void disarm(const struct options *o, const char *where)
{
    int err;

    if (o->arm_state < 0 || !o->disarm) {
        return;
    }
    err = fault_set_state(o, 0);
    ktap_check(!err, ktap_name("fault state 0 (disarmed) %s", where), err ? "error %d" : NULL,
               err);
    armed = 0;
    fault_hits_report(o);
}

/* ------------------------------------------------------------ setup/teardown */

void global_setup(const struct options *o, struct global_env *env)
{
    char buf[256], *s, *e;

    *env = (struct global_env){ .wb_shrinker = "Y" };
    /* THP: "always [madvise] never" -> remember the bracketed one. */
    if (gl_read_file(THP_ENABLED, buf, sizeof(buf)) == 0 && (s = strchr(buf, '[')) &&
        (e = strchr(s, ']'))) {
        *e = '\0';
        snprintf(env->old_thp, sizeof(env->old_thp), "%s", s + 1);
    }
    gl_write_file(THP_ENABLED, "never");
    gl_read_file(ZSWAP_PARAM "enabled", env->old_zswap, sizeof(env->old_zswap));
    gl_read_file(ZSWAP_PARAM "shrinker_enabled", env->old_shrinker, sizeof(env->old_shrinker));
    if (o->zswap >= 0) {
        gl_write_file(ZSWAP_PARAM "enabled", o->zswap ? "Y" : "N");
    }
    if (o->shrinker >= 0) {
        gl_write_file(ZSWAP_PARAM "shrinker_enabled", o->shrinker ? "Y" : "N");
    }
    gl_read_file(ZSWAP_PARAM "shrinker_enabled", env->wb_shrinker, sizeof(env->wb_shrinker));
    gl_read_file(ZSWAP_PARAM "enabled", buf, sizeof(buf));
    ktap_diag("zswap enabled %s shrinker %s", buf,
              gl_read_file(ZSWAP_PARAM "shrinker_enabled", buf + 8, 8) == 0 ? buf + 8 : "?");
}

void global_teardown(const struct global_env *env)
{
    if (env->old_thp[0]) {
        gl_write_file(THP_ENABLED, env->old_thp);
    }
    if (env->old_zswap[0]) {
        gl_write_file(ZSWAP_PARAM "enabled", env->old_zswap);
    }
    if (env->old_shrinker[0]) {
        gl_write_file(ZSWAP_PARAM "shrinker_enabled", env->old_shrinker);
    }
}
