"""What the guest kernel said about the swap device's I/O: its console
messages counted by template (the summary's `kernel log` line and
report.json's `kernel_log`).

Pure functions over console text and fault log lines.  The templates are
the messages of Linux's block layer (blk_print_req_error), swap
(end_swap_bio_write/read), the NVMe driver (nvme_log_error, nvme_timeout,
the abort and reset paths) and printk's rate limiter: the block layer's
and swap's messages are rate-limited, so the "callbacks suppressed" lines
are counted with them.
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
    ("NVMe status {status}{dnr}", re.compile(
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
    # ___ratelimit: "%s: %d callbacks suppressed" (counted, not one per line)
    ("{func} messages suppressed", re.compile(
        r"(?P<func>blk_print_req_error|end_swap_bio_write|end_swap_bio_read|nvme_log_error|"
        r"__end_swap_bio_write|__end_swap_bio_read): (?P<n>\d+) callbacks suppressed")),
]


def count_templates(console):
    """{label: count} of the templates' messages in @console, in the
    order of TEMPLATES, then first appearance."""
    counts = {}
    for line in console.splitlines():
        for label, pattern in TEMPLATES:
            m = pattern.search(line)
            if not m:
                continue
            groups = {k: v or "" for k, v in m.groupdict().items()}
            key = label.format(**groups)
            counts[key] = counts.get(key, 0) + (int(groups["n"]) if "n" in groups else 1)
            break
    return counts


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
    return {"messages": count_templates(console),
            "injected_errors": injected_errors(fault_log_lines)}


def _error_messages(messages):
    return sum(v for k, v in messages.items()
               if k.endswith(")") and " error (" in k)


def format_line(k):
    """The summary's one line for a kernel_log dict."""
    messages = k.get("messages", {})
    injected = k.get("injected_errors", 0)
    parts = [f"{v} {label}" for label, v in messages.items()]
    text = ", ".join(parts) if parts else "no I/O error, swap error, timeout or reset message"
    if injected:
        seen = _error_messages(messages)
        text += f"; {injected} error(s) injected"
        if seen == 0:
            text += ", none reached the block layer (the driver retried them)"
    return text
