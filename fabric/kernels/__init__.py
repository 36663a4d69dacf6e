"""The kernel library: reusable fabric programs, each with a numpy reference and an analytic
cycle model. See `fabric.kernels.base` for the common shape of a kernel."""

from fabric.kernels.base import Kernel, KernelResult, pick_colors, run_kernel, split

__all__ = ["Kernel", "KernelResult", "pick_colors", "run_kernel", "split"]
