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
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/nvme_ioctl.h>

#include "ktap.h"

#define NVME_ADMIN_GET_LOG_PAGE 0x02
#define NVME_ADMIN_IDENTIFY     0x06
#define NVME_ADMIN_SET_FEATURES 0x09
#define NVME_ADMIN_GET_FEATURES 0x0a
#define FAULT_FID               0xc0
#define FAULT_LOG               0xc0
#define LOG_ERROR_INFO          0x01

struct hits_hdr {
    uint32_t version, nrules, entry_size, state;
};

struct hits_entry {
    char name[32];
    uint64_t matched, hits;
};

static int admin(int fd, struct nvme_passthru_cmd *cmd, uint32_t *result)
{
    int ret = ioctl(fd, NVME_IOCTL_ADMIN_CMD, cmd);

    if (ret < 0) {
        fprintf(stderr, "faultctl: admin opcode 0x%x: %s\n", cmd->opcode,
                strerror(errno));
        return -1;
    }
    if (ret > 0) {
        fprintf(stderr, "faultctl: admin opcode 0x%x: NVMe status 0x%x\n",
                cmd->opcode, ret);
        return -1;
    }
    if (result) {
        *result = cmd->result;
    }
    return 0;
}

static int get_log(int fd, uint8_t lid, void *buf, uint32_t len,
                   uint64_t off)
{
    uint32_t numd = len / 4 - 1;
    struct nvme_passthru_cmd cmd = {
        .opcode = NVME_ADMIN_GET_LOG_PAGE,
        .nsid = 0xffffffff,
        .addr = (uintptr_t)buf,
        .data_len = len,
        .cdw10 = lid | (numd << 16),
        .cdw11 = numd >> 16,
        .cdw12 = (uint32_t)off,
        .cdw13 = (uint32_t)(off >> 32),
    };

    return admin(fd, &cmd, NULL);
}

static int cmd_state(int fd, int argc, char **argv)
{
    struct nvme_passthru_cmd cmd = { .cdw10 = FAULT_FID };
    uint32_t result;

    if (argc > 0) {
        char *end;
        unsigned long v = strtoul(argv[0], &end, 0);

        if (*end || v > UINT32_MAX) {
            fprintf(stderr, "faultctl: bad state '%s'\n", argv[0]);
            return 2;
        }
        cmd.opcode = NVME_ADMIN_SET_FEATURES;
        cmd.cdw11 = v;
        if (admin(fd, &cmd, &result)) {
            return 1;
        }
        printf("# nvme state %lu (was %u)\n", v, result);
        return 0;
    }
    cmd.opcode = NVME_ADMIN_GET_FEATURES;
    if (admin(fd, &cmd, &result)) {
        return 1;
    }
    printf("# nvme state %u\n", result);
    return 0;
}

/* Returns a malloc'ed hits log (header + entries) or NULL. */
static struct hits_hdr *read_hits(int fd)
{
    struct hits_hdr hdr, *all;
    uint32_t size;

    if (get_log(fd, FAULT_LOG, &hdr, sizeof(hdr), 0)) {
        return NULL;
    }
    if (hdr.version != 1 || hdr.entry_size != sizeof(struct hits_entry)) {
        fprintf(stderr, "faultctl: unknown hits log version %u\n",
                hdr.version);
        return NULL;
    }
    size = sizeof(hdr) + hdr.nrules * sizeof(struct hits_entry);
    size = (size + 3) & ~3u;
    all = calloc(1, size);
    if (!all || get_log(fd, FAULT_LOG, all, size, 0)) {
        free(all);
        return NULL;
    }
    return all;
}

static int cmd_hits(int fd)
{
    struct hits_hdr *h = read_hits(fd);
    struct hits_entry *e;

    if (!h) {
        return 1;
    }
    e = (struct hits_entry *)(h + 1);
    printf("# nvme state %u\n", h->state);
    for (uint32_t i = 0; i < h->nrules; i++) {
        e[i].name[31] = 0;
        printf("# rule %s matched %" PRIu64 "\n", e[i].name, e[i].matched);
        printf("# rule %s hits %" PRIu64 "\n", e[i].name, e[i].hits);
    }
    free(h);
    return 0;
}

static int rule_hits(int fd, const char *name, uint64_t *hits)
{
    struct hits_hdr *h = read_hits(fd);
    struct hits_entry *e;
    int ret = -1;

    if (!h) {
        return -1;
    }
    e = (struct hits_entry *)(h + 1);
    for (uint32_t i = 0; i < h->nrules; i++) {
        if (!strncmp(e[i].name, name, sizeof(e[i].name))) {
            *hits = e[i].hits;
            ret = 0;
        }
    }
    free(h);
    return ret;
}

static int cmd_errlog(int fd, int argc, char **argv)
{
    uint8_t id[4096];
    struct nvme_passthru_cmd idc = {
        .opcode = NVME_ADMIN_IDENTIFY,
        .addr = (uintptr_t)id,
        .data_len = sizeof(id),
        .cdw10 = 1,
    };
    const char *expect = NULL;
    unsigned int entries, valid = 0;
    uint64_t newest = 0;
    uint8_t *log;
    struct { uint16_t status; unsigned int n; } st[16];
    unsigned int nst = 0;

    if (argc == 2 && !strcmp(argv[0], "--expect-rule")) {
        expect = argv[1];
    } else if (argc) {
        fprintf(stderr, "faultctl: errlog [--expect-rule NAME]\n");
        return 2;
    }
    if (admin(fd, &idc, NULL)) {
        return 1;
    }
    entries = id[262] + 1;  /* ELPE, 0's based */
    log = calloc(entries, 64);
    if (!log || get_log(fd, LOG_ERROR_INFO, log, entries * 64, 0)) {
        free(log);
        return 1;
    }
    for (unsigned int i = 0; i < entries; i++) {
        uint8_t *e = log + i * 64;
        uint64_t count;
        uint16_t status, sqid, cid;
        uint64_t lba;
        uint32_t nsid;
        unsigned int j;

        memcpy(&count, e, 8);
        if (!count) {
            continue;
        }
        memcpy(&sqid, e + 8, 2);
        memcpy(&cid, e + 10, 2);
        memcpy(&status, e + 12, 2);
        memcpy(&lba, e + 16, 8);
        memcpy(&nsid, e + 24, 4);
        status >>= 1;
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
                   "0x%x lba %" PRIu64 " nsid %u\n", i, count, sqid, cid,
                   status, lba, nsid);
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
        uint64_t hits = 0, h;
        char *names = strdup(expect), *save = NULL;

        for (char *r = strtok_r(names, ",", &save); r;
             r = strtok_r(NULL, ",", &save)) {
            if (rule_hits(fd, r, &h)) {
                ktap_result(0, NULL, "errlog: no rule '%s' in log 0xC0", r);
                free(names);
                return 1;
            }
            hits += h;
        }
        free(names);
        ktap_result(hits > 0 && hits == newest, NULL,
                    "errlog error count %" PRIu64 " == rules %s hits %" PRIu64
                    " (> 0)", newest, expect, hits);
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
        perror(argv[2]);
        return errno == ENOENT ? 4 : 1;
    }
    if (!strcmp(argv[3], "state") && argc <= 5) {
        ret = cmd_state(fd, argc - 4, argv + 4);
    } else if (!strcmp(argv[3], "hits") && argc == 4) {
        ret = cmd_hits(fd);
    } else if (!strcmp(argv[3], "errlog")) {
        ret = cmd_errlog(fd, argc - 4, argv + 4);
    } else {
        usage();
        ret = 2;
    }
    close(fd);
    return ret;
}
