"""What the host writes for a user input (`frontend.host_writes`): each element once per
PE and slot format, packed, then the PEs' local copies into the operand's slots. Checked
against numpy (the words of the operand's own layout), and through a convolution whose
windows hold an input element in several slots of a PE: eager PyTorch's output in both
modes and in the one fabric program with the host link, the link charged for the packed
words only."""

import numpy as np
import pytest
import torch
from torch import nn

import frontend
from fabric import FabricConfig, host_io_cycles
from fabric.kernels import WordMap
from fabric.program import Rect
from frontend.host_writes import PACKED, packed_map, unpack_plan

CONFIG = FabricConfig.small(4, 4)


def _operand_map() -> WordMap:
    """12 elements on a 2 x 2 tile at (1, 1): a 32-bit symbol with duplicates and gaps
    (-1), a bf16 one holding some of the same elements."""
    a = np.array([[[3, 1, 3, -1, 1, 0], [2, 2, 2, 2, -1, -1]],
                  [[4, 5, 6, 7, 4, 5], [-1, -1, -1, -1, -1, -1]]])
    h = np.array([[[0, 0, 9], [8, 11, 8]], [[10, 4, -1], [-1, 1, -1]]])
    return WordMap((3, 4), Rect(1, 1, 2, 2), {"a": a, "h": h}, {"h": "bf16"})


def test_the_packed_map_holds_each_element_once_per_pe_and_format_from_slot_0():
    dst = _operand_map()
    packed = packed_map(dst)
    assert packed.dtypes == {PACKED + "f32": "f32", PACKED + "bf16": "bf16"}
    for name, fmt in (("a", "f32"), ("h", "bf16")):
        slots, got = dst.symbols[name], packed.symbols[PACKED + fmt]
        for r in range(2):
            for c in range(2):
                want = sorted(set(slots[r, c][slots[r, c] >= 0].tolist()))
                n = len(want)
                assert got[r, c, :n].tolist() == want and (got[r, c, n:] == -1).all()
    # the widest PE: 4 distinct f32 elements (4..7) where the operand takes 6 slots
    assert packed.words(PACKED + "f32") == 4 and packed.widest_sram_words == 4


def test_unpacking_fills_every_slot_of_the_operand_with_local_copies():
    """The PEs' copies from the packed words give the operand's words bit for bit (bf16
    values rounded once, on the host's write, as a write of the operand would)."""
    dst = _operand_map()
    plan = unpack_plan(CONFIG, dst)
    assert plan is not None and plan.remote_words == 0 and plan.src.same_placement(packed_map(dst))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    words, cycles, _ = plan.run(plan.src.to_words(x))
    want = dst.to_words(x)
    assert cycles > 0 and words.keys() == want.keys()
    for k in want:
        np.testing.assert_array_equal(words[k], want[k])


def test_a_layout_with_each_element_once_per_pe_is_written_as_it_is():
    dense = WordMap((2, 4), Rect(0, 0, 1, 2), {"x": np.arange(8).reshape(1, 2, 4)})
    assert unpack_plan(CONFIG, dense) is None


class Conv(nn.Module):
    """A 3 x 3 convolution of the model's input: its windows, the GEMM's rows, hold an
    input element in up to 9 slots of a PE."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.fixture(scope="module")
def conv():
    torch.manual_seed(0)
    model = Conv().eval()
    xs = [torch.randn(1, 2, 6, 6) for _ in range(3)]
    return model, xs, frontend.compile(model, (xs[0],), FabricConfig.small(5, 5))


def test_a_convolutions_input_is_written_packed_and_unpacked_on_its_pes(conv):
    model, xs, cm = conv
    torch.testing.assert_close(cm(xs[0]), model(xs[0]))  # fp32: assert_close's defaults
    (p, src), = [(p, s) for p in cm.prepared for ss in p.sources.values() for s in ss
                 if s.plan is None]
    assert src.unpack is not None and src.written is src.unpack.src
    (t,), = [[t for t in r.transfers if t.host] for r in cm.last.results
             if r.name == p.stage.name]
    link = host_io_cycles(cm.config, p.rect, src.written.widest_sram_words)
    assert t.link_cycles == link < host_io_cycles(cm.config, p.rect, src.dst.widest_sram_words)
    assert t.local > 0 and t.cycles == link + t.local
    seq = frontend.compile(model, (xs[0],), cm.config, mode="sequential")
    torch.testing.assert_close(seq(xs[1]), model(xs[1]))


def test_the_one_program_writes_the_packed_words_into_the_input_buffer(conv):
    """Three samples through the one program with the host link: the same words as with
    the link apart, the host's write of each taking the packed words' cycles."""
    _, xs, cm = conv
    apart = cm.one_program_stream([(x,) for x in xs], start="data")
    run = cm.one_program_stream([(x,) for x in xs], start="data", host_io=True)
    assert all(run.same_words(s, apart.words[s]) for s in range(3))
    program = cm.model_program(gated=True, input_buffers=True)
    (b,) = program.inputs
    src = cm.prepared[0].sources[b.operand][b.source]
    assert b.map.same_placement(src.unpack.src)
    writes = [end - first for (part, _, kind), (first, end) in run.host.items()
              if kind == "write"]
    p = next(p for p in cm.prepared if p.stage.name == b.consumer)
    assert writes == [host_io_cycles(cm.config, p.rect, b.map.widest_sram_words)] * 3
