"""FabricConfig presets and validation (no engine run, no compile)."""

import pytest

from fabric import FabricConfig


def test_wse2_preset_matches_public_figures():
    """docs/engine.md "Machine figures": `--fabric-dims=757,996` is width x height."""
    cfg = FabricConfig.wse2()
    assert (cfg.cols, cfg.rows) == (757, 996)
    assert (cfg.usable_cols, cfg.usable_rows) == (750, 994)
    assert cfg.clock_hz == 850e6
    assert cfg.sram_bytes == 48 * 1024 and cfg.sram_words == 12 * 1024
    assert cfg.num_colors == 24
    assert cfg.num_task_ids == 31 and cfg.num_local_tasks == 7  # task ids 0..30
    assert cfg.queue_depth == 4 and cfg.hop_latency == 1
    assert cfg.num_pes == 757 * 996
    # SIMD widths of the WSE-2 table (DESIGN.md section 1)
    assert cfg.simd_width("add", "f32") == 2
    assert cfg.simd_width("sub", "f32") == 2
    assert cfg.simd_width("mov", "f32") == 2
    assert cfg.simd_width("max", "f32") == 1  # fmaxs has no SIMD mode on WSE-2
    assert cfg.simd_width("max", "f16") == 1
    assert cfg.simd_width("cvt", "f16") == 1  # fh2s / fs2h
    assert cfg.simd_width("add", "i32") == cfg.simd_width("shift", "i32") == 1
    assert cfg.simd_width("fma", "f32") == 1
    assert cfg.simd_width("mul", "f32") == 1
    assert cfg.simd_width("fma", "f16") == 4
    assert cfg.simd_width("mul_acc32", "f16") == 2


def test_wse3_preset_matches_public_figures():
    cfg = FabricConfig.wse3()
    assert (cfg.cols, cfg.rows) == (762, 1172)
    assert (cfg.usable_cols, cfg.usable_rows) == (755, 1170)
    assert cfg.clock_hz == 1.1e9
    assert cfg.generation == "wse3"
    assert cfg.simd_width("add", "f32") == 4
    assert cfg.simd_width("mov", "f32") == 4
    assert cfg.simd_width("max", "f32") == 4 and cfg.simd_width("max", "f16") == 8
    assert cfg.simd_width("cvt", "f16") == 4
    assert cfg.simd_width("add", "i32") == cfg.simd_width("shift", "i32") == 1
    assert cfg.simd_width("fma", "f16") == 8
    assert cfg.simd_width("fma", "f32") == 1
    assert cfg.simd_width("mul", "f32") == 1


@pytest.mark.parametrize("generation", ["wse2", "wse3"])
def test_small_preset(generation):
    cfg = FabricConfig.small(3, 5, generation=generation)
    assert (cfg.rows, cfg.cols) == (3, 5)
    assert (cfg.usable_rows, cfg.usable_cols) == (3, 5)
    assert cfg.num_pes == 15
    assert cfg.clock_hz == 850e6
    preset = FabricConfig.wse2() if generation == "wse2" else FabricConfig.wse3()
    assert cfg.simd_table == preset.simd_table


def test_config_is_hashable_and_compares_by_value():
    a, b = FabricConfig.small(4, 4), FabricConfig.small(4, 4)
    assert a == b and hash(a) == hash(b)
    assert a != a.replace(hop_latency=2)
    assert len({a, b, a.replace(queue_depth=5)}) == 2
    with pytest.raises(AttributeError):
        a.rows = 5  # frozen


def test_cycles_to_seconds_uses_the_clock():
    assert FabricConfig.small(1, 1).cycles_to_seconds(850) == pytest.approx(1e-6)
    assert FabricConfig.wse3().cycles_to_seconds(1.1e9) == pytest.approx(1.0)


def test_unknown_simd_width_lists_known_ones():
    with pytest.raises(KeyError, match="no SIMD width for div/f32; known: .*add/f32"):
        FabricConfig.small(1, 1).simd_width("div", "f32")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (dict(hop_latency=4), "hop_latency"),  # == queue_depth (4)
        (dict(hop_latency=5, queue_depth=3), "hop_latency"),
        (dict(hop_latency=0), "hop_latency"),
        (dict(queue_depth=0), "queue_depth"),
        (dict(num_colors=0), "num_colors"),
        (dict(num_colors=32), "num_colors"),
        (dict(num_task_ids=24), "num_task_ids"),  # must exceed num_colors
        (dict(sram_bytes=4 * 1024 + 2), "sram_bytes"),
        (dict(deadlock_window=2), "deadlock_window"),
    ],
)
def test_bad_config_raises_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        FabricConfig.small(2, 2, **changes)


def test_zero_rows_is_rejected():
    with pytest.raises(ValueError, match="rows=0"):
        FabricConfig.small(0, 4)
    with pytest.raises(ValueError, match="cols=0"):
        FabricConfig.small(4, 0)


def test_bad_generation_is_rejected():
    with pytest.raises(ValueError, match="generation"):
        FabricConfig.small(2, 2, generation="wse1")


def test_presets_accept_overrides():
    cfg = FabricConfig.wse2(queue_depth=6, hop_latency=3)
    assert (cfg.queue_depth, cfg.hop_latency, cfg.rows) == (6, 3, 996)
    with pytest.raises(ValueError, match="hop_latency"):
        FabricConfig.wse2(queue_depth=2, hop_latency=2)
