/*
 * syncblk wire format: BAR0 layout, command slots, scatter entries,
 * opcodes, statuses, completion contexts and error codes.
 *
 * The one definition shared by the device model (hw/block/syncblk.c) and
 * the guest driver (guest/module/syncblk.c), both of which include it from
 * here (include/ is on QEMU's include path, scripts/build-qemu overlays
 * it; the module's Makefile adds it): plain constants only, so the same
 * file compiles in QEMU and in the kernel.  docs/devices.md describes the protocol;
 * tests/qtest/syncblk-test.c writes the layout out from there on its own,
 * so that a mistake here fails it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef SYNCBLK_REGS_H
#define SYNCBLK_REGS_H

#define SYNCBLK_VENDOR_ID               0x1af4
#define SYNCBLK_DEVICE_ID               0x10f0
#define SYNCBLK_MAGIC                   0x4b425953  /* "SYBK" little-endian */
#define SYNCBLK_VERSION                 1
#define SYNCBLK_SECTOR_SIZE             512

/* Scatter entry: { le64 addr; le32 len; le32 0 }, len a multiple of 512. */
#define SYNCBLK_ENTRY_SIZE              16
#define SYNCBLK_ENTRY_ADDR              0x00
#define SYNCBLK_ENTRY_LEN               0x08

/* Global registers, 32-bit little-endian. */
#define SYNCBLK_REG_MAGIC               0x00
#define SYNCBLK_REG_VERSION             0x04
#define SYNCBLK_REG_CAPACITY_LO         0x08        /* sectors */
#define SYNCBLK_REG_CAPACITY_HI         0x0c
#define SYNCBLK_REG_BLOCK_SIZE          0x10
#define SYNCBLK_REG_MODE                0x14        /* a SYNCBLK_CTX_* */
#define SYNCBLK_REG_FEATURES            0x18        /* SYNCBLK_FEATURE_* */
#define SYNCBLK_REG_NUM_SLOTS           0x1c
#define SYNCBLK_REG_MAX_SECTORS         0x20
#define SYNCBLK_REG_MAX_ENTRIES         0x24
#define SYNCBLK_REG_TIMEOUT_MS          0x28
#define SYNCBLK_REG_FAULT_STATE         0x2c        /* RW: engine state */
#define SYNCBLK_REG_LAST_ERROR          0x30        /* W: clear */
#define SYNCBLK_REG_CNT_CMDS            0x40
#define SYNCBLK_REG_CNT_ERRORS          0x44
#define SYNCBLK_REG_CNT_INJECTED        0x48
#define SYNCBLK_REG_CNT_TIMEOUTS        0x4c
#define SYNCBLK_REG_CNT_DONE_TASK       0x50
#define SYNCBLK_REG_CNT_DONE_IRQ        0x54
#define SYNCBLK_REG_CNT_DONE_THREAD     0x58
#define SYNCBLK_REG_CNT_BAD_CMDS        0x5c
#define SYNCBLK_REG_CNT_READS           0x60
#define SYNCBLK_REG_CNT_WRITES          0x64
#define SYNCBLK_REG_SLOT_BASE           0x100
#define SYNCBLK_REG_SLOT_STRIDE         0x40
#define SYNCBLK_BAR_SIZE                4096

/* Per-slot registers, at SYNCBLK_REG_SLOT_BASE + slot * stride. */
#define SYNCBLK_SLOT_OPCODE             0x00        /* a SYNCBLK_OP_* */
#define SYNCBLK_SLOT_NUM_ENTRIES        0x04
#define SYNCBLK_SLOT_LBA_LO             0x08
#define SYNCBLK_SLOT_LBA_HI             0x0c
#define SYNCBLK_SLOT_NUM_SECTORS        0x10
#define SYNCBLK_SLOT_DOORBELL           0x14        /* WO: SYNCBLK_DOORBELL_* */
#define SYNCBLK_SLOT_LIST_LO            0x18
#define SYNCBLK_SLOT_LIST_HI            0x1c
#define SYNCBLK_SLOT_STATUS             0x20        /* RO: a SYNCBLK_ST_* */
#define SYNCBLK_SLOT_ERROR              0x24        /* RO: a SYNCBLK_ERR_* */
#define SYNCBLK_SLOT_CTX                0x28        /* RO: a SYNCBLK_CTX_* */

#define SYNCBLK_FEATURE_FLUSH           (1u << 0)
#define SYNCBLK_FEATURE_DISCARD         (1u << 1)
#define SYNCBLK_FEATURE_MSIX            (1u << 2)
#define SYNCBLK_FEATURE_ABORT           (1u << 3)

#define SYNCBLK_DOORBELL_SUBMIT         1
#define SYNCBLK_DOORBELL_ABORT          2

#define SYNCBLK_OP_READ                 0
#define SYNCBLK_OP_WRITE                1
#define SYNCBLK_OP_FLUSH                2
#define SYNCBLK_OP_DISCARD              3

#define SYNCBLK_ST_IDLE                 0
#define SYNCBLK_ST_BUSY                 1
#define SYNCBLK_ST_DONE                 2
#define SYNCBLK_ST_ERROR                3
#define SYNCBLK_ST_TIMEOUT              4

/* REG_MODE and SLOT_CTX: where the guest sees a command complete. */
#define SYNCBLK_CTX_TASK                0       /* in the doorbell write */
#define SYNCBLK_CTX_IRQ                 1       /* MSI-X, handled in hardirq */
#define SYNCBLK_CTX_THREAD              2       /* MSI-X, then an irq thread */

/*
 * SLOT_ERROR and REG_LAST_ERROR: Linux errno values, so the guest driver
 * maps them one to one.
 */
#define SYNCBLK_ERR_EIO                 5   /* injected eio, backend failure */
#define SYNCBLK_ERR_EFAULT              14  /* guest DMA failed */
#define SYNCBLK_ERR_EBUSY               16  /* doorbell on a busy slot */
#define SYNCBLK_ERR_EINVAL              22  /* bad command or doorbell */
#define SYNCBLK_ERR_ENOSPC              28  /* injected enospc */
#define SYNCBLK_ERR_ENODATA             61  /* injected write-fault */
#define SYNCBLK_ERR_EBADMSG             74  /* injected read-error */
#define SYNCBLK_ERR_EOPNOTSUPP          95  /* unknown opcode */
#define SYNCBLK_ERR_ETIMEDOUT           110 /* lost completion or abort */
#define SYNCBLK_ERR_EREMOTEIO           121 /* injected internal error */

#endif
