"""What the guest kernel said about the swap device's I/O: its console
messages counted by template (the summary's `kernel log` line and
report.json's `kernel_log`).

Pure functions over console text and fault log lines.  The templates are
the messages of Linux's block layer (blk_print_req_error), swap
(end_swap_bio_write/read), the NVMe driver (nvme_log_error, nvme_timeout,
the abort and reset paths).  Those messages are rate-limited: printk's
"callbacks suppressed" lines are counted beside them.
"""

import json
import re

# (label, pattern): a label with {NAME} takes the pattern's group NAME.
TEMPLATES = [
    # blk_print_req_error: "%s error, dev %s, sector %llu op 0x%x:(%s) ..."
    ("{err} error ({op})", re.compile(
        r"\b(?P<err>I/O|critical medium|critical space allocation|critical target|"
        r"critical nexus|protection|recoverable transport|timeout|operation not supported)"
        r" error, dev \S+, sector \d+ op 0x[0-9a-f]+:\((?P<op>[A-Z_]+)\)")),
    ("Write-error on swap-device", re.compile(r"Write-error on swap-device \(")),
    ("Read-error on swap-device", re.compile(r"Read-error on swap-device \(")),
    # nvme_log_error: "%s: %s(0x%x) @ LBA %llu, %u blocks, %s (sct 0x%x / sc 0x%x) %s%s"
    ("NVMe {status}{dnr}", re.compile(
        r"nvme\d+n\d+: I/O Cmd\(0x[0-9a-f]+\) @ LBA \d+, \d+ blocks, (?P<status>.+?) "
        r"\(sct 0x[0-9a-f]+ / sc 0x[0-9a-f]+\)(?P<dnr> DNR)?")),
    # nvme_timeout: "I/O tag %d (%04x) [opcode ...] QID %d timeout, ACTION"
    ("NVMe timeout, {action}", re.compile(
        r"nvme\d+: I/O tag \d+ \([0-9a-f]+\) .*?timeout, (?P<action>aborting|reset controller|"
        r"disable controller|completion polled)")),
    ("NVMe abort completed", re.compile(r"nvme\d+: Abort status: 0x[0-9a-f]+")),
    ("NVMe controller down, will reset", re.compile(
        r"nvme\d+: controller is down; will reset")),
    ("NVMe reset failed", re.compile(
        r"nvme\d+: (Disabling device after reset failure|Removing after probe failure|"
        r"Device not ready; aborting reset)")),
    ("NVMe controller (re)initialised", re.compile(
        r"nvme\d+: \d+/\d+/\d+ default/read/poll queues")),
]

# ___ratelimit: "%s: %d callbacks suppressed": messages of the function
# that were not printed, counted with the messages they would have been.
SUPPRESSED = re.compile(r"\b(?P<func>\w+): (?P<n>\d+) callbacks suppressed")
FAMILY = {"blk_print_req_error": " error (", "nvme_log_error": "NVMe ",
          "__end_swap_bio_write": "Write-error", "end_swap_bio_write": "Write-error",
          "__end_swap_bio_read": "Read-error", "end_swap_bio_read": "Read-error"}


def count_templates(console):
    """{"messages": {label: count printed}, "suppressed": {function: count}}
    of @console, labels in the order they first appear."""
    counts, suppressed = {}, {}
    for line in console.splitlines():
        m = SUPPRESSED.search(line)
        if m and m.group("func") in FAMILY:
            suppressed[m.group("func")] = suppressed.get(m.group("func"), 0) + int(m.group("n"))
            continue
        for label, pattern in TEMPLATES:
            m = pattern.search(line)
            if m:
                key = label.format(**{k: v or "" for k, v in m.groupdict().items()})
                counts[key] = counts.get(key, 0) + 1
                break
    return {"messages": counts, "suppressed": suppressed}


def injected_errors(fault_log_lines):
    """Injected error completions in the fault log (entries whose action
    has error= or the NVMe fatal/reset-fail statuses)."""
    n = 0
    for ln in fault_log_lines:
        try:
            e = json.loads(ln)
        except ValueError:
            continue
        if isinstance(e, dict) and "error=" in str(e.get("action", "")):
            n += 1
    return n


def summarize(console, fault_log_lines=()):
    """report.json's kernel_log: the messages by template and how many
    errors the device injected (the gap is what the driver retried)."""
    return dict(count_templates(console), injected_errors=injected_errors(fault_log_lines))


def format_line(k):
    """The summary's one line for a kernel_log dict: each message's count,
    with what the rate limiter suppressed of its kind."""
    messages = k.get("messages", {})
    extra = {}
    for func, n in k.get("suppressed", {}).items():
        label = next((x for x in messages if FAMILY.get(func, "\0") in x), None)
        if label:
            extra[label] = extra.get(label, 0) + n
    parts = [f"{v} {label}" + (f" (+{extra[label]} suppressed)" if label in extra else "")
             for label, v in messages.items()]
    text = ", ".join(parts) if parts else "no I/O error, swap error, timeout or reset message"
    injected = k.get("injected_errors", 0)
    if injected:
        text += f"; {injected} error(s) injected"
        if not any(" error (" in x for x in messages):
            text += ", none reached the block layer (the driver retried them)"
    return text
