// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * faultctl: control faultline fault injection from inside the guest.
 *
 *   faultctl nvme DEV state [N]       get (or set) the engine state
 *   faultctl nvme DEV hits            per-rule hit counts (vendor log 0xC0)
 *   faultctl nvme DEV errlog [--expect-rule NAME[,NAME...]]
 *                                     Error Information log summary; with
 *                                     --expect-rule: KTAP check that the
 *                                     error count equals the rules' hits
 *   faultctl syncblk ATTR [VALUE]     read (write) /sys/block/syncblk0/ATTR
 *
 * DEV is the NVMe controller character device (/dev/nvme0) or a namespace
 * block device.  Output lines are KTAP diagnostics ("# key value").
 * Exit status: 0 ok, 1 failed check or I/O error, 2 usage, 4 not present.
 *
 * The NVMe commands go through libnvme (guestlib-nvme.c), shared with
 * swaptest's in-band arming.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libnvme.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/guestlib-nvme.h"
#include "lib/ktap.h"

static int cmd_state(int fd, int argc, char **argv)
{
    if (argc > 0) {
        char *end;
        unsigned long v = strtoul(argv[0], &end, 0);

        if (!argv[0][0] || *end || v > UINT32_MAX) {
            fprintf(stderr, "faultctl: bad state '%s'\n", argv[0]);
            return 2;
        }
        return gl_faultctl_set_state(fd, v) ? 1 : 0;
    }
    return gl_faultctl_print_state(fd) ? 1 : 0;
}

/* errlog --expect-rule's one result, whether a rule is missing or not. */
static const char *errlog_name(const char *rules)
{
    return ktap_name("errlog error count == hits of rules %s (> 0)", rules);
}

/* Sum of the hits of the comma-separated rules @names; -1 if one is missing. */
static int rules_hits(int fd, const char *names, uint64_t *hits)
{
    NvmeFaultHitsHdr *log;
    char *list, *save = NULL;
    int ret = gl_nvme_fault_hits(fd, &log);

    if (ret) {
        gl_nvme_perror("Get Log Page 0xc0", ret);
        return -1;
    }
    list = strdup(names);
    *hits = 0;
    for (char *r = strtok_r(list, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
        const NvmeFaultHitsEntry *e = gl_nvme_fault_rule(log, r);

        if (!e) {
            ktap_check(0, errlog_name(names), "no rule '%s' in log 0xC0", r);
            ret = -1;
            break;
        }
        *hits += le64toh(e->hits);
    }
    free(list);
    free(log);
    return ret;
}

static int cmd_errlog(int fd, int argc, char **argv)
{
    const char *expect = NULL;
    struct nvme_error_log_page *log;
    unsigned int entries, valid = 0;
    uint64_t newest = 0;
    struct { uint16_t status; unsigned int n; } st[16];
    unsigned int nst = 0;
    int ret;

    if (argc == 2 && !strcmp(argv[0], "--expect-rule")) {
        expect = argv[1];
    } else if (argc) {
        fprintf(stderr, "faultctl: errlog [--expect-rule NAME]\n");
        return 2;
    }
    if (expect) {
        ktap_header(1);     /* one result: a missing rule or the comparison */
    }
    ret = gl_nvme_error_log(fd, &log, &entries);
    if (ret) {
        gl_nvme_perror("Error Information log", ret);
        return 1;
    }
    for (unsigned int i = 0; i < entries; i++) {
        const struct nvme_error_log_page *e = &log[i];
        uint64_t count = le64toh(e->error_count);
        /* Status Field without the phase tag bit (as nvme-cli's status_field >> 1) */
        uint16_t status = le16toh(e->status_field) >> 1;
        unsigned int j;

        if (!count) {
            continue;
        }
        valid++;
        if (count > newest) {
            newest = count;
        }
        for (j = 0; j < nst && st[j].status != status; j++) {
            ;
        }
        if (j == nst && nst < 16) {
            st[nst].status = status;
            st[nst++].n = 0;
        }
        if (j < nst) {
            st[j].n++;
        }
        if (i < 8) {
            printf("# errlog[%u] count %" PRIu64 " sqid %u cid %u status "
                   "0x%x lba %" PRIu64 " nsid %u\n", i, count, le16toh(e->sqid),
                   le16toh(e->cmdid), status, (uint64_t)le64toh(e->lba), le32toh(e->nsid));
        }
    }
    free(log);
    printf("# errlog page_entries %u\n", entries);
    printf("# errlog entries %u\n", valid);
    printf("# errlog error_count %" PRIu64 "\n", newest);
    for (unsigned int j = 0; j < nst; j++) {
        printf("# errlog status_0x%x %u\n", st[j].status, st[j].n);
    }
    if (expect) {
        uint64_t hits;

        if (rules_hits(fd, expect, &hits)) {
            return 1;
        }
        ktap_check(hits > 0 && hits == newest, errlog_name(expect),
                   "error count %" PRIu64 ", rules' hits %" PRIu64, newest, hits);
        return ktap_failed ? 1 : 0;
    }
    return 0;
}

static int cmd_syncblk(int argc, char **argv)
{
    char path[256], buf[256];
    FILE *f;

    if (argc < 1 || argc > 2 || strchr(argv[0], '/')) {
        fprintf(stderr, "faultctl: syncblk ATTR [VALUE]\n");
        return 2;
    }
    snprintf(path, sizeof(path), "/sys/block/syncblk0/%s", argv[0]);
    if (access(path, F_OK)) {
        printf("# syncblk %s not present\n", argv[0]);
        return 4;
    }
    f = fopen(path, argc == 2 ? "w" : "r");
    if (!f) {
        perror(path);
        return 1;
    }
    if (argc == 2) {
        int bad = fprintf(f, "%s\n", argv[1]) < 0;

        bad |= fclose(f) != 0;
        if (bad) {
            perror(path);
            return 1;
        }
        printf("# syncblk %s set %s\n", argv[0], argv[1]);
        return 0;
    }
    if (!fgets(buf, sizeof(buf), f)) {
        buf[0] = 0;
    }
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    printf("# syncblk %s %s\n", argv[0], buf);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: faultctl nvme DEV state [N]\n"
            "       faultctl nvme DEV hits\n"
            "       faultctl nvme DEV errlog [--expect-rule NAME]\n"
            "       faultctl syncblk ATTR [VALUE]\n");
}

int main(int argc, char **argv)
{
    int fd, ret;

    if (argc >= 2 && !strcmp(argv[1], "syncblk")) {
        return cmd_syncblk(argc - 2, argv + 2);
    }
    if (argc < 4 || strcmp(argv[1], "nvme")) {
        usage();
        return 2;
    }
    fd = open(argv[2], O_RDONLY);
    if (fd < 0) {
        int err = errno;    /* perror may change errno */

        perror(argv[2]);
        return err == ENOENT ? 4 : 1;
    }
    if (!strcmp(argv[3], "state") && argc <= 5) {
        ret = cmd_state(fd, argc - 4, argv + 4);
    } else if (!strcmp(argv[3], "hits") && argc == 4) {
        ret = gl_faultctl_print_hits(fd) ? 1 : 0;
    } else if (!strcmp(argv[3], "errlog")) {
        ret = cmd_errlog(fd, argc - 4, argv + 4);
    } else {
        usage();
        ret = 2;
    }
    close(fd);
    return ret;
}
