"""fabric.viz draws what a real run did: every picture renders headless (Agg) to a PNG whose
pixels follow the data (the busy PE is brighter than an idle one, a link's cell has the
colormap's colour for its load, the placement's rectangles are filled where they lie).

The run: on a 4 x 4 fabric, PE (0, 0) streams N words east along row 0 to PE (0, 3); every
other PE stays idle. Pixel colours are read back from the PNG at a PE's centre and compared
with the colormap's colour for that PE's value within 2/255 per channel (8-bit PNG rounding
plus antialiasing at most one level away).
"""

import numpy as np
import pytest
from matplotlib import colormaps, colors
from matplotlib.image import imread

from fabric import FabricConfig, Port, Program, Rect, Simulator, Tile, viz
from fabric import instructions as ins

GRID4 = FabricConfig.small(4, 4)  # the engine tests' shared 4 x 4 config: one compile
N = 32
SRC, DST, IDLE = (0, 0), (0, 3), (2, 2)
ATOL = 2 / 255


def stream_program() -> Program:
    src = Tile("src")
    x = src.symbol("x", "f32", N)
    src.local_task("main", [ins.mov(ins.FabOut(0, N), x.dsd())])
    dst = Tile("dst")
    y = dst.symbol("y", "f32", N)
    dst.local_task("main", [ins.add(y.dsd(), y.dsd(), ins.FabIn(0, N))])
    prog = Program(GRID4)
    prog.place(src, Rect(*SRC, 1, 1))
    prog.place(dst, Rect(*DST, 1, 1))
    prog.route(Rect(0, 0, 1, 1), 0, rx=Port.RAMP, tx=Port.EAST)
    prog.route(Rect(0, 1, 1, 2), 0, rx=Port.WEST, tx=Port.EAST)
    prog.route(Rect(0, 3, 1, 1), 0, rx=Port.WEST, tx=Port.RAMP)
    return prog


def loaded() -> Simulator:
    sim = Simulator(GRID4, stream_program())
    sim.memcpy_h2d("x", np.arange(N, dtype=np.float32), rect=Rect(*SRC, 1, 1))
    sim.launch("main")
    return sim


@pytest.fixture(scope="module")
def stats():
    out = loaded().run(max_cycles=10_000)
    # the facts the pictures below rely on
    assert out.busy[SRC] > 0 and out.busy[DST] > 0 and out.busy[IDLE] == 0
    assert out.stall[DST] > 0 and out.stall[SRC] == 0
    assert (out.link_count[0, :3, Port.EAST] == N).all() and out.link_count.sum() == 3 * N
    return out


def axis(fig, label):
    (ax,) = [a for a in fig.axes if a.get_label() == label]
    return ax


def pixel(png, ax, row, col) -> np.ndarray:
    """RGB (0..1) of the PNG at the centre of PE (row, col) in `ax` (PE (r, c) sits at x=c,
    y=r in every grid picture); the PNG must be saved at the figure's dpi (viz.save does)."""
    img = imread(png)
    x, y = ax.transData.transform((col, row))
    return img[int(img.shape[0] - y), int(x), :3]


def luminance(rgb) -> float:
    return float(np.dot(rgb, [0.2126, 0.7152, 0.0722]))


def expected(cmap, value, vmax):
    return np.asarray(colormaps[cmap](value / vmax))[:3]


def test_busy_heatmap_pixels_follow_busy_cycles(stats, tmp_path):
    fig = viz.busy_heatmap(stats, path=tmp_path / "busy.png")
    ax = axis(fig, "busy")
    png = tmp_path / "busy.png"
    assert png.stat().st_size > 5000
    busy, idle = pixel(png, ax, *SRC), pixel(png, ax, *IDLE)
    np.testing.assert_allclose(busy, expected("viridis", stats.busy[SRC], stats.cycles),
                               atol=ATOL)
    np.testing.assert_allclose(idle, expected("viridis", 0, 1), atol=ATOL)
    assert luminance(busy) > luminance(idle) + 0.3


def test_stall_heatmap_shows_the_waiting_receiver(stats, tmp_path):
    fig = viz.stall_heatmap(stats, path=tmp_path / "stall.png")
    ax = axis(fig, "stall")
    png = tmp_path / "stall.png"
    np.testing.assert_allclose(pixel(png, ax, *DST), expected("magma", 1, 1), atol=ATOL)
    assert luminance(pixel(png, ax, *DST)) > luminance(pixel(png, ax, *SRC)) + 0.3


def test_sram_heatmap_shows_allocated_symbols(stats, tmp_path):
    fig = viz.sram_heatmap(stats, path=tmp_path / "sram.png")
    png = tmp_path / "sram.png"
    ax = axis(fig, "sram")
    assert stats.sram_bytes_used[SRC] == 4 * N and stats.sram_bytes_used[IDLE] == 0
    assert luminance(pixel(png, ax, *SRC)) > luminance(pixel(png, ax, *IDLE)) + 0.3
    assert f"max {4 * N} of {GRID4.sram_bytes} B" in ax.get_title()


def test_link_heatmaps_colour_each_direction_by_its_load(stats, tmp_path):
    fig = viz.link_heatmaps(stats, path=tmp_path / "links.png")
    png = tmp_path / "links.png"
    east, north = axis(fig, "E"), axis(fig, "N")
    load = N / stats.cycles  # wavelets per cycle on each east link of row 0
    for col in range(3):
        np.testing.assert_allclose(pixel(png, east, 0, col), expected("magma", load, 1.0),
                                   atol=ATOL)
    np.testing.assert_allclose(pixel(png, east, 0, 3), expected("magma", 0, 1), atol=ATOL)
    np.testing.assert_allclose(pixel(png, north, 0, 1), expected("magma", 0, 1), atol=ATOL)
    assert f"({3 * N:,} wavelets)" in east.get_title()


def test_color_use_counts_colors_and_wavelets(stats, tmp_path):
    fig = viz.color_use(stats, path=tmp_path / "colors.png")
    png = tmp_path / "colors.png"
    per_pe = axis(fig, "colors_per_pe")
    assert luminance(pixel(png, per_pe, 0, 1)) > luminance(pixel(png, per_pe, 1, 1)) + 0.3
    bars = [p.get_height() for p in axis(fig, "per_color").patches]
    # every router of row 0 forwards the N wavelets of color 0 once
    np.testing.assert_array_equal(bars, stats.color_count)
    assert bars[0] == 4 * N and sum(bars) == 4 * N


def test_placement_map_fills_regions_and_draws_edges(tmp_path):
    regions = [("gemm", Rect(0, 0, 2, 4)), ("softmax", Rect(2, 0, 1, 2))]
    fig = viz.placement_map(GRID4, regions, edges=[("gemm", "softmax")], title="t",
                            path=tmp_path / "place.png")
    png = tmp_path / "place.png"
    ax = axis(fig, "placement")
    background = pixel(png, ax, 3, 3)
    np.testing.assert_allclose(background, [0.95] * 3, atol=ATOL)  # the wafer, no region
    gemm, softmax = pixel(png, ax, 1, 3), pixel(png, ax, 2, 1)
    assert np.abs(gemm - background).max() > 0.1 and np.abs(softmax - gemm).max() > 0.1
    arrows = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch"]
    assert len(arrows) == 1
    assert {t.get_text().split("\n")[0] for t in ax.texts} == {"gemm", "softmax"}


def test_placement_map_draws_edges_in_their_colors_hue():
    regions = [("a", Rect(0, 0, 1, 4)), ("b", Rect(2, 0, 1, 4)), ("c", Rect(3, 0, 1, 4))]
    fig = viz.placement_map(GRID4, regions, edges=[("a", "b"), ("b", "c")],
                            edge_colors=[[6, 9], []])
    ax = axis(fig, "placement")
    first, second = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch"]
    hue = colors.rgb_to_hsv(np.array(first.get_edgecolor()[:3]))[0]
    assert hue == pytest.approx(6 / GRID4.num_colors)  # the first of its colors
    assert tuple(second.get_edgecolor()) == colors.to_rgba("black")  # no colors: black
    assert "6,9" in {t.get_text() for t in ax.texts}
    with pytest.raises(ValueError, match="edge_colors has 1 entries for 2 edges"):
        viz.placement_map(GRID4, regions, edges=[("a", "b"), ("b", "c")], edge_colors=[[1]])


def test_placement_map_draws_emphasized_edges_thicker():
    regions = [("a", Rect(0, 0, 1, 4)), ("b", Rect(2, 0, 1, 4)), ("c", Rect(3, 0, 1, 4))]
    edges = [("a", "b"), ("b", "c"), ("a", "c")]
    fig = viz.placement_map(GRID4, regions, edges=edges, emphasized=[("a", "b"), ("b", "c")])
    widths = [p.get_linewidth() for p in axis(fig, "placement").patches
              if type(p).__name__ == "FancyArrowPatch"]
    assert widths[0] == widths[1] > 2 * widths[2]
    with pytest.raises(ValueError, match=r"emphasized names \[\('c', 'a'\)\], which are not"):
        viz.placement_map(GRID4, regions, edges=edges, emphasized=[("c", "a")])


def test_placement_map_on_a_full_wafer_shows_the_usable_area():
    fig = viz.placement_map(FabricConfig.wse2(), [("a", Rect(0, 0, 990, 700))])
    ax = axis(fig, "placement")
    assert ax.get_xlim() == (-0.5, 756.5)
    assert any(p.get_label() == "usable area" for p in ax.patches)


@pytest.mark.parametrize("regions, edges, error, words", [
    ([("a", Rect(3, 3, 2, 1))], (), ValueError, ["regions[0]", "'a'", "outside", "4 x 4"]),
    ([("a", Rect(0, 0, 1, 1)), ("a", Rect(1, 1, 1, 1))], (), ValueError, ["used twice"]),
    ([("a", (0, 0, 1, 1))], (), TypeError, ["regions[0]", "(label, Rect)"]),
    ([("a", Rect(0, 0, 1, 1))], [("a", "b")], ValueError, ["edges[0]", "'b'", "['a']"]),
    ([("a", Rect(0, 0, 1, 1))], ["ab"], TypeError, ["edges[0]", "pair"]),
])
def test_placement_map_rejects_bad_input(regions, edges, error, words):
    with pytest.raises(error) as info:
        viz.placement_map(GRID4, regions, edges)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_link_activity_sums_to_the_run_and_animates(stats, tmp_path):
    frames = viz.record_link_activity(loaded(), cycles=10_000)
    # cycle by cycle, the run is the one above: same length, same links in total
    assert frames.shape == (stats.cycles, 4, 4, 4)
    np.testing.assert_array_equal(frames.sum(axis=0), stats.link_count)
    assert frames.max() == 1  # one wavelet per link per cycle at most
    gif = viz.wavelet_animation(frames[:8], tmp_path / "w.gif")
    from PIL import Image

    with Image.open(gif) as image:
        assert image.n_frames == 8  # each frame differs (its cycle is in the title)
    html = viz.wavelet_animation(frames[:3], tmp_path / "w.html")
    assert html.read_text().count("<script") >= 1


def test_bad_paths_and_shapes_are_named(stats, tmp_path):
    with pytest.raises(ValueError, match=r"\.gif or \.html"):
        viz.wavelet_animation(np.zeros((2, 4, 4, 4)), tmp_path / "w.mp4")
    with pytest.raises(ValueError, match=r"\(cycles >= 1, rows, cols, 4\)"):
        viz.wavelet_animation(np.zeros((2, 4, 4)), tmp_path / "w.gif")
    with pytest.raises(ValueError, match="PNG"):
        viz.save(viz.busy_heatmap(stats), tmp_path / "busy.jpg")
    with pytest.raises(ValueError, match="cycles must be >= 1"):
        viz.record_link_activity(loaded(), cycles=0)
