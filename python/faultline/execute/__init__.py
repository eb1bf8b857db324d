"""Running swap programs in a VM (`faultline prog run`, `prog show`):
the executor's channel, the VM's device set, one program's turn, results."""
