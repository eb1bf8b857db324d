"""Judging runs: outcome, KTAP, the kernel log, reports, KCIDB documents,
failure signatures, statistics, tables and plots."""
