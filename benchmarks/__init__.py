"""vyre's benchmarks; run them with ``make bench`` or ``python benchmarks/run.py``."""
