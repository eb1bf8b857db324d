/*
 * fault-inject: a block filter that asks a faultline fault-injector what to
 * do with every request, so any disk frontend (virtio-blk, virtio-scsi, IDE,
 * NVMe without hooks) sees the faults through its own driver.
 *
 *   -object fault-injector,id=fi0,rules=FILE,seed=N
 *   -blockdev driver=file,filename=disk.img,node-name=disk0
 *   -blockdev driver=fault-inject,node-name=fi-disk0,file=disk0,
 *             fault-injector=fi0
 *   -device virtio-blk-pci,drive=fi-disk0
 *
 * Actions (docs/devices.md, "Block filter"):
 * - delay: the request completes no earlier than submission + delay on
 *   QEMU_CLOCK_VIRTUAL (the child I/O runs first).
 * - error: eio, write-fault, read-error, internal -> -EIO; enospc ->
 *   -ENOSPC.  when=before fails without calling the child, when=after
 *   does the I/O and then fails.  timeout is a drop.
 * - drop: the request is held until this node (or a node above it) is
 *   drained, which reset, detach, blockdev-del and shutdown all do; it then
 *   completes with -EIO.  A drain also cuts pending delays short, because
 *   the virtual clock may be stopped while the drain waits.
 * - dnr, complete= and irq* mean nothing here: ignored, traced once.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-io.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qemu/lockable.h"
#include "qemu/memalign.h"
#include "qemu/module.h"
#include "qemu/option.h"
#include "qemu/timer.h"
#include "hw/fault/fault-injector.h"
#include "trace.h"

#define FAULT_INJECT_OPT_INJECTOR "fault-injector"

/*
 * How often a held request checks whether a node above it is drained: a
 * drain only calls .bdrv_drain_begin of the drained node and its parents,
 * never of the children it waits for.
 */
#define FAULT_INJECT_POLL_NS (10 * SCALE_MS)

/* Ignored actions, each reported once per node. */
enum {
    FAULT_INJECT_IGNORED_DNR = 1 << 0,
    FAULT_INJECT_IGNORED_COMPLETE = 1 << 1,
    FAULT_INJECT_IGNORED_IRQ = 1 << 2,
};

typedef struct FaultInjectHeld FaultInjectHeld;

typedef struct BDRVFaultInjectState {
    FaultInjector *fi;

    QemuMutex lock;         /* protects held and every FaultInjectHeld */
    QLIST_HEAD(, FaultInjectHeld) held;
    unsigned ignored_reported;  /* FAULT_INJECT_IGNORED_*, atomic */
} BDRVFaultInjectState;

/* A request waiting for its delay to pass or for a drain (drop). */
struct FaultInjectHeld {
    BDRVFaultInjectState *s;
    Coroutine *co;
    AioContext *ctx;
    bool woken;             /* co is scheduled: wake it only once */
    bool by_drain;          /* woken by .bdrv_drain_begin */
    QLIST_ENTRY(FaultInjectHeld) next;
};

/* One request's decision, from submission to completion. */
typedef struct FaultInjectReq {
    FeOp op;
    uint64_t lba;
    int64_t due_ns;         /* completes no earlier (QEMU_CLOCK_VIRTUAL) */
    int error;              /* negative errno, 0 for none */
    bool drop;
    bool after;             /* when=after: the I/O is done first */
    FeDecision d;
} FaultInjectReq;

static QemuOptsList fault_inject_opts = {
    .name = "fault-inject",
    .head = QTAILQ_HEAD_INITIALIZER(fault_inject_opts.head),
    .desc = {
        {
            .name = FAULT_INJECT_OPT_INJECTOR,
            .type = QEMU_OPT_STRING,
            .help = "id of the fault-injector object to ask",
        },
        { /* end of list */ }
    },
};

/*
 * A block node sees neither an NVMe queue nor a vCPU; controller failure
 * (fatal, reset-fail=) has no block-layer meaning.
 */
static const FaultInjectorUser fault_inject_user = {
    .name = "fault-inject",
    .keys = FE_KEY_SQ | FE_KEY_CPU,
    .actions = FE_ACTION_FATAL | FE_ACTION_RESET_FAIL,
};

/*
 * The fault-injector named in @options, attached (detach it with
 * fault_injector_detach(fi, &fault_inject_user)); NULL with @errp set.
 */
static FaultInjector *fault_inject_attach(QDict *options, Error **errp)
{
    QemuOpts *opts = qemu_opts_create(&fault_inject_opts, NULL, 0,
                                      &error_abort);
    FaultInjector *fi = NULL;
    const char *id;

    if (!qemu_opts_absorb_qdict(opts, options, errp)) {
        goto out;
    }
    id = qemu_opt_get(opts, FAULT_INJECT_OPT_INJECTOR);
    if (!id) {
        error_setg(errp, "fault-inject: parameter '"
                   FAULT_INJECT_OPT_INJECTOR "' is required (the id of a "
                   "fault-injector object)");
        goto out;
    }
    fi = fault_injector_find(id, errp);
    if (!fi) {
        error_prepend(errp, "fault-inject: ");
        goto out;
    }
    if (!fault_injector_attach(fi, &fault_inject_user, errp)) {
        fi = NULL;
    }
out:
    qemu_opts_del(opts);
    return fi;
}

static int fault_inject_open(BlockDriverState *bs, QDict *options, int flags,
                             Error **errp)
{
    ERRP_GUARD();
    BDRVFaultInjectState *s = bs->opaque;
    int ret;

    /* Attaching the child below drains this node: the lock is needed. */
    qemu_mutex_init(&s->lock);
    QLIST_INIT(&s->held);

    s->fi = fault_inject_attach(options, errp);
    if (!s->fi) {
        trace_fault_inject_open_error(error_get_pretty(*errp));
        qemu_mutex_destroy(&s->lock);
        return -EINVAL;
    }

    /* A filter's "file" child is BDRV_CHILD_FILTERED | BDRV_CHILD_PRIMARY. */
    ret = bdrv_open_file_child(NULL, options, "file", bs, errp);
    if (ret < 0) {
        trace_fault_inject_open_error(error_get_pretty(*errp));
        /* .bdrv_close is not called when .bdrv_open fails */
        fault_injector_detach(s->fi, &fault_inject_user);
        qemu_mutex_destroy(&s->lock);
        return ret;
    }

    GRAPH_RDLOCK_GUARD_MAINLOOP();

    bs->supported_write_flags = bs->file->bs->supported_write_flags |
                                BDRV_REQ_WRITE_UNCHANGED;
    bs->supported_zero_flags = bs->file->bs->supported_zero_flags |
                               BDRV_REQ_WRITE_UNCHANGED;
    return 0;
}

static void fault_inject_close(BlockDriverState *bs)
{
    BDRVFaultInjectState *s = bs->opaque;

    /* Closing drains first, so nothing is held any more. */
    assert(QLIST_EMPTY(&s->held));
    fault_injector_detach(s->fi, &fault_inject_user);
    qemu_mutex_destroy(&s->lock);
}

static int64_t coroutine_fn GRAPH_RDLOCK
fault_inject_co_getlength(BlockDriverState *bs)
{
    return bdrv_co_getlength(bs->file->bs);
}

static void fault_inject_wake_locked(FaultInjectHeld *h, bool by_drain)
{
    if (!h->woken) {
        h->woken = true;
        h->by_drain = by_drain;
        aio_co_schedule(h->ctx, h->co);
    }
}

static void fault_inject_timer_cb(void *opaque)
{
    FaultInjectHeld *h = opaque;

    QEMU_LOCK_GUARD(&h->s->lock);
    fault_inject_wake_locked(h, false);
}

/* Is @bs, or any node above it, inside a drained section? */
static bool GRAPH_RDLOCK fault_inject_quiesced(BlockDriverState *bs)
{
    BdrvChild *c;

    if (qatomic_read(&bs->quiesce_counter)) {
        return true;
    }
    QLIST_FOREACH(c, &bs->parents, next_parent) {
        if (c->klass->parent_is_bds && fault_inject_quiesced(c->opaque)) {
            return true;
        }
    }
    return false;
}

/*
 * Wait until QEMU_CLOCK_VIRTUAL reaches @due_ns (-1: forever, a drop).
 * Returns true if a drain ended the wait first.
 */
static bool coroutine_fn GRAPH_RDLOCK
fault_inject_hold(BlockDriverState *bs, int64_t due_ns)
{
    BDRVFaultInjectState *s = bs->opaque;
    FaultInjectHeld h = {
        .s = s,
        .co = qemu_coroutine_self(),
        .ctx = qemu_get_current_aio_context(),
    };
    QEMUTimer due, poll;
    bool by_drain = false;

    aio_timer_init(h.ctx, &due, QEMU_CLOCK_VIRTUAL, SCALE_NS,
                   fault_inject_timer_cb, &h);
    aio_timer_init(h.ctx, &poll, QEMU_CLOCK_REALTIME, SCALE_NS,
                   fault_inject_timer_cb, &h);
    while (!by_drain) {
        if (fault_inject_quiesced(bs)) {
            by_drain = true;
            break;
        }
        if (due_ns >= 0 && qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) >= due_ns) {
            break;
        }
        WITH_QEMU_LOCK_GUARD(&s->lock) {
            h.woken = false;
            QLIST_INSERT_HEAD(&s->held, &h, next);
        }
        if (due_ns >= 0) {
            timer_mod(&due, due_ns);
        }
        timer_mod(&poll, qemu_clock_get_ns(QEMU_CLOCK_REALTIME) +
                  FAULT_INJECT_POLL_NS);
        qemu_coroutine_yield();
        timer_del(&due);
        timer_del(&poll);
        WITH_QEMU_LOCK_GUARD(&s->lock) {
            QLIST_REMOVE(&h, next);
            by_drain = h.by_drain;
        }
    }
    return by_drain;
}

static void fault_inject_drain_begin(BlockDriverState *bs)
{
    BDRVFaultInjectState *s = bs->opaque;
    FaultInjectHeld *h;

    QEMU_LOCK_GUARD(&s->lock);
    QLIST_FOREACH(h, &s->held, next) {
        fault_inject_wake_locked(h, true);
    }
}

static int fault_inject_errno(FeError err)
{
    switch (err) {
    case FE_ERR_NONE:
        return 0;
    case FE_ERR_ENOSPC:
        return -ENOSPC;
    default:
        return -EIO;
    }
}

static void fault_inject_report_ignored(BlockDriverState *bs,
                                        const FeDecision *d)
{
    BDRVFaultInjectState *s = bs->opaque;
    unsigned seen = 0;

    if (d->dnr) {
        seen |= FAULT_INJECT_IGNORED_DNR;
    }
    if (d->complete != FE_COMPLETE_DEFAULT) {
        seen |= FAULT_INJECT_IGNORED_COMPLETE;
    }
    if (d->irq != FE_IRQ_NORMAL || d->irq_delay_ns) {
        seen |= FAULT_INJECT_IGNORED_IRQ;
    }
    seen &= ~qatomic_fetch_or(&s->ignored_reported, seen);
    if (seen & FAULT_INJECT_IGNORED_DNR) {
        trace_fault_inject_ignored(bdrv_get_node_name(bs), "dnr");
    }
    if (seen & FAULT_INJECT_IGNORED_COMPLETE) {
        trace_fault_inject_ignored(bdrv_get_node_name(bs), "complete=");
    }
    if (seen & FAULT_INJECT_IGNORED_IRQ) {
        trace_fault_inject_ignored(bdrv_get_node_name(bs), "irq=/irq-delay=");
    }
}

/*
 * Ask the engine about one request (@offset, @bytes in bytes; the engine
 * counts 512-byte sectors).  Returns false when no rule fired: the caller
 * passes the request through untouched.
 */
static bool fault_inject_decide(BlockDriverState *bs, FeOp op,
                                int64_t offset, int64_t bytes,
                                FaultInjectReq *r)
{
    BDRVFaultInjectState *s = bs->opaque;
    uint64_t lba = offset >> BDRV_SECTOR_BITS;
    uint64_t end = DIV_ROUND_UP(offset + bytes, BDRV_SECTOR_SIZE);
    uint32_t len = MIN(end - lba, UINT32_MAX);

    if (!fault_injector_decide(s->fi, op, lba, len, &r->d)) {
        return false;
    }
    r->op = op;
    r->lba = lba;
    r->due_ns = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL) + r->d.delay_ns;
    r->drop = r->d.drop || r->d.error == FE_ERR_TIMEOUT;
    r->error = r->drop ? 0 : fault_inject_errno(r->d.error);
    r->after = r->d.when == FE_WHEN_AFTER;
    trace_fault_inject_decision(bdrv_get_node_name(bs), fe_op_name(op), lba,
                                len, r->d.delay_ns,
                                fe_error_name(r->d.error), r->drop, r->after);
    fault_inject_report_ignored(bs, &r->d);
    return true;
}

/*
 * Complete @r whose child I/O returned @ret (or was skipped): hold a drop,
 * wait out the delay, apply the error.
 */
static int coroutine_fn GRAPH_RDLOCK
fault_inject_complete(BlockDriverState *bs, FaultInjectReq *r, int ret)
{
    const char *node = bdrv_get_node_name(bs);

    if (r->drop) {
        trace_fault_inject_held(node, fe_op_name(r->op), r->lba);
        fault_inject_hold(bs, -1);
        trace_fault_inject_release(node, fe_op_name(r->op), r->lba, "drain");
        return -EIO;
    }
    if (r->d.delay_ns && fault_inject_hold(bs, r->due_ns)) {
        trace_fault_inject_delay_cut(node, fe_op_name(r->op), r->lba);
    }
    if (r->error) {
        trace_fault_inject_fail(node, fe_op_name(r->op), r->lba, r->error);
        return r->error;
    }
    return ret;
}

/*
 * Does the child I/O run (when=after, or no error/drop at all)?  Never for
 * a lie: the request completes as decided with nothing done.
 */
static bool fault_inject_do_io(const FaultInjectReq *r)
{
    return !r->d.lie && (r->after || (!r->error && !r->drop));
}

/*
 * Flip the decision's corrupt bytes in @qiov, which holds the request's
 * data from byte @offset on (the engine counts from its first sector).
 */
static void fault_inject_corrupt_qiov(const FaultInjectReq *r, int64_t offset,
                                      QEMUIOVector *qiov)
{
    uint64_t pos = offset - (r->lba << BDRV_SECTOR_BITS);

    for (int i = 0; i < qiov->niov; i++) {
        fe_decision_corrupt(&r->d, pos, qiov->iov[i].iov_base,
                            qiov->iov[i].iov_len);
        pos += qiov->iov[i].iov_len;
    }
}

/* The child I/O of @op, as asked for (@qiov and @flags where @op has them). */
static int coroutine_fn GRAPH_RDLOCK
fault_inject_child_io(BlockDriverState *bs, FeOp op, int64_t offset,
                      int64_t bytes, QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    switch (op) {
    case FE_OP_READ:
        return bdrv_co_preadv(bs->file, offset, bytes, qiov, flags);
    case FE_OP_WRITE:
        return bdrv_co_pwritev(bs->file, offset, bytes, qiov, flags);
    case FE_OP_WRITE_ZEROES:
        return bdrv_co_pwrite_zeroes(bs->file, offset, bytes, flags);
    case FE_OP_DISCARD:
        return bdrv_co_pdiscard(bs->file, offset, bytes);
    case FE_OP_FLUSH:
        return bdrv_co_flush(bs->file->bs);
    default:
        g_assert_not_reached();
    }
}

/*
 * Every request through the filter: ask the engine, do the child I/O or
 * not, corrupt the data of a read or write, complete.
 */
static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_request(BlockDriverState *bs, FeOp op, int64_t offset,
                        int64_t bytes, QEMUIOVector *qiov,
                        BdrvRequestFlags flags)
{
    FaultInjectReq r;
    QEMUIOVector bounce;
    void *buf = NULL;
    int ret;

    if (!fault_inject_decide(bs, op, offset, bytes, &r)) {
        return fault_inject_child_io(bs, op, offset, bytes, qiov, flags);
    }
    if (!fault_inject_do_io(&r)) {
        return fault_inject_complete(bs, &r, 0);
    }
    if (op == FE_OP_WRITE && r.d.ncorrupt) {
        /* What is stored differs, the guest's buffer does not. */
        buf = qemu_try_blockalign(bs->file->bs, bytes);
        if (!buf) {
            return -ENOMEM;
        }
        qemu_iovec_to_buf(qiov, 0, buf, bytes);
        qemu_iovec_init_buf(&bounce, buf, bytes);
        fault_inject_corrupt_qiov(&r, offset, &bounce);
        qiov = &bounce;
    }
    ret = fault_inject_child_io(bs, op, offset, bytes, qiov, flags);
    qemu_vfree(buf);
    if (op == FE_OP_READ && ret >= 0 && r.d.ncorrupt) {
        /* In the guest's buffer, after the read. */
        fault_inject_corrupt_qiov(&r, offset, qiov);
    }
    return fault_inject_complete(bs, &r, ret);
}

static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_preadv(BlockDriverState *bs, int64_t offset, int64_t bytes,
                       QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    return fault_inject_co_request(bs, FE_OP_READ, offset, bytes, qiov, flags);
}

static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_pwritev(BlockDriverState *bs, int64_t offset, int64_t bytes,
                        QEMUIOVector *qiov, BdrvRequestFlags flags)
{
    return fault_inject_co_request(bs, FE_OP_WRITE, offset, bytes, qiov, flags);
}

static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_pwrite_zeroes(BlockDriverState *bs, int64_t offset,
                              int64_t bytes, BdrvRequestFlags flags)
{
    return fault_inject_co_request(bs, FE_OP_WRITE_ZEROES, offset, bytes,
                                   NULL, flags);
}

static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_pdiscard(BlockDriverState *bs, int64_t offset, int64_t bytes)
{
    return fault_inject_co_request(bs, FE_OP_DISCARD, offset, bytes, NULL, 0);
}

static int coroutine_fn GRAPH_RDLOCK
fault_inject_co_flush(BlockDriverState *bs)
{
    return fault_inject_co_request(bs, FE_OP_FLUSH, 0, 0, NULL, 0);
}

/*
 * A reopen attaches to the injector its options name (the same one or
 * another) in prepare, so a refusal fails the reopen and leaves the node
 * as it was; commit then detaches the old one, abort the new one.
 */
static int fault_inject_reopen_prepare(BDRVReopenState *reopen_state,
                                       BlockReopenQueue *queue, Error **errp)
{
    ERRP_GUARD();
    FaultInjector *fi = fault_inject_attach(reopen_state->options, errp);

    if (!fi) {
        /* The node keeps its injector: as a failed open, traced. */
        trace_fault_inject_open_error(error_get_pretty(*errp));
        return -EINVAL;
    }
    reopen_state->opaque = fi;
    return 0;
}

static void fault_inject_reopen_commit(BDRVReopenState *reopen_state)
{
    BDRVFaultInjectState *s = reopen_state->bs->opaque;

    fault_injector_detach(s->fi, &fault_inject_user);
    s->fi = reopen_state->opaque;
    reopen_state->opaque = NULL;
}

static void fault_inject_reopen_abort(BDRVReopenState *reopen_state)
{
    fault_injector_detach(reopen_state->opaque, &fault_inject_user);
    reopen_state->opaque = NULL;
}

static const char *const fault_inject_strong_runtime_opts[] = {
    FAULT_INJECT_OPT_INJECTOR,

    NULL
};

static BlockDriver bdrv_fault_inject = {
    .format_name                = "fault-inject",
    .instance_size              = sizeof(BDRVFaultInjectState),

    .bdrv_open                  = fault_inject_open,
    .bdrv_close                 = fault_inject_close,
    .bdrv_child_perm            = bdrv_default_perms,

    .bdrv_co_getlength          = fault_inject_co_getlength,

    .bdrv_co_preadv             = fault_inject_co_preadv,
    .bdrv_co_pwritev            = fault_inject_co_pwritev,
    .bdrv_co_pwrite_zeroes      = fault_inject_co_pwrite_zeroes,
    .bdrv_co_pdiscard           = fault_inject_co_pdiscard,
    .bdrv_co_flush              = fault_inject_co_flush,

    .bdrv_reopen_prepare        = fault_inject_reopen_prepare,
    .bdrv_reopen_commit         = fault_inject_reopen_commit,
    .bdrv_reopen_abort          = fault_inject_reopen_abort,

    .bdrv_drain_begin           = fault_inject_drain_begin,

    .is_filter                  = true,
    .strong_runtime_opts        = fault_inject_strong_runtime_opts,
};

static void bdrv_fault_inject_init(void)
{
    bdrv_register(&bdrv_fault_inject);
}

block_init(bdrv_fault_inject_init);
