/*
 * faultline NVMe fault layer: corrupt=, bytes flipped after the data
 * moved.  A read's bytes are flipped where the guest reads them; a
 * successful write is stored again from a flipped copy before it
 * completes, the guest's buffer left as it is.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/memalign.h"
#include "system/block-backend.h"
#include "system/dma.h"
#include "nvme.h"

/* The namespace of a corruptible command: data without metadata. */
static NvmeNamespace *nvme_fault_corrupt_ns(NvmeRequest *req)
{
    if (!req->ns || req->ns->lbaf.ms || !(req->sg.flags & NVME_SG_ALLOC)) {
        return NULL;
    }
    return req->ns;
}

/* Flip the decided bytes of a read where the guest reads them. */
static void nvme_fault_corrupt_read(NvmeRequest *req)
{
    const FeDecision *d = &req->fault.d;
    NvmeSg *sg = &req->sg;
    uint64_t pos = 0;

    if (!(sg->flags & NVME_SG_DMA)) {
        /* Controller memory (CMB/PMR), mapped. */
        for (int i = 0; i < sg->iov.niov; i++) {
            fe_decision_corrupt(d, pos, sg->iov.iov[i].iov_base,
                                sg->iov.iov[i].iov_len);
            pos += sg->iov.iov[i].iov_len;
        }
        return;
    }
    for (int i = 0; i < sg->qsg.nsg; i++) {
        const ScatterGatherEntry *e = &sg->qsg.sg[i];

        for (uint32_t k = 0; k < d->ncorrupt; k++) {
            dma_addr_t addr = e->base + (d->corrupt[k] - pos);
            uint8_t b;

            if (d->corrupt[k] < pos || d->corrupt[k] - pos >= e->len) {
                continue;
            }
            if (dma_memory_read(sg->qsg.as, addr, &b, 1,
                                MEMTXATTRS_UNSPECIFIED) == MEMTX_OK) {
                b ^= 0xff;
                if (dma_memory_write(sg->qsg.as, addr, &b, 1,
                                     MEMTXATTRS_UNSPECIFIED) == MEMTX_OK) {
                    continue;
                }
            }
            qemu_log_mask(LOG_GUEST_ERROR, "nvme: fault corrupt: cannot "
                          "flip the read byte at 0x%" PRIx64 "\n",
                          (uint64_t)addr);
        }
        pos += e->len;
    }
}

static void nvme_fault_corrupt_write_cb(void *opaque, int ret)
{
    NvmeRequest *req = opaque;
    NvmeCQueue *cq = nvme_cq(req);

    req->aiocb = NULL;
    qemu_vfree(req->fault.bounce.iov[0].iov_base);
    qemu_iovec_destroy(&req->fault.bounce);
    if (ret < 0 && req->status == NVME_SUCCESS) {
        /* What is stored is neither the data nor its planned corruption. */
        req->status = NVME_INTERNAL_DEV_ERROR;
    }
    /* The completion hook again, this time past the corruption. */
    if (!nvme_fault_complete(cq, req)) {
        nvme_do_enqueue_req_completion(cq, req);
    }
}

/*
 * Store the written data again from a copy with the decided bytes
 * flipped; the guest's buffer stays as it is.  True if the command now
 * completes from nvme_fault_corrupt_write_cb().
 */
static bool nvme_fault_corrupt_write(NvmeRequest *req, NvmeNamespace *ns)
{
    NvmeRwCmd *rw = (NvmeRwCmd *)&req->cmd;
    NvmeSg *sg = &req->sg;
    uint64_t bytes = ((uint64_t)le16_to_cpu(rw->nlb) + 1) << ns->lbaf.ds;
    uint8_t *buf = qemu_try_blockalign(blk_bs(ns->blkconf.blk), bytes);
    uint64_t pos = 0;

    if (!buf) {
        return false;
    }
    if (sg->flags & NVME_SG_DMA) {
        for (int i = 0; i < sg->qsg.nsg && pos < bytes; i++) {
            dma_addr_t len = MIN(sg->qsg.sg[i].len, bytes - pos);

            if (dma_memory_read(sg->qsg.as, sg->qsg.sg[i].base, buf + pos,
                                len, MEMTXATTRS_UNSPECIFIED)) {
                qemu_log_mask(LOG_GUEST_ERROR, "nvme: fault corrupt: cannot "
                              "read the written data back\n");
                qemu_vfree(buf);
                return false;
            }
            pos += len;
        }
    } else {
        pos = qemu_iovec_to_buf(&sg->iov, 0, buf, bytes);
    }
    if (pos != bytes) {
        qemu_vfree(buf);
        return false;
    }
    fe_decision_corrupt(&req->fault.d, 0, buf, bytes);
    qemu_iovec_init_buf(&req->fault.bounce, buf, bytes);
    req->aiocb = blk_aio_pwritev(ns->blkconf.blk, nvme_l2b(ns,
                                 le64_to_cpu(rw->slba)), &req->fault.bounce,
                                 0, nvme_fault_corrupt_write_cb, req);
    return true;
}

/* Apply corrupt= once, after the data moved.  True: completes later. */
bool nvme_fault_corrupt(NvmeRequest *req)
{
    NvmeNamespace *ns = nvme_fault_corrupt_ns(req);

    req->fault.corrupted = true;
    if (!ns) {
        return false;
    }
    if (req->cmd.opcode == NVME_CMD_READ) {
        nvme_fault_corrupt_read(req);
        return false;
    }
    return req->cmd.opcode == NVME_CMD_WRITE &&
           nvme_fault_corrupt_write(req, ns);
}
