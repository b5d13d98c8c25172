"""The conformance corpus and kit: programs with independently worked-out outputs that
every backend must reproduce, the runner ``vyre conform`` uses, and the pytest plugin a
backend author runs with ``pytest --vyre-backend=ID``."""
