"""Loss curves of a fabric run against eager PyTorch: the stated tolerances, the check and
the picture.

Tolerances (relative difference of the loss at every step, |fabric - eager| / |eager|):
- fp32: 1e-4. Both runs compute the same fp32 operations; sums run in another order on
  the fabric (rows of a GEMM split over PEs, tree reductions), about 1e-7 relative per
  operation, and training compounds them over the steps: measured at most 2.1e-7 over 50
  MLP steps and 20 GPT steps (tests/frontend/test_training_curves.py).
- mixed: 3e-2. A 16-bit node's result may differ from autocast's by an ulp (fp32 sums in
  another order cross rounding boundaries): 2^-11 for float16, 2^-8 for bfloat16;
  cbfloat16 (no torch dtype) is compared with eager fp32, a difference of its own
  rounding, 2^-10 per value. These differences reach the weights every step; measured at
  most 4.2e-3 (bfloat16; float16 5.7e-4, cbfloat16 1.2e-3) over the same runs.
"""

from __future__ import annotations

from pathlib import Path

CURVE_RTOL = {"fp32": 1e-4, "mixed": 3e-2}


def compare_curves(fabric: list[float], eager: list[float], mode: str) -> dict:
    """{"rel": per-step relative differences, "max_rel", "worst_step" (from 1), "rtol",
    "ok"} of two loss curves of the same length."""
    if len(fabric) != len(eager):
        raise ValueError(f"the curves have {len(fabric)} and {len(eager)} steps")
    if not fabric:
        raise ValueError("no steps to compare")
    rel = [abs(f - e) / max(abs(e), 1e-30) for f, e in zip(fabric, eager)]
    worst = max(range(len(rel)), key=rel.__getitem__)
    rtol = CURVE_RTOL[mode]
    return {"rel": rel, "max_rel": rel[worst], "worst_step": worst + 1, "rtol": rtol,
            "ok": rel[worst] <= rtol}


def plot_curves(fabric: dict[str, list[dict]], eager: dict[str, list[dict]], path,
                title: str = "") -> Path:
    """Loss per step (fabric solid, eager dashed, one colour per label) and the loss scale
    of the fabric runs, from Trainer histories {label: history}; saved to `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, hist) in enumerate(fabric.items()):
        colour = f"C{i}"
        ax.plot([h["step"] for h in hist], [h["loss"] for h in hist], color=colour,
                label=f"{label} fabric")
        skipped = [h for h in hist if not h["taken"]]
        if skipped:
            ax.scatter([h["step"] for h in skipped], [h["loss"] for h in skipped],
                       color=colour, marker="x", label=f"{label} skipped")
        if label in eager:
            ax.plot([h["step"] for h in eager[label]], [h["loss"] for h in eager[label]],
                    color=colour, linestyle="--", label=f"{label} eager")
        bx.plot([h["step"] for h in hist], [h["scale"] for h in hist], color=colour,
                label=label)
    ax.set(xlabel="step", ylabel="loss", title=title or "loss")
    ax.legend(fontsize=7)
    bx.set(xlabel="step", ylabel="loss scale", yscale="log", title="loss scale (fabric)")
    bx.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
