#!/bin/sh
echo "# kernel $(uname -r)"
for m in nvme syncblk virtio_blk virtio_console; do
    [ -d /sys/module/$m ] || modprobe $m || echo "# modprobe $m failed"
done
# zswap's compressors built as modules: loaded so programs may choose them
for m in zstd lz4 lz4hc deflate 842; do
    [ -f /lib/modules/$(uname -r)/$m.ko ] && ! [ -d /sys/module/$m ] && { modprobe $m || echo "# modprobe $m failed"; }
done
/repro
echo "# repro exit $?"
