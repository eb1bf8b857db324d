"""The real-bug corpus (tests/bugs/) and `faultline bugs`: recall on it."""
