"""A first real program on 4x4: row broadcast by multicast, a local product, and a chain
reduction along each row, against numpy.

Row r: PE (r, 0) holds a vector v_r and broadcasts it east on color 0 (PEs 1 and 2 take a
copy and forward it; PE 3 takes the last copy). Every PE (r, c) computes
p_rc = v_r * a_rc. Then the partial sums flow west to east: PE 0 sends p_r0, PE c adds its
own p_rc to what arrives and sends it on, PE 3 stores
    out_r = ((p_r0 + p_r1) + p_r2) + p_r3.
The chain alternates colors 1 and 2 because a router accepts a color from one port only.
Since the numpy reference sums in the same order in float32, the result is bit-exact.
"""

import numpy as np

from fabric import Port, Program, Rect, Simulator, Tile
from fabric import instructions as ins
from tests.fabric.programs import GRID4, invariants

N = 16
BCAST, CHAIN_A, CHAIN_B = 0, 1, 2


def column(c: int) -> Rect:
    return Rect(0, c, 4, 1)


def build_program() -> Program:
    head = Tile("head")
    v, a, p = (head.symbol(s, "f32", N) for s in ("v", "a", "p"))
    head.local_task("main", [
        ins.mov(ins.FabOut(BCAST, N), v.dsd()),  # broadcast v east
        ins.mul(p.dsd(), v.dsd(), a.dsd()),
        ins.mov(ins.FabOut(CHAIN_A, N), p.dsd()),  # start the chain
    ])

    def middle(name, color_in, color_out):
        t = Tile(name)
        a, p = t.symbol("a", "f32", N), t.symbol("p", "f32", N)
        t.local_task("main", [
            ins.mul(p.dsd(), ins.FabIn(BCAST, N), a.dsd()),
            ins.add(ins.FabOut(color_out, N), ins.FabIn(color_in, N), p.dsd()),
        ])
        return t

    tail = Tile("tail")
    a, p, out = (tail.symbol(s, "f32", N) for s in ("a", "p", "out"))
    tail.local_task("main", [
        ins.mul(p.dsd(), ins.FabIn(BCAST, N), a.dsd()),
        ins.add(out.dsd(), ins.FabIn(CHAIN_A, N), p.dsd()),
    ])

    prog = Program(GRID4)
    prog.place(head, column(0))
    prog.place(middle("mid1", CHAIN_A, CHAIN_B), column(1))
    prog.place(middle("mid2", CHAIN_B, CHAIN_A), column(2))
    prog.place(tail, column(3))
    # broadcast: multicast to the CE and on east at columns 1 and 2
    prog.route(column(0), BCAST, Port.RAMP, Port.EAST)
    prog.route(Rect(0, 1, 4, 2), BCAST, Port.WEST, [Port.RAMP, Port.EAST])
    prog.route(column(3), BCAST, Port.WEST, Port.RAMP)
    # chain: 0 -> 1 on color 1, 1 -> 2 on color 2, 2 -> 3 on color 1
    prog.route(column(0), CHAIN_A, Port.RAMP, Port.EAST)
    prog.route(column(1), CHAIN_A, Port.WEST, Port.RAMP)
    prog.route(column(1), CHAIN_B, Port.RAMP, Port.EAST)
    prog.route(column(2), CHAIN_B, Port.WEST, Port.RAMP)
    prog.route(column(2), CHAIN_A, Port.RAMP, Port.EAST)
    prog.route(column(3), CHAIN_A, Port.WEST, Port.RAMP)
    return prog


def test_broadcast_multiply_chain_reduce_matches_numpy():
    rng = np.random.default_rng(2024)
    v = rng.standard_normal((4, 1, N)).astype(np.float32)
    a = rng.standard_normal((4, 4, N)).astype(np.float32)
    sim = Simulator(GRID4, build_program())
    sim.memcpy_h2d("v", v)
    for c in range(4):
        sim.memcpy_h2d("a", a[:, c:c + 1], column(c))
    sim.launch("main")
    stats = sim.run()

    products = v * a  # (4, 4, N), float32
    ref = products[:, 0]
    for c in range(1, 4):
        ref = ref + products[:, c]  # same association as the chain
    np.testing.assert_array_equal(sim.memcpy_d2h("out")[:, 0], ref)
    for c in range(4):
        np.testing.assert_array_equal(sim.memcpy_d2h("p", column(c))[:, 0], products[:, c])

    # wavelets: v once per row (forked at 2 routers), 3 chain hops per row
    assert stats.injected == 4 * N + 3 * 4 * N
    assert stats.forked == 4 * 2 * N
    assert stats.consumed == 4 * 3 * N + 3 * 4 * N
    np.testing.assert_array_equal(stats.link_count[:, :3, Port.EAST], 2 * N)
    assert stats.link_count.sum() == 4 * 3 * 2 * N
    invariants(sim, stats)
    # SRAM: 3 vectors on the head and tail columns, 2 on the middle ones, within capacity;
    # the head's a starts one word later (its product reads v and a: the bank-aware
    # layout puts them in different bank pairs)
    np.testing.assert_array_equal(stats.sram_bytes_used,
                                  [[3 * 4 * N + 4, 8 * N, 8 * N, 12 * N]] * 4)
    assert (stats.sram_bytes_used <= GRID4.sram_bytes).all()

    # cycles: the head sends v in cycles 1..N, multiplies in N+1..2N and sends p in
    # 2N+1..3N; each chain stage adds one hop of zero-load latency (3 cycles) and the tail
    # finishes 3 stages later, then RETs: 3N + 3*3 + 2
    assert stats.cycles == 3 * N + 11
