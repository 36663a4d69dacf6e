"""Tasks: data tasks triggered by wavelets, async ops activating/unblocking tasks, task
priority, loops and branches on registers, and scalar register arithmetic.

Cycle counts follow the documented rules: starting a task takes 1 cycle, each scalar
instruction 1 cycle, a sync DSD op ceil(n / w) cycles, the implicit RET 1 cycle; a task made
ready by an async op that finishes in cycle t can start in cycle t + 1. Accumulations use
small integer-valued floats so that every fp32 result is exact (fused or not).
"""


import numpy as np
import pytest

from fabric import FabricConfig, Port, Program, Rect, Simulator, Tile
from fabric import instructions as ins
from fabric.banks import op_read_pair_stalls
from tests.fabric.programs import ROW, ROW_ASYNC, ROW_RECT, pe, run_stepwise, run_tile, sender_tile


# ---- data tasks -------------------------------------------------------------------------------
def test_data_task_runs_once_per_wavelet_with_its_payload():
    """acc += x * WAVELET for each of n wavelets; count and last payload kept in memory."""
    n, m = 6, 5
    recv = Tile("recv")
    acc = recv.symbol("acc", "f32", m)
    x = recv.symbol("x", "f32", m)
    cnt = recv.symbol("cnt", "i32", 1)
    last = recv.symbol("last", "f32", 1)
    recv.data_task("on_wavelet", 3, [
        ins.fma(acc.dsd(), acc.dsd(), x.dsd(), ins.WAVELET),  # m cycles (w = 1)
        ins.iadd("c", "c", 1),
        ins.mov(cnt.dsd(), "c"),
        ins.mov(last.dsd(), ins.WAVELET),
    ])
    prog = Program(ROW)
    prog.place(sender_tile(3, n), pe(0, 0))
    prog.place(recv, pe(0, 1))
    prog.route(pe(0, 0), 3, Port.RAMP, Port.EAST)
    prog.route(pe(0, 1), 3, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    payload = np.array([1, -2, 3, 0.5, 4, -1], np.float32)
    xs = np.arange(1, m + 1, dtype=np.float32)
    sim.memcpy_h2d("x", payload, pe(0, 0))
    sim.memcpy_h2d("x", xs, pe(0, 1))
    sim.launch("main")  # only the sender has a local task
    stats = sim.run()
    np.testing.assert_array_equal(sim.memcpy_d2h("acc")[0, 0], xs * payload.sum())
    assert sim.memcpy_d2h("cnt")[0, 0, 0] == n
    assert sim.memcpy_d2h("last")[0, 0, 0] == payload[-1]
    # the first wavelet (sent in cycle 1) starts the task at cycle 1 + 3 = 4; each run
    # then takes 1 + m + 1 + 1 + 1 + 1 (RET) cycles, back to back
    assert stats.cycles == 4 + n * (m + 5)
    assert stats.consumed == n


def test_wavelet_as_integer_operand():
    """Integer payloads summed with iadd(reg, reg, WAVELET)."""
    n = 7
    send = Tile("send")
    xi = send.symbol("xi", "i32", n)
    send.local_task("main", [ins.mov(ins.FabOut(0, n), xi.dsd())])
    recv = Tile("recv")
    total = recv.symbol("total", "i32", 1)
    recv.data_task("d", 0, [ins.iadd("s", "s", ins.WAVELET), ins.mov(total.dsd(), "s")])
    prog = Program(ROW)
    prog.place(send, pe(0, 6))
    prog.place(recv, pe(0, 2))
    for c in range(2, 7):
        prog.route(pe(0, c), 0, Port.RAMP if c == 6 else Port.EAST,
                   Port.RAMP if c == 2 else Port.WEST)
    sim = Simulator(ROW, prog)
    data = np.array([5, -9, 2**30, 2**30, 7, -1, 100], np.int32)
    sim.memcpy_h2d("xi", data)
    sim.launch("main")
    sim.run()
    assert sim.memcpy_d2h("total")[0, 0, 0] == data.sum(dtype=np.int32)


# ---- async ops --------------------------------------------------------------------------------
def _async_tile(on_done, extra_main=(), after_blocked=False):
    t = Tile("t")
    a = t.symbol("a", "f32", 8)
    d = t.symbol("d", "f32", 8)
    e = t.symbol("e", "f32", 8)
    t.local_task("main", [*extra_main[:1],
                          ins.mov(d.dsd(), a.dsd(), is_async=True, on_done=on_done),
                          *extra_main[1:]])
    # d + a (= 2 a once the mov is done): two symbols the layout keeps in other bank pairs
    t.local_task("after", [ins.add(e.dsd(), d.dsd(), a.dsd())], blocked=after_blocked)
    return t


A8 = np.arange(64, dtype=np.float32).reshape(1, 8, 8) - 20


def test_async_completion_activates_a_task():
    t = _async_tile(ins.Activate("after"))
    sim, stats = run_tile(t, {"a": A8}, config=ROW_ASYNC)
    np.testing.assert_array_equal(sim.memcpy_d2h("e"), 2 * A8)
    # main: start 0, issue 1, RET 2; the async mov runs cycles 1-4 (8 elements, w = 2);
    # "after" starts at 5, adds in 6-9, RETs at 10
    assert stats.cycles == 11


def test_async_completion_unblocks_a_blocked_task():
    """main activates the blocked task "after" first; it runs only once the async op that
    produces its input has finished and unblocked it."""
    nops = [ins.set_reg("q", 0)] * 3
    t = _async_tile(ins.Unblock("after"), extra_main=(ins.activate("after"), *nops),
                    after_blocked=True)
    sim, stats = run_tile(t, {"a": A8}, config=ROW_ASYNC)
    np.testing.assert_array_equal(sim.memcpy_d2h("e"), 2 * A8)
    # main: start 0, activate 1, issue 2 (mov runs 2-5), 3 set_regs 3-5, RET 6;
    # "after" (unblocked at 5) starts at 7 when the CE is free, adds 8-11, RETs at 12
    assert stats.cycles == 13


def _most_async_in_flight(config: FabricConfig, ops: int = 9, n: int = 64) -> tuple[int, int]:
    """(most async ops in flight at once, cycles) of one PE whose main task issues `ops`
    async copies of n words back to back, each into its own array."""
    t = Tile("t")
    x = t.symbol("x", "f32", n)
    ys = [t.symbol(f"y{i}", "f32", n) for i in range(ops)]
    t.local_task("main", [ins.mov(y.dsd(), x.dsd(), is_async=True) for y in ys])
    prog = Program(config)
    prog.place(t, Rect(0, 0, 1, 1))
    sim = Simulator(config, prog)
    data = np.arange(n, dtype=np.float32)
    sim.memcpy_h2d("x", data)
    sim.launch("main")
    most = 0
    for _ in run_stepwise(sim, chunk=1):
        busy = np.asarray(sim.state.slot_active)[0, 0, 1:].astype(bool)  # slot 0: main thread
        most = max(most, int(busy.sum()))
    for y in ys:
        np.testing.assert_array_equal(sim.memcpy_d2h(y.name)[0, 0], data)
    return most, int(sim.state.cycle)


def test_eight_microthreads_hold_eight_async_ops_and_a_ninth_waits():
    """WSE-3 has 8 microthreads and the WSE-2 examples use queue ids 0..7, one microthread
    each: 8 async ops are in flight at once and the ninth waits for a free one. With 3 slots
    only 3 are; the datapath serves one op at a time either way, so the cycles agree."""
    for preset in (FabricConfig.small(1, 1), FabricConfig.wse2(), FabricConfig.wse3()):
        assert preset.num_async_slots == 8, preset.name
    # copies on memory alone, async where the rule is off: the engine's microthreads
    eight = _most_async_in_flight(FabricConfig.small(1, 1, async_memory_ops=True))
    three = _most_async_in_flight(FabricConfig.small(1, 1, async_memory_ops=True,
                                                     num_async_slots=3))
    assert eight[0] == 8 and three[0] == 3
    assert eight[1] == three[1]


def test_block_and_unblock_instructions():
    """block() keeps an activated task from running until unblock()."""
    t = Tile("t")
    log = t.symbol("log", "i32", 2)
    t.local_task("main", [ins.block("second"), ins.activate("second"),
                          ins.activate("first")])
    t.local_task("first", [ins.mov(log.dsd(offset=0, length=1), 1), ins.unblock("second")])
    t.local_task("second", [ins.mov(log.dsd(offset=1, length=1), 2)])
    sim, _ = run_tile(t, {})
    np.testing.assert_array_equal(sim.memcpy_d2h("log")[0], [[1, 2]] * 8)


def test_lowest_id_ready_task_starts_first():
    """Two local tasks activated together run in id (declaration) order, whatever the order
    of activation; each appends its marker to a log."""
    t = Tile("t")
    log = t.symbol("log", "i32", 3)
    append = [ins.mov(log.dsd(length=1, offset_reg="p"), "mark"), ins.iadd("p", "p", 1)]
    t.local_task("main", [ins.activate("late"), ins.activate("early")])
    t.local_task("early", [ins.set_reg("mark", 10), *append])
    t.local_task("late", [ins.set_reg("mark", 20), *append])
    sim, stats = run_tile(t, {})
    np.testing.assert_array_equal(sim.memcpy_d2h("log")[0], [[10, 20, 0]] * 8)
    assert stats.cycles == 4 + 5 + 5  # each task: start, 3 instructions, RET


# ---- loops and branches -----------------------------------------------------------------------
def test_loop_of_fma_with_offset_register():
    """acc += X[i] * s_i for i < 5, where X[i] = x[4i : 4i+4] (offset register stepped by 4)
    and s_i = s0 + 0.5 i (a float register, s0 per PE)."""
    m, iters = 4, 5
    t = Tile("t")
    acc = t.symbol("acc", "f32", m)
    x = t.symbol("x", "f32", iters * m)
    fma = ins.fma(acc.dsd(), acc.dsd(), x.dsd(length=m, offset_reg="off"), "s")
    t.local_task("main", [
        ins.set_reg("off", 0),
        ins.set_reg("i", 0),
        ins.set_reg("s", "s0"),
        ins.label("loop"),
        fma,
        ins.iadd("off", "off", m),
        ins.fadd("s", "s", 0.5),
        ins.iadd("i", "i", 1),
        ins.branch_if_less("i", iters, "loop"),
    ])
    X = np.random.default_rng(5).integers(-8, 8, (1, 8, iters * m)).astype(np.float32)
    acc0 = np.random.default_rng(6).integers(-8, 8, (1, 8, m)).astype(np.float32)
    s0 = np.arange(8, dtype=np.float32).reshape(1, 8) - 3
    sim, stats = run_tile(t, {"x": X, "acc": acc0}, params={"s0": s0})
    ref = acc0.copy()
    for i in range(iters):
        ref = ref + X[..., i * m:(i + 1) * m] * (s0 + np.float32(0.5 * i))[..., None]
    np.testing.assert_array_equal(sim.memcpy_d2h("acc"), ref)
    # acc (word 0) and X[i] (word 4 + 4 i) start at even words: every element of every
    # fma waits on its bank pair (an offset from a register leaves the layout as declared)
    waits = [op_read_pair_stalls(ROW, t, fma, registers={"off": m * i}) for i in range(iters)]
    assert waits == [m] * iters
    np.testing.assert_array_equal(stats.bank_stall, sum(waits))
    assert stats.cycles == 1 + 3 + iters * (m + 4) + 1 + sum(waits)


def test_countdown_loop_with_branch_if_nonzero():
    t = Tile("t")
    out = t.symbol("out", "f32", 1)
    t.local_task("main", [
        ins.set_reg("acc", 0.0),
        ins.label("top"),
        ins.fadd("acc", "acc", 1.5),
        ins.isub("n", "n", 1),
        ins.branch_if_nonzero("n", "top"),
        ins.mov(out.dsd(), "acc"),
    ])
    n = np.arange(1, 9).reshape(1, 8)
    sim, stats = run_tile(t, {}, params={"n": n})
    np.testing.assert_array_equal(sim.memcpy_d2h("out")[0, :, 0], 1.5 * n[0])
    np.testing.assert_array_equal(stats.busy[0], 1 + 1 + 3 * n[0] + 1 + 1)


@pytest.mark.parametrize("kind", ["zero", "nonzero", "less", "jump"])
def test_branches_skip_an_instruction(kind):
    """out = 1 unless the branch is taken; taken costs one cycle less (the skipped mov)."""
    flag = np.array([[0, 1, -1, 5, 0, -7, 2, 0]], np.int32)
    branch = {
        "zero": ins.branch_if_zero("f", "skip"),
        "nonzero": ins.branch_if_nonzero("f", "skip"),
        "less": ins.branch_if_less("f", 0, "skip"),  # signed int32 compare
        "jump": ins.jump("skip"),
    }[kind]
    taken = {"zero": flag == 0, "nonzero": flag != 0, "less": flag < 0,
             "jump": np.ones_like(flag, bool)}[kind]
    t = Tile("t")
    out = t.symbol("out", "i32", 1)
    t.local_task("main", [branch, ins.mov(out.dsd(), 1), ins.label("skip")])
    sim, stats = run_tile(t, {}, params={"f": flag})
    np.testing.assert_array_equal(sim.memcpy_d2h("out")[..., 0], np.where(taken, 0, 1))
    np.testing.assert_array_equal(stats.busy, np.where(taken, 3, 4))


def test_explicit_ret_ends_the_task():
    t = Tile("t")
    out = t.symbol("out", "i32", 1)
    t.local_task("main", [ins.ret(), ins.mov(out.dsd(), 1)])
    sim, stats = run_tile(t, {})
    np.testing.assert_array_equal(sim.memcpy_d2h("out"), 0)
    assert stats.cycles == 2


# ---- scalar register arithmetic -----------------------------------------------------------------
def test_integer_registers_from_params_wrap_like_int32():
    a = np.array([[3, -4, 2**30 + 5, 2**31 - 1, -(2**31), 0, 77, -1]], np.int32)
    b = np.array([[5, 9, 3, 1, 1, -8, -77, -1]], np.int32)
    t = Tile("t")
    out = t.symbol("out", "i32", 3)
    t.local_task("main", [
        ins.iadd("s", "a", "b"), ins.isub("d", "a", "b"), ins.imul("p", "a", "b"),
        ins.mov(out.dsd(offset=0, length=1), "s"),
        ins.mov(out.dsd(offset=1, length=1), "d"),
        ins.mov(out.dsd(offset=2, length=1), "p"),
    ])
    sim, stats = run_tile(t, {}, params={"a": a, "b": b})
    ref = np.stack([a + b, a - b, a * b], axis=-1)  # int32 arrays wrap around
    np.testing.assert_array_equal(sim.memcpy_d2h("out"), ref)
    assert stats.cycles == 1 + 6 + 1


def test_float_registers_match_numpy_float32():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((1, 8)).astype(np.float32)
    b = rng.standard_normal((1, 8)).astype(np.float32)
    t = Tile("t")
    out = t.symbol("out", "f32", 4)
    t.local_task("main", [
        ins.fadd("s", "a", "b"), ins.fsub("d", "a", "b"), ins.fmul("p", "a", "b"),
        ins.fmul("q", "a", 0.1),
        *[ins.mov(out.dsd(offset=i, length=1), r) for i, r in enumerate("sdpq")],
    ])
    sim, _ = run_tile(t, {}, params={"a": a, "b": b})
    ref = np.stack([a + b, a - b, a * b, a * np.float32(0.1)], axis=-1)
    np.testing.assert_array_equal(sim.memcpy_d2h("out"), ref)


def test_launch_on_a_sub_rectangle_only():
    t = Tile("t")
    out = t.symbol("out", "i32", 1)
    t.local_task("main", [ins.mov(out.dsd(), 1)])
    prog = Program(ROW)
    prog.place(t, ROW_RECT)
    sim = Simulator(ROW, prog)
    sim.launch("main", Rect(0, 2, 1, 3))
    sim.run()
    np.testing.assert_array_equal(sim.memcpy_d2h("out")[0, :, 0], [0, 0, 1, 1, 1, 0, 0, 0])


def test_launch_each_starts_each_pe_its_own_tasks():
    """`launch_each`: PE 1 runs task a, PE 3 a and b, the others nothing; a PE without the
    task, or a data task, is refused naming the PE and the task."""
    t = Tile("t")
    out = t.symbol("out", "i32", 2)
    t.local_task("a", [ins.mov(out.dsd(length=1), 1)])
    t.local_task("b", [ins.mov(out.dsd(offset=1, length=1), 2)])
    t.data_task("d", 3, [])
    prog = Program(ROW)
    prog.place(t, Rect(0, 0, 1, 6))
    prog.route(Rect(0, 0, 1, 6), 3, Port.WEST, Port.RAMP)
    sim = Simulator(ROW, prog)
    sim.launch_each({(0, 1): ["a"], (0, 3): ["a", "b"]})
    sim.run()
    got = sim.memcpy_d2h("out", Rect(0, 0, 1, 6))[0]
    np.testing.assert_array_equal(got, [[0, 0], [1, 0], [0, 0], [1, 2], [0, 0], [0, 0]])
    with pytest.raises(ValueError, match=r"PE \(0, 7\) has no task 'a'"):
        sim.launch_each({(0, 7): ["a"]})
    with pytest.raises(ValueError, match=r"task 'd' on PE \(0, 2\) is a data task"):
        sim.launch_each({(0, 2): ["d"]})
