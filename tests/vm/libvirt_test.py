#!/usr/bin/python3
"""vm tests of the libvirt backend against a real libvirtd (meson suite 'vm').

  libvirt_test.py run SCENARIO          the run passes through --backend libvirt,
                                        its run directory has domain.xml and the
                                        libvirt facts in run.json
  libvirt_test.py same SCENARIO [--deterministic] [--cpus N]
                                        qemu backend, then libvirt: same verdict and
                                        rule hits (deterministic: same digest, KTAP)
  libvirt_test.py kill SCENARIO         SIGTERM, then SIGKILL, of a launcher mid-run:
                                        the domain is gone each time, and so is the
                                        run's scratch directory (SIGKILL: once the
                                        next launcher has started)
  libvirt_test.py orphans               a faultline domain whose owner (a launcher) is
                                        gone is destroyed by the next libvirt start;
                                        one whose owner lives is left alone
  libvirt_test.py xml SCENARIO          `faultline libvirt-xml SCENARIO` booted by
                                        `virsh create`: the domain boots the image
                                        with the scenario's [vm] tools and its
                                        guest exits 0 with every test ok
  libvirt_test.py errors                one line and exit 2 for an unreachable URI,
                                        a QEMU libvirt rejects, a domain name clash,
                                        python3-libvirt missing, a domain QEMU
                                        refuses to start (its scratch removed)

Needs root (libvirtd is started when absent).  Exit 0 pass, 1 fail, 2 setup.
"""

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vmtest import (FAULTLINE, OUT, exit_with, run_one, run_options,  # noqa: E402
                    verdict)

from faultline.build.builds import build_all
from faultline.errors import EXIT_PASS, EXIT_SETUP, SetupError
from faultline.host import procs
from faultline.run import runner
from faultline.vm import libvirt, libvirt_xml
from faultline.vm.libvirt import LibvirtMachine, import_libvirt
from faultline.vm.machine import MachineSpec


def hits(report):
    return {r["name"]: r["hits"] for r in (report.faults or {}).get("rules", [])}


def check_libvirt_rundir(rundir):
    problems = []
    for f in ("domain.xml", "libvirt-qemu.log", "cmdline", "console.log", "ktap.log"):
        if not os.path.exists(os.path.join(rundir, f)):
            problems.append(f"run directory lacks {f}")
    with open(os.path.join(rundir, "run.json")) as f:
        meta = json.load(f)
    info = meta.get("backend_info") or {}
    if meta.get("backend") != "libvirt":
        problems.append(f"run.json backend {meta.get('backend')!r}")
    for key in ("uri", "libvirt_version", "domain_xml", "domain"):
        if not info.get(key):
            problems.append(f"run.json backend_info lacks {key}")
    return problems


def test_run(scenario):
    status, r, rundir = run_one(scenario, run_options(backend="libvirt"))
    problems = check_libvirt_rundir(rundir)
    if status != EXIT_PASS:
        problems.append(f"libvirt run: {r.outcome}: {r.reason}")
    return problems


def test_same(scenario, deterministic, cpus=None):
    same = dict(deterministic=deterministic, cpus=cpus)
    qs, qr, qdir = run_one(scenario, run_options(backend="qemu", **same))
    ls, lr, ldir = run_one(scenario, run_options(backend="libvirt", **same))
    problems = check_libvirt_rundir(ldir)
    print(f"qemu    {qr.outcome:5} hits {hits(qr)} digest {qr.digest}")
    print(f"libvirt {lr.outcome:5} hits {hits(lr)} digest {lr.digest}")
    if (qs, qr.outcome) != (ls, lr.outcome):
        problems.append(f"verdict: qemu {qr.outcome} ({qr.reason}), "
                        f"libvirt {lr.outcome} ({lr.reason})")
    if hits(qr) != hits(lr):
        problems.append(f"rule hits: qemu {hits(qr)}, libvirt {hits(lr)}")
    if deterministic:
        if qr.digest != lr.digest or qr.digest is None:
            problems.append(f"digest: qemu {qr.digest}, libvirt {lr.digest}")
        with open(os.path.join(qdir, "ktap.log")) as a, open(os.path.join(ldir, "ktap.log")) as b:
            if a.read() != b.read():
                problems.append("KTAP differs between the backends")
    return problems


def test_xml(scenario):
    """What a user does by hand: libvirt-xml, then virsh create."""
    problems = []
    out = tempfile.mkdtemp(prefix="libvirt-xml-", dir=OUT)
    r = subprocess.run([FAULTLINE, "libvirt-xml", scenario, "--out", out],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return [f"libvirt-xml {scenario}: exit {r.returncode}: {r.stderr.strip()[-300:]}"]
    xml_path = os.path.join(out, "domain.xml")
    with open(xml_path) as f:
        xml = f.read()
    name = re.search(r"<name>([^<]+)</name>", xml).group(1)
    # An image with tools is the base image's directory + "-tools-KEY"
    # (scripts/build-guest); whether they run, the guest's tests say.
    image = re.search(r"<kernel>([^<]+)/vmlinuz</kernel>", xml)
    if read_scenario(scenario).vm.tools and not (image and "-tools-" in image.group(1)):
        problems.append(f"the domain boots {image and image.group(1)}, not an image with "
                        f"the scenario's tools")
    r = subprocess.run(["virsh", "-c", libvirt.DEFAULT_URI, "create", xml_path],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return problems + [f"virsh create: {r.stderr.strip()}"]
    ktap_path = os.path.join(out, "ktap.log")
    deadline = time.monotonic() + read_scenario(scenario).timeout_s + 120
    ktap = ""
    try:
        while time.monotonic() < deadline:
            with open(ktap_path, errors="replace") as f:
                ktap = f.read()
            if "FAULTLINE-EXIT " in ktap:
                break
            time.sleep(1)
    finally:
        subprocess.run(["virsh", "-c", libvirt.DEFAULT_URI, "destroy", name],
                       capture_output=True, timeout=60)
    if "FAULTLINE-EXIT 0" not in ktap:
        problems.append(f"the guest did not exit 0 (tail of {ktap_path}: {ktap[-300:]!r})")
    bad = [ln for ln in ktap.splitlines() if ln.startswith("not ok")]
    if bad:
        problems.append(f"{len(bad)} test(s) not ok: {bad[0]}")
    if not any(ln.startswith("ok ") for ln in ktap.splitlines()):
        problems.append("no test passed")
    if not problems:
        shutil.rmtree(out, ignore_errors=True)
    return problems


def read_scenario(name):
    return runner.load_scenario(name, run_options())


def scratch_of(rundir):
    """The scratch directories a run's domain XML names (kernel, initrd, disk)."""
    try:
        with open(os.path.join(rundir, "domain.xml")) as f:
            return sorted(set(re.findall(r"/dev/shm/faultline-[A-Za-z0-9_]+", f.read())))
    except OSError:
        return []


def faultline_domains(conn, pid):
    prefix = "faultline-"
    return [d.name() for d in conn.listAllDomains()
            if d.name().startswith(prefix) and f"-{pid}-" in d.name()]


def test_kill(scenario):
    lv, _ = import_libvirt()
    problems = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        out = tempfile.mkdtemp(prefix="libvirt-kill-", dir=OUT)
        proc = subprocess.Popen([FAULTLINE, "run", scenario, "--backend", "libvirt",
                                 "--out", out, "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        conn = None
        deadline = time.monotonic() + 300
        seen = []
        while time.monotonic() < deadline and proc.poll() is None and not seen:
            time.sleep(0.5)
            try:
                conn = conn or lv.open("qemu:///system")
                seen = faultline_domains(conn, proc.pid)
            except lv.libvirtError:
                pass
        if not seen:
            proc.kill()
            proc.wait()
            return problems + [f"{sig.name}: the launcher's domain never appeared"]
        time.sleep(3)   # mid-boot
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        # libvirtd destroys an AUTODESTROY domain once it sees the
        # connection drop: within 5 s on a loaded host (once not within 1 s).
        deadline = time.monotonic() + 5
        while True:
            left = [n for n in seen if n in {d.name() for d in conn.listAllDomains()}]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if left and sig == signal.SIGKILL:
            # Killed while libvirtd was still starting the domain (its
            # autodestroy is armed only when the start ends): the next
            # launcher start destroys it, its owner being gone.
            subprocess.run([FAULTLINE, "list"], stdout=subprocess.DEVNULL, check=False)
            left = [n for n in seen if n in {d.name() for d in conn.listAllDomains()}]
            print(f"{sig.name}: domain outlived the launcher; after the next launcher start: "
                  f"{'STILL THERE' if left else 'gone'}")
        print(f"{sig.name}: launcher exit {proc.returncode}, domain {seen[0]}: "
              f"{'STILL THERE' if left else 'gone'}")
        if left:
            problems.append(f"{sig.name}: domain {left} left behind")
            for n in left:
                try:
                    conn.lookupByName(n).destroy()
                except lv.libvirtError:
                    pass
        if proc.returncode == 0:
            problems.append(f"{sig.name}: launcher exit 0")
        if "Traceback" in err:
            problems.append(f"{sig.name}: traceback on stderr")
        conn.close()
        rundirs = [os.path.join(out, d) for d in os.listdir(out)]
        scratch = [d for r in rundirs for d in scratch_of(r)]
        if sig == signal.SIGKILL:
            # The killed launcher could not remove it: the next one does.
            subprocess.run([FAULTLINE, "list"], stdout=subprocess.DEVNULL, check=False)
        left = [d for d in scratch if os.path.exists(d)]
        print(f"{sig.name}: scratch {scratch}: {'LEFT' if left else 'gone'}")
        if not scratch:
            problems.append(f"{sig.name}: no scratch directory in {rundirs}' domain.xml")
        if left:
            problems.append(f"{sig.name}: scratch {left} left behind")
            for d in left:
                shutil.rmtree(d, ignore_errors=True)
    return problems


def expect_one_line(what, argv, needle, env=None):
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = [ln for ln in r.stderr.splitlines() if "error" in ln]
    print(f"{what}: exit {r.returncode}: {lines[-1] if lines else r.stderr.strip()[-200:]}")
    if r.returncode != EXIT_SETUP or len(lines) != 1 or needle not in lines[0] \
            or "Traceback" in r.stderr:
        return [f"{what}: expected exit 2 and one line with {needle!r}"]
    return []


def start_error_leaves_nothing():
    """A domain libvirt defines but QEMU refuses (a bogus device property):
    one line, exit 2, and no scratch directory or domain left."""
    out = tempfile.mkdtemp(prefix="libvirt-start-error-", dir=OUT)
    path = os.path.join(out, "bad-option.toml")
    with open(path, "w") as f:
        f.write('description = "a device property QEMU does not have"\ntimeout = "60s"\n'
                '[vm]\nmemory = "256M"\ncpus = 1\n'
                '[device]\nkind = "nvme"\nsize = "64M"\nextra = "no-such-property=1"\n'
                '[[test]]\nrun = "true"\n')
    problems = expect_one_line(
        "QEMU refuses the domain", [FAULTLINE, "run", path, "--backend", "libvirt",
                                    "--out", out, "--quiet"],
        "libvirt could not start the domain")
    rundirs = [os.path.join(out, d) for d in os.listdir(out)
               if os.path.isdir(os.path.join(out, d))]
    scratch = [d for r in rundirs for d in scratch_of(r)]
    left = [d for d in scratch if os.path.exists(d)]
    print(f"QEMU refuses the domain: scratch {scratch}: {'LEFT' if left else 'gone'}")
    if not scratch:
        problems.append(f"QEMU refuses the domain: no scratch named in {rundirs}")
    if left:
        problems.append(f"QEMU refuses the domain: scratch {left} left behind")
        for d in left:
            shutil.rmtree(d, ignore_errors=True)
    return problems


def test_errors():
    problems = expect_one_line(
        "unreachable URI", [FAULTLINE, "run", "smoke", "--backend", "libvirt", "--connect",
                            "qemu+tcp://127.0.0.1:1/system", "--out", OUT, "--quiet"],
        "cannot connect to qemu+tcp://127.0.0.1:1/system")
    # The launcher under a Python without Debian's dist-packages: the
    # binding is really not importable there.
    problems += expect_one_line(
        "no python3-libvirt", ["/usr/bin/python3", "-S", FAULTLINE, "run", "smoke",
                               "--backend", "libvirt", "--out", OUT, "--quiet"],
        "python3-libvirt is not installed")
    problems += start_error_leaves_nothing()
    builds = build_all(quiet=True)
    rundir = tempfile.mkdtemp(prefix="libvirt-errors-", dir=OUT)
    made = []

    def scratch():
        # Machine.cleanup() empties a scratch directory; its maker removes it.
        made.append(tempfile.mkdtemp(prefix="faultline-", dir="/dev/shm"))
        return made[-1]

    spec = MachineSpec(scenario="errors", qemu_binary=builds.qemu_binary,
                       firmware_dirs=builds.firmware_dirs, kernel=builds.kernel,
                       initrd=builds.initramfs, append="console=ttyS0", memory="256M", cpus=1,
                       accel="tcg", deterministic=False, rundir=rundir,
                       scratch=scratch(), disk="", injector_id=None, device_args=[],
                       extra_args=[])

    def start_fails(what, spec, needle, **opts):
        try:
            with LibvirtMachine(spec, **opts) as m:
                m.start()
        except SetupError as e:
            print(f"{what}: {e}")
            return [] if needle in str(e) and "\n" not in str(e) else [f"{what}: {e}"]
        return [f"{what}: the domain started"]

    try:
        fake = os.path.join(rundir, "not-qemu")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'I am not QEMU'\nexit 1\n")
        os.chmod(fake, 0o755)
        problems += start_fails("QEMU rejected", dataclasses.replace(spec, qemu_binary=fake),
                                "libvirt rejects " + fake)
        # Each machine a scratch directory of its own: start() records its
        # domain there.
        with LibvirtMachine(dataclasses.replace(spec, scratch=scratch())) as first:
            first.start()
            problems += start_fails("name clash", dataclasses.replace(spec, scratch=scratch()),
                                    "already exists", name=first.name)
            if not first.running():
                problems.append("the first domain of the clash test is not running")
        return problems
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def test_orphans():
    lv, _ = import_libvirt()
    builds = build_all(quiet=True)
    rundir = tempfile.mkdtemp(prefix="libvirt-orphans-", dir=OUT)
    spec = MachineSpec(scenario="orphans", qemu_binary=builds.qemu_binary,
                       firmware_dirs=builds.firmware_dirs, kernel=builds.kernel,
                       initrd=builds.initramfs, append="console=ttyS0", memory="256M", cpus=1,
                       accel="tcg", deterministic=False, rundir=rundir, scratch=rundir,
                       disk="", injector_id=None, device_args=[], extra_args=[])
    lv.registerErrorHandler(lambda ctx, err: None, None)
    # The "dead" domain's owner lives while libvirt starts it (a libvirt
    # run starting meanwhile would destroy an orphan under createXML), then dies.
    owner_proc = subprocess.Popen(["sleep", "600"])
    doomed = procs.identity(owner_proc.pid)
    conn = lv.open(libvirt.DEFAULT_URI)
    names = {}
    problems = []
    try:
        # Transient, not AUTODESTROY: as if libvirtd had not destroyed them.
        for who, owner in (("dead", doomed), ("live", procs.identity())):
            names[who] = libvirt_xml.new_domain_name("orphans-" + who)
            conn.createXML(libvirt_xml.domain_xml(spec, names[who], owner=owner), 0)
        owner_proc.kill()
        owner_proc.wait()
        destroyed = libvirt.destroy_orphans(conn, lv)
        left = {d.name() for d in conn.listAllDomains()}
        print(f"orphans: destroyed {destroyed}; "
              f"left {sorted(n for n in left if n in names.values())}")
        # (Another launcher starting a libvirt run may have destroyed it first.)
        if names["dead"] in left:
            problems.append(f"the dead owner's domain {names['dead']} is still there")
        if names["live"] not in left:
            problems.append(f"the live owner's domain {names['live']} was destroyed")
    finally:
        owner_proc.kill()
        owner_proc.wait()
        for n in names.values():
            try:
                conn.lookupByName(n).destroy()
            except lv.libvirtError:
                pass
        conn.close()
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("test", choices=["run", "same", "kill", "errors", "orphans", "xml"])
    p.add_argument("scenario", nargs="?", default="smoke")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--cpus", type=int, help="vCPUs (overrides the scenario's)")
    args = p.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.test == "run":
        problems = test_run(args.scenario)
    elif args.test == "same":
        problems = test_same(args.scenario, args.deterministic, args.cpus)
    elif args.test == "kill":
        problems = test_kill(args.scenario)
    elif args.test == "orphans":
        problems = test_orphans()
    elif args.test == "xml":
        problems = test_xml(args.scenario)
    else:
        problems = test_errors()
    return verdict(f"libvirt {args.test}", problems)


if __name__ == "__main__":
    exit_with("libvirt test", main)
