"""results/: the records of measured runs (records.py) and the tables of
docs/ generated from them (docs.py)."""
