"""LAVA jobs (device_type qemu) of a MachineSpec: the job YAML, the qemu
device template rendered for it, and the pattern monitor that turns the
guest's KTAP lines into LAVA test cases.  docs/ci.md is the user side."""

import glob
import os
import re
import shlex

from faultline.errors import SetupError

try:
    import yaml
except ImportError:     # scripts/setup installs python3-yaml
    yaml = None

MONITOR_NAME = "faultline-ktap"
EXIT_CASE = "FAULTLINE-EXIT"
# Extra time LAVA gets on top of the scenario's watchdog: deploy copies the
# images (the disk image in full) before the boot starts.
LAVA_MARGIN_S = 120

# One pattern for every result line.  pexpect searches the stream for the
# earliest match of any pattern; this one consumes only the newline (and
# indentation) before a complete result line and reads the line through
# lookaheads, so each line is seen once and the end pattern still sees the
# FAULTLINE-EXIT line after its result was taken:
#   "ok 1 name", "not ok 2 name", "ok 3 name # SKIP why", "Bail out! why"
#   -> result ok / not ok / SKIP / XFAIL / Bail, test_case_id: the name
#   "FAULTLINE-EXIT 0" -> result 0 (pass) or the status' first digit (fail),
#   test_case_id FAULTLINE-EXIT
RESULT_PATTERN = (r"\n[ \t]*(?=[^\n]*\n)"
                  r"(?=(?:FAULTLINE-EXIT |[^\n#]*# )?"
                  r"(?P<result>SKIP|XFAIL|not ok|ok|Bail|(?<=FAULTLINE-EXIT )(?:0\b|[1-9])))"
                  r"(?=(?:(?:not )?ok \d+ )?"
                  r"(?P<test_case_id>FAULTLINE-EXIT(?= )|[^\r\n#]*[^\s#]))")
FIXUPS = {"ok": "pass", "not ok": "fail", "SKIP": "skip", "XFAIL": "pass", "Bail": "fail",
          "0": "pass", **{str(d): "fail" for d in range(1, 10)}}
# The end needs the whole FAULTLINE-EXIT line, so the result pattern (which
# matches earlier, at the newline before it) always takes it first.
END_PATTERN = EXIT_CASE + r" \d+\r?\n"
START_PATTERN = "# seed "
LAVA_CACHE_GLOB = "lava/lava-server-*/device-types"

# The device dictionary of the local dispatcher, as a lab admin would write
# it for a qemu worker that has faultline's QEMU.
DEVICE_DICT = """{% extends 'qemu.jinja2' %}
{% set no_kvm = True %}
{% set netdevice = 'none' %}
"""


def yaml_dump(data):
    if yaml is None:
        raise SetupError("LAVA jobs need python3-yaml (scripts/setup installs it)")
    return yaml.safe_dump(data, sort_keys=False, width=1000)


def yaml_load(text):
    if yaml is None:
        raise SetupError("LAVA results need python3-yaml (scripts/setup installs it)")
    return yaml.safe_load(text)


# ---------------------------------------------------------------- job generation

def lava_case_id(name):
    """The case name LAVA stores for a KTAP test name (lower case, \\W -> _)."""
    return re.sub(r"\W+", "_", name.strip().lower())


def _quote(arg):
    # LAVA joins the command into one string and splits it like a shell.
    return shlex.quote(arg)


def job_args(spec, console="mux"):
    """(extra_options, image_args) of a job for MachineSpec @spec: the same
    machine and devices as the qemu backend, with the run's files replaced
    by LAVA's {kernel} {initrd} {rules} placeholders, and {disk} unless
    @console is a local file (see below)."""
    extra = ["-nodefaults -machine q35 -no-reboot",
             "-accel " + spec.accel + " " + " ".join(_quote(a) for a in spec.extra_args)]
    extra += ["-L " + _quote(d) for d in spec.firmware_dirs]
    if console == "mux":
        extra.append("-chardev stdio,mux=on,id=ser0 -serial chardev:ser0 -serial chardev:ser0")
    else:
        # Local: ttyS0 straight into the run directory, LAVA sees only ttyS1.
        extra.append("-serial " + _quote("file:" + console) + " -serial stdio")
    # A lab downloads the disk; a local run boots the scratch disk in place
    # (LAVA would copy and hash the whole image, ~15 s for 1 GB).
    subst = {spec.disk: "{disk}"} if console == "mux" else {}
    if spec.rules_file:
        subst[spec.rules_file] = "{rules}"
    images = {}
    args = list(spec.device_args)
    i = 0
    while i < len(args):
        opt, val = args[i], args[i + 1] if i + 1 < len(args) else ""
        for path, key in subst.items():
            val = val.replace(path, key)
        # The fault log path is of this host; a lab worker has no such place.
        if opt == "-object" and console == "mux":
            val = re.sub(r",log=[^,]*", "", val)
        arg = f"{opt} {_quote(val)}"
        if "{disk}" in val:
            images["disk"] = arg
        elif "{rules}" in val:
            images["rules"] = arg
        else:
            extra.append(arg)
        i += 2
    images["kernel"] = "-kernel {kernel} -append " + _quote(spec.append)
    images["initrd"] = "-initrd {initrd}"
    return extra, images


def memory_mb(memory):
    """'512M' / '1G' -> 512 / 1024 (the template's -m)."""
    m = re.fullmatch(r"(\d+)([MG]?)", str(memory).strip().upper())
    if not m:
        raise SetupError(f"memory {memory!r}: expected e.g. 512M or 1G")
    return int(m.group(1)) * (1024 if m.group(2) == "G" else 1)


def make_job(spec, urls, timeout_s, metadata, console="mux", name=None):
    """The LAVA job (a dict) that boots @spec.  @urls: image key -> URL of
    the kernel, initrd, disk (and rules) artefacts."""
    extra, image_args = job_args(spec, console)
    images = {}
    # (a local job has no disk image: job_args() left it in extra_options)
    for key in ("kernel", "initrd", "disk", "rules"):
        if key in image_args:
            if key not in urls:
                raise SetupError(f"LAVA job: no URL for the {key} artefact")
            images[key] = {"url": urls[key], "image_arg": image_args[key]}
            if key == "disk" and urls[key].endswith(".gz"):
                images[key]["compression"] = "gz"
    boot_s = int(timeout_s) + 60
    job = {
        "device_type": "qemu",
        "job_name": name or f"faultline {spec.scenario} seed {metadata.get('faultline.seed')}",
        "timeouts": {"job": {"seconds": int(timeout_s) + LAVA_MARGIN_S + 60},
                     "action": {"seconds": boot_s},
                     "connection": {"seconds": boot_s}},
        "priority": "medium",
        "visibility": "public",
        "metadata": metadata,
        "context": {"arch": "x86_64", "memory": memory_mb(spec.memory),
                    # -accel comes from extra_options; the template's
                    # -enable-kvm -cpu host would contradict it.
                    "netdevice": "none", "no_kvm": 1,
                    "extra_options": extra},
        "actions": [
            {"deploy": {"to": "tmpfs", "timeout": {"seconds": LAVA_MARGIN_S},
                        "images": images}},
            {"boot": {"method": "qemu", "media": "tmpfs",
                      "timeout": {"seconds": boot_s}}},
            {"test": {"timeout": {"seconds": int(timeout_s)},
                      "monitors": [{"name": MONITOR_NAME, "start": START_PATTERN,
                                    "end": END_PATTERN, "pattern": RESULT_PATTERN,
                                    "fixupdict": FIXUPS}]}},
        ],
    }
    return job


def job_metadata(scenario, seed, version, repro, kernel=None):
    return {"faultline.scenario": scenario, "faultline.seed": seed,
            "faultline.version": version, "faultline.repro": repro,
            "faultline.kernel": kernel or "debian"}


def template_dir(cache):
    """lava-server's device-types directory unpacked by scripts/setup."""
    dirs = sorted(glob.glob(os.path.join(cache, LAVA_CACHE_GLOB)))
    for d in reversed(dirs):
        if os.path.isfile(os.path.join(d, "qemu.jinja2")):
            return d
    raise SetupError("no LAVA qemu device template in the cache: run scripts/setup")


def render_device(tpl_dir, job_context, device_dict=DEVICE_DICT):
    """The device configuration (YAML text) for a job's context, rendered
    from the device dictionary the way lava-server does."""
    try:
        import jinja2
        from jinja2.sandbox import SandboxedEnvironment
    except ImportError:
        raise SetupError("rendering the LAVA device needs python3-jinja2 (scripts/setup)") \
            from None
    env = SandboxedEnvironment(loader=jinja2.FileSystemLoader([tpl_dir]),
                               autoescape=False, trim_blocks=True)
    try:
        return env.from_string(device_dict).render(**job_context)
    except jinja2.TemplateError as e:
        raise SetupError(f"LAVA device template: {e}") from None
