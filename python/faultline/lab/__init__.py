"""Many runs and other labs: matrix, LAVA jobs, libvirt XML, compare and check."""
