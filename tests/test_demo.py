"""The README's main job runs, checks itself against numpy and writes its picture."""

from fabric import demo


def test_demo_runs_exact_and_writes_png(tmp_path, capsys):
    code = demo.main(["--rows", "3", "--cols", "4", "--n", "16", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "exact match" in out
    assert "kernel cycles" in out
    png = tmp_path / "busy_heatmap.png"
    assert png.exists() and png.stat().st_size > 1000


def test_reference_matches_direct_sum():
    import numpy as np

    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 7)).astype(np.float32)
    v = rng.standard_normal((2, 7)).astype(np.float32)
    np.testing.assert_allclose(demo.reference(a, v), (a * v[:, None, :]).sum(1), rtol=1e-5,
                               atol=1e-5)
