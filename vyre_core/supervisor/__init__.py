"""Worker supervision: the private run directory, worker processes, and pools."""
