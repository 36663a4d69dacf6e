"""build(): table buckets, SRAM allocation and route masks (no engine run, no compile)."""

import numpy as np
import pytest

from fabric import FabricConfig, Port, Program, Rect, Tile, build, program_table_rows
from fabric import instructions as ins
from fabric.build import MIN_BUCKET, bucket
from fabric.kernels import build_gemm_summa
from tests.fabric.programs import GRID4, ROW, Routes, l_path, pe, receiver_tile, sender_tile


def _n_instr_tile(n: int) -> Tile:
    t = Tile("t")
    t.local_task("main", [ins.set_reg("r", i) for i in range(n)])
    return t


@pytest.mark.parametrize(("n", "size"), [(1, 64), (64, 64), (65, 128), (200, 256)])
def test_bucket_is_next_power_of_two(n, size):
    assert MIN_BUCKET == 64
    assert bucket(n) == size


@pytest.mark.parametrize(("n_code", "rows"), [(10, 64), (63, 64), (64, 128)])
def test_instruction_table_is_padded_to_a_bucket(n_code, rows):
    # each task gets an implicit RET row: n_code + 1 rows
    prog = Program(ROW)
    prog.place(_n_instr_tile(n_code), pe(0, 0))
    tables, info = build(ROW, prog)
    assert info.num_instructions == n_code + 1
    assert tables.instr.shape[0] == rows
    assert tables.dsd.shape[0] == MIN_BUCKET


def test_symbols_are_packed_and_sram_use_is_reported():
    t = Tile("t")
    t.symbol("a", "f32", 10)
    t.symbol("b", "i32", (3, 4))
    t.symbol("c", "u32", 1)
    prog = Program(GRID4)
    prog.place(t, Rect(1, 1, 2, 3))
    _, info = build(GRID4, prog)
    syms = info.symbols[0]
    assert [syms[n].address for n in "abc"] == [0, 10, 22]
    assert syms["b"].shape == (3, 4)
    expected = np.zeros((4, 4), np.int64)
    expected[1:3, 1:4] = 23
    np.testing.assert_array_equal(info.sram_used_words, expected)


def test_full_sram_fits_exactly():
    t = Tile("t")
    t.symbol("a", "f32", ROW.sram_words - 1)
    t.symbol("b", "f32", 1)
    prog = Program(ROW)
    prog.place(t, pe(0, 0))
    _, info = build(ROW, prog)
    assert info.sram_used_words.max() == ROW.sram_words


def test_route_masks_follow_the_routes():
    prog = Program(GRID4)
    prog.place(sender_tile(3, 4), pe(0, 0))
    prog.place(receiver_tile(3, 4), pe(2, 1))
    Routes().add_path(3, l_path((0, 0), (2, 1), row_first=True)).apply(prog)
    tables, _ = build(GRID4, prog)
    tx = np.asarray(tables.tx_mask)
    rx = np.asarray(tables.rx_mask)
    bit = np.uint32(1 << 3)
    assert rx[0, 0, Port.RAMP] == bit and tx[0, 0, Port.EAST] == bit
    assert rx[0, 1, Port.WEST] == bit and tx[0, 1, Port.SOUTH] == bit
    assert rx[1, 1, Port.NORTH] == bit and tx[1, 1, Port.SOUTH] == bit
    assert rx[2, 1, Port.NORTH] == bit and tx[2, 1, Port.RAMP] == bit
    # nothing else routes color 3, and every PE accepts a color from at most one port
    assert int((tx & bit).astype(bool).sum()) == 4
    assert int((rx & bit).astype(bool).sum()) == 4


def test_task_ids_data_tasks_take_their_color():
    t = Tile("t")
    t.data_task("d5", 5, [])
    t.local_task("first", [])
    t.local_task("second", [])
    prog = Program(ROW)
    prog.place(t, pe(0, 3))
    prog.route(pe(0, 2), 5, Port.RAMP, Port.EAST)
    prog.route(pe(0, 3), 5, Port.WEST, Port.RAMP)
    _, info = build(ROW, prog)
    assert info.task_ids[0] == {"d5": 5, "first": ROW.num_colors, "second": ROW.num_colors + 1}


@pytest.mark.parametrize("n_code", [10, 64, 300])
def test_program_table_rows_are_builds_without_building(n_code):
    """program_table_rows (what the frontend sizes the engine by) gives the bucketed rows
    build gives, from the tiles' code alone: instructions and DSDs of every tile."""
    prog = Program(ROW)
    prog.place(_n_instr_tile(n_code), pe(0, 0))
    tables, _ = build(ROW, prog)
    assert program_table_rows(ROW, prog) == (tables.instr.shape[0], tables.dsd.shape[0])
    config = FabricConfig.small(4, 4)
    gemm = build_gemm_summa(config, Rect(0, 0, 3, 4), 12, 8 * n_code // 10, 16).program
    tables, _ = build(config, gemm)
    assert program_table_rows(config, gemm) == (tables.instr.shape[0], tables.dsd.shape[0])
