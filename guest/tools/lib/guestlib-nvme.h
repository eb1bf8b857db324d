/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The faultline NVMe vendor interface (engine state feature 0xC0, rule hits
 * log 0xC0, wire format in include/faultline/nvme-fault-vendor.h) and the Error Information
 * log, through libnvme.  faultctl's commands and swaptest's in-band arming
 * both call these.
 */
#ifndef FAULTLINE_GUESTLIB_NVME_H
#define FAULTLINE_GUESTLIB_NVME_H

#include <stdint.h>

#include "faultline/nvme-fault-vendor.h"   /* the repo's include/ */

struct nvme_error_log_page;

/*
 * Return convention of the gl_nvme_* calls (libnvme's): 0 ok, > 0 the NVMe
 * status the controller returned, < 0 -errno.  They print nothing; the
 * gl_faultctl_* calls print faultctl's diagnostics and errors.
 */
int gl_nvme_fault_get_state(int fd, uint32_t *state);
/* Set Features 0xC0; @was (optional) gets the previous state. */
int gl_nvme_fault_set_state(int fd, uint32_t state, uint32_t *was);
/* Vendor log 0xC0 (header and entries), malloc'ed in @log. */
int gl_nvme_fault_hits(int fd, NvmeFaultHitsHdr **log);
const NvmeFaultHitsEntry *gl_nvme_fault_rule(const NvmeFaultHitsHdr *log, const char *name);
/* The Error Information log (Identify's ELPE + 1 entries), malloc'ed in @log. */
int gl_nvme_error_log(int fd, struct nvme_error_log_page **log, unsigned int *entries);
/* "opcode: strerror" or "opcode: NVMe status 0x..." on stderr for a failed call. */
void gl_nvme_perror(const char *what, int ret);

/* faultctl's commands: "# nvme state N (was M)" / "# nvme state N" / hits. */
int gl_faultctl_set_state(int fd, uint32_t state);
int gl_faultctl_print_state(int fd);
/* "# nvme state N" then "# rule NAME matched N" and "# rule NAME hits N". */
int gl_faultctl_print_hits(int fd);

#endif /* FAULTLINE_GUESTLIB_NVME_H */
