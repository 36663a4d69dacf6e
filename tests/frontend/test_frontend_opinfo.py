"""Per-op checks from PyTorch's OpInfo database: for every op family the lowering claims, the
first fp32 sample inputs that fit a small fabric run through `frontend.compile` (the sample's
first tensor as the model input, its other tensors as constants of the model) and are
compared with eager PyTorch under assert_close's fp32 tolerances."""

import pytest
import torch

import frontend
from tests.frontend.models import CONFIG

op_db = pytest.importorskip("torch.testing._internal.common_methods_invocations").op_db

# OpInfo name -> samples to run (the first ones that fit), chosen to cover each lowering rule
CLAIMED = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "nn.functional.relu": 1, "softmax": 1,
    "nn.functional.layer_norm": 1, "mm": 1, "addmm": 1, "bmm": 1, "mean": 1, "sum": 1,
    "nn.functional.max_pool2d": 1, "nn.functional.avg_pool2d": 1, "nn.functional.conv2d": 1,
    "nn.functional.embedding": 1, "permute": 1, "transpose": 1, "reshape": 1, "expand": 1,
    "sigmoid": 1, "rsqrt": 1, "sqrt": 1, "nn.functional.gelu": 2, "nn.functional.silu": 1,
    "exp": 1, "tanh": 1,
}
MAX_ELEMENTS = 500
# which positional argument of (input, *args) is the model's runtime input (default 0):
# an embedding's indices are its input, its table a weight
RUNTIME_ARG = {"nn.functional.embedding": 1}
VARIANTS = ("", "default", "no_rounding_mode")
RAN, PASSED = [], []


class OpModule(torch.nn.Module):
    """op(*positional, **kwargs) with positional[runtime] as the input and the other tensor
    arguments as buffers (constants of the model)."""

    def __init__(self, op, positional, kwargs, runtime):
        super().__init__()
        self.op, self.kwargs, self.runtime = op, kwargs, runtime
        self.is_const = [isinstance(a, torch.Tensor) and i != runtime
                         for i, a in enumerate(positional)]
        self.plain = [None if c or i == runtime else a
                      for i, (a, c) in enumerate(zip(positional, self.is_const))]
        for i, (a, c) in enumerate(zip(positional, self.is_const)):
            if c:
                self.register_buffer(f"c{i}", a.clone())

    def forward(self, x):
        args = [x if i == self.runtime else getattr(self, f"c{i}") if c else a
                for i, (a, c) in enumerate(zip(self.plain, self.is_const))]
        return self.op(*args, **self.kwargs)


def _fits(sample) -> bool:
    tensors = [sample.input, *[a for a in sample.args if isinstance(a, torch.Tensor)]]
    return (all(isinstance(t, torch.Tensor) and 0 < t.numel() <= MAX_ELEMENTS for t in tensors)
            and sample.input.dim() >= 1)


def _samples(name):
    info = next(o for o in op_db if o.name == name and o.variant_test_name in VARIANTS)
    for s in info.sample_inputs("cpu", torch.float32):
        if _fits(s):
            yield info, s


@pytest.mark.parametrize("name", sorted(CLAIMED))
def test_opinfo_sample(name):
    ran = 0
    runtime = RUNTIME_ARG.get(name, 0)
    for info, sample in _samples(name):
        positional = [sample.input, *sample.args]
        model = OpModule(info.op, positional, sample.kwargs, runtime)
        x = positional[runtime]
        try:
            cm = frontend.compile(model, (x,), config=CONFIG)
        except frontend.UnsupportedOpError:
            continue  # a variant outside what the rule covers (e.g. padded max pooling)
        RAN.append(name)
        got = cm(x)
        torch.testing.assert_close(got, model(x))
        PASSED.append(name)
        ran += 1
        if ran == CLAIMED[name]:
            break
    assert ran == CLAIMED[name], f"no sample of {name} could be lowered"


def test_opinfo_summary():
    print(f"\nOpInfo samples: {len(RAN)} ran, {len(PASSED)} passed "
          f"({len(set(PASSED))} ops)")
    assert len(PASSED) == len(RAN)
