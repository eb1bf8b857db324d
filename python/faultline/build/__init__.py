"""QEMU and the guest image, built by scripts/build-qemu and scripts/build-guest
and cached by the hash of their inputs."""
