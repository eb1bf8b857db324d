"""Swap programs on the host (docs/programs.md): the language (lang), its
checker (check), the page pattern (pattern), the seeded generator (gen,
weights.toml) and mutator (mutate), and `faultline prog` (tool)."""
