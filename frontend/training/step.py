"""A training step's gradients on the simulated fabric: the forward and the backward graph
of `joint_graphs`, each lowered, placed and run as a model of its own.

Parameters are runtime inputs of both graphs (they change every step; nothing is folded
from them); buffers are constants (a step does not change them). The forward returns the
loss and the saved activations; these and the loss's gradient (1.0) are the backward's
inputs, read back and written by the host between the two runs. A saved value the
forward computes from constants alone is a constant of the backward.

Example:
    >>> step = compile_training_step(model, (x,), (y,), F.mse_loss, config)
    >>> loss, grads = step(x, y)            # grads: {parameter name: tensor}
    >>> step.cycles                         # forward + backward, simulated
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from fabric.config import FabricConfig
from frontend.capture import Captured
from frontend.compiled import CompiledModel
from frontend.errors import FrontendError
from frontend.training.graphs import JointGraphs, joint_graphs
from frontend.values import Const


def _captured(gm: torch.fx.GraphModule, constants: dict[str, torch.Tensor]) -> Captured:
    """A Captured whose runtime inputs are every placeholder not in `constants`."""
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    out = gm.graph.find_nodes(op="output")[0]
    _, spec = torch.utils._pytree.tree_flatten(list(out.args[0]))
    return Captured(gm, dict(constants), [n for n in names if n not in constants], spec)


def _fit(compiled: CompiledModel, args: list[torch.Tensor]) -> list[torch.Tensor]:
    """`args` reshaped to the placeholders' shapes (a scalar travels as shape (1,), see
    `graphs._lift_scalar_inputs`)."""
    graph = compiled.captured.graph
    shapes = [graph.find_nodes(op="placeholder", target=n)[0].meta["val"].shape
              for n in compiled.captured.user_inputs]
    return [a.reshape(s) for a, s in zip(args, shapes)]


class TrainingStep:
    """Forward and backward graphs of one step compiled for `config`.

    Call with the user inputs and targets: returns (loss, {parameter name: gradient}),
    computed on the fabric with the model's current parameters."""

    def __init__(self, model: torch.nn.Module, graphs: JointGraphs, config: FabricConfig,
                 max_cycles: int = 5_000_000):
        self.model = model
        self.graphs = graphs
        buffers = dict(model.named_buffers())
        fw_consts = {ph: buffers[b].detach() for ph, b in
                     zip(graphs.forward_inputs[len(graphs.params):], graphs.buffers)}
        self.forward = CompiledModel(_captured(graphs.forward, fw_consts), config, max_cycles)
        # saved values the forward folded to constants stay constants of the backward
        outs = self.forward.lowered.outputs[1:]
        bw_consts = {name: v.value.detach() for name, v in zip(graphs.saved, outs)
                     if isinstance(v, Const)}
        self.backward = CompiledModel(_captured(graphs.backward, bw_consts), config,
                                      max_cycles)
        # one table size for both graphs: one compiled engine serves the whole step
        rows = tuple(max(a, b) for a, b in zip(self.forward.table_rows,
                                               self.backward.table_rows))
        self.forward.table_rows = self.backward.table_rows = rows
        self.loss: torch.Tensor | None = None

    def _fw_args(self, inputs, targets) -> list[torch.Tensor]:
        g = self.graphs
        if len(inputs) != len(g.user_inputs) or len(targets) != len(g.targets):
            raise FrontendError(f"the step was compiled for {len(g.user_inputs)} inputs and "
                                f"{len(g.targets)} targets, got {len(inputs)} and "
                                f"{len(targets)}")
        params = dict(self.model.named_parameters())
        return [params[n].detach() for n in g.params] + [t.detach() for t in (*inputs,
                                                                               *targets)]

    def __call__(self, inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor] = ()
                 ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        outs = self.forward(*_fit(self.forward, self._fw_args(tuple(inputs),
                                                                 tuple(targets))))
        self.loss = outs[0].reshape(())
        saved = {name: v for name, v in zip(self.graphs.saved, outs[1:])}
        bw_args = [saved[n] for n in self.backward.captured.user_inputs
                   if n != self.graphs.tangent]
        bw_args.append(torch.ones((), dtype=self.loss.dtype))  # d loss / d loss
        grads = self.backward(*_fit(self.backward, bw_args))
        return self.loss, {name: grads[i] for name, i in self.graphs.grads.items()}

    @property
    def cycles(self) -> int:
        """Simulated cycles of the last step: forward + backward (host I/O apart)."""
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
                          max_cycles: int = 5_000_000) -> TrainingStep:
    """Trace `loss_fn(model(*example_inputs), *targets)` and its gradient (`joint_graphs`),
    lower both graphs to fabric kernels and place them on `config` (default
    `FabricConfig.small(32, 32)`)."""
    config = config or FabricConfig.small(32, 32)
    graphs = joint_graphs(model, example_inputs, loss_fn, targets)
    return TrainingStep(model, graphs, config, max_cycles)
