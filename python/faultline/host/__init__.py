"""What this host offers every other part: messages, signals and stopping, child
processes, scratch directories, the versions scripts/setup recorded."""
