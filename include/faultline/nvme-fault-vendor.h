/*
 * faultline NVMe vendor interface: wire format of the vendor-specific
 * Set/Get Features and Get Log Page identifiers of the fault layer.
 *
 * One definition shared by the device model (hw/nvme/fault*.c), its qtest
 * (tests/qtest/nvme-fault-test.c) and the guest's tools
 * (guest/tools/guestlib-nvme.h), all of which include it from here
 * (include/ is on QEMU's include path, scripts/build-qemu overlays it):
 * plain C99 types only, so the same file compiles in QEMU, in tests and
 * in a guest program.  All fields are little endian.  docs/devices.md
 * describes the interface.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAULTLINE_NVME_FAULT_VENDOR_H
#define FAULTLINE_NVME_FAULT_VENDOR_H

#include <stdint.h>

/*
 * Set/Get Features FID: the fault engine state (CDW11 of Set Features,
 * completion dword 0 of Get Features; Set returns the previous state).
 */
#define NVME_FAULT_FID              0xc0

/* Get Log Page LID: per-rule hit counts, NvmeFaultHitsHdr + entries. */
#define NVME_FAULT_LOG_ID           0xc0

#define NVME_FAULT_HITS_LOG_VERSION 1
#define NVME_FAULT_RULE_NAME_LEN    32

typedef struct NvmeFaultHitsHdr {
    uint32_t version;       /* NVME_FAULT_HITS_LOG_VERSION */
    uint32_t nrules;        /* entries that follow */
    uint32_t entry_size;    /* sizeof(NvmeFaultHitsEntry) */
    uint32_t state;         /* engine state */
} NvmeFaultHitsHdr;

typedef struct NvmeFaultHitsEntry {
    char     name[NVME_FAULT_RULE_NAME_LEN];  /* NUL-terminated rule name */
    uint64_t matched;       /* matching I/Os seen */
    uint64_t hits;          /* times the rule fired */
} NvmeFaultHitsEntry;

/* The layout is the ABI: no padding, on any host or guest. */
_Static_assert(sizeof(NvmeFaultHitsHdr) == 16, "NvmeFaultHitsHdr size");
_Static_assert(sizeof(NvmeFaultHitsEntry) == 48, "NvmeFaultHitsEntry size");

#endif /* FAULTLINE_NVME_FAULT_VENDOR_H */
