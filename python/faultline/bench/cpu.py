"""bench: CPU time of QEMU and of its threads, by role, from /proc."""

import os


def proc_cpu_seconds(stat_text, clk_tck):
    """utime+stime of a /proc/PID/stat line, in seconds.  The command name
    (field 2) may hold spaces and parentheses: fields count from the last ')'."""
    rest = stat_text[stat_text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): utime is field 14, stime field 15.
    return (int(rest[11]) + int(rest[12])) / clk_tck


# QEMU's thread names under -name ...,debug-threads=on, by role.
THREAD_ROLES = (("CPU ", "vCPU"), ("worker", "thread pool"), ("qemu-system", "main loop"))
EXITED = "exited threads"
ROLE_ORDER = ("vCPU", "main loop", "thread pool", "other", EXITED)


def thread_role(comm):
    for prefix, role in THREAD_ROLES:
        if comm.startswith(prefix):
            return role
    return "other"


def proc_thread_cpu_seconds(pid, clk_tck):
    """{tid: (role, utime+stime)} of @pid's live threads (thread_role())."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue            # the thread just exited
        threads[int(tid)] = (thread_role(text[text.index("(") + 1:text.rindex(")")]),
                             proc_cpu_seconds(text, clk_tck))
    return threads


def thread_cpu_between(start, end):
    """{role: CPU seconds} from mark @start to mark @end ({tid: (role, s)}),
    of the threads alive at @end (one born in between counts from 0)."""
    by_role = {}
    for tid, (role, secs) in end.items():
        by_role[role] = by_role.get(role, 0.0) + secs - start.get(tid, (role, 0.0))[1]
    return by_role
