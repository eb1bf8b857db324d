"""Machine backends: processes that boot a MachineSpec (qemu, libvirt, lava), the
QMP client and the log readers.  Nothing here knows a scenario or a run directory."""
