/*
 * QTest for syncblk-pci: register interface, the three completion modes,
 * injected errors and latency, and bad commands (which must never crash
 * QEMU).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "hw/pci/pci_regs.h"
#include "faultline-qtest.h"

/*
 * The register interface as docs/devices.md ("syncblk") documents it.
 * Written out here on purpose, not included from the device's
 * include/faultline/syncblk-regs.h: the test checks the device against the spec,
 * so a wrong offset or code in the device's header fails it instead of
 * moving with it (test_registers, test_spec_layout).
 */
#define SB_VENDOR_ID                0x1af4
#define SB_DEVICE_ID                0x10f0
#define SB_MAGIC                    0x4b425953      /* "SYBK" */
#define SB_VERSION                  1

/* Register map (BAR0), 32-bit little-endian. */
#define SB_REG_MAGIC                0x00
#define SB_REG_VERSION              0x04
#define SB_REG_CAPACITY_LO          0x08
#define SB_REG_CAPACITY_HI          0x0c
#define SB_REG_BLOCK_SIZE           0x10
#define SB_REG_MODE                 0x14
#define SB_REG_FEATURES             0x18
#define SB_REG_NUM_SLOTS            0x1c
#define SB_REG_MAX_SECTORS          0x20
#define SB_REG_MAX_ENTRIES          0x24
#define SB_REG_TIMEOUT_MS           0x28
#define SB_REG_FAULT_STATE          0x2c
#define SB_REG_LAST_ERROR           0x30
#define SB_REG_CNT_CMDS             0x40
#define SB_REG_CNT_ERRORS           0x44
#define SB_REG_CNT_INJECTED         0x48
#define SB_REG_CNT_TIMEOUTS         0x4c
#define SB_REG_CNT_DONE_TASK        0x50
#define SB_REG_CNT_DONE_IRQ         0x54
#define SB_REG_CNT_DONE_THREAD      0x58
#define SB_REG_CNT_BAD_CMDS         0x5c
#define SB_REG_SLOT_BASE            0x100
#define SB_REG_SLOT_STRIDE          0x40
#define SB_NUM_SLOTS                16

/* Slot registers, at offsets within a slot. */
#define SB_SLOT_OPCODE              0x00
#define SB_SLOT_NUM_ENTRIES         0x04
#define SB_SLOT_LBA_LO              0x08
#define SB_SLOT_LBA_HI              0x0c
#define SB_SLOT_NUM_SECTORS         0x10
#define SB_SLOT_DOORBELL            0x14
#define SB_SLOT_LIST_LO             0x18
#define SB_SLOT_LIST_HI             0x1c
#define SB_SLOT_STATUS              0x20
#define SB_SLOT_ERROR               0x24
#define SB_SLOT_CTX                 0x28

#define SB_DOORBELL_SUBMIT          1
#define SB_DOORBELL_ABORT           2

#define SB_OP_READ                  0
#define SB_OP_WRITE                 1
#define SB_OP_FLUSH                 2
#define SB_OP_DISCARD               3

#define SB_ST_IDLE                  0
#define SB_ST_BUSY                  1
#define SB_ST_DONE                  2
#define SB_ST_ERROR                 3
#define SB_ST_TIMEOUT               4

/* MODE and CTX */
#define SB_CTX_TASK                 0
#define SB_CTX_IRQ                  1
#define SB_CTX_THREAD               2

/* ERROR and LAST_ERROR: Linux errno numbers. */
#define SB_ERR_EIO                  5
#define SB_ERR_EFAULT               14
#define SB_ERR_EBUSY                16
#define SB_ERR_EINVAL               22
#define SB_ERR_ENOSPC               28
#define SB_ERR_ENODATA              61
#define SB_ERR_EBADMSG              74
#define SB_ERR_EOPNOTSUPP           95
#define SB_ERR_ETIMEDOUT            110
#define SB_ERR_EREMOTEIO            121

/* A scatter entry: { le64 addr; le32 len; le32 0 }. */
#define SB_ENTRY_SIZE               16

#define IMG_SIZE            (64 * 1024 * 1024)
#define IMG_SECTORS         (IMG_SIZE / 512)

#define SLOT(i, r)          (SB_REG_SLOT_BASE + (i) * SB_REG_SLOT_STRIDE + (r))

#define MSI_DATA            0x5b10c000u

static const char *rules_text =
    "eio:    write lba=100 error=eio\n"
    "nospc:  write lba=200 error=enospc\n"
    "wfault: write lba=300 error=write-fault\n"
    "rerr:   read  lba=400 error=read-error\n"
    "intern: write lba=500 error=internal\n"
    "lost:   write lba=600 drop\n"
    "tmo:    write lba=700 error=timeout\n"
    "after:  write lba=800 error=write-fault when=after\n"
    "toirq:  write lba=900 complete=irq\n"
    "slow:   write lba=1000 delay=5ms\n"
    "lie:    write lba=2000 after=1 lie\n"
    "lier:   read  lba=2100 count=1 lie\n"
    "cw:     write lba=2200 corrupt=3\n"
    "cr:     read  lba=2300 count=1 corrupt=2\n";

static char *tmpdir;

typedef struct SB {
    QTestState *qts;
    FlPci pci;
    uint64_t msi_addr;
    char *img;
} SB;

typedef enum SBMsix {
    SB_MSIX_OFF,
    SB_MSIX_ASYNC,              /* vector 0 to RAM in irq and thread mode */
    SB_MSIX_ON,                 /* vector 0 to RAM in every mode */
} SBMsix;

typedef struct SBOpts {
    const char *completion;
    bool faults;                /* a fault-injector with rules_text */
    FlMode mode;
    SBMsix msix;
    const char *dev_opts;       /* more syncblk-pci properties, or NULL */
    const uint8_t *sector0;     /* 512 bytes for the image's sector 0 */
} SBOpts;

static uint32_t mode_ctx(const char *mode)
{
    return !strcmp(mode, "irq") ? SB_CTX_IRQ :
           !strcmp(mode, "thread") ? SB_CTX_THREAD : SB_CTX_TASK;
}

static uint32_t rd(SB *sb, uint64_t off)
{
    return qpci_io_readl(sb->pci.dev, sb->pci.bar, off);
}

static void wr(SB *sb, uint64_t off, uint32_t val)
{
    qpci_io_writel(sb->pci.dev, sb->pci.bar, off, val);
}

/* Point MSI-X vector 0 at @addr with @data. */
static void sb_msix_route(SB *sb, uint64_t addr, uint32_t data)
{
    QPCIDevice *d = sb->pci.dev;
    uint64_t e = d->msix_table_off;

    qpci_msix_enable(d);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_LOWER_ADDR,
                   (uint32_t)addr);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_UPPER_ADDR,
                   addr >> 32);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_DATA, data);
    qpci_io_writel(d, d->msix_table_bar, e + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
}

/* Point MSI-X vector 0 at guest RAM: a delivered message shows up there. */
static void sb_msix_to_ram(SB *sb)
{
    sb->msi_addr = guest_alloc(&sb->pci.alloc, 4);
    qtest_writel(sb->qts, sb->msi_addr, 0);
    sb_msix_route(sb, sb->msi_addr, MSI_DATA);
}

static void sb_start_opts(SB *sb, const SBOpts *o)
{
    g_autofree char *machine = NULL;

    memset(sb, 0, sizeof(*sb));
    sb->img = fl_zero_file(tmpdir, "disk.img", IMG_SIZE);
    if (o->sector0) {
        int fd = open(sb->img, O_WRONLY);

        g_assert(fd >= 0);
        g_assert(pwrite(fd, o->sector0, 512, 0) == 512);
        close(fd);
    }
    machine = fl_machine_args(tmpdir, o->faults ? rules_text : NULL, o->mode);
    sb->qts = qtest_initf("%s-machine q35 -nodefaults "
                          "-global apic-common.vapic=off "
                          "-blockdev driver=file,filename=%s,node-name=d0 "
                          "-device syncblk-pci,drive=d0,completion=%s%s%s%s,"
                          "addr=04.0",
                          machine, sb->img, o->completion,
                          o->faults ? ",fault-injector=fi0" : "",
                          o->dev_opts ? "," : "",
                          o->dev_opts ? o->dev_opts : "");
    fl_pci_start(&sb->pci, sb->qts, 4);
    if (o->msix == SB_MSIX_ON ||
        (o->msix == SB_MSIX_ASYNC && mode_ctx(o->completion) != SB_CTX_TASK)) {
        sb_msix_to_ram(sb);
    }
}

static void sb_start(SB *sb, const char *completion, bool faults,
                     SBMsix msix)
{
    SBOpts o = { .completion = completion, .faults = faults, .msix = msix };

    sb_start_opts(sb, &o);
}

/* True once (and clears it) if an MSI-X message arrived. */
static bool sb_msi_seen(SB *sb)
{
    uint32_t v = qtest_readl(sb->qts, sb->msi_addr);

    qtest_writel(sb->qts, sb->msi_addr, 0);
    g_assert(v == 0 || v == MSI_DATA);
    return v == MSI_DATA;
}

/* A command completed in @ctx: irq and thread contexts signal MSI-X. */
static void sb_assert_signalled(SB *sb, uint32_t ctx)
{
    if (ctx != SB_CTX_TASK) {
        g_assert(sb_msi_seen(sb));
    }
}

static void sb_stop(SB *sb)
{
    /* Whatever happened, QEMU must still be alive and running. */
    fl_assert_running(sb->qts);
    fl_pci_stop(&sb->pci);
    qtest_quit(sb->qts);
    unlink(sb->img);
    g_free(sb->img);
}

static uint32_t slot_rd(SB *sb, int slot, uint64_t reg)
{
    return rd(sb, SLOT(slot, reg));
}

/* A scatter list of @n entries, each @len bytes, in one fresh buffer. */
static uint64_t sb_list(SB *sb, uint64_t *data, unsigned n, uint32_t len)
{
    uint64_t list = guest_alloc(&sb->pci.alloc, n * SB_ENTRY_SIZE);

    for (unsigned i = 0; i < n; i++) {
        uint64_t e = list + i * SB_ENTRY_SIZE;

        if (!data[i]) {
            data[i] = guest_alloc(&sb->pci.alloc, len);
        }
        qtest_writeq(sb->qts, e, data[i]);
        qtest_writel(sb->qts, e + 8, len);
        qtest_writel(sb->qts, e + 12, 0);
    }
    return list;
}

/* A one-entry scatter list over a fresh 4 KiB buffer. */
static uint64_t sb_list1(SB *sb)
{
    uint64_t data[1] = { 0 };

    return sb_list(sb, data, 1, 4096);
}

/* Write a command into @slot's registers, without ringing the doorbell. */
static void sb_prepare(SB *sb, int slot, uint32_t op, uint64_t lba,
                       uint32_t nsec, uint64_t list, uint32_t nent)
{
    wr(sb, SLOT(slot, SB_SLOT_OPCODE), op);
    wr(sb, SLOT(slot, SB_SLOT_LBA_LO), (uint32_t)lba);
    wr(sb, SLOT(slot, SB_SLOT_LBA_HI), lba >> 32);
    wr(sb, SLOT(slot, SB_SLOT_NUM_SECTORS), nsec);
    wr(sb, SLOT(slot, SB_SLOT_LIST_LO), (uint32_t)list);
    wr(sb, SLOT(slot, SB_SLOT_LIST_HI), list >> 32);
    wr(sb, SLOT(slot, SB_SLOT_NUM_ENTRIES), nent);
}

static void sb_submit(SB *sb, int slot, uint32_t op, uint64_t lba,
                      uint32_t nsec, uint64_t list, uint32_t nent)
{
    sb_prepare(sb, slot, op, lba, nsec, list, nent);
    wr(sb, SLOT(slot, SB_SLOT_DOORBELL), SB_DOORBELL_SUBMIT);
}

/* Poll STATUS until it leaves BUSY (AIO completes in the main loop). */
static uint32_t sb_wait(SB *sb, int slot)
{
    uint32_t st = SB_ST_BUSY;

    FL_POLL((st = slot_rd(sb, slot, SB_SLOT_STATUS)) != SB_ST_BUSY,
            50000, 100);
    return st;
}

/* @slot's command ends with STATUS @st and ERROR @err. */
static void sb_expect(SB *sb, int slot, uint32_t st, uint32_t err)
{
    g_assert_cmpuint(sb_wait(sb, slot), ==, st);
    g_assert_cmpuint(slot_rd(sb, slot, SB_SLOT_ERROR), ==, err);
}

/* One 4 KiB I/O from/to one buffer in slot 0: STATUS @st, ERROR @err. */
static void sb_io(SB *sb, uint32_t op, uint64_t lba, uint64_t buf,
                  uint32_t st, uint32_t err)
{
    uint64_t data[1] = { buf };
    uint64_t list = sb_list(sb, data, 1, 4096);

    sb_submit(sb, 0, op, lba, 8, list, 1);
    sb_expect(sb, 0, st, err);
}

static void sb_io_ok(SB *sb, uint32_t op, uint64_t lba, uint64_t buf)
{
    sb_io(sb, op, lba, buf, SB_ST_DONE, 0);
}

static uint32_t done_count(SB *sb, uint32_t ctx)
{
    return rd(sb, ctx == SB_CTX_IRQ ? SB_REG_CNT_DONE_IRQ :
              ctx == SB_CTX_THREAD ? SB_REG_CNT_DONE_THREAD :
              SB_REG_CNT_DONE_TASK);
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = seed + i * 7 + (i >> 9);
    }
}

/* Registers with a fixed documented value (docs/devices.md). */
static const struct {
    const char *name;
    uint32_t off;
    uint32_t val;
} spec_values[] = {
    { "MAGIC", SB_REG_MAGIC, SB_MAGIC },
    { "VERSION", SB_REG_VERSION, SB_VERSION },
    { "CAPACITY_LO", SB_REG_CAPACITY_LO, IMG_SECTORS },
    { "CAPACITY_HI", SB_REG_CAPACITY_HI, 0 },
    { "BLOCK_SIZE", SB_REG_BLOCK_SIZE, 512 },
    { "FEATURES", SB_REG_FEATURES, 0xf },   /* flush discard MSI-X abort */
    { "NUM_SLOTS", SB_REG_NUM_SLOTS, SB_NUM_SLOTS },
    { "MAX_SECTORS", SB_REG_MAX_SECTORS, 4096 },
    { "MAX_ENTRIES", SB_REG_MAX_ENTRIES, 512 },
    { "TIMEOUT_MS", SB_REG_TIMEOUT_MS, 1000 },
};

static void test_registers(void)
{
    const char *modes[] = { "task", "irq", "thread" };

    for (int m = 0; m < 3; m++) {
        SB sb;

        sb_start(&sb, modes[m], false, SB_MSIX_OFF);
        for (int i = 0; i < ARRAY_SIZE(spec_values); i++) {
            g_test_message("%s at 0x%x", spec_values[i].name,
                           spec_values[i].off);
            g_assert_cmphex(rd(&sb, spec_values[i].off), ==,
                            spec_values[i].val);
        }
        g_assert_cmpuint(rd(&sb, SB_REG_MODE), ==, mode_ctx(modes[m]));
        g_assert_cmpuint(slot_rd(&sb, 3, SB_SLOT_STATUS), ==, SB_ST_IDLE);
        /* 64-bit access is split into two 32-bit halves */
        g_assert_cmphex(qpci_io_readq(sb.pci.dev, sb.pci.bar,
                                      SB_REG_CAPACITY_LO), ==, IMG_SECTORS);
        /* no injector: the state register reads 0 and ignores writes */
        wr(&sb, SB_REG_FAULT_STATE, 5);
        g_assert_cmpuint(rd(&sb, SB_REG_FAULT_STATE), ==, 0);
        g_assert_cmphex(qpci_config_readw(sb.pci.dev, PCI_VENDOR_ID), ==,
                        SB_VENDOR_ID);
        g_assert_cmphex(qpci_config_readw(sb.pci.dev, PCI_DEVICE_ID), ==,
                        SB_DEVICE_ID);
        sb_stop(&sb);
    }
}

/*
 * The documented slot layout, by behaviour: in the first, a middle and
 * the last slot each RW register reads back what was written at its
 * documented offset (no two share one, the stride is right), a command
 * written there and submitted with the documented DOORBELL value runs
 * (STATUS, ERROR and CTX at theirs), and documented error codes come
 * back: EOPNOTSUPP for an unknown opcode, EINVAL and EBUSY in
 * LAST_ERROR.
 */
static void test_spec_layout(void)
{
    static const uint32_t rw_regs[] = {
        SB_SLOT_OPCODE, SB_SLOT_NUM_ENTRIES, SB_SLOT_LBA_LO, SB_SLOT_LBA_HI,
        SB_SLOT_NUM_SECTORS, SB_SLOT_LIST_LO, SB_SLOT_LIST_HI,
    };
    static const int slots[] = { 0, 7, SB_NUM_SLOTS - 1 };
    uint64_t list;
    SB sb;

    sb_start(&sb, "irq", true, SB_MSIX_ASYNC);
    list = sb_list1(&sb);
    for (int s = 0; s < ARRAY_SIZE(slots); s++) {
        int slot = slots[s];

        for (int i = 0; i < ARRAY_SIZE(rw_regs); i++) {
            wr(&sb, SLOT(slot, rw_regs[i]), 0x5a000000 + slot * 0x100 + i);
        }
        for (int i = 0; i < ARRAY_SIZE(rw_regs); i++) {
            g_assert_cmphex(slot_rd(&sb, slot, rw_regs[i]), ==,
                            0x5a000000 + slot * 0x100 + i);
        }
        sb_submit(&sb, slot, SB_OP_WRITE, 8 * slot, 8, list, 1);
        sb_expect(&sb, slot, SB_ST_DONE, 0);
        g_assert_cmpuint(slot_rd(&sb, slot, SB_SLOT_CTX), ==, SB_CTX_IRQ);
        sb_assert_signalled(&sb, SB_CTX_IRQ);
        sb_submit(&sb, slot, 7, 0, 8, list, 1);
        sb_expect(&sb, slot, SB_ST_ERROR, SB_ERR_EOPNOTSUPP);
        sb_assert_signalled(&sb, SB_CTX_IRQ);
    }
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_BAD_CMDS), ==, ARRAY_SIZE(slots));
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_DONE_IRQ), ==, 2 * ARRAY_SIZE(slots));
    /* a lost completion keeps its slot busy: a second doorbell is EBUSY */
    sb_submit(&sb, 1, SB_OP_WRITE, 600, 8, list, 1);
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_STATUS), ==, SB_ST_BUSY);
    wr(&sb, SLOT(1, SB_SLOT_DOORBELL), SB_DOORBELL_SUBMIT);
    g_assert_cmpuint(rd(&sb, SB_REG_LAST_ERROR), ==, SB_ERR_EBUSY);
    wr(&sb, SLOT(2, SB_SLOT_DOORBELL), SB_DOORBELL_ABORT + 1);
    g_assert_cmpuint(rd(&sb, SB_REG_LAST_ERROR), ==, SB_ERR_EINVAL);
    wr(&sb, SLOT(1, SB_SLOT_DOORBELL), SB_DOORBELL_ABORT);
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_STATUS), ==, SB_ST_TIMEOUT);
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_ERROR), ==, SB_ERR_ETIMEDOUT);
    sb_stop(&sb);
}

/* Write a pattern over two scatter entries, read it back over four. */
static void rw_roundtrip(SB *sb, int slot, uint32_t ctx)
{
    uint8_t out[8192], in[8192];
    uint64_t wdata[2] = { 0 }, rdata[4] = { 0 };
    uint64_t wlist = sb_list(sb, wdata, 2, 4096);
    uint64_t rlist = sb_list(sb, rdata, 4, 2048);

    fill(out, sizeof(out), 0x11 * (slot + 1));
    qtest_memwrite(sb->qts, wdata[0], out, 4096);
    qtest_memwrite(sb->qts, wdata[1], out + 4096, 4096);
    sb_submit(sb, slot, SB_OP_WRITE, 2048 + slot * 16, 16, wlist, 2);
    if (ctx == SB_CTX_TASK) {
        /* the data moved during the doorbell write */
        g_assert_cmpuint(slot_rd(sb, slot, SB_SLOT_STATUS), ==, SB_ST_DONE);
    }
    sb_expect(sb, slot, SB_ST_DONE, 0);
    g_assert_cmpuint(slot_rd(sb, slot, SB_SLOT_CTX), ==, ctx);
    sb_assert_signalled(sb, ctx);

    sb_submit(sb, slot, SB_OP_READ, 2048 + slot * 16, 16, rlist, 4);
    g_assert_cmpuint(sb_wait(sb, slot), ==, SB_ST_DONE);
    sb_assert_signalled(sb, ctx);
    for (int i = 0; i < 4; i++) {
        qtest_memread(sb->qts, rdata[i], in + i * 2048, 2048);
    }
    g_assert(memcmp(in, out, sizeof(in)) == 0);
}

static void test_task_rw(void)
{
    SB sb;

    sb_start(&sb, "task", false, SB_MSIX_OFF);
    rw_roundtrip(&sb, 0, SB_CTX_TASK);
    rw_roundtrip(&sb, 15, SB_CTX_TASK);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_DONE_TASK), ==, 4);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_DONE_IRQ), ==, 0);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_CMDS), ==, 4);
    sb_stop(&sb);
}

static void test_async_rw(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    SB sb;

    sb_start(&sb, mode, false, SB_MSIX_ASYNC);
    rw_roundtrip(&sb, 0, ctx);
    rw_roundtrip(&sb, 7, ctx);
    g_assert_cmpuint(done_count(&sb, ctx), ==, 4);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_DONE_TASK), ==, 0);
    sb_stop(&sb);
}

/* Several commands in flight at once, in different slots. */
static void test_irq_many_slots(void)
{
    uint64_t data[16][1] = { { 0 } };
    uint64_t list[16];
    SB sb;

    sb_start(&sb, "irq", false, SB_MSIX_ASYNC);
    for (int i = 0; i < 16; i++) {
        list[i] = sb_list(&sb, data[i], 1, 4096);
        qtest_memset(sb.qts, data[i][0], i + 1, 4096);
    }
    for (int i = 0; i < 16; i++) {
        sb_submit(&sb, i, SB_OP_WRITE, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, SB_ST_DONE);
    }
    for (int i = 0; i < 16; i++) {
        qtest_memset(sb.qts, data[i][0], 0, 4096);
        sb_submit(&sb, i, SB_OP_READ, i * 8, 8, list[i], 1);
    }
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(sb_wait(&sb, i), ==, SB_ST_DONE);
        g_assert_cmpuint(qtest_readb(sb.qts, data[i][0] + 4095), ==, i + 1);
    }
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_DONE_IRQ), ==, 32);
    sb_stop(&sb);
}

static void assert_hits(SB *sb, const char *name, int64_t hits)
{
    g_assert_cmpint(fl_rule_hits(sb->qts, "fi0", name), ==, hits);
}

static void test_errors(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    static const struct {
        uint32_t op;
        uint64_t lba;
        uint32_t err;
        const char *rule;
    } cases[] = {
        { SB_OP_WRITE, 100, SB_ERR_EIO, "eio" },
        { SB_OP_WRITE, 200, SB_ERR_ENOSPC, "nospc" },
        { SB_OP_WRITE, 300, SB_ERR_ENODATA, "wfault" },
        { SB_OP_READ, 400, SB_ERR_EBADMSG, "rerr" },
        { SB_OP_WRITE, 500, SB_ERR_EREMOTEIO, "intern" },
    };
    uint64_t buf;
    SB sb;

    sb_start(&sb, mode, true, SB_MSIX_ASYNC);
    buf = guest_alloc(&sb.pci.alloc, 4096);
    for (int i = 0; i < ARRAY_SIZE(cases); i++) {
        sb_io(&sb, cases[i].op, cases[i].lba, buf, SB_ST_ERROR, cases[i].err);
        sb_assert_signalled(&sb, ctx);
        assert_hits(&sb, cases[i].rule, 1);
    }
    /* a neighbouring LBA is not hit */
    sb_io_ok(&sb, SB_OP_WRITE, 108, buf);

    /* when=after: the write lands, the status says it did not */
    qtest_memset(sb.qts, buf, 0xa5, 4096);
    sb_io(&sb, SB_OP_WRITE, 800, buf, SB_ST_ERROR, SB_ERR_ENODATA);
    sb_assert_signalled(&sb, ctx);
    qtest_memset(sb.qts, buf, 0, 4096);
    sb_io_ok(&sb, SB_OP_READ, 800, buf);
    g_assert_cmpuint(qtest_readb(sb.qts, buf + 100), ==, 0xa5);
    sb_assert_signalled(&sb, ctx);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_INJECTED), ==, 6);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_ERRORS), ==, 6);
    sb_stop(&sb);
}

/* Fill @buf with @byte, write it to @lba (status DONE). */
static void sb_write_byte(SB *sb, uint64_t lba, uint64_t buf, uint8_t byte)
{
    qtest_memset(sb->qts, buf, byte, 4096);
    sb_io_ok(sb, SB_OP_WRITE, lba, buf);
}

/*
 * Read @lba into @buf, which held @before: DONE, and the buffer is
 * @byte but for the bytes at @off[0..cnt), flipped.
 */
static void sb_read_expect(SB *sb, uint64_t lba, uint64_t buf,
                           uint8_t before, uint8_t byte, const uint64_t *off,
                           int cnt)
{
    qtest_memset(sb->qts, buf, before, 4096);
    sb_io_ok(sb, SB_OP_READ, lba, buf);
    fl_assert_guest_flipped(sb->qts, buf, byte, off, cnt);
}

/*
 * lie: a write reports DONE and the old data stays; a read reports DONE
 * and the buffer keeps what it held.  corrupt: what a write stored, or
 * what a read delivered, differs by exactly N bytes at the logged offsets.
 */
static void test_lie_corrupt(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t buf, off[16];
    SB sb;

    sb_start(&sb, mode, true, SB_MSIX_ASYNC);
    buf = guest_alloc(&sb.pci.alloc, 4096);
    sb_write_byte(&sb, 2000, buf, 0x11);
    sb_write_byte(&sb, 2000, buf, 0x22);
    assert_hits(&sb, "lie", 1);
    sb_read_expect(&sb, 2000, buf, 0, 0x11, NULL, 0);

    sb_write_byte(&sb, 2100, buf, 0x55);
    sb_read_expect(&sb, 2100, buf, 0x99, 0x99, NULL, 0);
    sb_read_expect(&sb, 2100, buf, 0x99, 0x55, NULL, 0);

    sb_write_byte(&sb, 2200, buf, 0x33);
    /* the guest's copy is intact */
    fl_assert_guest_flipped(sb.qts, buf, 0x33, NULL, 0);
    g_assert_cmpint(fl_logged_offsets(sb.qts, "fi0", "cw", off, 16), ==, 3);
    sb_read_expect(&sb, 2200, buf, 0x33, 0x33, off, 3);

    sb_write_byte(&sb, 2300, buf, 0x44);
    qtest_memset(sb.qts, buf, 0, 4096);
    sb_io_ok(&sb, SB_OP_READ, 2300, buf);
    g_assert_cmpint(fl_logged_offsets(sb.qts, "fi0", "cr", off, 16), ==, 2);
    fl_assert_guest_flipped(sb.qts, buf, 0x44, off, 2);
    /* the disk's copy is intact */
    sb_read_expect(&sb, 2300, buf, 0, 0x44, NULL, 0);
    sb_stop(&sb);
}

/* Lost completions: TIMEOUT after timeout-ms in task mode, abort else. */
static void test_drop(gconstpointer opaque)
{
    const char *mode = opaque;
    bool task = mode_ctx(mode) == SB_CTX_TASK;
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true, SB_MSIX_ASYNC);
    list = sb_list1(&sb);
    for (uint64_t lba = 600; lba <= 700; lba += 100) {
        sb_submit(&sb, 2, SB_OP_WRITE, lba, 8, list, 1);
        g_assert_cmpuint(slot_rd(&sb, 2, SB_SLOT_STATUS), ==, SB_ST_BUSY);
        qtest_clock_step(sb.qts, 999 * 1000 * 1000);
        g_usleep(10 * 1000);
        g_assert_cmpuint(slot_rd(&sb, 2, SB_SLOT_STATUS), ==, SB_ST_BUSY);
        /* a second doorbell on the busy slot is refused */
        wr(&sb, SLOT(2, SB_SLOT_DOORBELL), SB_DOORBELL_SUBMIT);
        g_assert_cmpuint(rd(&sb, SB_REG_LAST_ERROR), ==, SB_ERR_EBUSY);
        wr(&sb, SB_REG_LAST_ERROR, 0);
        g_assert_cmpuint(rd(&sb, SB_REG_LAST_ERROR), ==, 0);
        if (task) {
            qtest_clock_step(sb.qts, 2 * 1000 * 1000);
        } else {
            qtest_clock_step(sb.qts, 10ll * 1000 * 1000 * 1000);
            g_assert_cmpuint(slot_rd(&sb, 2, SB_SLOT_STATUS), ==,
                             SB_ST_BUSY);
            g_assert(!sb_msi_seen(&sb));
            wr(&sb, SLOT(2, SB_SLOT_DOORBELL), SB_DOORBELL_ABORT);
            g_assert(!sb_msi_seen(&sb));
        }
        g_assert_cmpuint(slot_rd(&sb, 2, SB_SLOT_STATUS), ==, SB_ST_TIMEOUT);
        g_assert_cmpuint(slot_rd(&sb, 2, SB_SLOT_ERROR), ==,
                         SB_ERR_ETIMEDOUT);
    }
    assert_hits(&sb, "lost", 1);
    assert_hits(&sb, "tmo", 1);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_TIMEOUTS), ==, 2);
    /* the slot is usable again */
    sb_submit(&sb, 2, SB_OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 2), ==, SB_ST_DONE);
    sb_stop(&sb);
}

/* Injected latency runs on the virtual clock, exactly. */
static void test_latency(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true, SB_MSIX_ASYNC);
    list = sb_list1(&sb);
    sb_submit(&sb, 1, SB_OP_WRITE, 1000, 8, list, 1);
    g_usleep(20 * 1000);        /* let any AIO finish: only time is missing */
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_STATUS), ==, SB_ST_BUSY);
    qtest_clock_step(sb.qts, 4 * 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_STATUS), ==, SB_ST_BUSY);
    g_assert(ctx == SB_CTX_TASK || !sb_msi_seen(&sb));
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(sb_wait(&sb, 1), ==, SB_ST_DONE);
    sb_assert_signalled(&sb, ctx);
    assert_hits(&sb, "slow", 1);
    sb_stop(&sb);
}

/* complete=irq switches one command of a task-mode device to MSI-X. */
static void test_complete_override(void)
{
    uint64_t buf;
    SB sb;

    sb_start(&sb, "task", true, SB_MSIX_ON);
    buf = guest_alloc(&sb.pci.alloc, 4096);
    sb_io_ok(&sb, SB_OP_WRITE, 900, buf);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_CTX), ==, SB_CTX_IRQ);
    g_assert(sb_msi_seen(&sb));
    sb_io_ok(&sb, SB_OP_WRITE, 16, buf);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_CTX), ==, SB_CTX_TASK);
    g_assert(!sb_msi_seen(&sb));
    sb_stop(&sb);
}

static void test_fault_state(void)
{
    SB sb;

    sb_start(&sb, "task", true, SB_MSIX_OFF);
    wr(&sb, SB_REG_FAULT_STATE, 3);
    g_assert_cmpuint(rd(&sb, SB_REG_FAULT_STATE), ==, 3);
    g_assert_cmpint(fl_stat(sb.qts, "fi0", "state"), ==, 3);
    fl_set_state(sb.qts, "fi0", 9);
    g_assert_cmpuint(rd(&sb, SB_REG_FAULT_STATE), ==, 9);
    sb_stop(&sb);
}

static void expect_bad(SB *sb, uint32_t op, uint64_t lba, uint32_t nsec,
                       uint64_t list, uint32_t nent, uint32_t err)
{
    uint32_t bad = rd(sb, SB_REG_CNT_BAD_CMDS);

    sb_submit(sb, 5, op, lba, nsec, list, nent);
    sb_expect(sb, 5, SB_ST_ERROR, err);
    g_assert_cmpuint(rd(sb, SB_REG_CNT_BAD_CMDS), ==, bad + 1);
}

static void test_bad_commands(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t data[2] = { 0 }, huge[1] = { 1ull << 62 };
    uint64_t list, list2, hlist, mlist;
    uint32_t cap = IMG_SECTORS;
    SB sb;

    sb_start(&sb, mode, false, SB_MSIX_OFF);
    list = sb_list(&sb, data, 1, 4096);
    list2 = sb_list(&sb, data, 2, 4096);
    hlist = sb_list(&sb, huge, 1, 4096);

    /* past the end, straddling it, wrapping */
    expect_bad(&sb, SB_OP_WRITE, cap, 8, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, cap - 4, 8, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_READ, UINT64_MAX - 2, 8, list, 1, SB_ERR_EINVAL);
    /* empty, too big */
    expect_bad(&sb, SB_OP_WRITE, 0, 0, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, 0, 4097, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, 0, UINT32_MAX, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_DISCARD, cap - 1, 2, 0, 0, SB_ERR_EINVAL);
    /* no entries, too many */
    expect_bad(&sb, SB_OP_WRITE, 0, 8, list, 0, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, 0, 8, list, 513, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, 0, 8, list, UINT32_MAX, SB_ERR_EINVAL);
    /* the entries' lengths sum short, long */
    expect_bad(&sb, SB_OP_WRITE, 0, 16, list, 1, SB_ERR_EINVAL);
    expect_bad(&sb, SB_OP_WRITE, 0, 8, list2, 2, SB_ERR_EINVAL);
    /* opcodes that do not exist */
    expect_bad(&sb, 7, 0, 8, list, 1, SB_ERR_EOPNOTSUPP);
    expect_bad(&sb, UINT32_MAX, 0, 8, list, 1, SB_ERR_EOPNOTSUPP);
    /* a scatter list or data buffer nowhere in guest memory */
    expect_bad(&sb, SB_OP_WRITE, 0, 8, 1ull << 62, 1, SB_ERR_EFAULT);
    expect_bad(&sb, SB_OP_WRITE, 0, 8, UINT64_MAX - 7, 1, SB_ERR_EFAULT);

    /* misaligned entry length */
    mlist = sb_list(&sb, data, 1, 4096);
    qtest_writel(sb.qts, mlist + 8, 500);
    expect_bad(&sb, SB_OP_WRITE, 0, 1, mlist, 1, SB_ERR_EINVAL);
    /* an entry that wraps the address space */
    qtest_writeq(sb.qts, mlist, UINT64_MAX - 511);
    qtest_writel(sb.qts, mlist + 8, 4096);
    expect_bad(&sb, SB_OP_WRITE, 0, 8, mlist, 1, SB_ERR_EINVAL);

    /* data address beyond guest memory: DMA fails, no data moves */
    sb_submit(&sb, 6, SB_OP_WRITE, 0, 8, hlist, 1);
    sb_expect(&sb, 6, SB_ST_ERROR, SB_ERR_EFAULT);
    sb_submit(&sb, 6, SB_OP_READ, 0, 8, hlist, 1);
    sb_expect(&sb, 6, SB_ST_ERROR, SB_ERR_EFAULT);

    /* bus mastering off: every DMA fails */
    qpci_config_writew(sb.pci.dev, PCI_COMMAND,
                       qpci_config_readw(sb.pci.dev, PCI_COMMAND) &
                       ~PCI_COMMAND_MASTER);
    sb_submit(&sb, 6, SB_OP_WRITE, 0, 8, list, 1);
    sb_expect(&sb, 6, SB_ST_ERROR, SB_ERR_EFAULT);
    qpci_device_enable(sb.pci.dev);
    sb_submit(&sb, 6, SB_OP_WRITE, 0, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SB_ST_DONE);

    /* unknown doorbell values, read-only and unmapped registers */
    wr(&sb, SLOT(6, SB_SLOT_DOORBELL), 0x77);
    g_assert_cmpuint(rd(&sb, SB_REG_LAST_ERROR), ==, SB_ERR_EINVAL);
    wr(&sb, SB_REG_MAGIC, 0);
    wr(&sb, SLOT(6, SB_SLOT_STATUS), SB_ST_BUSY);
    wr(&sb, 0xff0, 1);
    wr(&sb, 0x34, 1);           /* between LAST_ERROR and CNT_CMDS */
    g_assert_cmphex(rd(&sb, SB_REG_MAGIC), ==, SB_MAGIC);
    g_assert_cmpuint(slot_rd(&sb, 6, SB_SLOT_STATUS), ==, SB_ST_DONE);
    g_assert_cmpuint(rd(&sb, 0xffc), ==, 0);
    /* flush and discard of a valid range */
    sb_submit(&sb, 6, SB_OP_FLUSH, 0, 0, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SB_ST_DONE);
    sb_submit(&sb, 6, SB_OP_DISCARD, 0, 2048, 0, 0);
    g_assert_cmpuint(sb_wait(&sb, 6), ==, SB_ST_DONE);
    sb_stop(&sb);
}

/* Reset with commands in flight (timer, dropped, AIO) cancels them all. */
static void test_reset(gconstpointer opaque)
{
    const char *mode = opaque;
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, true, SB_MSIX_OFF);
    list = sb_list1(&sb);
    sb_submit(&sb, 0, SB_OP_WRITE, 1000, 8, list, 1);     /* delayed */
    sb_submit(&sb, 1, SB_OP_WRITE, 600, 8, list, 1);      /* dropped */
    sb_submit(&sb, 2, SB_OP_WRITE, 8, 8, list, 1);
    qtest_qmp_assert_success(sb.qts, "{'execute': 'system_reset'}");
    qtest_clock_step(sb.qts, 2ll * 1000 * 1000 * 1000);
    /* the reset cleared the BARs: map them again */
    qpci_device_enable(sb.pci.dev);
    sb.pci.bar = qpci_iomap(sb.pci.dev, 0, NULL);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(slot_rd(&sb, i, SB_SLOT_STATUS), ==, SB_ST_IDLE);
    }
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_CMDS), ==, 0);
    /* the device works after the reset */
    sb_submit(&sb, 0, SB_OP_WRITE, 8, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, SB_ST_DONE);
    sb_stop(&sb);
}

/* An MSI-X message arrived exactly if @ctx signals one. */
static void sb_assert_msi_iff(SB *sb, uint32_t ctx)
{
    g_assert(sb_msi_seen(sb) == (ctx != SB_CTX_TASK));
}

/*
 * deterministic=on: irq/thread commands do their I/O in the doorbell
 * write and signal completion (MSI-X) from a virtual timer.
 */
static void test_deterministic(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    SBOpts o = { .completion = mode, .faults = true,
                 .mode = FL_MODE_DET_ICOUNT, .msix = SB_MSIX_ON };
    uint8_t out[4096], in[4096];
    uint64_t buf;
    SB sb;

    sb_start_opts(&sb, &o);
    buf = guest_alloc(&sb.pci.alloc, 4096);
    fill(out, sizeof(out), 0x42);
    qtest_memwrite(sb.qts, buf, out, sizeof(out));
    sb_io_ok(&sb, SB_OP_WRITE, 8, buf);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_CTX), ==, ctx);
    sb_assert_msi_iff(&sb, ctx);
    /* An injected write error; when=before, so nothing is written. */
    sb_io(&sb, SB_OP_WRITE, 300, buf, SB_ST_ERROR, SB_ERR_ENODATA);
    sb_assert_msi_iff(&sb, ctx);
    /* 5 ms of virtual latency, then the data reads back. */
    sb_io_ok(&sb, SB_OP_WRITE, 1000, buf);
    sb_assert_msi_iff(&sb, ctx);
    qtest_memset(sb.qts, buf, 0, 4096);
    sb_io_ok(&sb, SB_OP_READ, 8, buf);
    sb_assert_msi_iff(&sb, ctx);
    qtest_memread(sb.qts, buf, in, sizeof(in));
    g_assert(memcmp(in, out, sizeof(in)) == 0);
    qtest_memset(sb.qts, buf, 0, 4096);
    sb_io_ok(&sb, SB_OP_READ, 300, buf);
    g_assert_cmpuint(qtest_readb(sb.qts, buf), ==, 0);
    assert_hits(&sb, "wfault", 1);
    assert_hits(&sb, "slow", 1);
    sb_stop(&sb);
}

/* deterministic=on without -icount: QEMU refuses to start, clearly. */
static void test_deterministic_no_icount(void)
{
    fl_expect_startup_error("-machine q35 -accel tcg "
        "-object fault-injector,id=fi0,deterministic=on "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,completion=irq,fault-injector=fi0",
        "syncblk-pci: fault-injector 'fi0' has deterministic=on, which "
        "needs -icount");
}

/* A write and a read back of one 4 KiB block: the device still works. */
static void assert_device_works(SB *sb, uint32_t ctx)
{
    uint8_t out[4096], in[4096];
    uint64_t buf = guest_alloc(&sb->pci.alloc, 4096);

    fill(out, sizeof(out), 0x5c);
    qtest_memwrite(sb->qts, buf, out, sizeof(out));
    sb_io_ok(sb, SB_OP_WRITE, 64, buf);
    sb_assert_signalled(sb, ctx);
    qtest_memset(sb->qts, buf, 0, sizeof(in));
    sb_io_ok(sb, SB_OP_READ, 64, buf);
    sb_assert_signalled(sb, ctx);
    qtest_memread(sb->qts, buf, in, sizeof(in));
    g_assert(memcmp(in, out, sizeof(in)) == 0);
}

/*
 * Issue 12, defect 1: DMA re-entrancy.  A READ of 2 sectors whose scatter
 * list is [{BAR0 + slot 0, 512}, {RAM, 512}], where sector 0 holds
 * DOORBELL_ABORT at the DOORBELL offset: the read data would abort the
 * command from inside its own completion (in irq/thread mode from the AIO
 * callback, outside any MMIO handler) and free the bounce buffer under the
 * scatter loop.  The device must refuse DMA into itself: the command ends
 * once, with EFAULT and (irq/thread) one MSI-X, and QEMU lives on.
 */
static void test_dma_into_own_bar(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    uint8_t sector0[512] = { 0 };
    SBOpts o = { .completion = mode, .sector0 = sector0,
                 .msix = SB_MSIX_ASYNC };
    uint64_t data[2];
    uint64_t list;
    SB sb;

    sector0[SB_SLOT_DOORBELL] = SB_DOORBELL_ABORT;   /* le32 */
    sb_start_opts(&sb, &o);
    data[0] = sb.pci.bar.addr + SLOT(0, 0);
    data[1] = guest_alloc(&sb.pci.alloc, 512);
    list = sb_list(&sb, data, 2, 512);
    sb_submit(&sb, 0, SB_OP_READ, 0, 2, list, 2);
    sb_expect(&sb, 0, SB_ST_ERROR, SB_ERR_EFAULT);
    sb_assert_signalled(&sb, ctx);
    /* Completed once: no second status change, no second MSI-X. */
    qtest_clock_step(sb.qts, 2ll * 1000 * 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert(ctx == SB_CTX_TASK || !sb_msi_seen(&sb));
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_STATUS), ==, SB_ST_ERROR);
    g_assert_cmpuint(done_count(&sb, ctx), ==, 1);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_ERRORS), ==, 1);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_TIMEOUTS), ==, 0);
    assert_device_works(&sb, ctx);
    sb_stop(&sb);
}

/*
 * The MSI-X message itself aimed at the device's own slot 1 DOORBELL with
 * data SUBMIT: a completion signalled from the AIO callback or a timer must
 * not start a command in the middle of another one's completion.
 */
static void test_msix_into_own_bar(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    uint64_t list;
    SB sb;

    sb_start(&sb, mode, false, SB_MSIX_OFF);
    sb_msix_route(&sb, sb.pci.bar.addr + SLOT(1, SB_SLOT_DOORBELL),
                  SB_DOORBELL_SUBMIT);
    list = sb_list1(&sb);
    /* slot 1 holds a valid command that only the MSI-X write would start */
    sb_prepare(&sb, 1, SB_OP_WRITE, 16, 8, list, 1);
    sb_submit(&sb, 0, SB_OP_WRITE, 8, 8, list, 1);
    g_assert_cmpuint(sb_wait(&sb, 0), ==, SB_ST_DONE);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_usleep(10 * 1000);
    g_assert_cmpuint(slot_rd(&sb, 1, SB_SLOT_STATUS), ==, SB_ST_IDLE);
    g_assert_cmpuint(rd(&sb, SB_REG_CNT_CMDS), ==, 1);
    g_assert_cmpuint(done_count(&sb, ctx), ==, 1);
    sb_stop(&sb);
}

/*
 * Issue 12, defect 6: timeout-ms * 1 ms overflowed 32 bits, so 4295 ms
 * became 32 us.  A lost completion in task mode stays BUSY for the whole
 * timeout, then reads TIMEOUT.
 */
static void test_timeout_over_32bit_ns(void)
{
    SBOpts o = { .completion = "task", .faults = true,
                 .dev_opts = "timeout-ms=4295" };
    static const int64_t steps_ms[] = { 1, 4293, 1 };
    uint64_t list;
    SB sb;

    sb_start_opts(&sb, &o);
    g_assert_cmpuint(rd(&sb, SB_REG_TIMEOUT_MS), ==, 4295);
    list = sb_list1(&sb);
    sb_submit(&sb, 3, SB_OP_WRITE, 600, 8, list, 1);      /* dropped */
    for (int i = 0; i < ARRAY_SIZE(steps_ms); i++) {
        g_assert_cmpuint(slot_rd(&sb, 3, SB_SLOT_STATUS), ==, SB_ST_BUSY);
        qtest_clock_step(sb.qts, steps_ms[i] * 1000 * 1000);
    }
    g_assert_cmpuint(slot_rd(&sb, 3, SB_SLOT_STATUS), ==, SB_ST_TIMEOUT);
    g_assert_cmpuint(slot_rd(&sb, 3, SB_SLOT_ERROR), ==, SB_ERR_ETIMEDOUT);
    sb_stop(&sb);
}

/*
 * deterministic=on under the qtest accelerator (what the fuzzers run):
 * accepted, and completions follow virtual time only, which moves only
 * on clock_step.
 */
static void test_deterministic_qtest(gconstpointer opaque)
{
    const char *mode = opaque;
    uint32_t ctx = mode_ctx(mode);
    SBOpts o = { .completion = mode, .faults = true,
                 .mode = FL_MODE_DET_QTEST, .msix = SB_MSIX_ASYNC };
    uint64_t list;
    SB sb;

    sb_start_opts(&sb, &o);
    list = sb_list1(&sb);
    sb_submit(&sb, 0, SB_OP_WRITE, 1000, 8, list, 1);    /* 5 ms */
    g_usleep(20 * 1000);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_STATUS), ==, SB_ST_BUSY);
    g_assert(ctx == SB_CTX_TASK || !sb_msi_seen(&sb));
    qtest_clock_step(sb.qts, 4 * 1000 * 1000);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_STATUS), ==, SB_ST_BUSY);
    qtest_clock_step(sb.qts, 1000 * 1000);
    g_assert_cmpuint(slot_rd(&sb, 0, SB_SLOT_STATUS), ==, SB_ST_DONE);
    sb_assert_signalled(&sb, ctx);
    assert_device_works(&sb, ctx);
    sb_stop(&sb);
}

/* A completion mode that does not exist is refused, by its QAPI name. */
static void test_bad_completion(void)
{
    g_autofree char *err = fl_startup_error("-machine q35 -accel qtest "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,completion=softirq", NULL);

    g_assert(strstr(err, "softirq"));
    g_assert(strstr(err, "completion"));
}

/*
 * cpu= matches the vCPU of the doorbell write: under the qtest accelerator
 * that is cpu 0 (qtest's accesses are first_cpu's), so cpu=0 fires and
 * cpu=1 never does.  syncblk has no submission queues: sq= is refused.
 */
/* x-fault-add-rules of @rules must fail: its error description. */
static char *add_rules_error(SB *sb, const char *rules)
{
    return fl_qmp_error(sb->qts, "{'execute': 'x-fault-add-rules', "
                        "'arguments': {'id': 'fi0', 'rules': %s}}", rules);
}

static void test_cpu_key(gconstpointer opaque)
{
    g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL;
    bool task = !strcmp(opaque, "task");
    uint64_t buf;
    SB sb;

    sb_start(&sb, opaque, true, SB_MSIX_ASYNC);
    fl_add_rules(sb.qts, "fi0", "cpu0: write lba=3000-3999 cpu=0 error=eio\n"
                 "cpu1: write lba=3000-3999 cpu=1-7 error=internal\n");
    buf = guest_alloc(&sb.pci.alloc, 4096);
    for (int i = 0; i < 3; i++) {
        sb_io(&sb, SB_OP_WRITE, 3000 + i * 8, buf, SB_ST_ERROR, SB_ERR_EIO);
        g_assert(task || sb_msi_seen(&sb));
    }
    sb_io_ok(&sb, SB_OP_READ, 3000, buf);
    g_assert(task || sb_msi_seen(&sb));
    assert_hits(&sb, "cpu0", 3);
    assert_hits(&sb, "cpu1", 0);

    e1 = add_rules_error(&sb, "write lba=5 sq=1 error=eio");
    g_assert_cmpstr(e1, ==, "1:13: 'sq' is not supplied by syncblk-pci");
    e2 = add_rules_error(&sb, "write cpu=one error=eio");
    g_assert_cmpstr(e2, ==, "1:7: bad number 'one' (expected a decimal or "
                    "0x hex integer)");
    e3 = add_rules_error(&sb, "write cpu=1 cpu=2 error=eio");
    g_assert_cmpstr(e3, ==, "1:13: duplicate key 'cpu' (already given at "
                    "column 7)");
    sb_stop(&sb);
}

/* A rule file with sq= keeps syncblk-pci from realizing, in one line. */
static void test_sq_key_refused(void)
{
    g_autofree char *rules = fl_write_file(tmpdir, "sq.rules",
                                           "q2: write sq=2 error=eio\n");
    g_autofree char *args = g_strdup_printf(
        "-machine q35 -accel qtest -object fault-injector,id=fi0,rules=%s "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,fault-injector=fi0", rules);

    fl_expect_startup_error(args, "syncblk-pci: rule 'q2' of fault-injector "
                            "'fi0' matches on sq=, which syncblk-pci does "
                            "not supply\n");
}

/*
 * Controller failure (fatal, reset-fail=) is NVMe's: syncblk refuses it
 * at realize and afterwards, with one line naming the rule, never ignores it.
 */
static void test_refuses_ctrl_fail(void)
{
    g_autofree char *rules = fl_write_file(tmpdir, "die.rules",
                                           "ok: write lba=9 error=eio\n"
                                           "die: write nth=5 fatal\n");
    g_autofree char *args = g_strdup_printf(
        "-machine q35 -object fault-injector,id=fi0,rules=%s "
        "-blockdev driver=null-co,node-name=d0 "
        "-device syncblk-pci,drive=d0,fault-injector=fi0", rules);
    g_autofree char *err = fl_startup_error(args, NULL);
    g_autofree char *e1 = NULL, *e2 = NULL;
    uint64_t gbuf;
    SB sb;

    g_assert(strstr(err, "syncblk-pci: rule 'die' of fault-injector 'fi0' "
                    "has 'fatal', which syncblk-pci does not support (NVMe "
                    "only)\n"));
    g_assert(!strstr(err, "Aborted") && !strstr(err, "assert"));

    /* Attached: adding one later fails, and the device goes on working. */
    sb_start(&sb, "task", true, SB_MSIX_OFF);
    e1 = add_rules_error(&sb, "x: write lba=5 reset-fail=1");
    g_assert_cmpstr(e1, ==, "1:16: 'reset-fail' is not supported by "
                    "syncblk-pci (NVMe only)");
    e2 = add_rules_error(&sb, "y: write drop\nz: read fatal");
    g_assert_cmpstr(e2, ==, "2:9: 'fatal' is not supported by syncblk-pci "
                    "(NVMe only)");
    gbuf = guest_alloc(&sb.pci.alloc, 4096);
    qtest_memset(sb.qts, gbuf, 0, 4096);
    sb_io_ok(&sb, SB_OP_WRITE, 8, gbuf);
    sb_stop(&sb);
}


/* Does fi0 refuse sq= and fatal now (an attached syncblk-pci does)? */
static bool refuses_sq_fatal(QTestState *qts)
{
    bool sq = fl_refuses(qts, "fi0", "write sq=1 error=eio",
                         "1:14: 'sq' is not supplied by syncblk-pci");
    bool fatal = fl_refuses(qts, "fi0", "write fatal", "1:14: 'fatal' is not "
                            "supported by syncblk-pci (NVMe only)");

    g_assert(sq == fatal);
    return sq;
}

/*
 * syncblk-pci attaches at realize and detaches at unplug: while attached
 * the injector refuses sq= and fatal rules and object-del; after an
 * unplug it takes them.  A realize that fails after the attach (a
 * read-only drive) detaches again; one refused by the rules takes nothing.
 */
static void test_attach_detach(void)
{
    QTestState *qts = qtest_init("-machine pc -nodefaults "
                                 "-object fault-injector,id=fi0 "
                                 "-blockdev driver=null-co,node-name=d0 "
                                 "-blockdev driver=null-co,node-name=ro,"
                                 "read-only=on "
                                 "-device syncblk-pci,id=sb0,drive=d0,"
                                 "fault-injector=fi0,addr=04.0");
    g_autofree char *e1 = NULL, *e2 = NULL;

    g_assert(refuses_sq_fatal(qts));
    g_assert(!fl_refuses(qts, "fi0", "write cpu=0 error=eio", NULL));
    g_assert(!fl_object_del(qts, "fi0"));
    fl_pci_unplug(qts, "sb0", 4);
    g_assert(!refuses_sq_fatal(qts));

    e1 = fl_qmp_error(qts, "{'execute': 'device_add', 'arguments': {"
                      "'driver': 'syncblk-pci', 'id': 'sb1', 'drive': 'ro', "
                      "'fault-injector': 'fi0'}}");
    g_assert(strstr(e1, "read-only"));
    g_assert(!refuses_sq_fatal(qts));

    fl_add_rules(qts, "fi0", "die: write nth=3 fatal\n");
    e2 = fl_qmp_error(qts, "{'execute': 'device_add', 'arguments': {"
                      "'driver': 'syncblk-pci', 'id': 'sb2', 'drive': 'd0', "
                      "'fault-injector': 'fi0'}}");
    g_assert_cmpstr(e2, ==, "syncblk-pci: rule 'die' of fault-injector 'fi0' "
                    "has 'fatal', which syncblk-pci does not support (NVMe "
                    "only)");
    fl_delete_rule(qts, "fi0", "die");
    g_assert(!refuses_sq_fatal(qts));
    g_assert(fl_object_del(qts, "fi0"));
    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "task", "irq", "thread" };
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = fl_tmpdir_make("syncblk-test");
    qtest_add_func("/syncblk/registers", test_registers);
    qtest_add_func("/syncblk/spec-layout", test_spec_layout);
    qtest_add_func("/syncblk/task/rw", test_task_rw);
    qtest_add_data_func("/syncblk/irq/rw", "irq", test_async_rw);
    qtest_add_data_func("/syncblk/thread/rw", "thread", test_async_rw);
    qtest_add_func("/syncblk/irq/many-slots", test_irq_many_slots);
    qtest_add_func("/syncblk/task/complete-override", test_complete_override);
    qtest_add_func("/syncblk/fault-state", test_fault_state);
    qtest_add_func("/syncblk/refuses-ctrl-fail", test_refuses_ctrl_fail);
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *e = g_strdup_printf("/syncblk/%s/errors", modes[i]);
        g_autofree char *d = g_strdup_printf("/syncblk/%s/drop", modes[i]);
        g_autofree char *l = g_strdup_printf("/syncblk/%s/latency", modes[i]);
        g_autofree char *b = g_strdup_printf("/syncblk/%s/bad-commands",
                                             modes[i]);
        g_autofree char *r = g_strdup_printf("/syncblk/%s/reset", modes[i]);
        g_autofree char *lc = g_strdup_printf("/syncblk/%s/lie-corrupt",
                                              modes[i]);

        qtest_add_data_func(e, modes[i], test_errors);
        qtest_add_data_func(d, modes[i], test_drop);
        qtest_add_data_func(l, modes[i], test_latency);
        qtest_add_data_func(b, modes[i], test_bad_commands);
        qtest_add_data_func(r, modes[i], test_reset);
        qtest_add_data_func(lc, modes[i], test_lie_corrupt);
    }
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *t = g_strdup_printf("/syncblk/%s/deterministic",
                                             modes[i]);

        qtest_add_data_func(t, modes[i], test_deterministic);
    }
    for (int i = 0; i < ARRAY_SIZE(modes); i++) {
        g_autofree char *t = g_strdup_printf("/syncblk/%s/dma-into-own-bar",
                                             modes[i]);
        g_autofree char *m = g_strdup_printf("/syncblk/%s/msix-into-own-bar",
                                             modes[i]);
        g_autofree char *q = g_strdup_printf(
            "/syncblk/%s/deterministic-qtest", modes[i]);

        qtest_add_data_func(t, modes[i], test_dma_into_own_bar);
        if (i) {
            qtest_add_data_func(m, modes[i], test_msix_into_own_bar);
        }
        qtest_add_data_func(q, modes[i], test_deterministic_qtest);
    }
    qtest_add_func("/syncblk/task/timeout-over-32bit-ns",
                   test_timeout_over_32bit_ns);
    qtest_add_func("/syncblk/deterministic-no-icount",
                   test_deterministic_no_icount);
    qtest_add_func("/syncblk/bad-completion", test_bad_completion);
    qtest_add_data_func("/syncblk/task/cpu-key", "task", test_cpu_key);
    qtest_add_data_func("/syncblk/irq/cpu-key", "irq", test_cpu_key);
    qtest_add_func("/syncblk/sq-key-refused", test_sq_key_refused);
    qtest_add_func("/syncblk/attach-detach", test_attach_detach);
    ret = g_test_run();
    fl_tmpdir_remove(tmpdir);
    return ret;
}
