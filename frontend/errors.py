"""Errors of the frontend: each names what is wrong and where (FX node, ATen op, the user's
source line)."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import fabric


class FrontendError(Exception):
    """Base class of the frontend's errors."""


class UnsupportedOpError(FrontendError):
    """An ATen op (or a use of one) that the lowering has no rule for."""


class PlacementError(FrontendError):
    """The model does not fit the fabric (PEs, SRAM or colors)."""


class StageRunError(FrontendError, RuntimeError):
    """A stage's run on the fabric (or a move into it) did not finish: a deadlock or the
    cycle limit; the message names the stage and its FX node, the engine's error (with its
    report) is the cause."""


class ValidationError(FrontendError):
    """Outputs of the simulated fabric differ from eager PyTorch beyond tolerance."""


class CheckpointError(FrontendError, fabric.CheckpointError):
    """A training checkpoint cannot be loaded: the file is missing, unreadable, truncated or
    corrupt (its digest does not match), or it does not fit the optimizer, scaler or run
    resuming from it (the message names the file and what differs).

    It is a `FrontendError` (the frontend raised it) and a `fabric.CheckpointError` (hence a
    ValueError), so one `except fabric.CheckpointError` refuses a bad checkpoint of either
    kind, training or simulator."""


class IntegerRangeError(FrontendError, ValueError):
    """An integer the model computes from a call's inputs lies beyond 2^24, past what the
    fabric's fp32 words carry exactly (`frontend.integer_ranges`)."""


class RankingNaNError(FrontendError, ValueError):
    """A call gave NaN to a ranking (topk, sort, argmax, max.dim, min.dim) whose fabric
    lowering does not order NaN as eager does (`frontend.nan_rankings`)."""


class UserCodeError(FrontendError):
    """The user's own code that the frontend called (a model or data factory) raised; the
    original exception is the `__cause__`."""


# Files that are not the user's: Python's own, installed packages, this project's packages.
_NOT_USERS = tuple(str(p) for p in {Path(sys.prefix), Path(sys.base_prefix),
                                    Path(sys.exec_prefix)}) + tuple(
    str(Path(__file__).resolve().parents[1] / pkg) for pkg in ("fabric", "frontend"))


def user_code_error(what: str, exc: BaseException) -> UserCodeError:
    """A UserCodeError saying that `what` (e.g. "mypkg.models:make") raised `exc`, and where:
    the innermost line of the traceback in the user's own files (the innermost line at all
    when none is), before `exc`'s message.

    Example:
        >>> user_code_error("mypkg.models:make", exc)  # doctest: +SKIP
        UserCodeError('mypkg.models:make raised OSError at /home/me/mypkg/models.py:12: no
        file weights.pt')
    """
    frames = traceback.extract_tb(exc.__traceback__)
    users = [f for f in frames if not str(Path(f.filename).resolve()).startswith(_NOT_USERS)]
    where = ""
    if users or frames:
        frame = (users or frames)[-1]
        where = f" at {frame.filename}:{frame.lineno}"
    message = str(exc).strip()
    return UserCodeError(f"{what} raised {type(exc).__name__}{where}"
                         f"{': ' + message if message else ''}")
