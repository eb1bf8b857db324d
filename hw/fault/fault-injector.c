/*
 * fault-injector: QOM wrapper around the faultline fault engine.
 *
 *   -object fault-injector,id=fi0,rules=FILE,seed=N[,log=FILE][,state=S]
 *           [,events=on][,deterministic=on]
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/error-report.h"
#include "system/reset.h"
#include "qapi/visitor.h"
#include "qapi/qapi-events-fault.h"
#include "qom/object_interfaces.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "system/cpu-timers.h"
#include "system/qtest.h"
#include "hw/fault/fault-injector.h"
#include "trace.h"

/* FE_KEY_* and FE_ACTION_* bits a user may refuse. */
#define FAULT_INJECTOR_REFUSE_BITS 2

struct FaultInjector {
    Object parent_obj;

    /* properties */
    char *rules_path;
    char *log_path;
    uint64_t seed;
    uint32_t initial_state;
    bool events;
    bool deterministic;     /* devices: sync I/O, virtual-clock completions */
    bool created;           /* complete() ran: file properties are fixed */

    QemuMutex lock;         /* protects everything below */
    FeEngine *engine;
    FILE *log;
    uint64_t log_next;      /* next log seq to write to @log */
    char *log_error;        /* why @log was given up, or NULL */
    /* The attached users (const FaultInjectorUser *), in attach order. */
    GPtrArray *users;
};

/*
 * Called with fi->lock held after a write to @log: on failure say so once
 * (stderr, trace, x-fault-query-stats) and stop writing the file; the ring
 * and QMP still have every entry.
 */
static void fault_injector_check_log(FaultInjector *fi, int ret)
{
    const char *id = object_get_canonical_path_component(OBJECT(fi));
    int err = errno;

    if (ret >= 0 && !ferror(fi->log)) {
        return;
    }
    fi->log_error = g_strdup_printf("cannot write log '%s': %s",
                                    fi->log_path, strerror(err ? err : EIO));
    error_report("fault-injector '%s': %s", id, fi->log_error);
    trace_fault_log_error(id, fi->log_error);
    fclose(fi->log);
    fi->log = NULL;
}

/* Called with fi->lock held: export new log entries and announce them. */
static void fault_injector_flush_log(FaultInjector *fi)
{
    uint64_t total = fe_engine_log_total(fi->engine);
    uint64_t first = fe_engine_log_first(fi->engine);
    const char *id = object_get_canonical_path_component(OBJECT(fi));
    FeLogEntry e;
    int ret = 0;

    if (fi->log_next < first) {
        /* The ring wrapped before we got here: say so in the file. */
        if (fi->log) {
            ret |= fprintf(fi->log, "{\"lost\":%" PRIu64 "}\n",
                           first - fi->log_next);
        }
        fi->log_next = first;
    }
    for (; fi->log_next < total; fi->log_next++) {
        if (fe_engine_log_get(fi->engine, fi->log_next, &e) < 0) {
            continue;
        }
        trace_fault_rule_hit(id, e.rule, e.action, e.ordinal,
                             fe_op_name(e.op), e.lba, e.len);
        if (fi->log) {
            char buf[1024];

            fe_log_entry_json(&e, buf, sizeof(buf));
            ret |= fprintf(fi->log, "%s\n", buf);
        }
        if (fi->events) {
            qapi_event_send_x_fault_injected(id, e.rule, e.action, e.ordinal,
                                             fe_op_name(e.op), e.lba, e.len);
        }
    }
    if (fi->log) {
        /* Once per fired fault (rare next to I/Os): a kill -9 loses none. */
        ret |= fflush(fi->log);
        fault_injector_check_log(fi, ret);
    }
}

bool fault_injector_decide(FaultInjector *fi, FeOp op, uint64_t lba,
                           uint32_t len, FeDecision *d)
{
    return fault_injector_decide_keys(fi, op, lba, len, NULL, d);
}

bool fault_injector_decide_keys(FaultInjector *fi, FeOp op, uint64_t lba,
                                uint32_t len, const FeIoKeys *keys,
                                FeDecision *d)
{
    bool fired;

    qemu_mutex_lock(&fi->lock);
    fired = fe_engine_decide_keys(fi->engine, op, lba, len, keys,
                                  qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), d);
    if (fired) {
        fault_injector_flush_log(fi);
    }
    qemu_mutex_unlock(&fi->lock);
    return fired;
}

void fault_injector_void_hit(FaultInjector *fi, FeHitRef ref, uint32_t times)
{
    qemu_mutex_lock(&fi->lock);
    fe_engine_void_hit(fi->engine, ref, times);
    qemu_mutex_unlock(&fi->lock);
}

void fault_injector_set_state(FaultInjector *fi, uint32_t state)
{
    qemu_mutex_lock(&fi->lock);
    fe_engine_set_state(fi->engine, state);
    qemu_mutex_unlock(&fi->lock);
    trace_fault_set_state(object_get_canonical_path_component(OBJECT(fi)),
                          state);
}

uint32_t fault_injector_get_state(FaultInjector *fi)
{
    uint32_t state;

    qemu_mutex_lock(&fi->lock);
    state = fe_engine_state(fi->engine);
    qemu_mutex_unlock(&fi->lock);
    return state;
}

int fault_injector_rule_stats(FaultInjector *fi, FeRuleStats *out, int max)
{
    int n;

    qemu_mutex_lock(&fi->lock);
    n = fe_engine_rule_count(fi->engine);
    for (int i = 0; i < n && i < max; i++) {
        fe_engine_rule_stats(fi->engine, i, &out[i]);
    }
    qemu_mutex_unlock(&fi->lock);
    return n;
}

bool fault_injector_deterministic(FaultInjector *fi)
{
    return fi->deterministic;
}

/*
 * Called with fi->lock held: false with @errp set if @u cannot attach to
 * @fi as its rules and mode are now.
 */
static bool fault_injector_check_locked(FaultInjector *fi,
                                        const FaultInjectorUser *u,
                                        Error **errp)
{
    ERRP_GUARD();
    const char *id = object_get_canonical_path_component(OBJECT(fi));
    const char *what = NULL;
    FeRuleStats st;
    int i;

    /* The qtest accelerator's clock moves only on clock_step: also fixed. */
    if (u->deterministic && fi->deterministic &&
        icount_enabled() != ICOUNT_PRECISE && !qtest_enabled()) {
        error_setg(errp, "%s: fault-injector '%s' has deterministic=on, "
                   "which needs -icount shift=N (TCG, fixed shift) or "
                   "the qtest accelerator", u->name, id);
        goto fail;
    }
    i = fe_engine_find_key(fi->engine, u->keys, &what);
    if (i >= 0) {
        fe_engine_rule_stats(fi->engine, i, &st);
        error_setg(errp, "%s: rule '%s' of fault-injector '%s' matches on "
                   "%s=, which %s does not supply", u->name, st.name, id,
                   what, u->name);
        goto fail;
    }
    i = fe_engine_find_action(fi->engine, u->actions, &what);
    if (i >= 0) {
        fe_engine_rule_stats(fi->engine, i, &st);
        error_setg(errp, "%s: rule '%s' of fault-injector '%s' has '%s', "
                   "which %s does not support (NVMe only)", u->name, st.name,
                   id, what, u->name);
        goto fail;
    }
    return true;

fail:
    trace_fault_attach_error(id, u->name, error_get_pretty(*errp));
    return false;
}

/*
 * Called with fi->lock held: each key and action is refused by the first
 * attached user that refuses it, and by no one once none does.
 */
static void fault_injector_update_refusals(FaultInjector *fi)
{
    for (int b = 0; b < FAULT_INJECTOR_REFUSE_BITS; b++) {
        const char *key_by = NULL, *action_by = NULL;
        g_autofree char *action_who = NULL;

        for (guint i = 0; i < fi->users->len; i++) {
            const FaultInjectorUser *u = g_ptr_array_index(fi->users, i);

            if (!key_by && (u->keys & (1u << b))) {
                key_by = u->name;
            }
            if (!action_by && (u->actions & (1u << b))) {
                action_by = u->name;
            }
        }
        fe_engine_refuse_keys(fi->engine, 1u << b, key_by);
        /* The actions a user may refuse (fatal, reset-fail=) are NVMe's. */
        if (action_by) {
            action_who = g_strdup_printf("%s (NVMe only)", action_by);
        }
        fe_engine_refuse_actions(fi->engine, 1u << b, action_who);
    }
}

bool fault_injector_check_attach(FaultInjector *fi, const FaultInjectorUser *u,
                                 Error **errp)
{
    bool ok;

    qemu_mutex_lock(&fi->lock);
    ok = fault_injector_check_locked(fi, u, errp);
    qemu_mutex_unlock(&fi->lock);
    return ok;
}

bool fault_injector_attach(FaultInjector *fi, const FaultInjectorUser *u,
                           Error **errp)
{
    qemu_mutex_lock(&fi->lock);
    if (!fault_injector_check_locked(fi, u, errp)) {
        qemu_mutex_unlock(&fi->lock);
        return false;
    }
    g_ptr_array_add(fi->users, (gpointer)u);
    fault_injector_update_refusals(fi);
    qemu_mutex_unlock(&fi->lock);
    object_ref(OBJECT(fi));
    trace_fault_attach(object_get_canonical_path_component(OBJECT(fi)),
                       u->name);
    return true;
}

void fault_injector_detach(FaultInjector *fi, const FaultInjectorUser *u)
{
    bool attached;

    qemu_mutex_lock(&fi->lock);
    attached = g_ptr_array_remove(fi->users, (gpointer)u);
    fault_injector_update_refusals(fi);
    qemu_mutex_unlock(&fi->lock);
    /* A detach without its attach would drop someone else's reference. */
    assert(attached);
    trace_fault_detach(object_get_canonical_path_component(OBJECT(fi)),
                       u->name);
    object_unref(OBJECT(fi));
}

bool fault_guard_enter(DeviceState *dev)
{
    bool was = dev->mem_reentrancy_guard.engaged_in_io;

    dev->mem_reentrancy_guard.engaged_in_io = true;
    return was;
}

void fault_guard_exit(DeviceState *dev, bool was)
{
    dev->mem_reentrancy_guard.engaged_in_io = was;
}

FaultInjector *fault_injector_find(const char *id, Error **errp)
{
    Object *obj = object_resolve_path_component(object_get_objects_root(), id);
    FaultInjector *fi;

    if (!obj) {
        error_setg(errp, "no fault-injector with id '%s'", id);
        return NULL;
    }
    fi = (FaultInjector *)object_dynamic_cast(obj, TYPE_FAULT_INJECTOR);
    if (!fi) {
        error_setg(errp, "object '%s' is not a fault-injector", id);
    }
    return fi;
}

FeEngine *fault_injector_lock_engine(FaultInjector *fi)
{
    qemu_mutex_lock(&fi->lock);
    return fi->engine;
}

void fault_injector_unlock_engine(FaultInjector *fi)
{
    qemu_mutex_unlock(&fi->lock);
}

char *fault_injector_log_error(FaultInjector *fi)
{
    char *msg;

    qemu_mutex_lock(&fi->lock);
    msg = g_strdup(fi->log_error);
    qemu_mutex_unlock(&fi->lock);
    return msg;
}

void fault_injector_reset(FaultInjector *fi)
{
    uint32_t state;

    qemu_mutex_lock(&fi->lock);
    state = fe_engine_state(fi->engine);
    fe_engine_reset(fi->engine);
    fe_engine_set_state(fi->engine, state);
    /* The log starts again at seq 0: export it from there. */
    fi->log_next = 0;
    qemu_mutex_unlock(&fi->lock);
}

/*
 * Machine reset (a guest reboot): the new boot sees the faults the first
 * one saw, at the same I/O ordinals, with the state back to the "state"
 * property.  The log and digest go on, so faults.jsonl and the digest
 * cover every boot of the run.
 */
static void fault_injector_machine_reset(void *opaque)
{
    FaultInjector *fi = opaque;

    qemu_mutex_lock(&fi->lock);
    fe_engine_reset_counters(fi->engine);
    fe_engine_set_state(fi->engine, fi->initial_state);
    qemu_mutex_unlock(&fi->lock);
}

static void fault_injector_complete(UserCreatable *uc, Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(uc);
    const char *id = object_get_canonical_path_component(OBJECT(fi));
    g_autofree char *text = NULL;
    g_autoptr(GError) gerr = NULL;
    char err[FE_ERR_MSG_MAX];
    gsize len;

    if (fi->rules_path) {
        if (!g_file_get_contents(fi->rules_path, &text, &len, &gerr)) {
            error_setg(errp, "fault-injector '%s': cannot read rules: %s",
                       id, gerr->message);
            return;
        }
        if (fe_engine_add_rules_len(fi->engine, text, len, err,
                                    sizeof(err)) < 0) {
            trace_fault_parse_error(id, err);
            error_setg(errp, "fault-injector '%s': %s:%s", id,
                       fi->rules_path, err);
            return;
        }
    }
    if (fi->log_path) {
        fi->log = fopen(fi->log_path, "w");
        if (!fi->log) {
            error_setg_errno(errp, errno, "fault-injector '%s': cannot open "
                             "log '%s'", id, fi->log_path);
            return;
        }
    }
    fe_engine_set_state(fi->engine, fi->initial_state);
    qemu_register_reset(fault_injector_machine_reset, fi);
    fi->created = true;
}

/*
 * Devices hold the injector through a strong link (or object_ref()): any
 * reference beyond the /objects container's is a user.
 */
static bool fault_injector_can_be_deleted(UserCreatable *uc)
{
    return OBJECT(uc)->ref == 1;
}

static bool fault_injector_can_set(FaultInjector *fi, const char *name,
                                   Error **errp)
{
    if (fi->created) {
        error_setg(errp, "fault-injector: '%s' cannot change once created "
                   "(use the x-fault-* QMP commands)", name);
        return false;
    }
    return true;
}

static char *get_rules(Object *obj, Error **errp)
{
    return g_strdup(FAULT_INJECTOR(obj)->rules_path);
}

static void set_rules(Object *obj, const char *value, Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    if (fault_injector_can_set(fi, "rules", errp)) {
        g_free(fi->rules_path);
        fi->rules_path = g_strdup(value);
    }
}

static char *get_log(Object *obj, Error **errp)
{
    return g_strdup(FAULT_INJECTOR(obj)->log_path);
}

static void set_log(Object *obj, const char *value, Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    if (fault_injector_can_set(fi, "log", errp)) {
        g_free(fi->log_path);
        fi->log_path = g_strdup(value);
    }
}

static void get_seed(Object *obj, Visitor *v, const char *name, void *opaque,
                     Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    visit_type_uint64(v, name, &fi->seed, errp);
}

static void set_seed(Object *obj, Visitor *v, const char *name, void *opaque,
                     Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);
    uint64_t seed;

    if (!visit_type_uint64(v, name, &seed, errp) ||
        !fault_injector_can_set(fi, "seed", errp)) {
        return;
    }
    fi->seed = seed;
    /* The seed keys every decision: a new engine, nothing loaded yet. */
    fe_engine_free(fi->engine);
    fi->engine = fe_engine_new(seed);
}

static void get_state(Object *obj, Visitor *v, const char *name, void *opaque,
                      Error **errp)
{
    uint32_t state = fault_injector_get_state(FAULT_INJECTOR(obj));

    visit_type_uint32(v, name, &state, errp);
}

static void set_state(Object *obj, Visitor *v, const char *name, void *opaque,
                      Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);
    uint32_t state;

    if (visit_type_uint32(v, name, &state, errp)) {
        fi->initial_state = state;
        fault_injector_set_state(fi, state);
    }
}

static bool get_events(Object *obj, Error **errp)
{
    return FAULT_INJECTOR(obj)->events;
}

static void set_events(Object *obj, bool value, Error **errp)
{
    FAULT_INJECTOR(obj)->events = value;
}

static bool get_deterministic(Object *obj, Error **errp)
{
    return FAULT_INJECTOR(obj)->deterministic;
}

static void set_deterministic(Object *obj, bool value, Error **errp)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    if (fault_injector_can_set(fi, "deterministic", errp)) {
        fi->deterministic = value;
    }
}

static void fault_injector_init(Object *obj)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    qemu_mutex_init(&fi->lock);
    fi->engine = fe_engine_new(0);
    fi->users = g_ptr_array_new();
}

static void fault_injector_finalize(Object *obj)
{
    FaultInjector *fi = FAULT_INJECTOR(obj);

    if (fi->created) {
        qemu_unregister_reset(fault_injector_machine_reset, fi);
    }
    if (fi->log) {
        fclose(fi->log);
    }
    g_free(fi->log_error);
    g_ptr_array_free(fi->users, true);
    fe_engine_free(fi->engine);
    qemu_mutex_destroy(&fi->lock);
    g_free(fi->rules_path);
    g_free(fi->log_path);
}

static void fault_injector_class_init(ObjectClass *oc, void *data)
{
    UserCreatableClass *ucc = USER_CREATABLE_CLASS(oc);

    ucc->complete = fault_injector_complete;
    ucc->can_be_deleted = fault_injector_can_be_deleted;
    object_class_property_add_str(oc, "rules", get_rules, set_rules);
    object_class_property_set_description(oc, "rules",
        "file with fault rules, one per line (docs/rules.md)");
    object_class_property_add(oc, "seed", "uint64", get_seed, set_seed,
                              NULL, NULL);
    object_class_property_set_description(oc, "seed",
        "seed of every random decision (default 0)");
    object_class_property_add_str(oc, "log", get_log, set_log);
    object_class_property_set_description(oc, "log",
        "write every injected fault to this file as JSON lines");
    object_class_property_add(oc, "state", "uint32", get_state, set_state,
                              NULL, NULL);
    object_class_property_set_description(oc, "state",
        "engine state matched by state=S rules (default 0)");
    object_class_property_add_bool(oc, "events", get_events, set_events);
    object_class_property_set_description(oc, "events",
        "emit an X_FAULT_INJECTED QMP event for every injected fault");
    object_class_property_add_bool(oc, "deterministic", get_deterministic,
                                   set_deterministic);
    object_class_property_set_description(oc, "deterministic",
        "devices do I/O synchronously and complete on virtual-clock "
        "timers (needs -icount)");
}

static const TypeInfo fault_injector_info = {
    .name = TYPE_FAULT_INJECTOR,
    .parent = TYPE_OBJECT,
    .instance_size = sizeof(FaultInjector),
    .instance_init = fault_injector_init,
    .instance_finalize = fault_injector_finalize,
    .class_init = fault_injector_class_init,
    .interfaces = (InterfaceInfo[]) {
        { TYPE_USER_CREATABLE },
        { }
    },
};

static void fault_injector_register_types(void)
{
    type_register_static(&fault_injector_info);
}

type_init(fault_injector_register_types);

#define FAULT_LATE_MAX_NS   (1 * SCALE_MS)     /* samples clamped to it */
#define FAULT_LATE_FRACTION 2
#define FAULT_LATE_STEP_NS  (2 * SCALE_US)      /* of the median estimate */
#define FAULT_LATE_SPIN_NS  (100 * SCALE_US)    /* longest wait on the CPU */

int64_t fault_lateness_early(const FaultLateness *l, int64_t wait_ns,
                             uint64_t delay_ns, unsigned *bucket)
{
    unsigned b = 0;

    for (int64_t t = 100 * SCALE_US; wait_ns >= t && b < FAULT_LATE_BUCKETS - 1;
         t *= 10) {
        b++;
    }
    *bucket = b;
    return MIN((uint64_t)l->est_ns[b], delay_ns / FAULT_LATE_FRACTION);
}

static void fault_lateness_sample(FaultLateness *l, unsigned bucket,
                                  int64_t late)
{
    int64_t *est = &l->est_ns[bucket];

    /*
     * The median, not the mean: a noisy host's long tail of late
     * wake-ups would have most timers wait long.
     */
    late = MIN(MAX(late, 0), FAULT_LATE_MAX_NS);
    if (late > *est) {
        *est += MIN(late - *est, FAULT_LATE_STEP_NS);
    } else {
        *est -= MIN(*est - late, FAULT_LATE_STEP_NS);
    }
}

bool fault_lateness_arrive(FaultLateness *l, unsigned *bucket,
                           int64_t armed_ns, int64_t deadline_ns)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int64_t spin_end;

    if (*bucket < FAULT_LATE_BUCKETS) {
        fault_lateness_sample(l, *bucket, now - armed_ns);
        *bucket = FAULT_LATE_BUCKETS;
    }
    if (deadline_ns - now > FAULT_LATE_SPIN_NS) {
        return false;
    }
    /*
     * Bounded by the host's clock as well: with -icount the virtual clock
     * stands still while the main loop spins.  Yielding, not pausing: a
     * vCPU or an I/O worker waiting for this core runs meanwhile.
     */
    spin_end = get_clock() + FAULT_LATE_SPIN_NS;
    while (now < deadline_ns && get_clock() < spin_end) {
        g_thread_yield();
        now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    }
    return now >= deadline_ns;
}
