// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * syncblk: guest driver for faultline's syncblk-pci device (1af4:10f0).
 *
 * A bio-based block driver whose completion context is chosen by the
 * device (its MODE register, set by QEMU's completion= property):
 *
 *  task    the I/O is done while the doorbell is written and every bio ends
 *          before submit_bio() returns, in the submitter's context; the
 *          disk is BLK_FEAT_SYNCHRONOUS (->rw_page before Linux 6.3), so
 *          swap uses SWP_SYNCHRONOUS_IO (like brd, zram and pmem).
 *  irq     the device signals completion by MSI-X; bios end in hardirq.
 *  thread  MSI-X too, but bios end in the threaded IRQ handler (task
 *          context, not the submitter).
 *
 * A fault rule may switch one command to another context (complete=...):
 * the slot's CTX register says how each command completes.
 *
 * A command that does not complete within io_timeout_ms is aborted and its
 * bio ended with BLK_STS_TIMEOUT (the device drops completions on request).
 * Register interface: faultline docs/devices.md, "syncblk".
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/version.h>
#include <linux/wait.h>

#include "faultline/syncblk-regs.h"	/* the repo's include/, shared with the device */

#define SYNCBLK_NAME		"syncblk"
#define SYNCBLK_MAX_SLOTS	BITS_PER_LONG

/*
 * Two block-layer API generations (faultline's guest kernels are 6.1, 6.12
 * and 7.2): before 6.3 swap took SWP_SYNCHRONOUS_IO from ->rw_page (6.3
 * removed it for QUEUE_FLAG_SYNCHRONOUS); 6.11 moved the queue's limits
 * and features (BLK_FEAT_SYNCHRONOUS) to blk_alloc_disk() and added
 * pcim_iomap_region().  The kernels in between are not supported.
 */
#define SYNCBLK_RW_PAGE	(LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0))
#if !SYNCBLK_RW_PAGE && LINUX_VERSION_CODE < KERNEL_VERSION(6, 11, 0)
#error "syncblk builds for Linux 6.1-6.2 and 6.11 or later"
#endif

/* Linux 6.16 renamed from_timer(); the guest kernels span both names. */
#ifndef timer_container_of
#define timer_container_of(var, callback_timer, timer_fieldname) \
	from_timer(var, callback_timer, timer_fieldname)
#endif

enum syncblk_where {
	WHERE_SUBMITTER,
	WHERE_HARDIRQ,
	WHERE_SOFTIRQ,
	WHERE_OTHER_TASK,
	WHERE_NR,
};

static DEFINE_IDA(syncblk_ida);

static unsigned int io_timeout_ms = 10000;
module_param(io_timeout_ms, uint, 0644);
MODULE_PARM_DESC(io_timeout_ms,
		 "abort a command after this many ms (BLK_STS_TIMEOUT)");

struct syncblk_entry {
	__le64 addr;
	__le32 len;
	__le32 reserved;
};

struct syncblk_dev;

struct syncblk_slot {
	struct syncblk_dev *dev;
	void __iomem *regs;
	unsigned int index;
	struct syncblk_entry *list;	/* DMA-coherent scatter list */
	dma_addr_t list_dma;
	unsigned int nents;
	enum dma_data_direction dir;
	struct bio *bio;
	struct task_struct *submitter;
	/* Owned by the IRQ/timeout path while set (under dev->lock). */
	bool inflight;
	u32 ctx;
	u32 status;
	u32 error;
	unsigned long deadline;
	struct timer_list timer;
};

struct syncblk_dev {
	struct pci_dev *pdev;
	void __iomem *bar;
	struct gendisk *disk;
	spinlock_t lock;		/* slots' inflight state, free_slots */
	unsigned long free_slots;
	unsigned long thread_pending;	/* slots for the IRQ thread */
	wait_queue_head_t slot_wq;
	u32 mode;
	u32 nslots;
	u32 max_sectors;
	u32 max_entries;
	int id;				/* N of syncblkN */
	u64 capacity;
	atomic64_t ios, reads, writes, errors, timeouts;
	atomic64_t where[WHERE_NR];
	struct syncblk_slot slots[SYNCBLK_MAX_SLOTS];
};

static const char * const syncblk_mode_names[] = { "task", "irq", "thread" };

static blk_status_t syncblk_error_to_status(u32 status, u32 err)
{
	if (status == SYNCBLK_ST_DONE)
		return BLK_STS_OK;
	if (status == SYNCBLK_ST_TIMEOUT)
		return BLK_STS_TIMEOUT;
	switch (err) {
	case SYNCBLK_ERR_ENOSPC:
		return BLK_STS_NOSPC;
	case SYNCBLK_ERR_ENODATA:		/* injected write fault: medium error */
	case SYNCBLK_ERR_EBADMSG:		/* injected unrecovered read error */
		return BLK_STS_MEDIUM;
	case SYNCBLK_ERR_EREMOTEIO:		/* injected internal device error */
		return BLK_STS_TARGET;
	case SYNCBLK_ERR_ETIMEDOUT:
		return BLK_STS_TIMEOUT;
	case SYNCBLK_ERR_EOPNOTSUPP:
		return BLK_STS_NOTSUPP;
	default:		/* EIO, EFAULT, EINVAL, backend errors */
		return BLK_STS_IOERR;
	}
}

static struct syncblk_slot *syncblk_try_get_slot(struct syncblk_dev *dev)
{
	struct syncblk_slot *slot = NULL;
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&dev->lock, flags);
	i = find_first_bit(&dev->free_slots, dev->nslots);
	if (i < dev->nslots) {
		__clear_bit(i, &dev->free_slots);
		slot = &dev->slots[i];
	}
	spin_unlock_irqrestore(&dev->lock, flags);
	return slot;
}

static struct syncblk_slot *syncblk_get_slot(struct syncblk_dev *dev)
{
	struct syncblk_slot *slot;

	wait_event(dev->slot_wq, (slot = syncblk_try_get_slot(dev)));
	return slot;
}

static void syncblk_put_slot(struct syncblk_slot *slot)
{
	struct syncblk_dev *dev = slot->dev;
	unsigned long flags;

	spin_lock_irqsave(&dev->lock, flags);
	__set_bit(slot->index, &dev->free_slots);
	spin_unlock_irqrestore(&dev->lock, flags);
	wake_up(&dev->slot_wq);
}

static void syncblk_unmap(struct syncblk_slot *slot)
{
	struct device *d = &slot->dev->pdev->dev;
	unsigned int i;

	for (i = 0; i < slot->nents; i++)
		dma_unmap_page(d, le64_to_cpu(slot->list[i].addr),
			       le32_to_cpu(slot->list[i].len), slot->dir);
	slot->nents = 0;
}

static enum syncblk_where syncblk_completion_where(struct syncblk_slot *slot)
{
	if (in_hardirq())
		return WHERE_HARDIRQ;
	if (in_serving_softirq())
		return WHERE_SOFTIRQ;
	if (current == slot->submitter)
		return WHERE_SUBMITTER;
	return WHERE_OTHER_TASK;
}

/* The command in @slot is over (status/error read): end its bio share. */
static void syncblk_end_cmd(struct syncblk_slot *slot)
{
	struct syncblk_dev *dev = slot->dev;
	struct bio *bio = slot->bio;
	blk_status_t sts = syncblk_error_to_status(slot->status, slot->error);

	syncblk_unmap(slot);
	atomic64_inc(&dev->where[syncblk_completion_where(slot)]);
	if (sts) {
		atomic64_inc(&dev->errors);
		if (sts == BLK_STS_TIMEOUT)
			atomic64_inc(&dev->timeouts);
		bio->bi_status = sts;
	}
	slot->bio = NULL;
	syncblk_put_slot(slot);
	bio_endio(bio);
}

/* Called with dev->lock held: take an async command back from the device. */
static void syncblk_abort_locked(struct syncblk_slot *slot)
{
	writel(SYNCBLK_DOORBELL_ABORT, slot->regs + SYNCBLK_SLOT_DOORBELL);
	slot->status = readl(slot->regs + SYNCBLK_SLOT_STATUS);
	slot->error = readl(slot->regs + SYNCBLK_SLOT_ERROR);
	if (slot->status == SYNCBLK_ST_BUSY)	/* a broken device: give up on it */
		slot->status = SYNCBLK_ST_TIMEOUT;
	slot->inflight = false;
}

/* Busy-poll a task-mode command; bounded by io_timeout_ms. */
static void syncblk_poll(struct syncblk_slot *slot)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(io_timeout_ms);
	unsigned int spins = 0;
	u32 st;

	while ((st = readl(slot->regs + SYNCBLK_SLOT_STATUS)) == SYNCBLK_ST_BUSY) {
		if (time_after(jiffies, deadline)) {
			writel(SYNCBLK_DOORBELL_ABORT, slot->regs + SYNCBLK_SLOT_DOORBELL);
			st = readl(slot->regs + SYNCBLK_SLOT_STATUS);
			if (st == SYNCBLK_ST_BUSY)
				st = SYNCBLK_ST_TIMEOUT;
			break;
		}
		cpu_relax();
		/* injected delays can be long: let others run meanwhile */
		if (!(++spins & 1023))
			cond_resched();
	}
	slot->status = st;
	slot->error = readl(slot->regs + SYNCBLK_SLOT_ERROR);
}

static void syncblk_issue(struct syncblk_slot *slot, u32 op, sector_t lba,
			  u32 nsectors)
{
	struct syncblk_dev *dev = slot->dev;
	void __iomem *r = slot->regs;
	unsigned long flags;
	u32 ctx;

	atomic64_inc(&dev->ios);
	atomic64_inc(op == SYNCBLK_OP_WRITE ? &dev->writes : &dev->reads);
	slot->submitter = current;
	writel(op, r + SYNCBLK_SLOT_OPCODE);
	writel(lower_32_bits(lba), r + SYNCBLK_SLOT_LBA_LO);
	writel(upper_32_bits(lba), r + SYNCBLK_SLOT_LBA_HI);
	writel(nsectors, r + SYNCBLK_SLOT_NUM_SECTORS);
	writel(lower_32_bits(slot->list_dma), r + SYNCBLK_SLOT_LIST_LO);
	writel(upper_32_bits(slot->list_dma), r + SYNCBLK_SLOT_LIST_HI);
	writel(slot->nents, r + SYNCBLK_SLOT_NUM_ENTRIES);

	/*
	 * Mark the slot in flight before ringing: an irq/thread command may
	 * complete (and its MSI-X fire on another CPU) before we read CTX.
	 */
	spin_lock_irqsave(&dev->lock, flags);
	slot->inflight = true;
	writel(SYNCBLK_DOORBELL_SUBMIT, r + SYNCBLK_SLOT_DOORBELL);
	ctx = slot->ctx = readl(r + SYNCBLK_SLOT_CTX);
	if (ctx == SYNCBLK_CTX_TASK) {
		slot->inflight = false;
	} else {
		slot->deadline = jiffies + msecs_to_jiffies(io_timeout_ms);
		mod_timer(&slot->timer, slot->deadline);
	}
	spin_unlock_irqrestore(&dev->lock, flags);

	/*
	 * Not slot->ctx: once the lock is dropped an irq/thread command may
	 * complete, and its slot go to another submitter whose command runs in
	 * task context; reading that would end the other command's bio too.
	 */
	if (ctx == SYNCBLK_CTX_TASK) {
		syncblk_poll(slot);
		syncblk_end_cmd(slot);
	}
}

static void syncblk_submit_bio(struct bio *bio)
{
	struct syncblk_dev *dev = bio->bi_bdev->bd_disk->private_data;
	struct device *d = &dev->pdev->dev;
	enum dma_data_direction dir;
	struct syncblk_slot *slot = NULL;
	sector_t sector = bio->bi_iter.bi_sector;
	sector_t start = sector;
	struct bvec_iter iter;
	struct bio_vec bv;
	u32 nsectors = 0;
	u32 op;

	switch (bio_op(bio)) {
	case REQ_OP_READ:
		op = SYNCBLK_OP_READ;
		dir = DMA_FROM_DEVICE;
		break;
	case REQ_OP_WRITE:
		op = SYNCBLK_OP_WRITE;
		dir = DMA_TO_DEVICE;
		break;
	case REQ_OP_FLUSH:	/* no volatile cache: nothing to do */
		bio_endio(bio);
		return;
	default:
		bio->bi_status = BLK_STS_NOTSUPP;
		bio_endio(bio);
		return;
	}

	/*
	 * Bio-based drivers get no splitting: a bio (a 2 MiB THP swap-out,
	 * say) becomes as many commands as the device limits need.  Every
	 * command but the last takes a reference (bio_inc_remaining); the
	 * last one inherits the submitter's, so the bio always ends in the
	 * context of its last command's completion, never in ours by chance.
	 */
	bio_for_each_segment(bv, bio, iter) {
		u32 secs = bv.bv_len >> SECTOR_SHIFT;
		dma_addr_t addr;

		if (slot && (slot->nents == dev->max_entries ||
			     nsectors + secs > dev->max_sectors)) {
			bio_inc_remaining(bio);
			syncblk_issue(slot, op, start, nsectors);
			slot = NULL;
		}
		if (!slot) {
			slot = syncblk_get_slot(dev);
			slot->bio = bio;
			slot->dir = dir;
			slot->nents = 0;
			start = sector;
			nsectors = 0;
		}
		if (bv.bv_len & (SECTOR_SIZE - 1)) {
			bio->bi_status = BLK_STS_IOERR;
			break;
		}
		addr = dma_map_page(d, bv.bv_page, bv.bv_offset, bv.bv_len,
				    dir);
		if (dma_mapping_error(d, addr)) {
			bio->bi_status = BLK_STS_RESOURCE;
			break;
		}
		slot->list[slot->nents].addr = cpu_to_le64(addr);
		slot->list[slot->nents].len = cpu_to_le32(bv.bv_len);
		slot->list[slot->nents].reserved = 0;
		slot->nents++;
		nsectors += secs;
		sector += secs;
	}
	if (slot && !bio->bi_status && slot->nents) {
		syncblk_issue(slot, op, start, nsectors);
		return;
	}
	if (slot) {
		syncblk_unmap(slot);
		slot->bio = NULL;
		syncblk_put_slot(slot);
	}
	bio_endio(bio);
}

/* Collect finished irq/thread commands; called with dev->lock held. */
static unsigned long syncblk_reap_locked(struct syncblk_dev *dev,
					 bool *wake_thread)
{
	unsigned long done = 0;
	unsigned int i;

	for (i = 0; i < dev->nslots; i++) {
		struct syncblk_slot *slot = &dev->slots[i];

		if (!slot->inflight)
			continue;
		slot->status = readl(slot->regs + SYNCBLK_SLOT_STATUS);
		if (slot->status == SYNCBLK_ST_BUSY)
			continue;
		slot->error = readl(slot->regs + SYNCBLK_SLOT_ERROR);
		slot->inflight = false;
		timer_delete(&slot->timer);
		if (slot->ctx == SYNCBLK_CTX_THREAD) {
			__set_bit(i, &dev->thread_pending);
			*wake_thread = true;
		} else {
			__set_bit(i, &done);
		}
	}
	return done;
}

static irqreturn_t syncblk_irq(int irq, void *data)
{
	struct syncblk_dev *dev = data;
	bool wake_thread = false;
	unsigned long done;
	unsigned int i;

	spin_lock(&dev->lock);
	done = syncblk_reap_locked(dev, &wake_thread);
	spin_unlock(&dev->lock);
	for_each_set_bit(i, &done, dev->nslots)
		syncblk_end_cmd(&dev->slots[i]);
	return wake_thread ? IRQ_WAKE_THREAD : IRQ_HANDLED;
}

static irqreturn_t syncblk_irq_thread(int irq, void *data)
{
	struct syncblk_dev *dev = data;
	unsigned long pending;
	unsigned int i;

	spin_lock_irq(&dev->lock);
	pending = dev->thread_pending;
	dev->thread_pending = 0;
	spin_unlock_irq(&dev->lock);
	for_each_set_bit(i, &pending, dev->nslots)
		syncblk_end_cmd(&dev->slots[i]);
	return IRQ_HANDLED;
}

/* A lost completion: abort the command, end its bio with a timeout. */
static void syncblk_timeout(struct timer_list *t)
{
	struct syncblk_slot *slot = timer_container_of(slot, t, timer);
	struct syncblk_dev *dev = slot->dev;
	unsigned long flags;

	spin_lock_irqsave(&dev->lock, flags);
	if (!slot->inflight) {
		spin_unlock_irqrestore(&dev->lock, flags);
		return;
	}
	if (time_before(jiffies, slot->deadline)) {
		mod_timer(&slot->timer, slot->deadline);
		spin_unlock_irqrestore(&dev->lock, flags);
		return;
	}
	syncblk_abort_locked(slot);
	spin_unlock_irqrestore(&dev->lock, flags);
	dev_warn_ratelimited(&dev->pdev->dev,
			     "slot %u: no completion in %u ms, aborted\n",
			     slot->index, io_timeout_ms);
	syncblk_end_cmd(slot);
}

static const struct block_device_operations syncblk_fops = {
	.owner		= THIS_MODULE,
	.submit_bio	= syncblk_submit_bio,
};

#if SYNCBLK_RW_PAGE
static void syncblk_rw_page_end(struct bio *bio)
{
	complete(bio->bi_private);
}

/*
 * One page through the same commands as a bio, ended before we return.
 * On an error the page is left alone and we return it: the caller
 * (__swap_writepage, swap_readpage) retries with a bio, whose end_io
 * handles the error (redirty, "Write-error on swap-device"), as zram does.
 */
static int syncblk_rw_page(struct block_device *bdev, sector_t sector,
			   struct page *page, enum req_op op)
{
	DECLARE_COMPLETION_ONSTACK(done);
	struct bio_vec bvec;
	struct bio bio;
	int err;

	if (PageTransHuge(page))
		return -EOPNOTSUPP;
	bio_init(&bio, bdev, &bvec, 1, op);
	bio.bi_iter.bi_sector = sector;
	__bio_add_page(&bio, page, PAGE_SIZE, 0);
	bio.bi_private = &done;
	bio.bi_end_io = syncblk_rw_page_end;
	/* a fault rule may move the command to the IRQ (complete=irq) */
	syncblk_submit_bio(&bio);
	wait_for_completion_io(&done);
	err = blk_status_to_errno(bio.bi_status);
	bio_uninit(&bio);
	if (!err)
		page_endio(page, op_is_write(op), 0);
	return err;
}

/* Task mode's disk: swap sees ->rw_page and sets SWP_SYNCHRONOUS_IO. */
static const struct block_device_operations syncblk_sync_fops = {
	.owner		= THIS_MODULE,
	.submit_bio	= syncblk_submit_bio,
	.rw_page	= syncblk_rw_page,
};

static struct gendisk *syncblk_alloc_disk(struct syncblk_dev *dev)
{
	struct gendisk *disk = blk_alloc_disk(NUMA_NO_NODE);

	if (!disk)
		return ERR_PTR(-ENOMEM);
	blk_queue_logical_block_size(disk->queue, SECTOR_SIZE);
	blk_queue_physical_block_size(disk->queue, PAGE_SIZE);
	blk_queue_max_hw_sectors(disk->queue, dev->max_sectors);
	disk->fops = dev->mode == SYNCBLK_CTX_TASK ? &syncblk_sync_fops :
						      &syncblk_fops;
	return disk;
}

static void __iomem *syncblk_iomap(struct pci_dev *pdev)
{
	int ret = pcim_iomap_regions(pdev, BIT(0), SYNCBLK_NAME);

	return ret ? IOMEM_ERR_PTR(ret) : pcim_iomap_table(pdev)[0];
}
#else
static struct gendisk *syncblk_alloc_disk(struct syncblk_dev *dev)
{
	struct queue_limits lim = {
		.logical_block_size	= SECTOR_SIZE,
		.physical_block_size	= PAGE_SIZE,
		.max_hw_sectors		= dev->max_sectors,
	};
	struct gendisk *disk;

	if (dev->mode == SYNCBLK_CTX_TASK)
		lim.features |= BLK_FEAT_SYNCHRONOUS;
	disk = blk_alloc_disk(&lim, NUMA_NO_NODE);
	if (!IS_ERR(disk))
		disk->fops = &syncblk_fops;
	return disk;
}

static void __iomem *syncblk_iomap(struct pci_dev *pdev)
{
	return pcim_iomap_region(pdev, 0, SYNCBLK_NAME);
}
#endif

/*
 * sysfs: attributes directly in /sys/block/syncblkN/ (none clashes with
 * the block layer's own), where faultline's guest tools look for them.
 */
static struct syncblk_dev *to_syncblk(struct device *d)
{
	return dev_to_disk(d)->private_data;
}

static ssize_t mode_show(struct device *d, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n", syncblk_mode_names[to_syncblk(d)->mode]);
}
static DEVICE_ATTR_RO(mode);

static ssize_t fault_state_show(struct device *d,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  readl(to_syncblk(d)->bar + SYNCBLK_REG_FAULT_STATE));
}

static ssize_t fault_state_store(struct device *d,
				 struct device_attribute *attr,
				 const char *buf, size_t count)
{
	u32 state;
	int ret = kstrtou32(buf, 0, &state);

	if (ret)
		return ret;
	writel(state, to_syncblk(d)->bar + SYNCBLK_REG_FAULT_STATE);
	return count;
}
static DEVICE_ATTR_RW(fault_state);

#define SYNCBLK_COUNTER_ATTR(_name, _field)				\
static ssize_t _name##_show(struct device *d,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&to_syncblk(d)->_field));	\
}									\
static DEVICE_ATTR_RO(_name)

SYNCBLK_COUNTER_ATTR(ios, ios);
SYNCBLK_COUNTER_ATTR(reads, reads);
SYNCBLK_COUNTER_ATTR(writes, writes);
SYNCBLK_COUNTER_ATTR(errors, errors);
SYNCBLK_COUNTER_ATTR(timeouts, timeouts);
SYNCBLK_COUNTER_ATTR(complete_submitter, where[WHERE_SUBMITTER]);
SYNCBLK_COUNTER_ATTR(complete_hardirq, where[WHERE_HARDIRQ]);
SYNCBLK_COUNTER_ATTR(complete_softirq, where[WHERE_SOFTIRQ]);
SYNCBLK_COUNTER_ATTR(complete_other_task, where[WHERE_OTHER_TASK]);

static struct attribute *syncblk_attrs[] = {
	&dev_attr_mode.attr,
	&dev_attr_fault_state.attr,
	&dev_attr_ios.attr,
	&dev_attr_reads.attr,
	&dev_attr_writes.attr,
	&dev_attr_errors.attr,
	&dev_attr_timeouts.attr,
	&dev_attr_complete_submitter.attr,
	&dev_attr_complete_hardirq.attr,
	&dev_attr_complete_softirq.attr,
	&dev_attr_complete_other_task.attr,
	NULL,
};

static const struct attribute_group syncblk_attr_group = {
	.attrs	= syncblk_attrs,
};

static const struct attribute_group *syncblk_attr_groups[] = {
	&syncblk_attr_group,
	NULL,
};

static int syncblk_read_config(struct syncblk_dev *dev)
{
	struct device *d = &dev->pdev->dev;
	void __iomem *bar = dev->bar;

	if (readl(bar + SYNCBLK_REG_MAGIC) != SYNCBLK_MAGIC ||
	    readl(bar + SYNCBLK_REG_VERSION) != SYNCBLK_VERSION) {
		dev_err(d, "not a syncblk v%u device\n", SYNCBLK_VERSION);
		return -ENODEV;
	}
	dev->capacity = readl(bar + SYNCBLK_REG_CAPACITY_LO) |
			(u64)readl(bar + SYNCBLK_REG_CAPACITY_HI) << 32;
	dev->mode = readl(bar + SYNCBLK_REG_MODE);
	dev->nslots = min_t(u32, readl(bar + SYNCBLK_REG_NUM_SLOTS), SYNCBLK_MAX_SLOTS);
	dev->max_sectors = readl(bar + SYNCBLK_REG_MAX_SECTORS);
	dev->max_entries = readl(bar + SYNCBLK_REG_MAX_ENTRIES);
	if (readl(bar + SYNCBLK_REG_BLOCK_SIZE) != SECTOR_SIZE ||
	    dev->mode >= ARRAY_SIZE(syncblk_mode_names) || !dev->nslots ||
	    dev->max_sectors < PAGE_SIZE >> SECTOR_SHIFT ||
	    !dev->max_entries) {
		dev_err(d, "unsupported device configuration\n");
		return -ENODEV;
	}
	return 0;
}

static int syncblk_init_slots(struct syncblk_dev *dev)
{
	size_t list_size = dev->max_entries * sizeof(struct syncblk_entry);
	unsigned int i;

	for (i = 0; i < dev->nslots; i++) {
		struct syncblk_slot *slot = &dev->slots[i];

		slot->dev = dev;
		slot->index = i;
		slot->regs = dev->bar + SYNCBLK_REG_SLOT_BASE + i * SYNCBLK_REG_SLOT_STRIDE;
		slot->list = dmam_alloc_coherent(&dev->pdev->dev, list_size,
						 &slot->list_dma, GFP_KERNEL);
		if (!slot->list)
			return -ENOMEM;
		timer_setup(&slot->timer, syncblk_timeout, 0);
		__set_bit(i, &dev->free_slots);
	}
	return 0;
}

static int syncblk_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct syncblk_dev *dev;
	int ret;

	dev = devm_kzalloc(&pdev->dev, sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	dev->pdev = pdev;
	spin_lock_init(&dev->lock);
	init_waitqueue_head(&dev->slot_wq);
	pci_set_drvdata(pdev, dev);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	dev->bar = syncblk_iomap(pdev);
	if (IS_ERR(dev->bar))
		return PTR_ERR(dev->bar);
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	ret = syncblk_read_config(dev);
	if (ret)
		return ret;
	ret = syncblk_init_slots(dev);
	if (ret)
		return ret;

	/* Even task mode takes MSI-X: a fault rule may redirect a command. */
	dev->id = ida_alloc(&syncblk_ida, GFP_KERNEL);
	if (dev->id < 0)
		return dev->id;
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0)
		goto out_ida;
	ret = request_threaded_irq(pci_irq_vector(pdev, 0), syncblk_irq,
				   syncblk_irq_thread, 0, SYNCBLK_NAME, dev);
	if (ret)
		goto out_vectors;

	dev->disk = syncblk_alloc_disk(dev);
	if (IS_ERR(dev->disk)) {
		ret = PTR_ERR(dev->disk);
		goto out_irq;
	}
	/* major 0, minors 0: the block layer picks an extended dev_t */
	dev->disk->flags |= GENHD_FL_NO_PART;
	dev->disk->private_data = dev;
	snprintf(dev->disk->disk_name, DISK_NAME_LEN, SYNCBLK_NAME "%d",
		 dev->id);
	set_capacity(dev->disk, dev->capacity);
	ret = device_add_disk(&pdev->dev, dev->disk, syncblk_attr_groups);
	if (ret)
		goto out_disk;
	dev_info(&pdev->dev, "%s: %llu sectors, completion=%s, %u slots\n",
		 dev->disk->disk_name, dev->capacity,
		 syncblk_mode_names[dev->mode], dev->nslots);
	return 0;

out_disk:
	put_disk(dev->disk);
out_irq:
	free_irq(pci_irq_vector(pdev, 0), dev);
out_vectors:
	pci_free_irq_vectors(pdev);
out_ida:
	ida_free(&syncblk_ida, dev->id);
	return ret;
}

static void syncblk_remove(struct pci_dev *pdev)
{
	struct syncblk_dev *dev = pci_get_drvdata(pdev);
	unsigned long flags;
	unsigned int i;

	/* No new bios after this; task-mode submitters have finished. */
	del_gendisk(dev->disk);
	/* Take back what the device still holds, then stop the IRQ. */
	for (i = 0; i < dev->nslots; i++) {
		struct syncblk_slot *slot = &dev->slots[i];
		bool abort;

		spin_lock_irqsave(&dev->lock, flags);
		abort = slot->inflight;
		if (abort)
			syncblk_abort_locked(slot);
		spin_unlock_irqrestore(&dev->lock, flags);
		if (abort)
			syncblk_end_cmd(slot);
	}
	free_irq(pci_irq_vector(pdev, 0), dev);
	/* Reaped by the hardirq handler but not yet by the thread. */
	for_each_set_bit(i, &dev->thread_pending, dev->nslots)
		syncblk_end_cmd(&dev->slots[i]);
	for (i = 0; i < dev->nslots; i++)
		timer_shutdown_sync(&dev->slots[i].timer);
	pci_free_irq_vectors(pdev);
	put_disk(dev->disk);
	ida_free(&syncblk_ida, dev->id);
}

static const struct pci_device_id syncblk_ids[] = {
	{ PCI_DEVICE(SYNCBLK_VENDOR_ID, SYNCBLK_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, syncblk_ids);

static struct pci_driver syncblk_driver = {
	.name		= SYNCBLK_NAME,
	.id_table	= syncblk_ids,
	.probe		= syncblk_probe,
	.remove		= syncblk_remove,
};
module_pci_driver(syncblk_driver);

MODULE_DESCRIPTION("faultline syncblk-pci fault-injecting block device");
MODULE_LICENSE("GPL");
