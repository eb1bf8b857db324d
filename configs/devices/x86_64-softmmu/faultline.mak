# Minimal x86_64 device set for faultline (configure --with-devices-x86_64=faultline).
CONFIG_Q35=y
CONFIG_I440FX=y
CONFIG_NVME_PCI=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_VIRTIO_SERIAL=y
CONFIG_SERIAL_ISA=y
