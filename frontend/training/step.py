"""A training step's gradients on the simulated fabric: the forward and the backward graph
of `joint_graphs`, each lowered, placed and run as a model of its own.

Parameters are runtime inputs of both graphs (they change every step; nothing is folded
from them); buffers are constants (a step does not change them). The forward returns the
loss and the saved activations; these and the loss's gradient (1.0) are the backward's
inputs, read back and written by the host between the two runs. A saved value the
forward computes from constants alone is a constant of the backward.

Mixed precision (precision="mixed", in the 16-bit format `half`, by default the one of
`frontend.amp.set_half_dtype` when the step is compiled): each graph's nodes take their
formats from one run of that graph under CPU autocast (`frontend.amp.node_formats`), the
forward's on the example inputs, the
backward's on the saved values of an fp32 run of the forward. Saved values travel between
the graphs widened to fp32 (exact); gradients come back as fp32 tensors.

Execution (`execution="sequential" | "pipelined"`, `frontend.schedule`): both graphs are
compiled in that mode. Pipelined, each graph's stages are placed for a pipeline
(`place(..., balance="cycles")`) and the graph's run is scheduled as one: stages overlap
where the dataflow allows, and its cycles are its latency, host writes of its inputs and
reads of its outputs on the path included (`CompiledModel.cycles`). The two graphs still
run one after the other (the backward needs the forward's outputs), and one step is one
sample: the next step's weights depend on this one's gradients, so nothing streams.

Loss scaling: `step(inputs, targets, loss_scale=s)` feeds s as the loss's gradient, so the
backward computes the gradients of s * loss (in 16 bits where autocast says so: that is
what the scale is for); the loss returned is unscaled.

Example:
    >>> step = compile_training_step(model, (x,), (y,), F.mse_loss, config)
    >>> loss, grads = step((x,), (y,))      # grads: {parameter name: tensor}
    >>> step.cycles                         # forward + backward, simulated
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fabric.config import FabricConfig
from frontend.amp import HalfDtype, check_precision, resolve_half
from frontend.capture import Captured
from frontend.compiled import CompiledModel
from frontend.errors import FrontendError
from frontend.schedule import DEFAULT_MODE
from frontend.tables import widest
from frontend.training.graphs import JointGraphs, joint_graphs
from frontend.values import Const


def _captured(gm: torch.fx.GraphModule, constants: dict[str, torch.Tensor]) -> Captured:
    """A Captured whose runtime inputs are every placeholder not in `constants`."""
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    out = gm.graph.find_nodes(op="output")[0]
    _, spec = torch.utils._pytree.tree_flatten(list(out.args[0]))
    return Captured(gm, dict(constants), [n for n in names if n not in constants], spec)


def fit_args(captured: Captured, args: list[torch.Tensor], skip=frozenset()
             ) -> list[torch.Tensor]:
    """`args` (one per runtime placeholder not in `skip`, in order) reshaped to the
    placeholders' shapes (a scalar travels as shape (1,), see
    `graphs._lift_scalar_inputs`) and widened to fp32 where the graph traced fp32 (a saved
    value of a mixed-precision forward comes back in 16 bits; widening is exact)."""
    graph = captured.graph
    vals = [graph.find_nodes(op="placeholder", target=n)[0].meta["val"]
            for n in captured.user_inputs if n not in skip]
    return [a.reshape(v.shape).to(v.dtype) for a, v in zip(args, vals)]


class TrainingStep:
    """Forward and backward graphs of one step compiled for `config`.

    Call with the user inputs and targets: returns (loss, {parameter name: gradient}),
    computed on the fabric with the model's current parameters."""

    def __init__(self, model: torch.nn.Module, graphs: JointGraphs, config: FabricConfig,
                 max_cycles: int = 5_000_000, precision: str = "fp32",
                 example: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]] = ((), ()),
                 half: HalfDtype | None = None, execution: str = DEFAULT_MODE):
        """half: the 16-bit format of a "mixed" step (`frontend.amp.resolve_half`); None in
        fp32. execution: each graph's mode, "pipelined" or "sequential" (module
        docstring)."""
        self.model = model
        self.graphs = graphs
        self.precision = check_precision(precision)
        self.half = half
        buffers = dict(model.named_buffers())
        fw_consts = {ph: buffers[b].detach() for ph, b in
                     zip(graphs.forward_inputs[len(graphs.params):], graphs.buffers)}
        fw_captured = _captured(graphs.forward, fw_consts)
        fw_args = (fit_args(fw_captured, self._fw_args(*example)) if precision == "mixed"
                   else ())
        # a training step's graphs run as parts apart in either mode: in pipelined mode the
        # graph's colors are reported (cm.colors), a shortfall not refused
        self.forward = CompiledModel(fw_captured, config, max_cycles, precision, fw_args, half,
                                     execution, colors="report")
        # saved values the forward folded to constants stay constants of the backward
        outs = self.forward.lowered.outputs[1:]
        bw_consts = {name: v.value.detach() for name, v in zip(graphs.saved, outs)
                     if isinstance(v, Const)}
        bw_captured = _captured(graphs.backward, bw_consts)
        bw_args = (self._example_backward(fw_captured, fw_args, bw_captured)
                   if precision == "mixed" else ())
        self.backward = CompiledModel(bw_captured, config, max_cycles, precision, bw_args, half,
                                      execution, colors="report")
        # one table size for both graphs: one compiled engine serves the whole step
        rows = widest(self.forward.table_rows, self.backward.table_rows)
        self.forward.table_rows = self.backward.table_rows = rows
        self.loss: torch.Tensor | None = None

    def _example_backward(self, fw_captured: Captured, fw_args: list[torch.Tensor],
                          bw_captured: Captured) -> list[torch.Tensor]:
        """The backward's runtime inputs from an fp32 run of the forward graph on the
        example (for the autocast run that gives the backward's node formats)."""
        placeholders = self.graphs.forward.graph.find_nodes(op="placeholder")
        given = dict(zip(fw_captured.user_inputs, fw_args))
        args = [given.get(ph.name, fw_captured.constants.get(ph.name)) for ph in placeholders]
        with torch.no_grad():
            outs = self.graphs.forward(*[a.reshape(ph.meta["val"].shape)
                                         for a, ph in zip(args, placeholders)])
        return self.bw_args(outs[0], outs[1:], 1.0, bw_captured)

    def bw_args(self, loss: torch.Tensor, saved: Sequence[torch.Tensor], loss_scale: float,
                captured: Captured, skip=frozenset()) -> list[torch.Tensor]:
        """The backward's runtime inputs (those not in `skip`): the saved values, then the
        loss's gradient loss_scale."""
        by_name = dict(zip(self.graphs.saved, saved))
        args = [by_name[n] for n in captured.user_inputs
                if n != self.graphs.tangent and n not in skip]
        args.append(torch.full((), loss_scale, dtype=torch.float32))  # d (s * loss) / d loss
        return fit_args(captured, args, skip)

    def check_batch(self, inputs: tuple, targets: tuple) -> None:
        g = self.graphs
        if len(inputs) != len(g.user_inputs) or len(targets) != len(g.targets):
            raise FrontendError(f"the step was compiled for {len(g.user_inputs)} inputs and "
                                f"{len(g.targets)} targets, got {len(inputs)} and "
                                f"{len(targets)}")

    def _fw_args(self, inputs, targets) -> list[torch.Tensor]:
        g = self.graphs
        self.check_batch(inputs, targets)
        params = dict(self.model.named_parameters())
        return [params[n].detach() for n in g.params] + [t.detach() for t in (*inputs,
                                                                               *targets)]

    def __call__(self, inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor] = (),
                 loss_scale: float = 1.0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(loss, {parameter name: gradient of loss_scale * loss}) with the model's current
        parameters; the loss (fp32) is not scaled."""
        outs = self.forward(*fit_args(self.forward.captured,
                                  self._fw_args(tuple(inputs), tuple(targets))))
        self.loss = outs[0].reshape(()).to(torch.float32)
        grads = self.backward(*self.bw_args(self.loss, outs[1:], float(loss_scale),
                                             self.backward.captured))
        return self.loss, {name: grads[i].to(torch.float32)
                           for name, i in self.graphs.grads.items()}

    def loss_only(self, inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor] = ()
                  ) -> torch.Tensor:
        """The loss alone (the forward graph; an evaluation step)."""
        outs = self.forward(*fit_args(self.forward.captured,
                                  self._fw_args(tuple(inputs), tuple(targets))))
        return outs[0].reshape(()).to(torch.float32)

    @property
    def execution(self) -> str:
        """The graphs' execution mode: "sequential" or "pipelined"."""
        return self.forward.mode

    @property
    def cycles(self) -> int:
        """Simulated cycles of the last step: forward + backward, each its
        `CompiledModel.cycles` (sequential: its kernels and moves, host I/O apart;
        pipelined: its latency, host I/O on its path included)."""
        return self.forward.cycles + self.backward.cycles

    @property
    def host_cycles(self) -> int:
        return self.forward.host_cycles + self.backward.host_cycles

    @property
    def fmas(self) -> int:
        return self.forward.fmas + self.backward.fmas


def compile_training_step(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                          targets: Sequence[torch.Tensor], loss_fn: Callable,
                          config: FabricConfig | None = None,
                          max_cycles: int = 5_000_000, precision: str = "fp32",
                          half=None, execution: str = DEFAULT_MODE) -> TrainingStep:
    """Trace `loss_fn(model(*example_inputs), *targets)` and its gradient (`joint_graphs`),
    lower both graphs to fabric kernels and place them on `config` (default
    `FabricConfig.small(32, 32)`). precision: "fp32" or "mixed" (module docstring); half:
    the 16-bit format under "mixed" (default `frontend.amp.get_half_dtype()`, read now);
    execution: "pipelined" (default) or "sequential", both graphs' mode (module docstring)."""
    config = config or FabricConfig.small(32, 32)
    half = resolve_half(precision, half)
    graphs = joint_graphs(model, example_inputs, loss_fn, targets)
    return TrainingStep(model, graphs, config, max_cycles, precision,
                        (tuple(example_inputs), tuple(targets)), half, execution)
