"""`faultline fuzz`: a campaign of generated and mutated swap programs (docs/fuzz.md)."""
