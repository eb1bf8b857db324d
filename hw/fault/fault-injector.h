/*
 * fault-injector: the QOM object that wraps the faultline fault engine.
 *
 * Devices hold a link to one (property "fault-injector") and ask it, once
 * per I/O, what to do.  All entry points are thread-safe: devices call them
 * from vCPU threads, the main loop and iothreads.
 *
 * Attaching: a device or block node that asks an injector declares what it
 * cannot do (FaultInjectorUser) with fault_injector_attach() before its
 * first decision and gives it back with fault_injector_detach() when done.
 * An attached user holds a reference: object-del of an injector is refused
 * while anyone besides /objects holds one.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_FAULT_INJECTOR_H
#define HW_FAULT_INJECTOR_H

#include "qom/object.h"
#include "hw/qdev-core.h"
#include "hw/fault/fault-engine.h"

#define TYPE_FAULT_INJECTOR "fault-injector"
OBJECT_DECLARE_SIMPLE_TYPE(FaultInjector, FAULT_INJECTOR)

/*
 * Decide the fate of one I/O (@lba, @len in 512-byte sectors) and log it.
 * Returns true when any rule fired; @d is always filled.
 */
bool fault_injector_decide(FaultInjector *fi, FeOp op, uint64_t lba,
                           uint32_t len, FeDecision *d);
/* The same for an I/O that carries @keys (sq=, cpu= match keys). */
bool fault_injector_decide_keys(FaultInjector *fi, FeOp op, uint64_t lba,
                                uint32_t len, const FeIoKeys *keys,
                                FeDecision *d);

/*
 * What an attach point cannot do.  Usually one static const per device
 * type, passed to both fault_injector_attach() and _detach().
 */
typedef struct FaultInjectorUser {
    const char *name;       /* in messages: "syncblk-pci", "fault-inject" */
    uint32_t keys;          /* FE_KEY_* it cannot supply */
    uint32_t actions;       /* FE_ACTION_* it cannot honour */
    /*
     * It follows the injector's deterministic=on, which then needs a
     * deterministic machine (-icount with a fixed shift, or the qtest
     * accelerator).
     */
    bool deterministic;
} FaultInjectorUser;

/*
 * Attach @u to @fi: false with @errp set (one line naming @u, the injector
 * and the rule) if an armed rule needs a key or an action that @u refuses,
 * or if @u follows deterministic=on on a machine that is not deterministic.
 * Otherwise @u holds a reference to @fi and, until it detaches, adding a
 * rule that needs what @u refuses fails.
 */
bool fault_injector_attach(FaultInjector *fi, const FaultInjectorUser *u,
                           Error **errp);
/*
 * Give back exactly what fault_injector_attach(@fi, @u) took (once per
 * successful attach); drops @u's reference to @fi.
 */
void fault_injector_detach(FaultInjector *fi, const FaultInjectorUser *u);
/*
 * What fault_injector_attach() would refuse, without attaching: for a
 * device that checks early in realize and attaches last, once nothing
 * can fail any more (nothing changes the rules in between: the BQL is
 * held throughout).
 */
bool fault_injector_check_attach(FaultInjector *fi, const FaultInjectorUser *u,
                                 Error **errp);

/* fe_engine_void_hit(), for a device that raised the interrupt anyway. */
void fault_injector_void_hit(FaultInjector *fi, FeHitRef ref, uint32_t times);

void fault_injector_set_state(FaultInjector *fi, uint32_t state);
uint32_t fault_injector_get_state(FaultInjector *fi);

/*
 * The engine behind @fi, for the QMP handlers (fault-qmp.c): it is only
 * touched between these two calls, which hold the injector's lock.
 */
FeEngine *fault_injector_lock_engine(FaultInjector *fi);
void fault_injector_unlock_engine(FaultInjector *fi);

/*
 * x-fault-reset: counters, ordinals and log start over (the log file goes
 * on from seq 0); the rules and the state stay.
 */
void fault_injector_reset(FaultInjector *fi);

/* Why writing the log file failed (g_free() it), or NULL. */
char *fault_injector_log_error(FaultInjector *fi);

/* Copy up to @max rules' statistics into @out; returns the rule count. */
int fault_injector_rule_stats(FaultInjector *fi, FeRuleStats *out, int max);

/*
 * Property "deterministic": the devices do their backend I/O synchronously
 * and complete on QEMU_CLOCK_VIRTUAL timers only (docs/devices.md).
 */
bool fault_injector_deterministic(FaultInjector *fi);

/*
 * Work of a device that starts outside an MMIO handler (a timer, an AIO
 * completion, a bottom half run by hand) engages @dev's MemReentrancyGuard
 * as memory dispatch does for an MMIO access, so DMA or an MSI-X message
 * aimed at the device's own BAR fails instead of re-entering it.  Returns
 * the guard's previous state, for fault_guard_exit().
 */
bool fault_guard_enter(DeviceState *dev);
void fault_guard_exit(DeviceState *dev, bool was);

/* Look up a fault-injector by its -object id; sets @errp if there is none. */
FaultInjector *fault_injector_find(const char *id, Error **errp);

/*
 * Without deterministic mode the virtual clock follows the host, and a
 * timer fires late by the host's wake-up latency: tens of us, more after
 * a longer sleep.  A device holding a completion for an injected delay
 * arms its timer that much early: the running median of the lateness of
 * timers that waited about as long (one per decade of the wait, from
 * 100 us), never more than half the delay.  A timer that fires before
 * its deadline waits out the rest in fault_lateness_arrive(), so that no
 * completion is ever early.
 */
#define FAULT_LATE_BUCKETS 4

typedef struct FaultLateness {
    int64_t est_ns[FAULT_LATE_BUCKETS];
} FaultLateness;

/*
 * How much earlier than its deadline, @wait_ns from now, to arm the timer
 * of a @delay_ns delay; *@bucket is for fault_lateness_arrive().
 */
int64_t fault_lateness_early(const FaultLateness *l, int64_t wait_ns,
                             uint64_t delay_ns, unsigned *bucket);
/*
 * The timer armed for @armed_ns, early for @deadline_ns, fires: learn its
 * lateness (once per arming: *@bucket is spent), then wait for the
 * deadline, yielding the CPU (the caller keeps the BQL), when that is at
 * most FAULT_LATE_SPIN_NS away.  True when the deadline has passed; false
 * when the caller must re-arm the timer for @deadline_ns.
 */
bool fault_lateness_arrive(FaultLateness *l, unsigned *bucket,
                           int64_t armed_ns, int64_t deadline_ns);

#endif /* HW_FAULT_INJECTOR_H */
