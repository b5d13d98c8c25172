"""Backend-neutral conformance corpus: programs with independently worked-out outputs."""
