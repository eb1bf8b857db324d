/*
 * syncblk: a small PCI block device for swap fault injection (faultline).
 *
 *   -device syncblk-pci,drive=D[,fault-injector=ID]
 *           [,completion=task|irq|thread][,timeout-ms=N]
 *
 * PCI 1af4:10f0 (the experimental range of docs/specs/pci-ids.rst).
 * BAR0: 4 KiB of 32-bit registers (8-byte accesses are split), BAR1: MSI-X
 * (one vector).  The register map, the command format and the status and
 * error codes are documented in faultline's docs/devices.md ("syncblk").
 *
 * Commands live in NUM_SLOTS independent slots, so in irq/thread mode the
 * guest keeps several I/Os in flight.  completion=task does the I/O inside
 * the doorbell write (like hw/vmapple/bdif.c): the data has moved before
 * the vCPU continues and the guest polls the slot's STATUS.  irq/thread do
 * it with blk_aio_* and signal completion by MSI-X; the two differ only in
 * the context the guest driver completes in (hardirq vs. threaded handler).
 *
 * Injected latency is deterministic: a command's result becomes visible at
 * submit time + delay on QEMU_CLOCK_VIRTUAL (task: STATUS reads BUSY until
 * then; irq/thread: a virtual timer).  Not migratable.
 *
 * With a fault-injector that has deterministic=on (needs -icount), irq and
 * thread commands also do their I/O synchronously in the doorbell write,
 * like task commands, and always signal completion from the slot's virtual
 * timer (at submit time + delay, or at once in virtual time): no host AIO
 * completion decides when the guest sees anything.  Thread mode then
 * behaves exactly as irq mode in the device; only the guest's handler
 * context differs, as always.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qapi/error.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "hw/fault/fault-injector.h"
#include "migration/vmstate.h"
#include "system/block-backend.h"
#include "trace.h"
#include "syncblk-regs.h"

#define TYPE_SYNCBLK_PCI "syncblk-pci"
OBJECT_DECLARE_SIMPLE_TYPE(SyncBlkState, SYNCBLK_PCI)

#define SYNCBLK_SECTOR          512
#define SYNCBLK_NUM_SLOTS       16
#define SYNCBLK_MAX_SECTORS     4096        /* 2 MiB: one THP swap-out */
#define SYNCBLK_MAX_ENTRIES     512         /* 2 MiB of 4 KiB pages */
#define SYNCBLK_BAR_SIZE        4096

/* Error codes: Linux errno values, so the guest maps them one to one. */
enum {
    SB_EIO          = 5,    /* injected eio, backend failure */
    SB_EFAULT       = 14,   /* guest DMA failed (bad address, no busmaster) */
    SB_EBUSY        = 16,   /* doorbell on a busy slot (LAST_ERROR) */
    SB_EINVAL       = 22,   /* bad command */
    SB_ENOSPC       = 28,   /* injected enospc */
    SB_ENODATA      = 61,   /* injected write-fault (medium error) */
    SB_EBADMSG      = 74,   /* injected read-error (unrecovered read) */
    SB_EOPNOTSUPP   = 95,   /* unknown opcode */
    SB_ETIMEDOUT    = 110,  /* lost completion (task bound) or abort */
    SB_EREMOTEIO    = 121,  /* injected internal error */
};

typedef struct SyncBlkState SyncBlkState;

/* Command registers as the guest writes them. */
typedef struct SyncBlkDesc {
    uint32_t opcode;
    uint32_t num_entries;
    uint64_t lba;
    uint32_t num_sectors;
    uint64_t list_addr;
} SyncBlkDesc;

typedef struct SyncBlkSlot {
    SyncBlkState *s;
    unsigned index;
    SyncBlkDesc desc;           /* next command (guest-writable) */
    SyncBlkDesc cmd;            /* the command in flight (latched) */

    uint32_t status;
    uint32_t error;
    uint32_t ctx;

    /* Result held back until @deadline_ns (virtual). */
    uint32_t result_status;
    uint32_t result_error;
    int64_t submit_ns;
    int64_t deadline_ns;
    bool dropped;               /* lost completion: never signalled */
    bool aborting;

    FeDecision decision;
    uint8_t *bounce;
    uint64_t bytes;
    QEMUIOVector qiov;          /* over @bounce, for blk_aio_* */
    BlockAIOCB *aiocb;
    QEMUTimer timer;
} SyncBlkSlot;

struct SyncBlkState {
    PCIDevice parent_obj;

    /* properties */
    BlockBackend *blk;
    FaultInjector *fi;
    char *completion;
    uint32_t timeout_ms;
    bool deterministic;         /* from the fault-injector */

    MemoryRegion mmio;
    uint32_t mode;               /* CTX_* */
    uint64_t capacity;          /* sectors */
    uint32_t last_error;

    uint32_t cnt_cmds;
    uint32_t cnt_errors;
    uint32_t cnt_injected;
    uint32_t cnt_timeouts;
    uint32_t cnt_done[3];       /* by CTX_* */
    uint32_t cnt_bad_cmds;
    uint32_t cnt_reads;
    uint32_t cnt_writes;

    SyncBlkSlot slots[SYNCBLK_NUM_SLOTS];
};

static uint32_t syncblk_fe_error_code(FeError err)
{
    switch (err) {
    case FE_ERR_NONE:
        return 0;
    case FE_ERR_EIO:
        return SB_EIO;
    case FE_ERR_ENOSPC:
        return SB_ENOSPC;
    case FE_ERR_WRITE_FAULT:
        return SB_ENODATA;
    case FE_ERR_READ_ERROR:
        return SB_EBADMSG;
    case FE_ERR_INTERNAL:
        return SB_EREMOTEIO;
    case FE_ERR_TIMEOUT:
    default:
        return SB_ETIMEDOUT;
    }
}

static FeOp syncblk_fe_op(uint32_t opcode)
{
    switch (opcode) {
    case OP_READ:
        return FE_OP_READ;
    case OP_WRITE:
        return FE_OP_WRITE;
    case OP_FLUSH:
        return FE_OP_FLUSH;
    default:
        return FE_OP_DISCARD;
    }
}

static void syncblk_slot_release(SyncBlkSlot *slot)
{
    g_free(slot->bounce);
    slot->bounce = NULL;
}

/* Make the held result visible; raise MSI-X for irq/thread commands. */
static void syncblk_finish(SyncBlkSlot *slot)
{
    SyncBlkState *s = slot->s;

    slot->status = slot->result_status;
    slot->error = slot->result_error;
    slot->deadline_ns = 0;
    syncblk_slot_release(slot);
    if (slot->status != ST_DONE) {
        s->cnt_errors++;
    }
    if (slot->status == ST_TIMEOUT) {
        s->cnt_timeouts++;
    }
    s->cnt_done[slot->ctx]++;
    trace_syncblk_complete(slot->index, slot->status, slot->error, slot->ctx);
    if (slot->ctx != CTX_TASK && msix_enabled(PCI_DEVICE(s))) {
        msix_notify(PCI_DEVICE(s), 0);
    }
}

static void syncblk_set_result(SyncBlkSlot *slot, uint32_t status,
                               uint32_t error)
{
    slot->result_status = error ? status : ST_DONE;
    slot->result_error = error;
}

/*
 * The transfer is over (or was never started): hold the result until the
 * injected delay has passed, or forever for a lost completion in irq/thread
 * mode.  Task mode turns a lost completion into TIMEOUT after timeout-ms so
 * that the polling guest never hangs.
 */
static void syncblk_schedule_finish(SyncBlkSlot *slot)
{
    SyncBlkState *s = slot->s;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint64_t delay = slot->decision.delay_ns;

    if (slot->dropped) {
        if (slot->ctx != CTX_TASK) {
            syncblk_slot_release(slot);
            return;         /* stays BUSY until the guest aborts it */
        }
        delay = MIN(delay, INT64_MAX / 4) + s->timeout_ms * SCALE_MS;
        syncblk_set_result(slot, ST_TIMEOUT, SB_ETIMEDOUT);
    }
    slot->deadline_ns = slot->submit_ns + MIN(delay, INT64_MAX / 2);
    if (s->deterministic && slot->ctx != CTX_TASK) {
        /* Signal from virtual time only, even when the deadline is now. */
        syncblk_slot_release(slot);
        timer_mod(&slot->timer, MAX(slot->deadline_ns, now));
    } else if (now >= slot->deadline_ns) {
        syncblk_finish(slot);
    } else if (slot->ctx != CTX_TASK) {
        timer_mod(&slot->timer, slot->deadline_ns);
    } else {
        syncblk_slot_release(slot);  /* STATUS reads finish it */
    }
}

static void syncblk_timer_cb(void *opaque)
{
    SyncBlkSlot *slot = opaque;

    if (slot->status == ST_BUSY && !slot->dropped) {
        syncblk_finish(slot);
    }
}

/* Scatter entries to/from the bounce buffer; false on any DMA failure. */
static bool syncblk_dma_list(SyncBlkSlot *slot, bool to_device)
{
    PCIDevice *pci = PCI_DEVICE(slot->s);
    uint64_t off = 0;

    for (uint32_t i = 0; i < slot->cmd.num_entries; i++) {
        uint8_t raw[SYNCBLK_ENTRY_SIZE];
        uint64_t addr;
        uint32_t len;
        MemTxResult r;

        r = pci_dma_read(pci, slot->cmd.list_addr + i * SYNCBLK_ENTRY_SIZE,
                         raw, sizeof(raw));
        if (r != MEMTX_OK) {
            return false;
        }
        addr = ldq_le_p(raw);
        len = ldl_le_p(raw + 8);
        /* Checked by syncblk_check_list(); the list may have changed since. */
        if (len == 0 || len > slot->bytes - off || addr + len < addr) {
            return false;
        }
        if (to_device) {
            r = pci_dma_read(pci, addr, slot->bounce + off, len);
        } else {
            r = pci_dma_write(pci, addr, slot->bounce + off, len);
        }
        if (r != MEMTX_OK) {
            return false;
        }
        off += len;
    }
    return off == slot->bytes;
}

/*
 * Validate the scatter list before any data moves: NULL, or the reason
 * with the error code in @error.
 */
static const char *syncblk_check_list(SyncBlkSlot *slot, uint32_t *error)
{
    PCIDevice *pci = PCI_DEVICE(slot->s);
    uint64_t list = slot->cmd.list_addr;
    uint64_t sum = 0;

    *error = SB_EINVAL;
    if (slot->cmd.num_entries == 0) {
        return "no scatter entries";
    }
    if (slot->cmd.num_entries > SYNCBLK_MAX_ENTRIES) {
        return "too many scatter entries";
    }
    *error = SB_EFAULT;
    if (list + slot->cmd.num_entries * SYNCBLK_ENTRY_SIZE < list) {
        return "scatter list wraps the address space";
    }
    for (uint32_t i = 0; i < slot->cmd.num_entries; i++) {
        uint8_t raw[SYNCBLK_ENTRY_SIZE];
        uint64_t addr;
        uint32_t len;

        *error = SB_EFAULT;
        if (pci_dma_read(pci, list + i * SYNCBLK_ENTRY_SIZE,
                         raw, sizeof(raw)) != MEMTX_OK) {
            return "scatter list not readable";
        }
        *error = SB_EINVAL;
        addr = ldq_le_p(raw);
        len = ldl_le_p(raw + 8);
        if (len == 0 || len % SYNCBLK_SECTOR) {
            return "entry length not a multiple of 512";
        }
        if (addr + len < addr) {
            return "entry wraps the address space";
        }
        sum += len;
        if (sum > slot->bytes) {
            return "entries longer than the command";
        }
    }
    if (sum != slot->bytes) {
        return "entries shorter than the command";
    }
    return NULL;
}

static const char *syncblk_check_cmd(SyncBlkState *s, SyncBlkSlot *slot,
                                     uint32_t *error)
{
    const SyncBlkDesc *c = &slot->cmd;

    *error = SB_EINVAL;
    switch (c->opcode) {
    case OP_FLUSH:
        return NULL;
    case OP_READ:
    case OP_WRITE:
        if (c->num_sectors > SYNCBLK_MAX_SECTORS) {
            return "too many sectors";
        }
        /* fall through */
    case OP_DISCARD:
        if (c->num_sectors == 0) {
            return "zero sectors";
        }
        if (c->lba >= s->capacity || c->num_sectors > s->capacity - c->lba) {
            return "lba range beyond capacity";
        }
        return NULL;
    default:
        *error = SB_EOPNOTSUPP;
        return "unknown opcode";
    }
}

static void syncblk_aio_cb(void *opaque, int ret)
{
    SyncBlkSlot *slot = opaque;

    slot->aiocb = NULL;
    if (slot->aborting) {
        return;
    }
    if (ret == 0 && slot->cmd.opcode == OP_READ &&
        slot->decision.error == FE_ERR_NONE) {
        if (!syncblk_dma_list(slot, false)) {
            syncblk_set_result(slot, ST_ERROR, SB_EFAULT);
            syncblk_schedule_finish(slot);
            return;
        }
    } else if (ret == 0 && slot->cmd.opcode == OP_READ) {
        /* when=after: the data still reaches the guest */
        syncblk_dma_list(slot, false);
    }
    if (ret < 0) {
        syncblk_set_result(slot, ST_ERROR, SB_EIO);
    }
    syncblk_schedule_finish(slot);
}

/* Start the backend I/O; synchronous for task commands. */
static void syncblk_do_io(SyncBlkState *s, SyncBlkSlot *slot)
{
    int64_t off = slot->cmd.lba * SYNCBLK_SECTOR;
    int64_t len = slot->bytes;
    bool sync = slot->ctx == CTX_TASK || s->deterministic;
    int ret = 0;

    if (!sync && slot->bounce) {
        qemu_iovec_init_buf(&slot->qiov, slot->bounce, len);
    }

    switch (slot->cmd.opcode) {
    case OP_READ:
        if (sync) {
            ret = blk_pread(s->blk, off, len, slot->bounce, 0);
            if (ret == 0 && !syncblk_dma_list(slot, false) &&
                slot->decision.error == FE_ERR_NONE) {
                syncblk_set_result(slot, ST_ERROR, SB_EFAULT);
                syncblk_schedule_finish(slot);
                return;
            }
        } else {
            slot->aiocb = blk_aio_preadv(s->blk, off, &slot->qiov, 0,
                                         syncblk_aio_cb, slot);
        }
        break;
    case OP_WRITE:
        if (sync) {
            ret = blk_pwrite(s->blk, off, len, slot->bounce, 0);
        } else {
            slot->aiocb = blk_aio_pwritev(s->blk, off, &slot->qiov, 0,
                                          syncblk_aio_cb, slot);
        }
        break;
    case OP_FLUSH:
        if (sync) {
            ret = blk_flush(s->blk);
        } else {
            slot->aiocb = blk_aio_flush(s->blk, syncblk_aio_cb, slot);
        }
        break;
    case OP_DISCARD:
        if (sync) {
            ret = blk_pdiscard(s->blk, off, len, 0);
        } else {
            slot->aiocb = blk_aio_pdiscard(s->blk, off, len,
                                           syncblk_aio_cb, slot);
        }
        break;
    }
    if (sync) {
        if (ret < 0) {
            syncblk_set_result(slot, ST_ERROR, SB_EIO);
        }
        syncblk_schedule_finish(slot);
    }
}

static void syncblk_submit(SyncBlkState *s, SyncBlkSlot *slot)
{
    bool data = false;
    const char *why;
    uint32_t error;
    FeDecision *d = &slot->decision;

    if (slot->status == ST_BUSY) {
        /* The command in flight keeps going; the doorbell is refused. */
        s->last_error = SB_EBUSY;
        s->cnt_bad_cmds++;
        trace_syncblk_bad_command(slot->index, "doorbell while busy");
        return;
    }
    s->cnt_cmds++;
    slot->cmd = slot->desc;
    slot->ctx = s->mode;
    slot->dropped = false;
    slot->aborting = false;
    slot->deadline_ns = 0;
    slot->submit_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    memset(d, 0, sizeof(*d));

    why = syncblk_check_cmd(s, slot, &error);
    if (!why && (slot->cmd.opcode == OP_READ ||
                 slot->cmd.opcode == OP_WRITE)) {
        data = true;
        slot->bytes = (uint64_t)slot->cmd.num_sectors * SYNCBLK_SECTOR;
        why = syncblk_check_list(slot, &error);
    } else {
        slot->bytes = (uint64_t)slot->cmd.num_sectors * SYNCBLK_SECTOR;
    }
    if (why) {
        s->cnt_bad_cmds++;
        trace_syncblk_bad_command(slot->index, why);
        qemu_log_mask(LOG_GUEST_ERROR, "syncblk: slot %u: %s\n",
                      slot->index, why);
        /* Bad commands complete at once, in the device's mode. */
        slot->status = ST_BUSY;
        syncblk_set_result(slot, ST_ERROR, error);
        syncblk_finish(slot);
        return;
    }

    if (s->fi && fault_injector_decide(s->fi, syncblk_fe_op(slot->cmd.opcode),
                                       slot->cmd.lba,
                                       slot->cmd.opcode == OP_FLUSH ?
                                       0 : slot->cmd.num_sectors, d)) {
        s->cnt_injected++;
    }
    switch (d->complete) {
    case FE_COMPLETE_IRQ:
        slot->ctx = CTX_IRQ;
        break;
    case FE_COMPLETE_TASK:
        slot->ctx = CTX_TASK;
        break;
    case FE_COMPLETE_THREAD:
        slot->ctx = CTX_THREAD;
        break;
    default:
        break;
    }
    slot->dropped = d->drop || d->error == FE_ERR_TIMEOUT;
    syncblk_set_result(slot, ST_ERROR,
                       syncblk_fe_error_code(d->error));
    slot->status = ST_BUSY;
    slot->error = 0;
    trace_syncblk_submit(slot->index, slot->cmd.opcode, slot->cmd.lba,
                         slot->cmd.num_sectors, slot->ctx);
    if (slot->cmd.opcode == OP_READ) {
        s->cnt_reads++;
    } else if (slot->cmd.opcode == OP_WRITE) {
        s->cnt_writes++;
    }

    if (d->error != FE_ERR_NONE && !slot->dropped &&
        d->when == FE_WHEN_BEFORE) {
        syncblk_schedule_finish(slot);      /* no data moves */
        return;
    }
    if (data) {
        slot->bounce = g_try_malloc(slot->bytes);
        if (!slot->bounce) {
            syncblk_set_result(slot, ST_ERROR, SB_EIO);
            syncblk_schedule_finish(slot);
            return;
        }
        if (slot->cmd.opcode == OP_WRITE && !syncblk_dma_list(slot, true)) {
            syncblk_set_result(slot, ST_ERROR, SB_EFAULT);
            syncblk_schedule_finish(slot);
            return;
        }
    }
    syncblk_do_io(s, slot);
}

/* Cancel whatever the slot does; it ends up in @status (no interrupt). */
static void syncblk_slot_cancel(SyncBlkSlot *slot, uint32_t status,
                                uint32_t error)
{
    slot->aborting = true;
    if (slot->aiocb) {
        blk_aio_cancel(slot->aiocb);    /* waits for it; cb sees aborting */
    }
    slot->aiocb = NULL;
    timer_del(&slot->timer);
    syncblk_slot_release(slot);
    slot->deadline_ns = 0;
    slot->dropped = false;
    slot->status = status;
    slot->error = error;
}

static void syncblk_abort(SyncBlkState *s, SyncBlkSlot *slot)
{
    trace_syncblk_abort(slot->index, slot->status);
    if (slot->status != ST_BUSY) {
        return;
    }
    syncblk_slot_cancel(slot, ST_TIMEOUT, SB_ETIMEDOUT);
    s->cnt_errors++;
    s->cnt_timeouts++;
}

static uint32_t syncblk_slot_read(SyncBlkState *s, SyncBlkSlot *slot,
                                  hwaddr reg)
{
    switch (reg) {
    case SLOT_OPCODE:
        return slot->desc.opcode;
    case SLOT_NUM_ENTRIES:
        return slot->desc.num_entries;
    case SLOT_LBA_LO:
        return slot->desc.lba;
    case SLOT_LBA_HI:
        return slot->desc.lba >> 32;
    case SLOT_NUM_SECTORS:
        return slot->desc.num_sectors;
    case SLOT_LIST_LO:
        return slot->desc.list_addr;
    case SLOT_LIST_HI:
        return slot->desc.list_addr >> 32;
    case SLOT_STATUS:
        /* Task commands: the held result shows once its time has come. */
        if (slot->status == ST_BUSY && slot->ctx == CTX_TASK &&
            slot->deadline_ns &&
            qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) >= slot->deadline_ns) {
            syncblk_finish(slot);
        }
        return slot->status;
    case SLOT_ERROR:
        return slot->error;
    case SLOT_CTX:
        return slot->ctx;
    default:
        return 0;
    }
}

static void syncblk_slot_write(SyncBlkState *s, SyncBlkSlot *slot,
                               hwaddr reg, uint32_t val)
{
    switch (reg) {
    case SLOT_OPCODE:
        slot->desc.opcode = val;
        break;
    case SLOT_NUM_ENTRIES:
        slot->desc.num_entries = val;
        break;
    case SLOT_LBA_LO:
        slot->desc.lba = deposit64(slot->desc.lba, 0, 32, val);
        break;
    case SLOT_LBA_HI:
        slot->desc.lba = deposit64(slot->desc.lba, 32, 32, val);
        break;
    case SLOT_NUM_SECTORS:
        slot->desc.num_sectors = val;
        break;
    case SLOT_LIST_LO:
        slot->desc.list_addr = deposit64(slot->desc.list_addr, 0, 32, val);
        break;
    case SLOT_LIST_HI:
        slot->desc.list_addr = deposit64(slot->desc.list_addr, 32, 32, val);
        break;
    case SLOT_DOORBELL:
        if (val == DOORBELL_SUBMIT) {
            syncblk_submit(s, slot);
        } else if (val == DOORBELL_ABORT) {
            syncblk_abort(s, slot);
        } else {
            s->last_error = SB_EINVAL;
        }
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "syncblk: write to read-only slot register 0x%x\n",
                      (unsigned)reg);
        break;
    }
}

static uint64_t syncblk_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    SyncBlkState *s = opaque;

    if (addr >= REG_SLOT_BASE) {
        hwaddr i = (addr - REG_SLOT_BASE) / REG_SLOT_STRIDE;

        if (i >= SYNCBLK_NUM_SLOTS) {
            return 0;
        }
        return syncblk_slot_read(s, &s->slots[i],
                                 (addr - REG_SLOT_BASE) % REG_SLOT_STRIDE);
    }
    switch (addr) {
    case REG_MAGIC:
        return SYNCBLK_MAGIC;
    case REG_VERSION:
        return SYNCBLK_VERSION;
    case REG_CAPACITY_LO:
        return (uint32_t)s->capacity;
    case REG_CAPACITY_HI:
        return s->capacity >> 32;
    case REG_BLOCK_SIZE:
        return SYNCBLK_SECTOR;
    case REG_MODE:
        return s->mode;
    case REG_FEATURES:
        return FEATURE_FLUSH | FEATURE_DISCARD | FEATURE_MSIX | FEATURE_ABORT;
    case REG_NUM_SLOTS:
        return SYNCBLK_NUM_SLOTS;
    case REG_MAX_SECTORS:
        return SYNCBLK_MAX_SECTORS;
    case REG_MAX_ENTRIES:
        return SYNCBLK_MAX_ENTRIES;
    case REG_TIMEOUT_MS:
        return s->timeout_ms;
    case REG_FAULT_STATE:
        return s->fi ? fault_injector_get_state(s->fi) : 0;
    case REG_LAST_ERROR:
        return s->last_error;
    case REG_CNT_CMDS:
        return s->cnt_cmds;
    case REG_CNT_ERRORS:
        return s->cnt_errors;
    case REG_CNT_INJECTED:
        return s->cnt_injected;
    case REG_CNT_TIMEOUTS:
        return s->cnt_timeouts;
    case REG_CNT_DONE_TASK:
        return s->cnt_done[CTX_TASK];
    case REG_CNT_DONE_IRQ:
        return s->cnt_done[CTX_IRQ];
    case REG_CNT_DONE_THREAD:
        return s->cnt_done[CTX_THREAD];
    case REG_CNT_BAD_CMDS:
        return s->cnt_bad_cmds;
    case REG_CNT_READS:
        return s->cnt_reads;
    case REG_CNT_WRITES:
        return s->cnt_writes;
    default:
        return 0;
    }
}

static void syncblk_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                               unsigned size)
{
    SyncBlkState *s = opaque;

    if (addr >= REG_SLOT_BASE) {
        hwaddr i = (addr - REG_SLOT_BASE) / REG_SLOT_STRIDE;

        if (i < SYNCBLK_NUM_SLOTS) {
            syncblk_slot_write(s, &s->slots[i],
                               (addr - REG_SLOT_BASE) % REG_SLOT_STRIDE, val);
        }
        return;
    }
    switch (addr) {
    case REG_FAULT_STATE:
        if (s->fi) {
            fault_injector_set_state(s->fi, val);
        }
        break;
    case REG_LAST_ERROR:
        s->last_error = 0;
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "syncblk: write to read-only register 0x%x\n",
                      (unsigned)addr);
        break;
    }
}

static const MemoryRegionOps syncblk_mmio_ops = {
    .read = syncblk_mmio_read,
    .write = syncblk_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

static void syncblk_reset(DeviceState *dev)
{
    SyncBlkState *s = SYNCBLK_PCI(dev);

    trace_syncblk_reset();
    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        SyncBlkSlot *slot = &s->slots[i];

        syncblk_slot_cancel(slot, ST_IDLE, 0);
        memset(&slot->desc, 0, sizeof(slot->desc));
        memset(&slot->cmd, 0, sizeof(slot->cmd));
        slot->ctx = s->mode;
    }
    s->last_error = 0;
    s->cnt_cmds = s->cnt_errors = s->cnt_injected = s->cnt_timeouts = 0;
    memset(s->cnt_done, 0, sizeof(s->cnt_done));
    s->cnt_bad_cmds = s->cnt_reads = s->cnt_writes = 0;
}

static void syncblk_realize(PCIDevice *pci, Error **errp)
{
    SyncBlkState *s = SYNCBLK_PCI(pci);
    int64_t len;

    if (!s->blk || !blk_bs(s->blk)) {
        error_setg(errp, "syncblk-pci: drive property not set");
        return;
    }
    if (!s->completion || !strcmp(s->completion, "task")) {
        s->mode = CTX_TASK;
    } else if (!strcmp(s->completion, "irq")) {
        s->mode = CTX_IRQ;
    } else if (!strcmp(s->completion, "thread")) {
        s->mode = CTX_THREAD;
    } else {
        error_setg(errp, "syncblk-pci: completion '%s' is not task, irq or "
                   "thread", s->completion);
        return;
    }
    s->deterministic = s->fi && fault_injector_deterministic(s->fi);
    if (s->deterministic &&
        !fault_injector_check_deterministic(s->fi, "syncblk-pci", errp)) {
        return;
    }
    if (s->timeout_ms == 0 || s->timeout_ms > 60000) {
        error_setg(errp, "syncblk-pci: timeout-ms must be 1..60000");
        return;
    }
    if (blk_set_perm(s->blk, BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE,
                     BLK_PERM_CONSISTENT_READ | BLK_PERM_WRITE_UNCHANGED,
                     errp) < 0) {
        return;
    }
    len = blk_getlength(s->blk);
    if (len < 0) {
        error_setg_errno(errp, -len, "syncblk-pci: cannot get drive size");
        return;
    }
    s->capacity = len / SYNCBLK_SECTOR;

    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        s->slots[i].s = s;
        s->slots[i].index = i;
        timer_init_ns(&s->slots[i].timer, QEMU_CLOCK_VIRTUAL,
                      syncblk_timer_cb, &s->slots[i]);
    }

    memory_region_init_io(&s->mmio, OBJECT(s), &syncblk_mmio_ops, s,
                          "syncblk-mmio", SYNCBLK_BAR_SIZE);
    pci_register_bar(pci, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->mmio);
    if (msix_init_exclusive_bar(pci, 1, 1, errp)) {
        return;
    }
    msix_vector_use(pci, 0);
}

static void syncblk_exit(PCIDevice *pci)
{
    SyncBlkState *s = SYNCBLK_PCI(pci);

    for (unsigned i = 0; i < SYNCBLK_NUM_SLOTS; i++) {
        syncblk_slot_cancel(&s->slots[i], ST_IDLE, 0);
    }
    msix_uninit_exclusive_bar(pci);
}

static const Property syncblk_properties[] = {
    DEFINE_PROP_DRIVE("drive", SyncBlkState, blk),
    DEFINE_PROP_LINK("fault-injector", SyncBlkState, fi,
                     TYPE_FAULT_INJECTOR, FaultInjector *),
    DEFINE_PROP_STRING("completion", SyncBlkState, completion),
    DEFINE_PROP_UINT32("timeout-ms", SyncBlkState, timeout_ms, 1000),
};

static const VMStateDescription syncblk_vmstate = {
    .name = "syncblk-pci",
    .unmigratable = 1,      /* in-flight AIO and held results are not saved */
};

static void syncblk_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = syncblk_realize;
    k->exit = syncblk_exit;
    k->vendor_id = SYNCBLK_VENDOR_ID;
    k->device_id = SYNCBLK_DEVICE_ID;
    k->revision = 1;
    k->class_id = PCI_CLASS_STORAGE_OTHER;
    dc->desc = "faultline synchronous block device";
    dc->vmsd = &syncblk_vmstate;
    device_class_set_props(dc, syncblk_properties);
    device_class_set_legacy_reset(dc, syncblk_reset);
    set_bit(DEVICE_CATEGORY_STORAGE, dc->categories);
}

static const TypeInfo syncblk_info = {
    .name = TYPE_SYNCBLK_PCI,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(SyncBlkState),
    .class_init = syncblk_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void syncblk_register_types(void)
{
    type_register_static(&syncblk_info);
}

type_init(syncblk_register_types)
