"""The autotuner: candidates (workgroup sizes, specialization values), measurement in the
backend's worker with a byte check, and a persistent cache of the choice.

``Driver.tune`` runs it; ``DispatchConfig(tuned=True)`` uses what it chose; ``vyre tune``
is the command. docs/operations.md, "Tuning"."""

from vyre_core.tuning.cache import CACHE_ENV, Tuned, TuneKey
from vyre_core.tuning.candidates import Candidate, candidates
from vyre_core.tuning.candidates import Candidate as TuneCandidate
from vyre_core.tuning.tuner import Measured, TuneResult

__all__ = ["CACHE_ENV", "Candidate", "Measured", "TuneCandidate", "TuneKey", "TuneResult",
           "Tuned", "candidates"]
