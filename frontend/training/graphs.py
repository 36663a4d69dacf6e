"""The forward and backward ATen graphs of one training step, from aot_autograd.

`joint_graphs(model, example_inputs, loss_fn, targets)` traces

    loss = loss_fn(model(*inputs), *targets)

with `torch._functorch.aot_autograd.aot_function` over a functional call of the model whose
parameters and buffers are explicit arguments, decomposed to core ATen
(`torch._decomp.core_aten_decompositions()`), with scaled-dot-product attention forced to
its math form so that the backward graph has no fused attention op. aot_autograd's default
partition splits the joint graph in two:

- forward: placeholders = parameters, buffers, user inputs, targets (in that order);
  outputs = (loss, *saved), the saved activations the backward needs;
- backward: placeholders = saved (same names as the forward's outputs) then the loss's
  gradient `tangents_1`; outputs = one gradient per forward placeholder (None where no
  gradient flows), reduced here to the parameters' gradients, in parameter order.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence

import torch
import torch.fx
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_function, make_boxed_func
from torch.nn.attention import SDPBackend, sdpa_kernel

from frontend.capture import torch_internals_quiet
from frontend.errors import FrontendError


@dataclasses.dataclass
class JointGraphs:
    """forward / backward: FX GraphModules of ATen ops (see the module docstring).

    params / buffers: the model's parameter and buffer names, the first forward
    placeholders (`forward_inputs[:len(params)]` are the parameters', then the buffers');
    user_inputs / targets: the next placeholders' names; saved: the saved activations
    (forward outputs 1.., backward placeholders but the last); tangent: the backward
    placeholder of the loss's gradient; grads: parameter name -> index of its gradient in
    the backward's outputs (every parameter has one)."""

    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule
    params: list[str]
    buffers: list[str]
    forward_inputs: list[str]
    user_inputs: list[str]
    targets: list[str]
    saved: list[str]
    tangent: str
    grads: dict[str, int]


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return list(gm.graph.find_nodes(op="placeholder"))


def _output_args(gm: torch.fx.GraphModule) -> list:
    out = gm.graph.find_nodes(op="output")[0]
    return list(out.args[0])


def joint_graphs(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                 loss_fn: Callable, targets: Sequence[torch.Tensor] = ()) -> JointGraphs:
    """Trace one step of `loss_fn(model(*example_inputs), *targets)` (a scalar loss) into
    its forward and backward graphs. The model's mode (train/eval) is used as it is; a
    forward that updates buffers (batch norm in training mode) is refused."""
    inputs, targets = tuple(example_inputs), tuple(targets)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    if not params:
        raise FrontendError(f"{type(model).__name__} has no parameters to train")
    frozen = [n for n, p in params.items() if not p.requires_grad]
    if frozen:
        raise FrontendError(f"parameters {frozen} do not require grad (training needs "
                            "every parameter's gradient)")
    names_p, names_b = list(params), list(buffers)
    recorded: dict[str, torch.fx.GraphModule] = {}

    def step(*args):
        p = dict(zip(names_p, args[:len(names_p)]))
        b = dict(zip(names_b, args[len(names_p):len(names_p) + len(names_b)]))
        rest = args[len(names_p) + len(names_b):]
        out = torch.func.functional_call(model, {**p, **b}, rest[:len(inputs)])
        return loss_fn(out, *rest[len(inputs):])

    def recorder(kind):
        def compiler(gm, _example):
            recorded[kind] = gm
            return make_boxed_func(gm)
        return compiler

    leaves = [p.detach().clone().requires_grad_(True) for p in params.values()]
    leaves += [b.detach().clone() for b in buffers.values()]
    leaves += [t.detach() for t in (*inputs, *targets)]
    traced = aot_function(step, fw_compiler=recorder("forward"),
                          bw_compiler=recorder("backward"),
                          decompositions=core_aten_decompositions())
    try:
        with sdpa_kernel(SDPBackend.MATH), torch_internals_quiet():
            loss = traced(*leaves)
            if not (isinstance(loss, torch.Tensor) and loss.dim() == 0):
                raise FrontendError(f"loss_fn must return a scalar tensor, got "
                                    f"{getattr(loss, 'shape', type(loss))}")
            loss.backward()
    except FrontendError:
        raise
    except Exception as exc:  # aot_autograd's own message says what it could not trace
        raise FrontendError(f"aot_autograd could not trace a training step of "
                            f"{type(model).__name__}: {type(exc).__name__}: {exc}") from exc
    _recompute_pool_indices(recorded["forward"], recorded["backward"])
    return _describe(recorded["forward"], recorded["backward"], names_p, names_b,
                     len(inputs), len(targets))


def _describe(fw, bw, names_p, names_b, n_in, n_tg) -> JointGraphs:
    fw_in = [n.name for n in _placeholders(fw)]
    if len(fw_in) != len(names_p) + len(names_b) + n_in + n_tg:
        raise FrontendError(f"the forward graph has {len(fw_in)} inputs, expected "
                            f"{len(names_p) + len(names_b) + n_in + n_tg}")
    fw_out = _output_args(fw)
    bw_in = [n.name for n in _placeholders(bw)]
    saved = [getattr(a, "name", None) for a in fw_out[1:]]
    # default partition: the backward's inputs are the forward's saved outputs (same names,
    # same order) and then the loss's gradient; more forward outputs would be mutated
    # buffers, which a training step here does not carry back
    if saved != bw_in[:-1] or len(bw_in) != len(saved) + 1:
        raise FrontendError("the forward graph's outputs are not (loss, saved activations "
                            f"of the backward): forward returns {saved}, backward takes "
                            f"{bw_in} (a forward that updates buffers, such as batch norm in "
                            "training mode, is not supported)")
    bw_out = _output_args(bw)
    grads = {}
    for i, name in enumerate(names_p):
        if bw_out[i] is None:
            raise FrontendError(f"parameter {name!r} gets no gradient from the loss")
        grads[name] = i
    _keep_outputs(bw, [bw_out[i] for i in grads.values()])
    for gm in (fw, bw):
        _lift_scalar_inputs(gm)
    grads = {name: i for i, name in enumerate(grads)}
    user = fw_in[len(names_p) + len(names_b):]
    return JointGraphs(fw, bw, names_p, names_b, fw_in, user[:n_in], user[n_in:],
                       bw_in[:-1], bw_in[-1], grads)


def _keep_outputs(gm: torch.fx.GraphModule, outs: list) -> None:
    """Make `gm` return the tuple `outs` (drops the gradients of non-parameters)."""
    node = gm.graph.find_nodes(op="output")[0]
    node.args = (tuple(outs),)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def _lift_scalar_inputs(gm: torch.fx.GraphModule) -> None:
    """Give every 0-dim placeholder the shape (1,) and view it back to () for its users:
    the host writes inputs of at least one dimension (a scalar input is the loss's
    gradient, or a saved scalar)."""
    for ph in list(gm.graph.find_nodes(op="placeholder")):
        val = ph.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            continue
        with gm.graph.inserting_after(ph):
            view = gm.graph.call_function(torch.ops.aten.view.default, (ph, []))
        ph.replace_all_uses_with(view, delete_user_cb=lambda user, v=view: user is not v)
        view.meta["val"] = val
        ph.meta["val"] = val.reshape(1)
    gm.recompile()


def _recompute_pool_indices(fw: torch.fx.GraphModule, bw: torch.fx.GraphModule) -> None:
    """max_pool2d's saved indices, recomputed in the backward from the pooled input (which
    the backward takes anyway) rather than saved: the fabric does not materialize integer
    indices (`lowering.backward_pool`). The graphs stay equivalent: the recomputed indices
    are the saved ones."""
    aten = torch.ops.aten
    dropped = set()
    for node in list(bw.graph.find_nodes(op="call_function",
                                         target=aten.max_pool2d_with_indices_backward.default)):
        grad, x, kernel, stride, padding, dilation, ceil_mode, saved = node.args
        if saved.op != "placeholder":
            continue
        with bw.graph.inserting_before(node):
            pool = bw.graph.call_function(aten.max_pool2d_with_indices.default,
                                          (x, kernel, stride, padding, dilation, ceil_mode))
            indices = bw.graph.call_function(operator.getitem, (pool, 1))
        pool.meta["val"] = (saved.meta["val"], saved.meta["val"])
        indices.meta["val"] = saved.meta["val"]
        node.args = (grad, x, kernel, stride, padding, dilation, ceil_mode, indices)
        if not saved.users:
            dropped.add(saved.name)
            bw.graph.erase_node(saved)
    if dropped:
        out = fw.graph.find_nodes(op="output")[0]
        kept = [a for a in out.args[0] if getattr(a, "name", None) not in dropped]
        out.args = (tuple(kept),)
        fw.graph.eliminate_dead_code()
        fw.recompile()
        bw.recompile()
