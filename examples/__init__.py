"""Runnable examples, installed as ``vyre_examples``: each module exposes
``build() -> vyre_core.Example`` and runs with ``python examples/NAME.py`` or
``vyre run NAME``."""
