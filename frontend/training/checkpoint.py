"""Training checkpoints: the weights and optimizer state on the fabric, and the loss scaler's
state, to and from one standard `torch.save` file.

File contents (a dict, loadable with `torch.load(path, weights_only=True)`):
    {"weights": {name: fp32 tensor}, "optimizer": optimizer.state_dict(),
     "scaler": grad_scaler.state_dict() or None, "extra": extra, "format": 1}

Saving reads the weights and the optimizer state back from PE memory (host I/O through the
optimizer's Simulators; those cycles are in the report); loading writes them back the same
way. Resuming from a checkpoint continues bit for bit as an uninterrupted run: every value
is stored as the fabric holds it (fp32) and the step counts come with the state.

Example:
    >>> report = save_checkpoint("ckpt.pt", opt, scaler, extra={"epoch": 3})  # doctest: +SKIP
    >>> print(report); load_checkpoint("ckpt.pt", fresh_opt, fresh_scaler)  # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import torch

from frontend.errors import FrontendError

FORMAT = 1
_KEYS = {"weights", "optimizer", "scaler", "extra", "format"}


@dataclass(frozen=True)
class CheckpointReport:
    """What a save wrote. Part sizes are each part serialized alone by torch.save (so they
    include its own container overhead and do not add up exactly to `file_bytes`)."""

    path: str
    file_bytes: int
    weights_bytes: int
    optimizer_bytes: int
    scaler_bytes: int  # 0 when no scaler was saved
    host_cycles: int  # host I/O of reading weights and state back from the fabric
    n_params: int

    def __str__(self) -> str:
        return (f"checkpoint {self.path}: {self.file_bytes} B ({self.n_params} parameters; "
                f"weights {self.weights_bytes} B, optimizer {self.optimizer_bytes} B, "
                f"scaler {self.scaler_bytes} B); read-back {self.host_cycles} host cycles")


def _nbytes(obj) -> int:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getbuffer().nbytes


def save_checkpoint(path, optimizer, grad_scaler=None, extra=None) -> CheckpointReport:
    """Save the fabric's weights and `optimizer`'s state (a FabricSGD / FabricAdamW), and
    `grad_scaler`'s state, to `path`. `extra` (plain data: tensors, numbers, strings and
    containers of them) is stored as is. Returns the CheckpointReport."""
    host0 = optimizer.io_cycles()
    weights = optimizer.parameters()
    opt_state = optimizer.state_dict()
    host_cycles = optimizer.io_cycles() - host0
    scaler_state = grad_scaler.state_dict() if grad_scaler is not None else None
    torch.save({"weights": weights, "optimizer": opt_state, "scaler": scaler_state,
                "extra": extra, "format": FORMAT}, path)
    return CheckpointReport(
        path=os.fspath(path), file_bytes=os.path.getsize(path),
        weights_bytes=_nbytes(weights), optimizer_bytes=_nbytes(opt_state),
        scaler_bytes=_nbytes(scaler_state) if scaler_state is not None else 0,
        host_cycles=host_cycles, n_params=len(weights))


def _read(path) -> dict:
    """The checkpoint dict in `path`, or a FrontendError saying why it is not one."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise FrontendError(f"load_checkpoint: no file {os.fspath(path)!r}") from None
    except Exception as e:  # torch raises several kinds for a file it cannot read
        raise FrontendError(f"load_checkpoint: {os.fspath(path)!r} is not a checkpoint "
                            f"(torch.load failed: {type(e).__name__}: {e})") from e
    if not (isinstance(ckpt, dict) and set(ckpt) == _KEYS and ckpt["format"] == FORMAT):
        got = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise FrontendError(f"load_checkpoint: {os.fspath(path)!r} is not a format-{FORMAT} "
                            f"checkpoint: want the keys {sorted(_KEYS)}, got {got}")
    return ckpt


def _check_weights(weights, optimizer) -> None:
    if not isinstance(weights, dict):
        raise FrontendError(f"load_checkpoint: 'weights' is a {type(weights).__name__}, "
                            "not a dict")
    names = set(optimizer.param_names)
    missing, extra = sorted(names - set(weights)), sorted(set(weights) - names)
    if missing or extra:
        raise FrontendError(f"load_checkpoint: parameter names differ: missing from the "
                            f"checkpoint {missing}, not in the optimizer {extra}")
    for name in optimizer.param_names:
        w = weights[name]
        m, n, _ = optimizer.layout(name)
        shape = tuple(optimizer.sources[name].shape)
        if not isinstance(w, torch.Tensor) or w.dtype != torch.float32:
            raise FrontendError(f"load_checkpoint: weights of {name!r} must be an fp32 "
                                f"tensor, got {getattr(w, 'dtype', type(w).__name__)}")
        if tuple(w.shape) != shape:
            raise FrontendError(f"load_checkpoint: parameter {name!r} has shape "
                                f"{tuple(w.shape)} in the checkpoint, {shape} in the "
                                f"optimizer (an {m} x {n} matrix on the fabric)")


def load_checkpoint(path, optimizer, grad_scaler=None):
    """Write the weights and optimizer state of the checkpoint at `path` onto the fabric of
    `optimizer` (host I/O) and restore `grad_scaler` from it. Everything is checked before
    anything is written. Returns the checkpoint's `extra`."""
    ckpt = _read(path)
    _check_weights(ckpt["weights"], optimizer)
    if grad_scaler is not None and ckpt["scaler"] is None:
        raise FrontendError(f"load_checkpoint: a grad_scaler was given but "
                            f"{os.fspath(path)!r} holds no scaler state")
    state = ckpt["optimizer"]
    for name, entry in state.get("state", {}).items():
        for key, t in entry.items():
            shape = tuple(optimizer.sources[name].shape) if name in optimizer.sources else None
            if isinstance(t, torch.Tensor) and shape is not None and tuple(t.shape) != shape:
                raise FrontendError(f"load_checkpoint: optimizer state {key} of parameter "
                                    f"{name!r} has shape {tuple(t.shape)}, the parameter "
                                    f"{shape}")
    try:
        optimizer.load_state_dict(state)
        if grad_scaler is not None:
            grad_scaler.load_state_dict(ckpt["scaler"])
    except (KeyError, ValueError, TypeError) as e:
        raise FrontendError(f"load_checkpoint: {os.fspath(path)!r}: {e}") from e
    optimizer.load_parameters(ckpt["weights"])
    return ckpt["extra"]
