"""One run and sweeps of runs: the spec builder, the watch loop, the runner,
restored runs, repro, command-line values and options, aborted runs' reports."""
