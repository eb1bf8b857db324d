/*
 * syncblk register interface: BAR0 layout, command slots, codes.
 *
 * One definition shared by the device model (hw/block/syncblk.c), its
 * qtest and the guest driver (guest/module/syncblk.c, which build-guest
 * builds with a copy of this file): plain constants only, so the same
 * file compiles in QEMU, in the kernel and in tests.  docs/devices.md
 * describes the protocol.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef SYNCBLK_REGS_H
#define SYNCBLK_REGS_H

#define SYNCBLK_VENDOR_ID       0x1af4
#define SYNCBLK_DEVICE_ID       0x10f0
#define SYNCBLK_MAGIC           0x4b425953  /* "SYBK" little-endian */
#define SYNCBLK_VERSION         1
#define SYNCBLK_ENTRY_SIZE      16      /* { le64 addr; le32 len; le32 0 } */

/* Global registers, 32-bit little-endian. */
#define REG_MAGIC               0x00
#define REG_VERSION             0x04
#define REG_CAPACITY_LO         0x08        /* sectors */
#define REG_CAPACITY_HI         0x0c
#define REG_BLOCK_SIZE          0x10
#define REG_MODE                0x14        /* a CTX_* value */
#define REG_FEATURES            0x18        /* FEATURE_* bits */
#define REG_NUM_SLOTS           0x1c
#define REG_MAX_SECTORS         0x20
#define REG_MAX_ENTRIES         0x24
#define REG_TIMEOUT_MS          0x28
#define REG_FAULT_STATE         0x2c        /* RW: the fault engine state */
#define REG_LAST_ERROR          0x30        /* last protocol error, W: clear */
#define REG_CNT_CMDS            0x40
#define REG_CNT_ERRORS          0x44
#define REG_CNT_INJECTED        0x48
#define REG_CNT_TIMEOUTS        0x4c
#define REG_CNT_DONE_TASK       0x50
#define REG_CNT_DONE_IRQ        0x54
#define REG_CNT_DONE_THREAD     0x58
#define REG_CNT_BAD_CMDS        0x5c
#define REG_CNT_READS           0x60
#define REG_CNT_WRITES          0x64
#define REG_SLOT_BASE           0x100
#define REG_SLOT_STRIDE         0x40

/* Per-slot registers, at REG_SLOT_BASE + slot * REG_SLOT_STRIDE. */
#define SLOT_OPCODE             0x00        /* an OP_* value */
#define SLOT_NUM_ENTRIES        0x04
#define SLOT_LBA_LO             0x08
#define SLOT_LBA_HI             0x0c
#define SLOT_NUM_SECTORS        0x10
#define SLOT_DOORBELL           0x14        /* WO: DOORBELL_* */
#define SLOT_LIST_LO            0x18
#define SLOT_LIST_HI            0x1c
#define SLOT_STATUS             0x20        /* RO: an ST_* value */
#define SLOT_ERROR              0x24        /* RO: Linux errno value */
#define SLOT_CTX                0x28        /* RO: how this command completes */

#define FEATURE_FLUSH           (1u << 0)
#define FEATURE_DISCARD         (1u << 1)
#define FEATURE_MSIX            (1u << 2)
#define FEATURE_ABORT           (1u << 3)

#define DOORBELL_SUBMIT         1
#define DOORBELL_ABORT          2

/* SLOT_OPCODE */
#define OP_READ                 0
#define OP_WRITE                1
#define OP_FLUSH                2
#define OP_DISCARD              3

/* SLOT_STATUS */
#define ST_IDLE                 0
#define ST_BUSY                 1
#define ST_DONE                 2
#define ST_ERROR                3
#define ST_TIMEOUT              4

/* REG_MODE and SLOT_CTX: where the guest sees a command complete. */
#define CTX_TASK                0           /* in the doorbell write */
#define CTX_IRQ                 1           /* MSI-X, handled in hardirq */
#define CTX_THREAD              2           /* MSI-X, then an irq thread */

#endif
