"""Stream chains (`fabric.kernels.streams`): elementwise ops on stacked tiles, each tile's
output streamed into the next as it is computed.

Tolerance: bit-exact. Every stage runs its standalone kernel's code (one definition), so
the chain gives the words of the standalone kernels run one after another, and of their
numpy references (each op rounding once to the storage dtype, as PyTorch's elementwise
ops). Cycles: the model (`stream_chain_cycles`) exactly for stages of one op, within 5 %
where a stage has ops on memory after its first.
"""

import numpy as np
import pytest

from fabric import FabricConfig, Rect
from fabric.host import Simulator
from fabric.kernels import (
    build_affine,
    build_binary_math,
    build_broadcast_op,
    build_clamp,
    build_elementwise,
    build_extremum,
    build_gelu,
    build_map,
    build_modulo,
    build_unary,
)
from fabric.kernels.base import run_kernel
from fabric.kernels.stream_stages import (
    affine_stage,
    binary_math_stage,
    binary_stage,
    broadcast_stage,
    clamp_stage,
    elu_stage,
    extremum_stage,
    gelu_stage,
    map_stage,
    modulo_stage,
    pow_stage,
    unary_stage,
)
from fabric.kernels.streams import (
    build_stream_chain,
    read_stage,
    stream_chain_reference,
    stream_colors_needed,
)
from tests.kernels.kernel_cases import CONFIG, normal, rng

UNEVEN = Rect(1, 2, 3, 5)  # 20 x 23: blocks of 7/6 rows by 5/4 columns, four classes
MIXED = [map_stage("add", 1.5), affine_stage("row"), binary_stage("sub"),
         broadcast_stage("mul", "col"), clamp_stage(-0.75, 0.5), map_stage("relu")]


def _inputs(stages, m, n, seed=3):
    gen = rng(seed)
    values = {"x": normal(gen, m, n)}
    for k, stage in enumerate(stages):
        for key in stage.inputs:
            values[f"{k}.{key}"] = normal(gen, *stage.input_shape(m, n))
    return values


def _standalone(config, rect, m, n, stage, x, own, dtype):
    """The stage's standalone kernel on `rect`, run on x."""
    kind = stage.name
    if kind in ("relu", "add", "mul", "max", "min") and not stage.inputs:
        scalar = {"add": 1.5}.get(kind, 0.0)
        return run_kernel(build_map(config, rect, m, n, kind, scalar, dtype=dtype),
                          {"x": x}).output
    if kind == "affine":
        vector = "row" if own["s"].shape == (n,) else "full"
        return run_kernel(build_affine(config, rect, m, n, vector, dtype=dtype),
                          {"x": x, **own}).output
    if kind == "clamp":
        return run_kernel(build_clamp(config, rect, m, n, -0.75, 0.5, dtype=dtype),
                          {"x": x}).output
    if kind == "sub":
        return run_kernel(build_elementwise(config, rect, m, n, "sub", dtype=dtype),
                          {"x": x, **own}).output
    op, vector = kind.split("_")
    return run_kernel(build_broadcast_op(config, rect, m, n, op, vector, dtype=dtype),
                      {"x": x, **own}).output


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16", "cb16"])
def test_a_chain_gives_the_words_of_its_kernels_run_apart(dtype):
    """Six ops, two chains of three on 2 x 5 tiles of small(8, 8) (four block classes):
    every stage's z equal bit for bit to its standalone kernel run on the previous stage's
    words, and the output to numpy."""
    rect, m, n = Rect(0, 2, 2, 5), 21, 23
    x = _inputs(MIXED, m, n)["x"]
    for first in range(0, len(MIXED), 3):
        stages = MIXED[first:first + 3]
        values = {**_inputs(stages, m, n, seed=first), "x": x}
        kernel = build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype)
        sim = Simulator(CONFIG, kernel.program)
        kernel.load(sim, values)
        kernel.launch(sim)
        sim.run(max_cycles=100_000)
        words = x
        for k, stage in enumerate(stages):
            own = {key: values[f"{k}.{key}"] for key in stage.inputs}
            words = _standalone(CONFIG, rect, m, n, stage, words, own, dtype)
            np.testing.assert_array_equal(read_stage(sim, kernel, k), words)
        np.testing.assert_array_equal(kernel.read(sim), stream_chain_reference(
            x, stages, values, dtype))
        x = words


@pytest.mark.parametrize("rows, stages, block", [(1, 4, 4), (2, 4, 16), (4, 2, 16),
                                                  (2, 3, 5)])
def test_cycles_match_the_model_and_a_stage_costs_a_block(rows, stages, block):
    """Stages of one op: the model exactly. Every stage after the second adds one block and
    a hop per row (the last block's way down), not the tile's whole contents: the crossing
    of every block over a tile's bottom edge, which a move between the tiles pays per
    stage, is paid once."""
    config = FabricConfig.small(8, 8)
    m = rows * block
    chain = [map_stage("relu"), map_stage("mul", 0.5), map_stage("add", -1.0),
             map_stage("relu")][:stages]
    cycles = []
    for k in range(2, stages + 1):
        kernel = build_stream_chain(config, Rect(0, 0, rows, 1), m, 1, chain[:k])
        values = _inputs(chain[:k], m, 1)
        result = run_kernel(kernel, values)
        np.testing.assert_array_equal(result.output,
                                      stream_chain_reference(values["x"], chain[:k], values))
        assert result.cycles == kernel.model_cycles
        cycles.append(result.cycles)
    for before, after in zip(cycles, cycles[1:]):
        assert after - before == block + (rows + 1) * config.hop_latency + 2


def test_uneven_blocks_and_ops_on_memory_within_five_percent():
    """Four block classes (21 x 23 on 2 x 5: 11 / 10 rows by 5 / 4 columns); the affine's
    add runs on memory after its product came in."""
    stages = [map_stage("add", 1.0), affine_stage("row"), map_stage("relu")]
    kernel = build_stream_chain(CONFIG, Rect(0, 2, 2, 5), 21, 23, stages)
    values = _inputs(stages, 21, 23)
    result = run_kernel(kernel, values)
    np.testing.assert_array_equal(result.output,
                                  stream_chain_reference(values["x"], stages, values))
    assert abs(result.cycles - kernel.model_cycles) <= 0.05 * kernel.model_cycles


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_math_stages_give_the_words_of_build_unary(dtype):
    """tanh, then exp (fp32 math on every dtype): the block taken into memory as it arrives
    (16-bit: widened as it arrives), the function's code as `build_unary` runs it. Words
    equal bit for bit to the standalone kernels' and to the code's numpy mirror
    (`mathlib_numpy.emulate`); cycles within 5 % of the model."""
    rect, m, n = Rect(0, 2, 2, 5), 21, 23
    stages = [unary_stage("tanh"), unary_stage("exp")]
    x = normal(rng(5), m, n)
    kernel = build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype)
    result = run_kernel(kernel, {"x": x})
    words = x
    for fn in ("tanh", "exp"):
        words = run_kernel(build_unary(CONFIG, rect, m, n, fn, dtype=dtype), {"x": words}).output
    np.testing.assert_array_equal(result.output, words)
    np.testing.assert_array_equal(stream_chain_reference(x, stages, {}, dtype), words)
    assert abs(result.cycles - kernel.model_cycles) <= 0.05 * kernel.model_cycles
    with pytest.raises(ValueError, match="unary: fn must be one of"):
        unary_stage("gelu")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_stages_with_inputs_of_their_own_give_their_kernels_words(dtype):
    """atan2 with its abscissa b written into its tile, then remainder by 0.7 and fmod by a
    tensor d: each as its standalone kernel (`build_binary_math`, `build_modulo`) on the
    previous one's words, bit for bit; cycles within 1 % of the model (each block's
    function timed where it lies, the longest blocks first)."""
    rect, m, n = Rect(0, 2, 2, 5), 21, 23
    stages = [binary_math_stage("atan2"), modulo_stage("remainder", 0.7), modulo_stage("fmod")]
    gen = rng(9)
    x, b, d = normal(gen, m, n), normal(gen, m, n), normal(gen, m, n) + 3
    values = {"x": x, "0.b": b, "2.d": d}
    kernel = build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype)
    result = run_kernel(kernel, values)
    words = run_kernel(build_binary_math(CONFIG, rect, m, n, "atan2", dtype=dtype),
                       {"a": x, "b": b}).output
    words = run_kernel(build_modulo(CONFIG, rect, m, n, "remainder", 0.7, dtype=dtype),
                       {"x": words}).output
    words = run_kernel(build_modulo(CONFIG, rect, m, n, "fmod", dtype=dtype),
                       {"x": words, "d": d}).output
    np.testing.assert_array_equal(result.output, words)
    np.testing.assert_array_equal(stream_chain_reference(x, stages, values, dtype), words)
    assert abs(result.cycles - kernel.model_cycles) <= 0.01 * kernel.model_cycles
    with pytest.raises(ValueError, match="binary math: fn must be one of"):
        binary_math_stage("max")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_samples_stream_through_with_no_host_between(dtype):
    """Four samples one after another, each PE re-arming itself: every sample's words those
    of the chain run on it alone (and numpy's); each sample after the first costs less than
    the first's latency (they overlap in the chain) and at least the period's bound; the
    whole within 1.00x to 1.20x of the model (module docstring, "Samples")."""
    rect, m, n = Rect(0, 2, 2, 5), 21, 23
    stages = [map_stage("add", 1.0), affine_stage("row"), binary_stage("sub")]
    values = _inputs(stages, m, n)
    x = np.stack([normal(rng(20 + s), m, n) for s in range(4)])
    cycles = []
    for samples in (1, 2, 4):
        kernel = build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype, samples=samples)
        result = run_kernel(kernel, {**values, "x": x[0] if samples == 1 else x[:samples]})
        want = stream_chain_reference(x[:samples], stages, values, dtype)
        np.testing.assert_array_equal(result.output, want[0] if samples == 1 else want)
        assert kernel.model_cycles <= result.cycles + 1 <= 1.20 * kernel.model_cycles + 1
        cycles.append(result.cycles)
    one, two, four = cycles
    assert (four - two) / 2 < one  # the next sample enters while the one before is in flight
    alone = build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype)
    sim = Simulator(CONFIG, alone.program)
    alone.load(sim, {**values, "x": x[3]})
    alone.launch(sim)
    sim.run(max_cycles=100_000)
    np.testing.assert_array_equal(run_kernel(
        build_stream_chain(CONFIG, rect, m, n, stages, dtype=dtype, samples=4),
        {**values, "x": x}).output[3], alone.read(sim))
    with pytest.raises(ValueError, match="samples must be a whole number >= 1"):
        build_stream_chain(CONFIG, rect, m, n, stages, samples=0)
    kernel = build_stream_chain(CONFIG, rect, m, n, stages, samples=2)
    with pytest.raises(ValueError, match=r"'x' has shape \(21, 23\), expected \(2, 21, 23\)"):
        kernel.load(Simulator(CONFIG, kernel.program), {**values, "x": x[0]})


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_activation_stages_give_their_kernels_words(dtype):
    """gelu (erf form) then maximum with a tensor of its own, and elu, pow, leaky_relu,
    gelu (tanh form) in a chain: the first pair equal bit for bit to `build_gelu` and
    `build_extremum` run apart; all to the code's numpy mirror; the model exact for the
    pair, within 1 % for the four (middle stages with ops on memory)."""
    rect, m, n = Rect(0, 2, 2, 5), 21, 23
    gen = rng(13)
    x, other = normal(gen, m, n), normal(gen, m, n)
    pair = [gelu_stage("none"), extremum_stage("maximum")]
    kernel = build_stream_chain(CONFIG, rect, m, n, pair, dtype=dtype)
    result = run_kernel(kernel, {"x": x, "1.y": other})
    words = run_kernel(build_gelu(CONFIG, rect, m, n, dtype, approximate="none"),
                       {"x": x}).output
    words = run_kernel(build_extremum(CONFIG, rect, m, n, "maximum", dtype=dtype),
                       {"x": words, "z": other}).output
    np.testing.assert_array_equal(result.output, words)
    assert result.cycles == kernel.model_cycles
    chain = [elu_stage(1.5), pow_stage(3.0), extremum_stage("leaky_relu", 0.1),
             gelu_stage("tanh")]
    kernel = build_stream_chain(FabricConfig.small(8, 8), Rect(0, 0, 1, 5), 7, 23, chain,
                                dtype=dtype)
    result = run_kernel(kernel, {"x": x[:7]})
    np.testing.assert_array_equal(result.output,
                                  stream_chain_reference(x[:7], chain, {}, dtype))
    assert abs(result.cycles - kernel.model_cycles) <= 0.01 * kernel.model_cycles
    with pytest.raises(ValueError, match="extremum: op must be"):
        extremum_stage("leaky_relu")


def test_one_stage_is_the_standalone_kernel():
    kernel = build_stream_chain(CONFIG, UNEVEN, 20, 23, [map_stage("relu")])
    values = _inputs([map_stage("relu")], 20, 23)
    result = run_kernel(kernel, values)
    standalone = build_map(CONFIG, UNEVEN, 20, 23, "relu")
    np.testing.assert_array_equal(result.output, run_kernel(standalone, values).output)
    assert result.cycles == kernel.model_cycles == standalone.model_cycles
    # three samples through the one stage: computed, copied out, re-armed; the model exact
    xs = np.stack([values["x"], -values["x"], 2 * values["x"]])
    looped = build_stream_chain(CONFIG, UNEVEN, 20, 23, [map_stage("relu")], samples=3)
    result = run_kernel(looped, {"x": xs})
    for sample, x in zip(result.output, xs):
        np.testing.assert_array_equal(sample, run_kernel(standalone, {"x": x}).output)
    assert result.cycles == looped.model_cycles


def test_colors_given_are_used_and_checked():
    stages = [map_stage("relu"), map_stage("mul", 2.0), map_stage("relu")]
    needed = stream_colors_needed(3, 2)
    assert needed == 5  # two sets of two block rows, one turn
    colors = list(range(10, 10 + needed))
    kernel = build_stream_chain(CONFIG, Rect(0, 0, 2, 3), 6, 6, stages, colors=colors)
    assert {r.color for r in kernel.program.routes} == set(colors)
    values = _inputs(stages, 6, 6)
    np.testing.assert_array_equal(run_kernel(kernel, values).output,
                                  stream_chain_reference(values["x"], stages, values))
    with pytest.raises(ValueError, match="needs 5 distinct colors"):
        build_stream_chain(CONFIG, Rect(0, 0, 2, 3), 6, 6, stages, colors=colors[:4])


def test_bad_chains_are_refused_with_what_is_wrong():
    relu = map_stage("relu")
    with pytest.raises(ValueError, match="no stages"):
        build_stream_chain(CONFIG, Rect(0, 0, 2, 2), 4, 4, [])
    with pytest.raises(ValueError, match=r"need rows 2\.\.9 .* small\(8,8\) has 8 x 8"):
        build_stream_chain(CONFIG, Rect(2, 0, 4, 2), 8, 8, [relu, relu])
    tall = FabricConfig.small(32, 2)
    with pytest.raises(ValueError, match="route on 22 colors .* use a tile of fewer rows"):
        build_stream_chain(tall, Rect(0, 0, 10, 1), 10, 1, [relu, relu, relu])
    with pytest.raises(ValueError, match="stage 'relu' needs .* above the 48 KiB"):
        build_stream_chain(CONFIG, Rect(0, 0, 1, 1), 128, 128, [relu, relu])
    with pytest.raises(ValueError, match="map: op must be"):
        map_stage("tanh")
    kernel = build_stream_chain(CONFIG, Rect(0, 0, 2, 2), 4, 4, [relu, binary_stage("add")])
    sim = Simulator(CONFIG, kernel.program)
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"stage 1 \(add\): input 'y' is missing"):
        kernel.load(sim, {"x": x})
    with pytest.raises(ValueError, match=r"input 'y' has shape \(4,\), expected \(4, 4\)"):
        kernel.load(sim, {"x": x, "1.y": np.zeros(4)})
    with pytest.raises(ValueError, match=r"inputs \['0.y'\] are not inputs of the chain"):
        kernel.load(sim, {"x": x, "0.y": x, "1.y": x})
