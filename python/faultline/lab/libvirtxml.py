"""`faultline libvirt-xml`: a run's inputs and its domain XML, for
`virsh create` by hand (the libvirt backend's XML, libvirt.domain_xml)."""

import os

from faultline.errors import SetupError
from faultline.run.spec_builder import prepare_spec
from faultline.vm.libvirt_xml import domain_xml, new_domain_name, validate_xml


def write_inputs(sc, builds, outdir, seed, deterministic, accel="tcg"):
    """`faultline libvirt-xml`: the run's inputs (disk, initramfs, rules) and
    a domain XML in @outdir for `virsh create`; returns the XML's path."""
    os.makedirs(outdir, exist_ok=True)
    spec = prepare_spec(sc, builds, outdir, seed=seed, deterministic=deterministic,
                        accel=accel)
    path = os.path.join(outdir, "domain.xml")
    with open(path, "w") as f:
        f.write(domain_xml(spec, new_domain_name(sc.name), by_hand=True))
    problem = validate_xml(path)
    if problem:
        raise SetupError(f"{path}: virt-xml-validate: {problem}")
    return path
