"""Collectives (broadcast, reduce, allreduce, gather, scatter) against numpy and their cycle
models, and the fragment API other kernels build on.

Tolerances: every result is compared bit for bit. Broadcast, gather and scatter move words
unchanged; reductions run in a fixed order (chain from the far end, tree by the pairs of
`tree_schedule`) that the numpy references reproduce in float32; max and min are exact in
any order. Cycle counts equal the models exactly (every case here starts all PEs together,
where the models are exact).
"""

import math

import numpy as np
import pytest

from fabric import Program, Rect, Tile
from fabric import instructions as ins
from fabric.banks import read_pair_stalls
from fabric.kernels import collectives as co
from fabric.kernels.base import run_kernel
from tests.kernels.kernel_cases import (
    CONFIG,
    FULL,
    ODD,
    ROW_L2,
    check_cycles,
    normal,
    rng,
    run_exact,
)

COLUMN = Rect(0, 3, 8, 1)  # one column: a single line of 8 PEs

REDUCE_CASES = [  # rect, along, algo, n
    (FULL, "row", "chain", 16),
    (FULL, "row", "tree", 1),
    (FULL, "col", "tree", 16),
    (FULL, "rect", "chain", 4),
    (FULL, "rect", "tree", 4),
    (ODD, "row", "tree", 16),
    (ODD, "col", "chain", 5),
    (ODD, "rect", "chain", 16),
    (ODD, "rect", "tree", 3),
    (COLUMN, "col", "tree", 7),
]


def case_id(case):
    rect, along, algo, n = case
    return f"{rect.rows}x{rect.cols}-{along}-{algo}-n{n}"


@pytest.mark.parametrize("case", REDUCE_CASES, ids=case_id)
def test_reduce(case):
    rect, along, algo, n = case
    x = normal(rng(1), rect.rows, rect.cols, n)
    kernel = co.build_reduce(CONFIG, rect, n, along=along, algo=algo)
    run_exact(kernel, {"x": x}, co.reduce_reference(x, along, algo))


@pytest.mark.parametrize("case, op", [
    (REDUCE_CASES[0], "add"), (REDUCE_CASES[2], "max"), (REDUCE_CASES[4], "add"),
    (REDUCE_CASES[5], "min"), (REDUCE_CASES[7], "max"), (REDUCE_CASES[8], "add"),
], ids=lambda v: v if isinstance(v, str) else case_id(v))
def test_allreduce(case, op):
    rect, along, algo, n = case
    x = normal(rng(2), rect.rows, rect.cols, n)
    kernel = co.build_allreduce(CONFIG, rect, n, along=along, algo=algo, op=op)
    run_exact(kernel, {"x": x}, co.allreduce_reference(x, along, algo, op))


@pytest.mark.parametrize("along, algo, root", [
    ("row", "chain", "east"), ("col", "tree", "south"), ("rect", "tree", ("east", "south")),
])
def test_reduce_into_the_other_end(along, algo, root):
    x = normal(rng(3), ODD.rows, ODD.cols, 6)
    kernel = co.build_reduce(CONFIG, ODD, 6, along=along, algo=algo, root=root)
    run_exact(kernel, {"x": x}, co.reduce_reference(x, along, algo, root=root))


@pytest.mark.parametrize("along", ["row", "rect"])
def test_tree_wins_small_vectors_and_chain_wins_large_ones(along):
    """The models order the two algorithms (tree faster at n = 1, chain at n = 32) and the
    measured cycles, equal to the models, agree."""
    x = normal(rng(4), 8, 8, 32)
    measured = {}
    for n in (1, 32):
        for algo in ("chain", "tree"):
            kernel = co.build_reduce(CONFIG, FULL, n, along=along, algo=algo)
            result = run_exact(kernel, {"x": x[..., :n]},
                               co.reduce_reference(x[..., :n], along, algo))
            measured[n, algo] = (result.cycles, kernel.model_cycles)
    for n, faster in ((1, "tree"), (32, "chain")):
        slower = "chain" if faster == "tree" else "tree"
        assert measured[n, faster][1] < measured[n, slower][1]  # the model says so
        assert measured[n, faster][0] < measured[n, slower][0]  # and so does the fabric


def test_closed_forms_of_the_module_docstring():
    """T_chain = (2H + 1)(L - 1) + n + 4 and T_tree = (2^K - 1 + K) H + K (n + 2) + 3 for
    one line of L = 8 (H = 1), as the code-derived models give them."""
    for n in (1, 5, 16):
        chain = co.build_reduce(CONFIG, COLUMN, n, along="col", algo="chain")
        tree = co.build_reduce(CONFIG, COLUMN, n, along="col", algo="tree")
        assert chain.model_cycles == 3 * 7 + n + 4
        assert tree.model_cycles == (7 + 3) + 3 * (n + 2) + 3


def test_models_follow_the_hop_latency():
    """On a row with hop latency H = 2 the code-derived models still match, and the closed
    forms carry H: chain (2H + 1)(L - 1) + n + 4, tree (2^K - 1 + K) H + K (n + 2) + 3."""
    row, n = Rect(0, 0, 1, 8), 4
    x = normal(rng(9), 1, 8, n)
    chain = co.build_reduce(ROW_L2, row, n, along="row", algo="chain")
    tree = co.build_reduce(ROW_L2, row, n, along="row", algo="tree")
    assert chain.model_cycles == 5 * 7 + n + 4
    assert tree.model_cycles == (7 + 3) * 2 + 3 * (n + 2) + 3
    for kernel, algo in ((chain, "chain"), (tree, "tree")):
        run_exact(kernel, {"x": x}, co.reduce_reference(x, "row", algo))
    run_exact(co.build_allreduce(ROW_L2, row, n, along="row", algo="tree", op="max"),
              {"x": x}, co.allreduce_reference(x, "row", "tree", "max"))
    run_exact(co.build_gather(ROW_L2, row, n), {"x": x}, x)


@pytest.mark.parametrize("rect, along, src, n", [
    (FULL, "rect", (3, 5), 9),
    (ODD, "rect", (0, 0), 16),
    (ODD, "row", 4, 7),
    (ODD, "col", 2, 16),
    (FULL, "col", 0, 1),
])
def test_broadcast(rect, along, src, n):
    groups = 1 if along == "rect" else rect.rows if along == "row" else rect.cols
    x = normal(rng(5), groups, n)
    kernel = co.build_broadcast(CONFIG, rect, n, along=along, src=src)
    if along == "rect":
        expected = np.broadcast_to(x[0], (rect.rows, rect.cols, n))
    elif along == "row":
        expected = np.broadcast_to(x[:, None], (rect.rows, rect.cols, n))
    else:
        expected = np.broadcast_to(x[None], (rect.rows, rect.cols, n))
    result = run_exact(kernel, {"x": x}, expected)
    if along == "rect":  # T = (h_max + 1) H + n + 5
        sr, sc = src
        h_max = max(sr, rect.rows - 1 - sr) + max(sc, rect.cols - 1 - sc)
        assert result.cycles == h_max + 1 + n + 5


@pytest.mark.parametrize("kind", ["gather", "scatter"])
@pytest.mark.parametrize("rect, along, n", [(FULL, "row", 16), (ODD, "col", 3),
                                            (ODD, "row", 1)])
def test_gather_and_scatter(kind, rect, along, n):
    x = normal(rng(6), rect.rows, rect.cols, n)
    build = co.build_gather if kind == "gather" else co.build_scatter
    result = run_exact(build(CONFIG, rect, n, along=along), {"x": x}, x)
    L, big = (rect.cols if along == "row" else rect.rows), n >= 8
    if kind == "gather" and big:  # bandwidth bound: T = (L - 1) n + 3 + ceil(n / 2) + 5
        assert result.cycles == (L - 1) * n + 3 + math.ceil(n / 2) + 5


# ---- the fragment API, as another kernel uses it -----------------------------------------------
def _centering_program(rect, n, colors, algo):
    """A user kernel: every PE of `rect` holds x (n values); its row maximum, found with a
    local running max into one word and a row allreduce of that word, is subtracted from
    x into y. The west column and the rest run different tiles (the west one also counts
    its calls), each with the fragment's code and params for its part."""
    prog = Program(CONFIG)
    frag = co.allreduce(prog, rect, "mx", 1, colors, along="row", algo=algo, op="max",
                        name="rowmax")
    west = Rect(rect.row, rect.col, rect.rows, 1)
    rest = Rect(rect.row, rect.col + 1, rect.rows, rect.cols - 1)
    for part, extra in ((west, [ins.iadd("calls", "calls", 1)]), (rest, [])):
        tile = Tile(f"center{part.col}")
        x, y = tile.symbol("x", "f32", n), tile.symbol("y", "f32", n)
        mx = tile.symbol("mx", "f32", 1)
        fold = ins.max_(mx.dsd(length=n, stride=0), mx.dsd(length=n, stride=0), x.dsd())
        center = ins.sub(y.dsd(), x.dsd(), mx.dsd(length=n, stride=0))
        tile.local_task("main", [ins.mov(mx.dsd(), -np.inf), fold, *frag.code_for(part),
                                 *extra, center])
        prog.place(tile, part, params=frag.params_for(part))
        # element groups that wait on a bank pair (mx read beside x), every tile alike
        waits = [read_pair_stalls(CONFIG, tile, [op]) for op in (fold, center)]
    # start, mov, n serial max steps
    start = np.full((rect.rows, rect.cols), 1 + 1 + n + waits[0])
    after = frag.exit_times(start)
    after[:, 0] += 1  # the west tile's iadd
    model = int(after.max()) + math.ceil(n / 2) + waits[1] + 1  # the sub, the implicit RET
    return prog, model


@pytest.mark.parametrize("algo", ["chain", "tree"])
def test_fragment_inside_a_user_kernel(algo):
    from fabric import Simulator

    n = 12
    prog, model = _centering_program(ODD, n, colors=[7, 9, 11, 13], algo=algo)
    x = normal(rng(7), ODD.rows, ODD.cols, n)
    sim = Simulator(CONFIG, prog)
    for part in (Rect(ODD.row, ODD.col, ODD.rows, 1), Rect(ODD.row, ODD.col + 1, ODD.rows,
                                                            ODD.cols - 1)):
        off = part.col - ODD.col
        sim.memcpy_h2d("x", x[:, off:off + part.cols], part)
    sim.launch("main")
    stats = sim.run()
    y = np.concatenate([sim.memcpy_d2h("y", Rect(ODD.row, ODD.col, ODD.rows, 1)),
                        sim.memcpy_d2h("y", Rect(ODD.row, ODD.col + 1, ODD.rows,
                                                 ODD.cols - 1))], axis=1)
    np.testing.assert_array_equal(y, x - x.max(axis=(1, 2))[:, None, None])
    assert stats.cycles == model


def test_fragments_chain_and_report_their_colors():
    prog = Program(CONFIG)
    red = co.reduce(prog, FULL, "v", 4, [0, 1, 2, 3], along="rect", algo="chain")
    assert red.colors == (0, 1, 2, 3)
    assert set(red.params) == {"rd.r.role", "rd.c.role"}
    assert co.colors_needed("allreduce", FULL, "rect", "tree") == 3 + 3 + 1
    assert co.colors_needed("reduce", ODD, "row", "tree") == 3
    bc = co.broadcast(prog, FULL, "v", 4, 5, along="rect")
    both = red.then(bc)
    assert len(both.code) == len(red.code) + len(bc.code)
    with pytest.raises(ValueError, match="share registers"):
        red.then(red)


@pytest.mark.parametrize("call, message", [
    (lambda p: co.reduce(p, FULL, "v", 4, [0], along="row", algo="chain"), "needs 2 colors"),
    (lambda p: co.reduce(p, FULL, "v", 4, [0, 1], along="diagonal"), "along"),
    (lambda p: co.reduce(p, FULL, "v", 4, [0, 1], op="mean"), "op must be"),
    (lambda p: co.reduce(p, FULL, "v", 4, [0, 1], root="south"), "root at west or east"),
    (lambda p: co.broadcast(p, ODD, "v", 4, 0, along="row", src=5), "outside"),
    (lambda p: co.broadcast(p, FULL, "v", 4, 0, domain=ODD), "not inside"),
    (lambda p: co.allreduce(p, ODD, "v", 4, [0, 1, 2], along="row", algo="tree"),
     "needs 4 colors"),
])
def test_fragment_errors_name_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call(Program(CONFIG))


def test_builders_check_sizes_and_dtype():
    with pytest.raises(ValueError, match="48 KiB"):
        co.build_reduce(CONFIG, FULL, 13_000)
    with pytest.raises(ValueError, match="f16"):
        co.build_allreduce(CONFIG, FULL, 4, dtype="f16")
    with pytest.raises(ValueError, match="48 KiB"):
        co.build_gather(CONFIG, FULL, 2_000)  # 8 vectors land on the root


def test_single_pe_lines_do_nothing_but_return():
    """A 1-wide rectangle reduced along rows: each PE is its own root."""
    x = normal(rng(8), 8, 1, 3)
    kernel = co.build_allreduce(CONFIG, COLUMN, 3, along="row", algo="tree")
    result = run_kernel(kernel, {"x": x})
    np.testing.assert_array_equal(result.output, x)
    check_cycles(result, kernel)
