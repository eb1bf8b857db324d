#!/usr/bin/env python3
"""Seed inputs for generic-fuzz on syncblk-pci and NVMe (scripts/fuzz-devices).

generic-fuzz reads its input as commands separated by b"FUZZ"; the first
byte of each is the opcode (tests/qtest/fuzz/generic_fuzz.c in QEMU).
These seeds do what a driver does (syncblk: MSI-X on, a scatter list,
commands in two slots, aborts; NVMe: enable the controller, create an I/O
queue pair, write and read) so the fuzzer starts from deep states instead
of having to discover the protocol.  Every DMA read of guest memory the
device does returns the current DMA pattern.

usage: seeds.py syncblk|nvme OUTDIR
"""
import os
import struct
import sys

SEP = b"FUZZ"
OP_WRITE, OP_PCI_WRITE, OP_ADD_DMA_PATTERN, OP_CLEAR_DMA_PATTERNS, \
    OP_CLOCK_STEP = 3, 5, 7, 8, 9
BAR0, MSIX_TABLE = 0, 1         # fuzzable regions, in address order

# include/faultline/syncblk-regs.h
SLOT_BASE, SLOT_STRIDE = 0x100, 0x40
OPCODE, NUM_ENTRIES, LBA_LO, NUM_SECTORS, DOORBELL, LIST_LO, STATUS = \
    0x00, 0x04, 0x08, 0x10, 0x14, 0x18, 0x20
OP_READ, OP_WRITE_CMD, OP_FLUSH, OP_DISCARD = 0, 1, 2, 3
SUBMIT, ABORT = 1, 2


def mmio_write(base, offset, value, size=2):     # size 2: 32-bit
    return bytes([OP_WRITE]) + struct.pack("<BBxxIQ", size, base, offset, value)


def pci_write(offset, value, size=1):            # size 1: 16-bit
    return bytes([OP_PCI_WRITE]) + struct.pack("<BBBxI", size, 0, offset, value)


def dma_pattern(data):
    return bytes([OP_ADD_DMA_PATTERN]) + struct.pack("<BB", 0, 0) + data


def clock_step():
    return bytes([OP_CLOCK_STEP])


def slot_cmd(slot, op, lba, nsec, nent, list_addr):
    r = SLOT_BASE + slot * SLOT_STRIDE
    return [mmio_write(BAR0, r + OPCODE, op),
            mmio_write(BAR0, r + NUM_ENTRIES, nent),
            mmio_write(BAR0, r + LBA_LO, lba),
            mmio_write(BAR0, r + NUM_SECTORS, nsec),
            mmio_write(BAR0, r + LIST_LO, list_addr),
            mmio_write(BAR0, r + DOORBELL, SUBMIT)]


def msix_on():
    # MSI-X capability at 0x40 (the device's only one): enable; vector 0
    # to the local APIC address, unmasked.
    return [pci_write(0x42, 0x8000),
            mmio_write(MSIX_TABLE, 0x0, 0xfee00000),
            mmio_write(MSIX_TABLE, 0x4, 0),
            mmio_write(MSIX_TABLE, 0x8, 0x4041),
            mmio_write(MSIX_TABLE, 0xc, 0)]


def clear_patterns():
    return bytes([OP_CLEAR_DMA_PATTERNS])


def syncblk_seeds():
    # every DMA read returns this: one scatter entry {0x100000, 4096}
    entry = dma_pattern(struct.pack("<QII", 0x100000, 4096, 0))
    rw = [entry] + msix_on()
    for op in (OP_WRITE_CMD, OP_READ, OP_WRITE_CMD, OP_FLUSH, OP_DISCARD):
        rw += slot_cmd(0, op, 8, 8, 1, 0x200000) + [clock_step()]
    yield "rw", rw
    two = [entry] + msix_on() + slot_cmd(0, OP_WRITE_CMD, 0, 8, 1, 0x200000) + \
        slot_cmd(1, OP_READ, 0, 8, 1, 0x300000) + \
        [mmio_write(BAR0, SLOT_BASE + DOORBELL, ABORT), clock_step(),
         mmio_write(BAR0, SLOT_BASE + SLOT_STRIDE + STATUS, 0), clock_step()]
    yield "two-slots-abort", two
    # a READ scattered into the device's own registers (issue 12, defect 1)
    own = [dma_pattern(struct.pack("<QII", 0xe0000100, 512, 0))] + msix_on() + \
        slot_cmd(0, OP_READ, 0, 1, 1, 0x200000) + [clock_step(), clock_step()]
    yield "own-bar", own


# NVMe (include/block/nvme.h): registers, admin and I/O opcodes.
NVME_AQA, NVME_ASQ, NVME_ACQ, NVME_CC = 0x24, 0x28, 0x30, 0x14
NVME_SQ0_TAIL, NVME_CQ0_HEAD, NVME_SQ1_TAIL, NVME_CQ1_HEAD = \
    0x1000, 0x1004, 0x1008, 0x100c
NVME_ADM_CREATE_SQ, NVME_ADM_CREATE_CQ, NVME_ADM_ABORT = 0x01, 0x05, 0x08
NVME_ADM_DBBUF_CONFIG = 0x7c
NVME_CMD_FLUSH, NVME_CMD_WRITE, NVME_CMD_READ = 0x00, 0x01, 0x02


def nvme_cmd(opcode, cid, nsid=0, prp1=0, cdw10=0, cdw11=0, cdw12=0):
    return struct.pack("<BBHIQQQQIIIIII", opcode, 0, cid, nsid, 0, 0, prp1, 0,
                       cdw10, cdw11, cdw12, 0, 0, 0)


def nvme_seeds():
    regs = 0                    # the "nvme" register region comes first
    enable = [mmio_write(regs, NVME_AQA, 0x000f000f),
              mmio_write(regs, NVME_ASQ, 0x100000), mmio_write(regs, NVME_ASQ + 4, 0),
              mmio_write(regs, NVME_ACQ, 0x200000), mmio_write(regs, NVME_ACQ + 4, 0),
              mmio_write(regs, NVME_CC, 0x00460001), clock_step()]
    queues = [dma_pattern(nvme_cmd(NVME_ADM_CREATE_CQ, 1, prp1=0x300000,
                                   cdw10=1 | 15 << 16, cdw11=0x3)),
              mmio_write(regs, NVME_SQ0_TAIL, 1), clock_step(), clear_patterns(),
              dma_pattern(nvme_cmd(NVME_ADM_CREATE_SQ, 2, prp1=0x400000,
                                   cdw10=1 | 15 << 16, cdw11=1 | 1 << 16)),
              mmio_write(regs, NVME_SQ0_TAIL, 2), clock_step(),
              mmio_write(regs, NVME_CQ0_HEAD, 2), clear_patterns()]
    io = []
    for i, op in enumerate((NVME_CMD_WRITE, NVME_CMD_READ, NVME_CMD_FLUSH,
                            NVME_CMD_WRITE)):
        io += [dma_pattern(nvme_cmd(op, 10 + i, nsid=1, prp1=0x500000,
                                    cdw10=8 * i, cdw12=7)),
               mmio_write(regs, NVME_SQ1_TAIL, i + 1), clock_step(), clock_step(),
               mmio_write(regs, NVME_CQ1_HEAD, i + 1), clear_patterns()]
    yield "enable", enable
    yield "queues", enable + queues
    yield "io", enable + queues + io
    # Fifteen writes in one SQ doorbell write (every SQ entry reads the same
    # pattern; the rules hold some), then fifteen Aborts of them in one
    # admin doorbell write.  In deterministic mode each Abort waits for its
    # cancel in a nested aio_poll(), which ran the main loop's notify BH of
    # the CQ timer an earlier one armed: the main loop never looked at that
    # timer, and the next clock_step found it due "now" (could not advance).
    burst = [dma_pattern(nvme_cmd(NVME_CMD_WRITE, 20, nsid=1, prp1=0x500000,
                                  cdw12=7)),
             mmio_write(regs, NVME_SQ1_TAIL, 15), clear_patterns(),
             dma_pattern(nvme_cmd(NVME_ADM_ABORT, 30, cdw10=1 | 20 << 16)),
             mmio_write(regs, NVME_SQ0_TAIL, 1), clock_step(), clock_step()]
    yield "abort-burst", enable + queues + burst
    # Shadow doorbells (Doorbell Buffer Config) whose SQ tail reads back as
    # 0xffffffff: the SQ is never empty, and every CQE post restarts it.
    # In deterministic mode that chain ran inside one pass of the timer
    # list, all at the same virtual instant, and QEMU never came back.
    spin = [dma_pattern(nvme_cmd(NVME_ADM_DBBUF_CONFIG, 40, prp1=0x600000)),
            mmio_write(regs, NVME_SQ0_TAIL, 1), clock_step(), clear_patterns(),
            dma_pattern(b"\xff" * 64),
            mmio_write(regs, NVME_SQ0_TAIL, 2), clock_step(), clock_step()]
    yield "dbbuf-spin", enable + spin
    # The admin CQ in the controller's own BAR0 (0xe0000000, where libqos
    # maps it): the second CQE's dword 1 lands on CC (issue 12, defect 2).
    in_bar = [mmio_write(regs, NVME_AQA, 0x000f000f),
              mmio_write(regs, NVME_ASQ, 0x100000), mmio_write(regs, NVME_ASQ + 4, 0),
              mmio_write(regs, NVME_ACQ, 0xe0000000), mmio_write(regs, NVME_ACQ + 4, 0),
              mmio_write(regs, NVME_CC, 0x00460001), clock_step()]
    yield "cq-in-bar", in_bar + queues + [clock_step()]


def main():
    kinds = {"syncblk": syncblk_seeds, "nvme": nvme_seeds}
    if len(sys.argv) != 3 or sys.argv[1] not in kinds:
        sys.exit(__doc__.strip().splitlines()[-1])
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, cmds in kinds[sys.argv[1]]():
        with open(os.path.join(sys.argv[2], f"seed-{sys.argv[1]}-{name}"), "wb") as f:
            f.write(SEP.join(cmds))


if __name__ == "__main__":
    main()
