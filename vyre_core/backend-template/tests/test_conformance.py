"""The vyre conformance kit, run here against this backend: ``pytest --vyre-backend=template``.

Importing the kit gives its cases node ids of this folder, so one case can be run alone:
``pytest --vyre-backend=template "tests/test_conformance.py::test_corpus[u32_arith]"``."""

from vyre_core.conformance.kit import *  # noqa: F403
