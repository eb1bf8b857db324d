/*
 * faultline NVMe fault layer: what it adds to the admin commands.  Get
 * Log Page: the Error Information log (filled by the injected errors)
 * and the vendor log 0xC0 (per-rule hits); Get/Set Features: the vendor
 * feature 0xC0 (the engine's state).  Layouts in
 * include/faultline/nvme-fault-vendor.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "nvme.h"
#include "trace.h"

void nvme_fault_log_error(NvmeCtrl *n, NvmeRequest *req)
{
    NvmeFaultCtrl *f = &n->fault;
    NvmeErrorLog *e = &f->errlog[f->errlog_next];

    f->errlog_next = (f->errlog_next + 1) % NVME_FAULT_ERRLOG_ENTRIES;
    f->error_count++;
    memset(e, 0, sizeof(*e));
    e->error_count = cpu_to_le64(f->error_count);
    e->sqid = cpu_to_le16(req->sq->sqid);
    e->cid = req->cqe.cid;      /* already little endian */
    e->status_field = cpu_to_le16(req->status << 1);
    e->param_error_location = cpu_to_le16(0xffff);
    e->lba = cpu_to_le64(req->fault.slba);
    e->nsid = req->cmd.nsid;    /* already little endian */
    trace_pci_nvme_fault_error(nvme_cid(req), req->sq->sqid, req->status,
                               f->error_count);
}

uint16_t nvme_fault_error_info(NvmeCtrl *n, uint8_t rae, uint32_t buf_len,
                               uint64_t off, NvmeRequest *req)
{
    NvmeFaultCtrl *f = &n->fault;
    const size_t size = NVME_FAULT_ERRLOG_ENTRIES * sizeof(NvmeErrorLog);
    g_autofree NvmeErrorLog *page = g_new0(NvmeErrorLog,
                                           NVME_FAULT_ERRLOG_ENTRIES);
    uint64_t count = MIN(f->error_count, NVME_FAULT_ERRLOG_ENTRIES);

    if (off >= size) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    if (!rae) {
        nvme_clear_events(n, NVME_AER_TYPE_ERROR);
    }
    /* Newest first. */
    for (uint64_t i = 0; i < count; i++) {
        unsigned int slot = (f->errlog_next + NVME_FAULT_ERRLOG_ENTRIES - 1 -
                             i) % NVME_FAULT_ERRLOG_ENTRIES;

        page[i] = f->errlog[slot];
    }
    trace_pci_nvme_fault_log(NVME_LOG_ERROR_INFO, off, buf_len);
    return nvme_c2h(n, (uint8_t *)page + off, MIN(size - off, buf_len), req);
}

uint16_t nvme_fault_hits_log(NvmeCtrl *n, uint32_t buf_len, uint64_t off,
                             NvmeRequest *req)
{
    FaultInjector *fi = n->fault.fi;
    NvmeFaultHitsHdr *hdr;
    NvmeFaultHitsEntry *ent;
    g_autofree FeRuleStats *stats = NULL;
    g_autofree uint8_t *buf = NULL;
    size_t size;
    int nr, got;

    nr = fault_injector_rule_stats(fi, NULL, 0);
    stats = g_new0(FeRuleStats, MAX(nr, 1));
    got = fault_injector_rule_stats(fi, stats, nr);
    nr = MIN(nr, got);

    size = sizeof(*hdr) + nr * sizeof(*ent);
    if (off >= size) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    buf = g_malloc0(size);
    hdr = (NvmeFaultHitsHdr *)buf;
    hdr->version = cpu_to_le32(NVME_FAULT_HITS_LOG_VERSION);
    hdr->nrules = cpu_to_le32(nr);
    hdr->entry_size = cpu_to_le32(sizeof(*ent));
    hdr->state = cpu_to_le32(fault_injector_get_state(fi));
    ent = (NvmeFaultHitsEntry *)(hdr + 1);
    /* Rule names fit whole. */
    QEMU_BUILD_BUG_ON(NVME_FAULT_RULE_NAME_LEN < FE_NAME_MAX);
    for (int i = 0; i < nr; i++) {
        pstrcpy(ent[i].name, sizeof(ent[i].name), stats[i].name);
        ent[i].matched = cpu_to_le64(stats[i].matched);
        ent[i].hits = cpu_to_le64(stats[i].hits);
    }
    trace_pci_nvme_fault_log(NVME_FAULT_LOG_ID, off, buf_len);
    return nvme_c2h(n, buf + off, MIN(size - off, buf_len), req);
}

uint16_t nvme_fault_get_feature(NvmeCtrl *n, NvmeRequest *req)
{
    uint32_t dw10 = le32_to_cpu(req->cmd.cdw10);
    uint32_t state;

    if (!n->fault.fi || req->cmd.cdw11 || req->cmd.cdw12) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    switch (NVME_GETFEAT_SELECT(dw10)) {
    case NVME_GETFEAT_SELECT_CURRENT:
        state = fault_injector_get_state(n->fault.fi);
        break;
    case NVME_GETFEAT_SELECT_DEFAULT:
    case NVME_GETFEAT_SELECT_SAVED:
        state = 0;
        break;
    case NVME_GETFEAT_SELECT_CAP:
        state = NVME_FEAT_CAP_CHANGE;
        break;
    default:
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    req->cqe.result = cpu_to_le32(state);
    trace_pci_nvme_fault_get_state(state);
    return NVME_SUCCESS;
}

uint16_t nvme_fault_set_feature(NvmeCtrl *n, NvmeRequest *req)
{
    uint32_t dw10 = le32_to_cpu(req->cmd.cdw10);
    uint32_t state = le32_to_cpu(req->cmd.cdw11);

    if (!n->fault.fi || req->cmd.cdw12) {
        return NVME_INVALID_FIELD | NVME_DNR;
    }
    if (NVME_SETFEAT_SAVE(dw10)) {
        return NVME_FID_NOT_SAVEABLE | NVME_DNR;
    }
    /* Completion dword 0: the previous state. */
    req->cqe.result = cpu_to_le32(fault_injector_get_state(n->fault.fi));
    fault_injector_set_state(n->fault.fi, state);
    trace_pci_nvme_fault_set_state(state);
    return NVME_SUCCESS;
}
