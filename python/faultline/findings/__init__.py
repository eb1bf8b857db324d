"""Kernel findings: findings/NAME/ (finding.toml, program.prog, README.md),
`faultline findings`, which replays them into results/findings/, and the
table `faultline docs` renders from those records (docs/findings.md)."""
