// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The faultline NVMe vendor interface and the Error Information log through
 * libnvme (Debian's static libnvme.a); see guestlib-nvme.h.  Every admin
 * command here has a libnvme call: no raw NVME_IOCTL_ADMIN_CMD is left.
 */
#define _GNU_SOURCE
#include "guestlib-nvme.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <libnvme.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libnvme returns -1 with errno, or the NVMe status (> 0). */
static int nvme_ret(int ret)
{
    return ret < 0 ? -errno : ret;
}

void gl_nvme_perror(const char *what, int ret)
{
    if (ret < 0) {
        fprintf(stderr, "faultctl: %s: %s\n", what, strerror(-ret));
    } else {
        fprintf(stderr, "faultctl: %s: NVMe status 0x%x\n", what, ret);
    }
}

int gl_nvme_fault_get_state(int fd, uint32_t *state)
{
    return nvme_ret(nvme_get_features_simple(fd, NVME_FAULT_FID, 0, state));
}

int gl_nvme_fault_set_state(int fd, uint32_t state, uint32_t *was)
{
    uint32_t result;
    int ret = nvme_ret(nvme_set_features_simple(fd, NVME_FAULT_FID, 0, state, false,
                                                &result));

    if (!ret && was) {
        *was = result;
    }
    return ret;
}

static int get_log(int fd, uint8_t lid, void *buf, uint32_t len)
{
    return nvme_ret(nvme_get_log_simple(fd, (enum nvme_cmd_get_log_lid)lid, len, buf));
}

int gl_nvme_fault_hits(int fd, NvmeFaultHitsHdr **log)
{
    NvmeFaultHitsHdr hdr, *all;
    uint32_t nrules, size;
    int ret;

    *log = NULL;
    ret = get_log(fd, NVME_FAULT_LOG_ID, &hdr, sizeof(hdr));
    if (ret) {
        return ret;
    }
    nrules = le32toh(hdr.nrules);
    if (le32toh(hdr.version) != NVME_FAULT_HITS_LOG_VERSION ||
        le32toh(hdr.entry_size) != sizeof(NvmeFaultHitsEntry) || nrules > 4096) {
        fprintf(stderr, "faultctl: unknown hits log version %u (entry size %u, %u rules)\n",
                le32toh(hdr.version), le32toh(hdr.entry_size), nrules);
        return -EPROTO;
    }
    size = sizeof(hdr) + nrules * sizeof(NvmeFaultHitsEntry);
    all = calloc(1, size);
    if (!all) {
        return -ENOMEM;
    }
    ret = get_log(fd, NVME_FAULT_LOG_ID, all, size);
    if (ret) {
        free(all);
        return ret;
    }
    /* Rules may have changed between the two reads: trust the first count. */
    all->nrules = htole32(nrules);
    for (uint32_t i = 0; i < nrules; i++) {
        NvmeFaultHitsEntry *e = (NvmeFaultHitsEntry *)(all + 1) + i;

        e->name[NVME_FAULT_RULE_NAME_LEN - 1] = '\0';
    }
    *log = all;
    return 0;
}

const NvmeFaultHitsEntry *gl_nvme_fault_rule(const NvmeFaultHitsHdr *log, const char *name)
{
    const NvmeFaultHitsEntry *e = (const NvmeFaultHitsEntry *)(log + 1);

    for (uint32_t i = 0; i < le32toh(log->nrules); i++) {
        if (!strcmp(e[i].name, name)) {
            return &e[i];
        }
    }
    return NULL;
}

int gl_nvme_error_log(int fd, struct nvme_error_log_page **log, unsigned int *entries)
{
    struct nvme_id_ctrl id;
    int ret = nvme_ret(nvme_identify_ctrl(fd, &id));

    *log = NULL;
    if (ret) {
        return ret;
    }
    *entries = id.elpe + 1;     /* 0's based */
    *log = calloc(*entries, sizeof(**log));
    if (!*log) {
        return -ENOMEM;
    }
    ret = nvme_ret(nvme_get_log_error(fd, *entries, false, *log));
    if (ret) {
        free(*log);
        *log = NULL;
    }
    return ret;
}

int gl_faultctl_set_state(int fd, uint32_t state)
{
    uint32_t was;
    int ret = gl_nvme_fault_set_state(fd, state, &was);

    if (ret) {
        gl_nvme_perror("Set Features 0xc0", ret);
        return ret;
    }
    printf("# nvme state %u (was %u)\n", state, was);
    fflush(stdout);
    return 0;
}

int gl_faultctl_print_state(int fd)
{
    uint32_t state;
    int ret = gl_nvme_fault_get_state(fd, &state);

    if (ret) {
        gl_nvme_perror("Get Features 0xc0", ret);
        return ret;
    }
    printf("# nvme state %u\n", state);
    fflush(stdout);
    return 0;
}

int gl_faultctl_print_hits(int fd)
{
    NvmeFaultHitsHdr *h;
    const NvmeFaultHitsEntry *e;
    int ret = gl_nvme_fault_hits(fd, &h);

    if (ret) {
        gl_nvme_perror("Get Log Page 0xc0", ret);
        return ret;
    }
    e = (const NvmeFaultHitsEntry *)(h + 1);
    printf("# nvme state %u\n", le32toh(h->state));
    for (uint32_t i = 0; i < le32toh(h->nrules); i++) {
        printf("# rule %s matched %" PRIu64 "\n", e[i].name, (uint64_t)le64toh(e[i].matched));
        printf("# rule %s hits %" PRIu64 "\n", e[i].name, (uint64_t)le64toh(e[i].hits));
    }
    fflush(stdout);
    free(h);
    return 0;
}
