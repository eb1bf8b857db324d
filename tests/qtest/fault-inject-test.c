/*
 * QTest for the fault-inject block filter (block/fault-inject.c), driven
 * through QMP human-monitor-command "qemu-io".
 *
 * Outcomes are read from what the block layer reports, not from the
 * filter: the aio_* qemu-io commands account every completion in the
 * BlockBackend statistics (query-blockstats), synchronous writes land (or
 * not) in the image file, and the flush result is the filter's trace line.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "qemu/osdep.h"
#include "faultline-qtest.h"

#define IMG_SIZE (1024 * 1024)

static char *tmpdir;

static char *tmp_path(const char *name)
{
    return g_build_filename(tmpdir, name, NULL);
}

/* A zero-filled raw image. */
static char *make_image(const char *name)
{
    return fl_zero_file(tmpdir, name, IMG_SIZE);
}

/*
 * QEMU with injector fi0 (seed @seed) and a BlockBackend "d0" over the
 * filter node "fi" (created with -drive: the shorthand must work) whose
 * child is @child (-drive suboptions "file.*").
 */
static QTestState *start(uint64_t seed, const char *child, const char *log)
{
    return qtest_initf("-machine none -object fault-injector,id=fi0,seed=%"
                       PRIu64 ",log=%s/faults.jsonl"
                       " -drive if=none,id=d0,node-name=fi,"
                       "driver=fault-inject,fault-injector=fi0,"
                       "discard=unmap,%s%s%s >>%s/qemu-io.out", seed, tmpdir,
                       child,
                       log ? " -trace enable=fault_inject_* -D " : "",
                       log ? log : "", tmpdir);
}

/*
 * qemu-io prints its results on QEMU's stdout (line-buffered), which
 * start() appends to qemu-io.out: the text printed since @from.
 */
static char *qemu_io_output(gsize from)
{
    g_autofree char *path = tmp_path("qemu-io.out");
    g_autofree char *text = NULL;
    gsize len = 0;

    g_file_get_contents(path, &text, &len, NULL);
    return g_strdup(len > from ? text + from : "");
}

static gsize qemu_io_output_end(void)
{
    g_autofree char *path = tmp_path("qemu-io.out");
    struct stat st;

    return stat(path, &st) ? 0 : st.st_size;
}

static void add_rules(QTestState *qts, const char *rules)
{
    fl_add_rules(qts, "fi0", rules);
}

static void qemu_io(QTestState *qts, const char *node, const char *cmd)
{
    g_autofree char *line = g_strdup_printf("qemu-io %s \"%s\"", node, cmd);
    g_autofree char *out = qtest_hmp(qts, "%s", line);

    /* Errors of the HMP command itself (unknown node...) come back here. */
    g_assert(!strstr(out, "Error"));
}

/* One counter of d0's query-blockstats, e.g. "failed_wr_operations". */
static int64_t blockstat(QTestState *qts, const char *key)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-blockstats'}");
    QList *list = qdict_get_qlist(rsp, "return");
    QListEntry *e;
    int64_t val = -1;

    QLIST_FOREACH_ENTRY(list, e) {
        QDict *bs = qobject_to(QDict, qlist_entry_obj(e));

        if (!strcmp(qdict_get_try_str(bs, "device") ?: "", "d0")) {
            val = qdict_get_int(qdict_get_qdict(bs, "stats"), key);
        }
    }
    qobject_unref(rsp);
    g_assert_cmpint(val, >=, 0);
    return val;
}

/* Wait (real time, bounded) for an asynchronous completion to be counted. */
static void wait_blockstat(QTestState *qts, const char *key, int64_t want)
{
    FL_POLL(blockstat(qts, key) == want, 500, 10 * 1000);
    g_assert_cmpint(blockstat(qts, key), ==, want);
}

static int64_t rule_hits(QTestState *qts, const char *name)
{
    return fl_rule_hits(qts, "fi0", name);
}

static int64_t rule_matched(QTestState *qts, const char *name)
{
    return fl_rule_count(qts, "fi0", name, "matched");
}

static uint64_t digest(QTestState *qts)
{
    return fl_stat(qts, "fi0", "digest");
}

/* Lines of the injector's faults.jsonl (of the last QEMU) containing @s. */
static int log_lines_with(const char *s)
{
    g_autofree char *path = tmp_path("faults.jsonl");

    return fl_file_lines_with(path, s);
}

static char *null_child(void)
{
    return g_strdup_printf("file.driver=null-co,file.size=%d,"
                           "file.read-zeroes=on", IMG_SIZE);
}

/*
 * Each op, with a rule that matches (lba 64, sectors 64..71) and without
 * (lba 0): the matching one fails with the mapped errno, the other passes.
 */
static void test_ops(void)
{
    g_autofree char *img = make_image("ops.img");
    g_autofree char *log = tmp_path("ops.log");
    g_autofree char *child = g_strdup_printf("file.driver=file,"
                                             "file.filename=%s", img);
    g_autofree char *trace = NULL;
    QTestState *qts = start(1, child, log);
    char *out;
    gsize from;
    static const struct {
        const char *cmd, *ok_key, *failed_key;
    } ops[] = {
        { "aio_read", "rd_operations", "failed_rd_operations" },
        { "aio_write", "wr_operations", "failed_wr_operations" },
        { "aio_discard", "unmap_operations", "failed_unmap_operations" },
    };

    add_rules(qts, "r: read lba=64 error=read-error\n"
              "w: write lba=64 error=enospc\n"
              "z: write-zeroes lba=64 error=write-fault\n"
              "d: discard lba=64 error=internal\n"
              "f: flush state=1 error=eio\n");
    for (int i = 0; i < ARRAY_SIZE(ops); i++) {
        g_autofree char *miss = g_strdup_printf("%s 0 4096", ops[i].cmd);
        g_autofree char *hit = g_strdup_printf("%s 32768 4096", ops[i].cmd);
        int64_t ok = blockstat(qts, ops[i].ok_key);
        int64_t failed = blockstat(qts, ops[i].failed_key);

        qemu_io(qts, "d0", miss);
        qemu_io(qts, "d0", "aio_flush");
        g_assert_cmpint(blockstat(qts, ops[i].ok_key), ==, ok + 1);
        g_assert_cmpint(blockstat(qts, ops[i].failed_key), ==, failed);
        qemu_io(qts, "d0", hit);
        qemu_io(qts, "d0", "aio_flush");
        g_assert_cmpint(blockstat(qts, ops[i].ok_key), ==, ok + 1);
        g_assert_cmpint(blockstat(qts, ops[i].failed_key), ==, failed + 1);
    }
    g_assert_cmpint(rule_hits(qts, "r"), ==, 1);
    g_assert_cmpint(rule_hits(qts, "w"), ==, 1);
    g_assert_cmpint(rule_hits(qts, "d"), ==, 1);

    /* qemu-io does not account write -z: read its report instead */
    from = qemu_io_output_end();
    qemu_io(qts, "d0", "write -z 0 4096");
    out = qemu_io_output(from);
    g_assert(strstr(out, "wrote 4096/4096 bytes at offset 0"));
    g_free(out);
    from = qemu_io_output_end();
    qemu_io(qts, "d0", "write -z 32768 4096");
    out = qemu_io_output(from);
    g_assert(strstr(out, "write failed: Input/output error"));
    g_free(out);
    g_assert_cmpint(rule_hits(qts, "z"), ==, 1);

    /* Flush: qemu-io's flush reports nothing, the filter's trace does. */
    qemu_io(qts, "d0", "flush");
    g_assert_cmpint(rule_hits(qts, "f"), ==, 0);
    fl_set_state(qts, "fi0", 1);
    qemu_io(qts, "d0", "flush");
    g_assert_cmpint(rule_hits(qts, "f"), ==, 1);
    qtest_quit(qts);

    g_assert(g_file_get_contents(log, &trace, NULL, NULL));
    g_assert(strstr(trace, "fi: flush lba 0 completes with -5"));
    g_assert(strstr(trace, "fi: read lba 64 completes with -5"));
    g_assert(strstr(trace, "fi: write lba 64 completes with -28"));
    g_assert(strstr(trace, "fi: write-zeroes lba 64 completes with -5"));
    g_assert(strstr(trace, "fi: discard lba 64 completes with -5"));
    unlink(log);
    unlink(img);
}

/* @n writes, then how many of them failed. */
static int64_t write_n(QTestState *qts, int n)
{
    int64_t failed = blockstat(qts, "failed_wr_operations");

    for (int i = 0; i < n; i++) {
        qemu_io(qts, "d0", "aio_write 0 512");
    }
    qemu_io(qts, "d0", "aio_flush");
    g_assert_cmpint(blockstat(qts, "wr_operations") +
                    blockstat(qts, "failed_wr_operations"), >=, n);
    return blockstat(qts, "failed_wr_operations") - failed;
}

/*
 * Writes under rule @rule alone: @want of @n fail, and the rule matched
 * all @n and fired @want times.
 */
static void trigger_run(QTestState *qts, const char *name, const char *rule,
                        int n, int64_t want)
{
    add_rules(qts, rule);
    g_assert_cmpint(write_n(qts, n), ==, want);
    g_assert_cmpint(rule_hits(qts, name), ==, want);
    g_assert_cmpint(rule_matched(qts, name), ==, n);
    fl_delete_rule(qts, "fi0", name);
}

/* nth=, after/every/count=, then prob=0.5: returns prob's failures. */
static int64_t trigger_sequence(QTestState *qts)
{
    int64_t prob_hits;

    trigger_run(qts, "n3", "n3: write nth=3 error=eio\n", 6, 1);
    /* after=2 every=3 count=2 fires at 5 and 8 of 12 */
    trigger_run(qts, "ev", "ev: write after=2 every=3 count=2 error=eio\n",
                12, 2);
    add_rules(qts, "p: write prob=0.5 error=eio\n");
    prob_hits = write_n(qts, 64);
    g_assert_cmpint(rule_hits(qts, "p"), ==, prob_hits);
    return prob_hits;
}

static void test_triggers(void)
{
    g_autofree char *child = null_child();
    QTestState *qts = start(7, child, NULL);
    int64_t prob_hits;
    uint64_t first_digest;

    prob_hits = trigger_sequence(qts);
    g_assert_cmpint(prob_hits, >, 0);
    g_assert_cmpint(prob_hits, <, 64);
    first_digest = digest(qts);
    qtest_quit(qts);

    /* The injector's JSON log has one line per injected fault. */
    g_assert_cmpint(log_lines_with("\"rule\":\"n3\""), ==, 1);
    g_assert_cmpint(log_lines_with("\"rule\":\"ev\""), ==, 2);
    g_assert_cmpint(log_lines_with("\"rule\":\"p\""), ==, prob_hits);
    g_assert_cmpint(log_lines_with("\"op\":\"write\""), ==, 3 + prob_hits);

    /* The same seed gives the same outcomes and the same digest. */
    qts = start(7, child, NULL);
    g_assert_cmpint(trigger_sequence(qts), ==, prob_hits);
    g_assert_cmpuint(digest(qts), ==, first_digest);
    qtest_quit(qts);
}

static bool image_bytes_are(const char *img, int64_t offset, int len, int val)
{
    g_autofree char *data = NULL;
    gsize size;

    g_assert(g_file_get_contents(img, &data, &size, NULL));
    g_assert_cmpint(size, >=, offset + len);
    for (int i = 0; i < len; i++) {
        if ((unsigned char)data[offset + i] != val) {
            return false;
        }
    }
    return true;
}

/* when=after: the data lands on the child, the write still fails. */
static void test_when(void)
{
    g_autofree char *img = make_image("when.img");
    g_autofree char *child = g_strdup_printf("file.driver=file,"
                                             "file.filename=%s", img);
    QTestState *qts = start(1, child, NULL);

    add_rules(qts, "after: write lba=0 error=eio when=after\n"
              "before: write lba=8 error=eio\n");
    qemu_io(qts, "d0", "aio_write -P 0xa5 0 512");
    qemu_io(qts, "d0", "aio_write -P 0x5a 4096 512");
    qemu_io(qts, "d0", "aio_flush");
    g_assert_cmpint(blockstat(qts, "failed_wr_operations"), ==, 2);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);
    qtest_quit(qts);

    g_assert(image_bytes_are(img, 0, 512, 0xa5));
    g_assert(image_bytes_are(img, 4096, 512, 0));
    unlink(img);
}

/* The offsets the log gives for rule @rule's first corrupt entry. */
static int logged_offsets(const char *rule, uint64_t *off, int max)
{
    g_autofree char *path = tmp_path("faults.jsonl");
    g_autofree char *text = NULL;
    g_autofree char *key = g_strdup_printf("\"rule\":\"%s\",", rule);
    char *p;

    /* {..."rule":"R","nth":N,"action":"corrupt=K at=A,B"} */
    g_assert(g_file_get_contents(path, &text, NULL, NULL));
    for (p = strstr(text, key); p; p = strstr(p + 1, key)) {
        char *eol = strchr(p, '\n');
        char *act = strstr(p, "\"action\":\"corrupt=");

        if (act && (!eol || act < eol)) {
            p = act;
            break;
        }
    }
    g_assert(p);
    return fl_parse_offsets(p, off, max);
}

/* The bytes a "read -v" printed (qemu-io's hex dump), into @buf. */
static int dumped_bytes(const char *out, unsigned char *buf, int max)
{
    int n = 0;

    for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l) {
        unsigned int addr, b;
        int pos;

        if (sscanf(l, "%x:%n", &addr, &pos) != 1) {
            continue;
        }
        l += pos;
        for (int j = 0; j < 16 && n < max; j++) {
            int k;
            if (sscanf(l, " %2x%n", &b, &k) != 1) {
                break;
            }
            buf[n++] = b;
            l += k;
        }
    }
    return n;
}

/*
 * lie: the write reports success and the old data stays.  corrupt: what
 * is stored differs by exactly N bytes at the logged offsets; after a
 * read, the guest's buffer does.
 */
static void test_lie_corrupt(void)
{
    g_autofree char *img = make_image("lie.img");
    g_autofree char *child = g_strdup_printf("file.driver=file,"
                                             "file.filename=%s", img);
    g_autofree char *data = NULL;
    g_autofree char *out = NULL;
    unsigned char got[4096];
    QTestState *qts = start(5, child, NULL);
    uint64_t off[16];
    gsize size, from;

    qemu_io(qts, "d0", "write -P 0x11 0 4096");
    qemu_io(qts, "d0", "write -P 0x44 16384 4096");
    add_rules(qts, "l: write lba=0-7 lie\n"
              "c: write lba=16-23 corrupt=3\n"
              "r: read lba=32-39 count=1 corrupt=2\n");
    qemu_io(qts, "d0", "aio_write -P 0x22 0 4096");
    qemu_io(qts, "d0", "aio_write -P 0x33 8192 4096");
    qemu_io(qts, "d0", "aio_flush");
    g_assert_cmpint(blockstat(qts, "failed_wr_operations"), ==, 0);
    g_assert_cmpint(rule_hits(qts, "l"), ==, 1);
    from = qemu_io_output_end();
    qemu_io(qts, "d0", "read -v 16384 4096");
    out = qemu_io_output(from);
    g_assert_cmpint(dumped_bytes(out, got, sizeof(got)), ==, 4096);
    g_assert_cmpint(logged_offsets("r", off, 16), ==, 2);
    fl_assert_flipped(got, sizeof(got), 0x44, off, 2);
    qtest_quit(qts);

    /* The lied write left the old data; the corrupt one 3 bytes off. */
    g_assert(image_bytes_are(img, 0, 4096, 0x11));
    g_assert(image_bytes_are(img, 16384, 4096, 0x44));
    g_assert_cmpint(logged_offsets("c", off, 16), ==, 3);
    g_assert(g_file_get_contents(img, &data, &size, NULL));
    g_assert_cmpint(size, >=, 8192 + 4096);
    fl_assert_flipped((uint8_t *)data + 8192, 4096, 0x33, off, 3);
    unlink(img);
}

/* Delays run on QEMU_CLOCK_VIRTUAL only, counted from submission. */
static void test_delay(void)
{
    g_autofree char *child = null_child();
    QTestState *qts = start(3, child, NULL);

    add_rules(qts, "w: write delay=10ms\n"
              "r: read lba=0 delay=uniform(2ms,3ms)\n"
              "e: read lba=8 delay=exp(1ms)\n");
    qemu_io(qts, "d0", "aio_write 0 512");
    qtest_clock_step(qts, 4 * 1000 * 1000);
    qemu_io(qts, "d0", "aio_read 0 512");
    g_usleep(50 * 1000);        /* real time does not complete them */
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);
    g_assert_cmpint(blockstat(qts, "rd_operations"), ==, 0);
    qtest_clock_step(qts, 1999 * 1000);
    g_usleep(20 * 1000);
    g_assert_cmpint(blockstat(qts, "rd_operations"), ==, 0);
    qtest_clock_step(qts, 1001 * 1000);        /* read: 3ms after its start */
    wait_blockstat(qts, "rd_operations", 1);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);
    qtest_clock_step(qts, 2999 * 1000);        /* write: 9.999ms */
    g_usleep(20 * 1000);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);
    qtest_clock_step(qts, 1000);
    wait_blockstat(qts, "wr_operations", 1);

    qemu_io(qts, "d0", "aio_read 4096 512");
    g_usleep(20 * 1000);
    g_assert_cmpint(blockstat(qts, "rd_operations"), ==, 1);
    qtest_clock_step(qts, 10 * 1000 * 1000 * 1000LL);
    wait_blockstat(qts, "rd_operations", 2);
    g_assert_cmpint(rule_hits(qts, "e"), ==, 1);
    qtest_quit(qts);
}

static bool node_exists(QTestState *qts, const char *name)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'query-named-block-nodes',"
                           " 'arguments': {'flat': true}}");
    QListEntry *e;
    bool found = false;

    QLIST_FOREACH_ENTRY(qdict_get_qlist(rsp, "return"), e) {
        QDict *n = qobject_to(QDict, qlist_entry_obj(e));

        found |= !strcmp(qdict_get_str(n, "node-name"), name);
    }
    qobject_unref(rsp);
    return found;
}

/*
 * drop holds the request through time (real and virtual) until a drain;
 * then it completes with -EIO.  Neither the drain nor blockdev-del nor the
 * shutdown hang.
 */
static void test_drop(void)
{
    g_autofree char *child = null_child();
    g_autofree char *log = tmp_path("drop.log");
    g_autofree char *trace = NULL;
    QTestState *qts = start(1, child, log);

    add_rules(qts, "lost: write drop\n");
    qemu_io(qts, "d0", "aio_write 0 512");
    g_usleep(50 * 1000);
    qtest_clock_step(qts, 100 * 1000 * 1000 * 1000LL);
    g_usleep(50 * 1000);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);
    g_assert_cmpint(blockstat(qts, "failed_wr_operations"), ==, 0);
    qemu_io(qts, "d0", "aio_flush");            /* bdrv_drain_all() */
    g_assert_cmpint(blockstat(qts, "failed_wr_operations"), ==, 1);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 0);

    /* blockdev-del of a filter node added over QMP, with a held write. */
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-add', 'arguments':"
                             " {'driver': 'fault-inject', 'node-name': 'fi2',"
                             "  'fault-injector': 'fi0', 'file':"
                             "  {'driver': 'null-co', 'size': 1048576}}}");
    /* qemu-io on a node drains its temporary BlockBackend when done */
    qemu_io(qts, "fi2", "aio_write 0 512");
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-del',"
                             " 'arguments': {'node-name': 'fi2'}}");
    g_assert(!node_exists(qts, "fi2"));

    /* Below another node: a drain of the node above releases it too. */
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-add', 'arguments':"
                             " {'driver': 'raw', 'node-name': 'top',"
                             "  'file': {'driver': 'fault-inject',"
                             "   'node-name': 'fi3', 'fault-injector': 'fi0',"
                             "   'file': {'driver': 'null-co',"
                             "            'size': 1048576}}}}");
    qemu_io(qts, "top", "aio_write 0 512");
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-del',"
                             " 'arguments': {'node-name': 'top'}}");
    g_assert(!node_exists(qts, "fi3"));
    g_assert_cmpint(rule_hits(qts, "lost"), ==, 3);

    /* One more held at shutdown: quit must not hang. */
    qemu_io(qts, "d0", "aio_write 0 512");
    qtest_quit(qts);

    g_assert(g_file_get_contents(log, &trace, NULL, NULL));
    g_assert(strstr(trace, "fi: write lba 0 released with -EIO"));
    g_assert(strstr(trace, "fi2: write lba 0 released with -EIO"));
    g_assert(strstr(trace, "fi3: write lba 0 released with -EIO"));
    unlink(log);
}

/* The actions with no meaning on a block node: accepted, ignored, once. */
static void test_ignored_actions(void)
{
    g_autofree char *child = null_child();
    g_autofree char *log = tmp_path("ignored.log");
    g_autofree char *trace = NULL;
    QTestState *qts = start(1, child, log);

    add_rules(qts, "x: write dnr complete=thread irq-delay=1ms\n");
    g_assert_cmpint(write_n(qts, 3), ==, 0);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 3);
    g_assert_cmpint(rule_hits(qts, "x"), ==, 3);
    qtest_quit(qts);

    g_assert(g_file_get_contents(log, &trace, NULL, NULL));
    g_assert(strstr(trace, "fi: dnr has no meaning"));
    g_assert(!strstr(strstr(trace, "fi: dnr has no meaning") + 1,
                     "fi: dnr has no meaning"));
    g_assert(strstr(trace, "fi: complete= has no meaning"));
    g_assert(strstr(trace, "fi: irq=/irq-delay= has no meaning"));
    unlink(log);
}

/* A chain with throttle above the filter. */
static void test_throttle_chain(void)
{
    QTestState *qts = qtest_initf("-machine none "
        "-object fault-injector,id=fi0 "
        "-object throttle-group,id=tg0,x-iops-total=100000 "
        "-drive if=none,id=d0,driver=throttle,throttle-group=tg0,"
        "file.driver=fault-inject,file.fault-injector=fi0,"
        "file.file.driver=null-co >>%s/qemu-io.out", tmpdir);

    add_rules(qts, "w: write nth=2 error=eio\n");
    g_assert_cmpint(write_n(qts, 3), ==, 1);
    g_assert_cmpint(blockstat(qts, "wr_operations"), ==, 2);
    qtest_quit(qts);
}

static void expect_add_error(QTestState *qts, const char *injector,
                             const char *msg)
{
    g_autofree char *desc = injector ?
        fl_qmp_error(qts, "{'execute': 'blockdev-add', 'arguments':"
                     " {'driver': 'fault-inject', 'node-name': 'bad',"
                     "  'fault-injector': %s, 'file': {'driver': 'null-co'}}}",
                     injector) :
        fl_qmp_error(qts, "{'execute': 'blockdev-add', 'arguments':"
                     " {'driver': 'fault-inject', 'node-name': 'bad',"
                     "  'file': {'driver': 'null-co'}}}");

    if (!strstr(desc, msg)) {
        g_test_message("error: %s", desc);
    }
    g_assert(strstr(desc, msg));
    g_assert(!strchr(desc, '\n'));
    g_assert(!node_exists(qts, "bad"));
}

static void test_bad_options(void)
{
    QTestState *qts = qtest_init("-machine none -object fault-injector,id=fi0"
                                 " -object throttle-group,id=tg0");
    g_autofree char *err = NULL;
    QDict *rsp;
    int code;

    expect_add_error(qts, NULL, "'fault-injector' is missing");
    expect_add_error(qts, "nope", "fault-inject: no fault-injector with id "
                     "'nope'");
    expect_add_error(qts, "tg0", "fault-inject: object 'tg0' is not a "
                     "fault-injector");
    /* and the good one works */
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-add', 'arguments':"
                             " {'driver': 'fault-inject', 'node-name': 'ok',"
                             "  'fault-injector': 'fi0',"
                             "  'file': {'driver': 'null-co'}}}");
    g_assert(node_exists(qts, "ok"));
    /* A block node knows no NVMe queue or vCPU: sq= and cpu= are refused. */
    rsp = qtest_qmp(qts, "{'execute': 'x-fault-add-rules', 'arguments':"
                    " {'id': 'fi0', 'rules': 'write cpu=0 error=eio'}}");
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"), ==,
                    "1:7: 'cpu' is not supplied by fault-inject");
    qobject_unref(rsp);
    qtest_quit(qts);
    qts = qtest_init("-machine none -object fault-injector,id=fi0");
    add_rules(qts, "q1: read sq=1 drop");
    expect_add_error(qts, "fi0", "fault-inject: rule 'q1' of "
                     "fault-injector 'fi0' matches on sq=, which "
                     "fault-inject does not supply");
    qtest_quit(qts);

    /* -drive has no schema: the driver's own message */
    err = fl_startup_error("-machine none -drive if=none,driver=fault-inject,"
                           "file.driver=null-co", &code);
    g_assert_cmpint(code, ==, 1);
    g_assert(strstr(err, "fault-inject: parameter 'fault-injector' is "
                    "required"));
}

/* fatal and reset-fail= mean nothing to a block node: refused, not ignored. */
static void test_refuses_ctrl_fail(void)
{
    QTestState *qts = qtest_init("-machine none "
                                 "-object fault-injector,id=fi0");
    QDict *rsp;

    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules', "
                             "'arguments': {'id': 'fi0', 'rules': "
                             "'die: write nth=3 fatal'}}");
    expect_add_error(qts, "fi0", "fault-inject: rule 'die' of "
                     "fault-injector 'fi0' has 'fatal', which fault-inject "
                     "does not support (NVMe only)");
    g_assert(!node_exists(qts, "bad"));
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-delete-rule', "
                             "'arguments': {'id': 'fi0', 'name': 'die'}}");
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-add', 'arguments':"
                             " {'driver': 'fault-inject', 'node-name': 'ok',"
                             "  'fault-injector': 'fi0',"
                             "  'file': {'driver': 'null-co'}}}");
    rsp = qtest_qmp(qts, "{'execute': 'x-fault-add-rules', 'arguments': "
                    "{'id': 'fi0', 'rules': 'write reset-fail=2'}}");
    g_assert(qdict_haskey(rsp, "error"));
    g_assert_cmpstr(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"), ==,
                    "1:7: 'reset-fail' is not supported by fault-inject "
                    "(NVMe only)");
    qobject_unref(rsp);
    /* The node gone, nothing refuses them any more. */
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-del', "
                             "'arguments': {'node-name': 'ok'}}");
    qtest_qmp_assert_success(qts, "{'execute': 'x-fault-add-rules', "
                             "'arguments': {'id': 'fi0', 'rules': "
                             "'write reset-fail=2'}}");
    qtest_quit(qts);
}


/* Does injector @id refuse a fatal rule now (an attached filter does)? */
static bool refuses_fatal(QTestState *qts, const char *id)
{
    return fl_refuses(qts, id, "write fatal", "1:14: 'fatal' is not "
                      "supported by fault-inject (NVMe only)");
}

/* blockdev-reopen of node "fi" onto injector @id; NULL, or its error. */
static char *reopen(QTestState *qts, const char *id)
{
    QDict *rsp = qtest_qmp(qts, "{'execute': 'blockdev-reopen', "
                           "'arguments': {'options': [{"
                           " 'driver': 'fault-inject', 'node-name': 'fi',"
                           " 'fault-injector': %s, 'file': 'null0'}]}}", id);
    char *desc = NULL;

    if (qdict_haskey(rsp, "error")) {
        desc = g_strdup(qdict_get_str(qdict_get_qdict(rsp, "error"), "desc"));
    }
    qobject_unref(rsp);
    return desc;
}

/*
 * blockdev-reopen onto another injector moves the attachment: the new
 * injector refuses what the filter cannot do and cannot be deleted, the
 * old one is free again.  A reopen the new injector's rules refuse fails
 * and leaves the node on the old one, attached as before.  Once the node
 * is gone, each injector can be deleted.
 */
static void test_reopen(void)
{
    QTestState *qts = qtest_initf("-machine none "
                                  "-object fault-injector,id=fi0 "
                                  "-object fault-injector,id=fi1 "
                                  "-object fault-injector,id=fi2 "
                                  "-blockdev driver=null-co,node-name=null0,"
                                  "size=1048576 >>%s/qemu-io.out", tmpdir);
    g_autofree char *err = NULL;

    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-add', 'arguments':"
                             " {'driver': 'fault-inject', 'node-name': 'fi',"
                             "  'fault-injector': 'fi0', 'file': 'null0'}}");
    g_assert(refuses_fatal(qts, "fi0"));
    g_assert(!refuses_fatal(qts, "fi1"));

    /* Refused: fi1 has a rule the filter cannot honour. */
    fl_add_rules(qts, "fi1", "die: write nth=9 fatal\n");
    err = reopen(qts, "fi1");
    g_assert_cmpstr(err, ==, "fault-inject: rule 'die' of fault-injector "
                    "'fi1' has 'fatal', which fault-inject does not support "
                    "(NVMe only)");
    g_assert(refuses_fatal(qts, "fi0"));
    fl_delete_rule(qts, "fi1", "die");
    g_assert(!refuses_fatal(qts, "fi1"));
    g_assert(!fl_object_del(qts, "fi0"));
    fl_add_rules(qts, "fi0", "w0: write error=eio\n");
    qemu_io(qts, "fi", "write 0 512");
    g_assert_cmpint(fl_rule_hits(qts, "fi0", "w0"), ==, 1);

    /* Onto fi1: fi1 is attached, fi0 free (and deleted). */
    g_free(reopen(qts, "fi1"));
    g_assert(refuses_fatal(qts, "fi1"));
    g_assert(!refuses_fatal(qts, "fi0"));
    g_assert(!fl_object_del(qts, "fi1"));
    fl_add_rules(qts, "fi1", "w1: write error=eio\n");
    qemu_io(qts, "fi", "write 0 512");
    g_assert_cmpint(fl_rule_hits(qts, "fi1", "w1"), ==, 1);
    g_assert_cmpint(fl_rule_hits(qts, "fi0", "w0"), ==, 1);
    g_assert(fl_object_del(qts, "fi0"));

    /* Onto the same injector, then onto fi2 and back: counts stay right. */
    err = reopen(qts, "fi1");
    g_assert_null(err);
    err = reopen(qts, "fi2");
    g_assert_null(err);
    g_assert(!refuses_fatal(qts, "fi1"));
    g_assert(refuses_fatal(qts, "fi2"));
    err = reopen(qts, "fi1");
    g_assert_null(err);
    g_assert(!refuses_fatal(qts, "fi2"));
    g_assert(fl_object_del(qts, "fi2"));
    g_assert(refuses_fatal(qts, "fi1"));
    g_assert(!fl_object_del(qts, "fi1"));

    /* The node gone, nothing uses fi1. */
    qtest_qmp_assert_success(qts, "{'execute': 'blockdev-del', "
                             "'arguments': {'node-name': 'fi'}}");
    g_assert(!refuses_fatal(qts, "fi1"));
    g_assert(fl_object_del(qts, "fi1"));
    qtest_quit(qts);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    tmpdir = fl_tmpdir_make("fault-inject-test");
    qtest_add_func("/fault-inject/ops", test_ops);
    qtest_add_func("/fault-inject/triggers", test_triggers);
    qtest_add_func("/fault-inject/when", test_when);
    qtest_add_func("/fault-inject/delay", test_delay);
    qtest_add_func("/fault-inject/lie-corrupt", test_lie_corrupt);
    qtest_add_func("/fault-inject/drop", test_drop);
    qtest_add_func("/fault-inject/ignored-actions", test_ignored_actions);
    qtest_add_func("/fault-inject/throttle-chain", test_throttle_chain);
    qtest_add_func("/fault-inject/bad-options", test_bad_options);
    qtest_add_func("/fault-inject/refuses-ctrl-fail", test_refuses_ctrl_fail);
    qtest_add_func("/fault-inject/reopen", test_reopen);
    ret = g_test_run();
    fl_tmpdir_remove(tmpdir);
    return ret;
}
