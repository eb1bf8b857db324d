#!/usr/bin/python3
"""vm test of `progexec serve` (docs/programs.md, The executor and its
channel), without the host tools: one guest, a virtio-serial port and an
NVMe disk, this script as the host.

  progexec_serve_test.py [--keep DIR]

1. A program with a swap device, a knob and a cgroup: hello, ready, start,
   ops-done, teardown, `result NAME pass 0` (the leak check passed: no
   `finding`), and swap-ins counted (its pages went to the disk and back).
2. A device smaller than the program's size, a serial the VM lacks, a
   message outside a program: each one `refused` line, and the next
   program still runs (nothing was left changed).
3. `quit`: the guest's run.sh ends with status 0; the console shows the
   kmsg markers of each program.

Exit 0 pass, 1 fail, 2 setup error.
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "python"))
from faultline.paths import FIRMWARE_DIRS  # noqa: E402
from faultline.run.guest import build_initrd  # noqa: E402

PORT = "org.faultline.prog.0"
SERIAL = "pe-serve0"
BOOT_S = 300            # TCG boot on a loaded 2-core host
STEP_S = 180

RUN_SH = f"""#!/bin/sh
modprobe nvme || {{ echo "Bail out! modprobe nvme"; exit 1; }}
i=0; while [ ! -b /dev/nvme0n1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
progexec serve {PORT}
"""

SWAP_PROGRAM = """swap s0 nvme size=16M prio=5
knob vm.page-cluster=0
cgroup g memory.swap.max=max
anon a 4M cgroup=g
write a 0 4M v=1
reclaim g 8M
read a 0 4M
madvise a 0 4M pageout
read a 0 4M
munmap a"""


def script_dir(name):
    out = subprocess.run([os.path.join(TOP, "scripts", name), "--print-dir"],
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise SystemExit(f"setup: scripts/{name} failed (exit {out.returncode})")
    return out.stdout.strip().splitlines()[-1]


class Channel:
    """The host end of the port: lines in and out, each read bounded."""

    def __init__(self, path, deadline):
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                # QEMU makes the socket a moment after it starts.
                self.sock.close()
                if time.monotonic() > deadline:
                    raise TimeoutError("QEMU's socket did not come up")
                time.sleep(0.1)
        self.buf = b""
        self.seen = []

    def send(self, *lines):
        self.sock.sendall("".join(line + "\n" for line in lines).encode())

    def line(self, timeout):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line in {timeout} s (seen: {self.seen[-5:]})")
            self.sock.settimeout(left)
            data = self.sock.recv(4096)
            if not data:
                raise EOFError(f"the guest closed the channel (seen: {self.seen[-5:]})")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        self.seen.append(line.decode())
        return self.seen[-1]

    def until(self, prefix, timeout=STEP_S):
        """Lines up to and including the first starting with @prefix."""
        got = []
        while True:
            got.append(self.line(timeout))
            if got[-1].startswith(prefix):
                return got


def program(name, text, binds):
    return ([f"program {name}"] + [f"bind {d} {t}" for d, t in binds] +
            [f"text {line}" for line in text.splitlines()] + ["end"])


def run_swap_program(ch, name, problems):
    ch.send(*program(name, SWAP_PROGRAM, [("s0", f"nvme:{SERIAL}")]))
    first = ch.until(("ready " + name, "refused " + name, "result " + name))
    if first[-1] != f"ready {name}":
        problems.append(f"{name}: {first[-1]}")
        return
    ch.send("start")
    ran = ch.until(f"ops-done {name}")
    ch.send("teardown")
    ended = ch.until(f"result {name}")
    findings = [x for x in ran + ended if x.startswith("finding")]
    if ended[-1] != f"result {name} pass 0" or findings:
        problems.append(f"{name}: {ended[-1]}; {findings[:3]}")
    stat = next((x for x in ended if x.startswith("stat ")), "")
    m = re.search(r"\bswapins=(\d+)", stat)
    if not m or int(m.group(1)) == 0:
        problems.append(f"{name}: no swap-ins counted ({stat or 'no stat line'})")


def expect_refused(ch, name, pattern, problems):
    got = ch.until("refused ", STEP_S)[-1]
    if not got.startswith(f"refused {name} ") or not re.search(pattern, got):
        problems.append(f"expected refused {name} /{pattern}/, got {got!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="write the VM's files here and keep them")
    args = ap.parse_args()
    qemu_dir = script_dir("build-qemu")
    qemu = os.path.join(qemu_dir, "bin", "qemu-system-x86_64")
    firmware = [a for d in (os.path.join(qemu_dir, "share"), *FIRMWARE_DIRS) for a in ("-L", d)]
    guest = script_dir("build-guest")
    work = args.keep or tempfile.mkdtemp(prefix="pe-serve-")
    os.makedirs(work, exist_ok=True)
    initrd = build_initrd(guest, RUN_SH, work)
    disk = os.path.join(work, "disk.img")
    with open(disk, "wb") as f:
        f.truncate(64 << 20)
    sock = os.path.join(work, "prog.sock")
    cmd = [qemu, *firmware, "-nodefaults", "-display", "none", "-no-reboot", "-machine", "q35",
           "-accel", "tcg", "-m", "512M", "-smp", "2", "-nic", "none",
           "-kernel", os.path.join(guest, "vmlinuz"), "-initrd", initrd,
           "-append", "console=ttyS0 panic=-1 tsc=reliable no_timer_check loglevel=6",
           "-serial", "file:" + os.path.join(work, "console.log"),
           "-serial", "file:" + os.path.join(work, "ktap.log"),
           "-device", "virtio-serial-pci",
           "-chardev", f"socket,id=prog,path={sock},server=on,wait=off",
           "-device", f"virtserialport,chardev=prog,name={PORT}",
           "-blockdev", f"driver=file,filename={disk},node-name=disk0",
           "-device", f"nvme,serial={SERIAL},drive=disk0"]
    vm = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    problems = []
    ch = None
    try:
        ch = Channel(sock, time.monotonic() + 30)
        hello = ch.line(BOOT_S)
        m = re.fullmatch(r"hello progexec 1 kernel=\S+ kcov=[01] offers=(\d+)", hello)
        if not m:
            problems.append(f"hello: {hello!r}")
        # The offers follow the hello at once, one line each.
        for _ in range(int(m.group(1)) if m else 0):
            line = ch.line(STEP_S)
            if not re.fullmatch(r"offers \S+( \S+)*", line):
                problems.append(f"offers: {line!r}")
        run_swap_program(ch, "swap-1", problems)
        ch.send(*program("too-small", SWAP_PROGRAM.replace("size=16M", "size=1G"),
                         [("s0", f"nvme:{SERIAL}")]))
        expect_refused(ch, "too-small", r"holds \d+ bytes, size=1073741824", problems)
        ch.send(*program("no-serial", SWAP_PROGRAM, [("s0", "nvme:not-here")]))
        expect_refused(ch, "no-serial", r"no nvme device nvme:not-here", problems)
        # zswap is uninitialized here (never enabled since boot), when the
        # kernel takes any zpool name unchecked; a program that enables it
        # and then names a zpool the kernel lacks (Debian's 6.12 has no
        # z3fold; 6.18+ no zpool knob) is refused, not failed halfway.
        ch.send(*program("no-z3fold", "anon a 4M\nknob zswap.enabled=Y\n"
                         "knob zswap.zpool=z3fold\nwrite a 0 4M v=1", []))
        expect_refused(ch, "no-z3fold", r"line 3: knob zswap.zpool(=z3fold)?: this kernel",
                       problems)
        ch.send("start")
        expect_refused(ch, "-", r"start outside a program", problems)
        run_swap_program(ch, "swap-2", problems)
        ch.send("quit")
        vm.wait(timeout=STEP_S)
    except (TimeoutError, EOFError, OSError, subprocess.TimeoutExpired) as e:
        problems.append(f"channel: {e}")
    finally:
        if vm.poll() is None:
            vm.kill()
        err = vm.communicate()[1].decode(errors="replace").strip()
        if vm.returncode and err:
            problems.append(f"QEMU: {err.splitlines()[-1]}")
    ktap = open(os.path.join(work, "ktap.log"), errors="replace").read()
    console = open(os.path.join(work, "console.log"), errors="replace").read()
    if "FAULTLINE-EXIT 0" not in ktap:
        problems.append(f"run.sh did not exit 0: {ktap.strip().splitlines()[-3:]}")
    for marker in ("progexec: program swap-1 start", "progexec: program swap-1 end pass",
                   "progexec: program swap-2 end pass"):
        if marker not in console:
            problems.append(f"console lacks {marker!r}")
    if ch is not None:
        with open(os.path.join(work, "channel.log"), "w") as f:
            f.write("\n".join(ch.seen) + "\n")
    for p in problems:
        print("FAIL:", p)
    print("PASS" if not problems else f"{len(problems)} problem(s); files in {work}")
    if not problems and not args.keep:
        subprocess.run(["rm", "-rf", work])
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
