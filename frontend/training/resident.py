"""A training step whose parameters live on the fabric: the weights and the optimizer state
stay in PE SRAM of the layer-pipelined placement from step to step, and only the batch, the
loss and the step's scalars cross the host boundary.

Homes: every parameter's optimizer kernel (`FabricOptimizer.rehome`) sits on the tile of the
first forward stage that reads it (graph order), in the top-left part of that tile its
(m, n) matrix view needs; a parameter no stage reads keeps its home. A home tile holds the
stage's program and the optimizer's symbols (weights, gradient, state, scalars) of every
parameter homed there; when they exceed a PE's SRAM, `PlacementError` names the stage, the
parameters and the bytes.

Per step:
- forward and backward: each operand a parameter feeds gets the weights over the mesh from
  the home (`CompiledModel.make_resident`: one redistribution plan per operand, simulated
  every step like any move between stages); a saved value that is a parameter itself is
  taken from the home the same way;
- gradients: each parameter's gradient moves over the mesh from the backward stages that
  produce it into the "g" symbol of its home (`runtime.sources_of` plans), then the
  optimizer kernel runs there (`step_resident`). A gradient that is not wholly produced by
  stages (a constant, a runtime input, structural zeros) goes through the host instead
  (`host_grads` names them);
- a loss scaler (`frontend.training.scaler`) works on the gradients where they are: its
  sum-of-squares and scaling kernels run on the homes' PEs and take the "g" words as they
  lie (local moves when their layouts differ; the scaled gradient goes back into "g");
  only the one-word sums of squares reach the host;
- `host_grads=True` (mode "validate", which compares every gradient with eager's) brings
  every gradient to the host instead.

Cycles: `cycles` = forward + backward (their parameter moves included; each graph's
`CompiledModel.cycles`, its latency in pipelined execution) + the gradient moves
(`grad_move_cycles`, after the backward); the optimizer's own kernel cycles are the
optimizer's figure.

Example:
    >>> opt = FabricSGD(model.named_parameters(), lr=0.1, config=config)  # doctest: +SKIP
    >>> step = ResidentStep(compile_training_step(model, (x,), (y,), loss_fn, config), opt)
    >>> loss = step((x,), (y,)); opt.step_resident(step.moved)         # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fabric.program import Program, Rect
from frontend.errors import PlacementError
from frontend.runtime import ResidentTensor, Source, sources_of
from frontend.sources import describe
from frontend.tables import widest
from frontend.training.optim import FabricOptimizer
from frontend.training.step import TrainingStep, fit_args
from frontend.values import Ref


def program_words(program: Program) -> np.ndarray:
    """SRAM words every PE of the fabric gives the symbols of `program`, (rows, cols)."""
    cfg = program.config
    out = np.zeros((cfg.rows, cfg.cols), np.int64)
    for pl in program.placements:
        r = pl.rect
        out[r.row:r.row_end, r.col:r.col_end] += sum(s.words for s in pl.tile.symbols.values())
    return out


def parameter_homes(step: TrainingStep) -> dict[str, tuple[Rect, str]]:
    """{parameter: (tile, stage name)} of the first forward stage reading each parameter."""
    by_placeholder = dict(zip(step.graphs.forward_inputs, step.graphs.params))
    homes: dict[str, tuple[Rect, str]] = {}
    for p in step.forward.prepared:
        for sources in p.sources.values():
            for src in sources:
                name = by_placeholder.get(src.tensor.name)
                if name is not None and name not in homes:
                    homes[name] = (p.rect, p.stage.name)
    return homes


def _is_whole(ref, tensor) -> bool:
    """Whether `ref` is exactly `tensor` (its elements in order)."""
    return isinstance(ref, Ref) and tuple(ref.shape) == tuple(tensor.shape) \
        and tensor.in_order(ref.index)


class ResidentStep:
    """`step` (a TrainingStep) run with `optimizer`'s parameters resident in PE memory.

    Call with (inputs, targets): returns the loss (fp32); the gradients are in the homes'
    "g" symbols of the parameters in `moved` (pending in the optimizer's `resident_grads`);
    the others' come back in `host_grads` (with host_grads=True: all of them)."""

    def __init__(self, step: TrainingStep, optimizer: FabricOptimizer, rehome: bool = True):
        self.step = step
        self.optimizer = optimizer
        g = step.graphs
        missing = sorted(set(g.params) - set(optimizer.param_names))
        if missing:
            raise ValueError(f"resident step: the optimizer holds no parameters {missing}")
        homes = self.homes = parameter_homes(step)
        if rehome:
            self._rehome(homes)
        self._check_sram(homes)
        fw, bw = step.forward, step.backward
        self.fw_resident = dict(zip(g.forward_inputs, g.params))  # placeholder -> parameter
        for placeholder, name in self.fw_resident.items():
            fw.make_resident(placeholder, optimizer.weight_map(name))
        # saved values that are parameters themselves: from the home, not the host
        self.bw_resident: dict[str, str] = {}
        by_base = {fw.lowered.tensors[ph].base: (ph, name)
                   for ph, name in self.fw_resident.items()}
        for saved, ref in zip(g.saved, fw.lowered.outputs[1:]):
            if saved not in bw.captured.user_inputs or not isinstance(ref, Ref) \
                    or ref.index.numel() == 0:
                continue
            ph, name = by_base.get(int(ref.index.reshape(-1)[0]), (None, None))
            if ph is not None and _is_whole(ref, fw.lowered.tensors[ph]):
                bw.make_resident(saved, optimizer.weight_map(name))
                self.bw_resident[saved] = name
        fw.table_rows = bw.table_rows = widest(fw.table_rows, bw.table_rows)
        self.grad_sources = self._grad_sources()
        self.moved = sorted(self.grad_sources)
        self.grad_move_cycles = 0
        self.host_grads: dict[str, torch.Tensor] = {}

    def _rehome(self, homes: dict[str, tuple[Rect, str]]) -> None:
        stages = {p.stage.name: p for p in self.step.forward.prepared}
        for name, (rect, stage) in homes.items():
            try:
                self.optimizer.rehome({name: rect})
            except ValueError as exc:
                node = stages[stage].stage.node
                raise PlacementError(f"{describe(node)}: parameter {name!r} cannot live on "
                                     f"the tile {rect} of stage {stage!r}, which reads it: "
                                     f"{exc}") from exc

    def _check_sram(self, homes: dict[str, tuple[Rect, str]]) -> None:
        """Each home tile's stage program plus the optimizer programs homed there fit SRAM."""
        stages = {p.stage.name: p for p in self.step.forward.prepared}
        by_stage: dict[str, list[str]] = {}
        for name, (_, stage) in homes.items():
            by_stage.setdefault(stage, []).append(name)
        cfg = self.step.forward.config
        for stage, names in by_stage.items():
            p = stages[stage]
            words = program_words(p.kernel.program)
            for name in names:
                words = words + program_words(self.optimizer.program(name))
            worst = int(words.max())
            if worst > cfg.sram_words:
                r, c = (int(v) for v in np.unravel_index(int(words.argmax()), words.shape))
                raise PlacementError(
                    f"{describe(p.stage.node)}: stage {stage!r} on {p.rect} and the optimizer "
                    f"state of {', '.join(names)} homed there need {4 * worst} B of SRAM on "
                    f"PE ({r}, {c}), which has {cfg.sram_bytes} B; use a larger fabric")

    def _grad_sources(self) -> dict[str, list[Source]]:
        """{parameter: sources moving its gradient into its home's "g"} for every gradient
        wholly produced by backward stages (the others go through the host)."""
        bw = self.step.backward
        prepared = {p.stage.name: p for p in bw.prepared}
        out = {}
        for name, i in self.step.graphs.grads.items():
            ref = bw.lowered.outputs[i]
            if not isinstance(ref, Ref) or bool((ref.index < 0).any()):
                continue
            gmap = self.optimizer.grad_map(name)
            sources = sources_of(ref.index, gmap, bw.lowered.tensors, prepared, bw.config)
            covered = {k: np.zeros(a.shape, bool) for k, a in gmap.symbols.items()}
            for src in sources:
                for k, a in src.dst.symbols.items():
                    covered[k] |= a >= 0
            whole = all(bool(covered[k][a >= 0].all()) for k, a in gmap.symbols.items())
            if whole and all(src.plan is not None for src in sources):
                out[name] = sources
        return out

    # ---- running --------------------------------------------------------------------------
    def _weights(self, placeholders: dict[str, str]) -> dict[str, ResidentTensor]:
        return {ph: ResidentTensor(*self.optimizer.resident(name))
                for ph, name in placeholders.items()}

    def _forward(self, inputs, targets) -> list[torch.Tensor]:
        fw = self.step.forward
        args = fit_args(fw.captured, [t.detach() for t in (*inputs, *targets)],
                        skip=fw.resident_inputs)
        return fw(*args, resident=self._weights(self.fw_resident))

    def __call__(self, inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor] = (),
                 loss_scale: float = 1.0, host_grads: bool = False) -> torch.Tensor:
        """The loss (fp32, unscaled) with the weights in PE memory; the gradients of
        loss_scale * loss go to the homes (`moved`) or to `host_grads`."""
        step, bw = self.step, self.step.backward
        step.check_batch(tuple(inputs), tuple(targets))
        outs = self._forward(tuple(inputs), tuple(targets))
        step.loss = outs[0].reshape(()).to(torch.float32)
        args = step.bw_args(step.loss, outs[1:], float(loss_scale), bw.captured,
                            skip=bw.resident_inputs)
        bw.run(*args, resident=self._weights(self.bw_resident))
        self.grad_move_cycles = 0
        mesh = {} if host_grads else self.grad_sources
        for name, sources in mesh.items():
            for src in sources:
                words, cycles, _ = src.plan.run(bw.last.words[src.tensor.name],
                                                min_table_rows=bw.table_rows)
                self.grad_move_cycles += cycles
                self.optimizer.put_grad_words(name, src.dst, words)
        rest = [n for n in step.graphs.grads if n not in mesh]
        outputs = bw.outputs() if rest else []
        self.host_grads = {n: outputs[step.graphs.grads[n]].to(torch.float32) for n in rest}
        self.moved = sorted(mesh)
        return step.loss

    def loss_only(self, inputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor] = ()
                  ) -> torch.Tensor:
        """The loss alone (the forward graph, weights in PE memory; an evaluation step)."""
        self.step.check_batch(tuple(inputs), tuple(targets))
        return self._forward(tuple(inputs), tuple(targets))[0].reshape(()).to(torch.float32)

    @property
    def cycles(self) -> int:
        """Simulated cycles of the last step: forward + backward + gradient moves."""
        return self.step.cycles + self.grad_move_cycles

    @property
    def host_cycles(self) -> int:
        return self.step.host_cycles

    @property
    def fmas(self) -> int:
        return self.step.fmas
