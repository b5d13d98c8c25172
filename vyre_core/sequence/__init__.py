"""Sequences of steps that run as one request: their parts (``nodes``), the model and
its rules (``model``), the canonical bytes (``wire``), and the in-worker executor every
backend can fall back on (``run``)."""

from vyre_core.sequence.model import (
    MAX_ITERATIONS,
    Sequence,
    SequenceBuilder,
    output_buffers,
)
from vyre_core.sequence.nodes import MAX_STEPS, Role, SequenceBuffer, Step, StepLoop

__all__ = ["MAX_ITERATIONS", "MAX_STEPS", "Role", "Sequence", "SequenceBuffer",
           "SequenceBuilder", "Step", "StepLoop", "output_buffers"]
