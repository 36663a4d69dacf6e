"""Splitting the grid's rows over several devices gives the same run, bit for bit.

JAX fixes its device count at start-up, so the comparison runs in a fresh interpreter with
two host devices (XLA_FLAGS=--xla_force_host_platform_device_count=2).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    from fabric import FabricConfig, Rect, Simulator
    from fabric.demo import row_reduce_program

    config = FabricConfig.small(4, 6)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6, 8), dtype=np.float32)
    v = rng.standard_normal((4, 8), dtype=np.float32)
    out = {}
    for devices in (1, 2):
        sim = Simulator(config, row_reduce_program(config, 8), devices=devices)
        for col in range(6):
            sim.memcpy_h2d("a", a[:, col:col + 1], rect=Rect(0, col, 4, 1))
        sim.memcpy_h2d("v", v[:, None, :], rect=Rect(0, 0, 4, 1))
        sim.launch("main")
        stats = sim.run()
        out[devices] = {
            "w": sim.memcpy_d2h("w", rect=Rect(0, 0, 4, 1)).tolist(),
            "cycles": stats.cycles,
            "busy": stats.busy.tolist(),
            "stall": stats.stall.tolist(),
            "links": stats.link_count.tolist(),
            "colors": stats.color_count.tolist(),
        }
    print(json.dumps(out))
""")


def test_two_devices_match_one_device_exactly():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    one, two = out["1"], out["2"]
    assert one["cycles"] > 0
    for key in one:
        assert one[key] == two[key], key


def test_devices_must_divide_rows():
    from fabric import FabricConfig, Simulator
    from fabric.demo import row_reduce_program

    config = FabricConfig.small(3, 4)
    with pytest.raises(ValueError, match="devices"):
        Simulator(config, row_reduce_program(config, 4), devices=5)
