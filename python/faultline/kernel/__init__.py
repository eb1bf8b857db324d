"""Guest kernels from source (`faultline kernel`): config fragments, patch series,
Debian and local sources, the cache of built kernels and its names, and what a
scenario needs of a kernel's config."""
