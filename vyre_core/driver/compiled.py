"""The handles ``Driver.compile`` makes (of a program, of a sequence): the work compiled
in one worker, found by routing as a dispatch finds it, and the ``run`` each handle calls
to send the work to that worker again until it restarts. Apart from the Driver because a
handle outlives the call that made it and talks to its worker alone, never to routing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_core import abi
from vyre_core.boundary.messages import Compile, CompileSequence, PipelineDispatch
from vyre_core.config import DispatchConfig
from vyre_core.contract.types import Outputs
from vyre_core.deadline import Deadline
from vyre_core.driver.calls import (
    _check_out,
    _checked_program,
    _checked_sequence,
    _config,
    _outputs,
    _sequence_config,
    _sequence_outputs,
    _sequence_request,
    _untuned,
    _weighed,
    _writing_into,
    _written_into,
    one_worker,
)
from vyre_core.driver.resident import ResidentBuffer
from vyre_core.errors import InvalidSequenceError
from vyre_core.ir import Program
from vyre_core.launch import effective_program, launch_of
from vyre_core.pipeline import CompiledPipeline, CompiledSequence
from vyre_core.sequence import Sequence as StepSequence
from vyre_core.supervisor.rules.requests import Call, Request
from vyre_core.supervisor.shell import PoolHandle

if TYPE_CHECKING:
    from vyre_core.routing import RoutingPolicy


def compiled_pipeline(routing: RoutingPolicy, program: Program, backend: str | None,
                      config: DispatchConfig | None) -> CompiledPipeline:
    """``Driver.compile`` of a program: compiled in one worker of the routed (or named)
    backend within ``config.timeout``, and the handle that dispatches it there."""
    config = _untuned(_config(config), "compile (a choice is kept per input size)")
    source, program = program, effective_program(_checked_program(program), config)
    weighed = _weighed(source, config)  # (its launch, when its grid is known already)
    config = config.replace(workgroup_override=None, constants=())
    message = Compile(program.to_wire(), config.to_wire())
    deadline = Deadline.after(config.timeout)

    def request(pool: PoolHandle) -> Request:
        return Request(Call(message, [],
                            deadline=deadline.within(pool.options.timeouts.compile)))

    pool, ran, (compiled, _) = routing.call(weighed, backend, request, deadline)
    slot, generation = ran.tracking.served_by
    pipeline_id = compiled.pipeline

    # the last launch's config and input shapes, its config as sent and output shapes
    last: list[Any] = [(None, None, None, None)]

    def run(inputs: Sequence[Any], cfg: DispatchConfig) -> Outputs:
        bound = abi.bind_inputs(program, inputs)
        shapes = [a.shape for a in bound]
        seen, seen_shapes, wire, outputs = last[0]  # (one read: threads share handles)
        if cfg is not seen or shapes != seen_shapes:  # (a repeated launch: checked once)
            _, sent = launch_of(program, cfg, bound)  # (checked here, as dispatch)
            wire, outputs = sent.to_wire(), abi.output_shapes(program, bound)
            last[0] = (cfg, shapes, wire, outputs)
        reply, arrays = pool.call(Request(Call(
            PipelineDispatch(pipeline_id, wire, cfg.label), bound,
            deadline=Deadline.after(cfg.timeout), slot=slot, generation=generation,
            outputs=outputs)))
        return _outputs(reply, arrays)

    return CompiledPipeline(
        program, config, pool.backend, compiled.key, generation, run,
        lambda g: pool.holds(slot, g), compiled.compile_ns / 1e9, source=source)


def compiled_sequence(routing: RoutingPolicy, sequence: StepSequence, backend: str | None,
                      config: DispatchConfig | None) -> CompiledSequence:
    """``Driver.compile`` of a sequence: checked against the routed (or named) backend and
    its programs compiled in one worker within ``config.timeout``, and the handle that
    runs it there."""
    config = _sequence_config(config)
    _checked_sequence(sequence)
    if config.fuse:
        sequence = sequence.fused()
    message = CompileSequence(sequence.fingerprint(), sequence.to_wire(), config.to_wire())
    deadline = Deadline.after(config.timeout)

    def request(pool: PoolHandle) -> Request:
        return Request(Call(message, [],
                            deadline=deadline.within(pool.options.timeouts.compile)))

    pool, ran, _ = routing.call(sequence, backend, request, deadline)
    slot, generation = ran.tracking.served_by

    def run(inputs: Sequence[Any], resident: Mapping[str, ResidentBuffer],
            cfg: DispatchConfig, out: Sequence[np.ndarray] | None) -> Outputs:
        cfg = _sequence_config(cfg)
        req = _sequence_request(sequence, inputs, resident, cfg)
        if out is not None:
            _check_out(sequence, req.call.outputs, out)
            _writing_into(req, out, {})
        if req.call.slot is not None:
            one_worker(list(resident.values()), list(resident), (pool, slot, generation),
                       InvalidSequenceError)
        req.call.slot, req.call.generation = slot, generation
        return _written_into(_sequence_outputs(*pool.call(req)), out)

    return CompiledSequence(sequence, config, pool.backend, generation, run,
                            lambda g: pool.holds(slot, g))
