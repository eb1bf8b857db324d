"""`faultline bench`: performance figures as ratios against baselines measured
in the same run."""
