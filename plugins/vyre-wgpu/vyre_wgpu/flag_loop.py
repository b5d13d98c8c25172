"""A sequence loop that runs until its flag is zero: decided on the device, or on the host.

On the device (``FlagLoop``, a hardware adapter): after each iteration a one-invocation
*control* kernel reads the flag. While it is set, the kernel counts the iteration; once
an iteration leaves it zero, the kernel marks the loop done and zeroes the indirect
workgroup counts every pass of the loop is dispatched with, so the iterations already
recorded after that one dispatch nothing. A buffer a step binds to an ``output`` is
zeroed by an indirect fill pass too (a plain clear would still run after the loop is
done). The host therefore records several iterations per submit (1, 2, 4, ... up to
``MAX_BATCH``) and reads back 8 bytes of loop state per batch, not the flag after every
iteration: the results are those of stopping at the first zero flag, exactly as the
reference does.

On the host (``sequence.SequenceRunner``, a software adapter, or a flag loop inside or
around another loop): each iteration is submitted and its flag read back. Measured on
Mesa's lavapipe, where a compute pass costs the CPU far more than a readback, that is
three times faster than the device-side loop (jacobi: 0.14 s against 0.47 s); on a GPU
the balance is the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from vyre_wgpu.adapter import wgpu_module
from vyre_wgpu.buffers import bind_group, destroy, padded_size, uniform
from vyre_wgpu.submission import Pass, Recorder
from vyre_wgpu.wgsl import BufferBinding, Lowered

if TYPE_CHECKING:
    from vyre_wgpu.device import Device
    from vyre_wgpu.pipelines import Kernel

#: Iterations recorded between two readbacks of the loop state, at most.
MAX_BATCH = 64
#: Words of flag and indirect counts one control invocation reads or writes serially, at
#: most: a larger loop is decided on the host (the control kernel stays quick, and far
#: inside any driver's loop budget).
MAX_CONTROL_WORDS = 4096
#: Workgroups a fill pass launches, at most (each invocation then zeroes a strided run).
FILL_GROUPS = 4096
FILL_WORKGROUP = 64

_CONTROL = """
@group(0) @binding(0) var<storage, read> flag: array<u32>;
@group(0) @binding(1) var<storage, read_write> state: array<u32>;  // [done, iterations]
@group(0) @binding(2) var<storage, read_write> args: array<u32>;
@group(0) @binding(3) var<uniform> params: array<vec4<u32>, 1>;  // (flag words, args words)

@compute @workgroup_size(1)
fn main() {
    if (state[0] != 0u) {
        return;
    }
    state[1] = state[1] + 1u;
    var raised = 0u;
    for (var i = 0u; i < params[0].x; i = i + 1u) {
        raised = raised | flag[i];
    }
    if (raised == 0u) {
        state[0] = 1u;
        for (var j = 0u; j < params[0].y; j = j + 1u) {
            args[j] = 0u;
        }
    }
}
"""

_FILL = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<uniform> params: array<vec4<u32>, 1>;  // (words, invocations)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = gid.x; i < params[0].x; i = i + params[0].y) {
        data[i] = 0u;
    }
}
"""


def fits_on_device(flag: Any, body: list[Pass]) -> bool:
    """Whether a loop is small enough for its control kernel: its flag and the indirect
    counts of its passes (and their fills) within ``MAX_CONTROL_WORDS``."""
    passes = sum(1 + len(p.zeroed) for p in body)
    return flag.size // 4 + 3 * passes <= MAX_CONTROL_WORDS


class FlagLoop:
    """The device-side state of one ``until_zero`` loop of a sequence plan: the indirect
    counts of its passes, the loop state, and the control pass."""

    def __init__(self, dev: Device, flag: Any, body: list[Pass], status: Any,
                 owned: list[Any]) -> None:
        usage = wgpu_module().BufferUsage
        self.flag = flag
        self.body = body
        counts: list[tuple[int, int, int]] = []
        for p in body:
            p.fills = [self._fill(dev, buf, status, owned) for buf in p.zeroed]
            for indirect in (*p.fills, p):
                indirect.offset = 12 * len(counts)
                counts.append(indirect.dispatch)
        self.counts = np.array(counts, np.uint32).reshape(-1)
        self.args = self._buffer(dev, owned, "vyre-loop-args", self.counts.nbytes,
                                 usage.STORAGE | usage.INDIRECT | usage.COPY_DST)
        for p in body:
            for indirect in (*p.fills, p):
                indirect.args = self.args
        self.state = self._buffer(dev, owned, "vyre-loop-state", 8,
                                  usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        params = np.array([flag.size // 4, self.counts.size, 0, 0], np.uint32)
        kernel, group, pbuf = _kernel_and_group(dev, "control", [flag, self.state, self.args],
                                                params, status)
        owned.append(pbuf)
        self.control = Pass(kernel, group, (1, 1, 1), [])

    def reset(self, dev: Device) -> None:
        """Before a run: every pass dispatches its full counts, and nothing is done yet."""
        dev.queue.write_buffer(self.args, 0, self.counts)
        dev.queue.write_buffer(self.state, 0, np.zeros(2, np.uint32))

    def run(self, recorder: Recorder, limit: int,
            number: Callable[[int], None]) -> tuple[int, bool]:
        """Record iterations in growing batches until the loop state read back says done,
        or ``limit`` iterations are recorded: (iterations run, converged). ``number(i)``
        records what comes before iteration ``i`` (its iteration number)."""
        recorded, batch = 0, 1
        while recorded < limit:
            for i in range(recorded, recorded + min(batch, limit - recorded)):
                recorder.clear(self.flag)
                number(i)
                for p in self.body:
                    recorder.step(p)
                recorder.step(self.control)
            recorded += min(batch, limit - recorded)
            (state,) = recorder.read([(self.state, 8)])
            done, ran = (int(v) for v in np.frombuffer(bytes(state), np.uint32))
            if done:
                return ran, True
            batch = min(batch * 2, MAX_BATCH)
        return limit, False

    @staticmethod
    def _buffer(dev: Device, owned: list[Any], label: str, size: int, usage: int) -> Any:
        buf = dev.device.create_buffer(label=label, size=padded_size(size), usage=usage)
        owned.append(buf)
        return buf

    @staticmethod
    def _fill(dev: Device, target: Any, status: Any, owned: list[Any]) -> Pass:
        words = target.size // 4
        groups = max(1, min(FILL_GROUPS, -(-words // FILL_WORKGROUP)))
        params = np.array([words, groups * FILL_WORKGROUP, 0, 0], np.uint32)
        kernel, group, pbuf = _kernel_and_group(dev, "fill", [target], params, status)
        owned.append(pbuf)
        return Pass(kernel, group, (groups, 1, 1), [])


def _kernel_and_group(dev: Device, which: str, buffers: list[Any], params: np.ndarray,
                      status: Any) -> tuple[Kernel, Any, Any]:
    """The cached control or fill kernel, a bind group of ``buffers``, ``params`` and the
    plan's status word (bound, as every vyre kernel's layout has it; never written), and
    the params buffer made for it (the plan's to destroy)."""
    if which == "control":
        wgsl, bindings = _CONTROL, (BufferBinding("flag", 0, "read", 4),
                                    BufferBinding("state", 1, "read_write", 4),
                                    BufferBinding("args", 2, "read_write", 4))
    else:
        wgsl, bindings = _FILL, (BufferBinding("data", 0, "read_write", 4),)
    lowered = Lowered(wgsl, bindings, params_binding=len(bindings), params_words=4,
                      status_binding=len(bindings) + 1, features=frozenset())
    kernel = dev.compile_wgsl(lowered, key=f"vyre-flag-loop-{which}", label=f"loop {which}")
    pbuf = uniform(dev, params, f"vyre-{which}-params")
    try:
        group = bind_group(dev, kernel, [(buf, buf.size) for buf in buffers], pbuf, status)
    except BaseException:
        destroy([pbuf])
        raise
    return kernel, group, pbuf
