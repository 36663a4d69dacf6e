"""Training checkpoints: the weights and optimizer state on the fabric, and the loss scaler's
state, to and from one standard `torch.save` file.

File contents (a dict, loadable with `torch.load(path, weights_only=True)`):
    {"weights": {name: fp32 tensor}, "optimizer": optimizer.state_dict(),
     "scaler": grad_scaler.state_dict() or None, "extra": extra, "format": 2}

Integrity (format 2): the file ends with a sha256 of all its bytes before it, stored as the
zip archive's comment (`torch.save` writes a zip with none; zip readers, torch.load among
them, skip it). Loading reads the file once, checks the digest over every byte (a flipped
byte anywhere, a truncated file, a file that is not a checkpoint are all refused with a
`frontend.errors.CheckpointError` naming the file) and unpickles those same bytes with
`weights_only=True`. Writes are atomic (`fabric.checkpoint.write_atomic`): a save killed
half way leaves the previous checkpoint under the name.

Saving reads the weights and the optimizer state back from PE memory (host I/O through the
optimizer's Simulators; those cycles are in the report); loading writes them back the same
way. Resuming from a checkpoint continues bit for bit as an uninterrupted run: every value
is stored as the fabric holds it (fp32) and the step counts come with the state.

Example:
    >>> report = save_checkpoint("ckpt.pt", opt, scaler, extra={"epoch": 3})  # doctest: +SKIP
    >>> print(report); load_checkpoint("ckpt.pt", fresh_opt, fresh_scaler)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass

import torch

from fabric import write_atomic
from frontend.errors import CheckpointError

FORMAT = 2  # 2: a sha256 digest at the end of the file
_KEYS = {"weights", "optimizer", "scaler", "extra", "format"}
_DIGEST_TAG = b"wafer-fabric training checkpoint sha256 "
_TRAILER = len(_DIGEST_TAG) + 64  # the tag and the digest in hex: the zip comment
_EOCD = b"PK\x05\x06"  # a zip's end record: signature, ..., comment length (last 2 bytes)
_EOCD_BYTES = 22


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
    file_bytes = write_checkpoint_file(
        path, {"weights": weights, "optimizer": opt_state, "scaler": scaler_state,
               "extra": extra, "format": FORMAT})
    return CheckpointReport(
        path=os.fspath(path), file_bytes=file_bytes,
        weights_bytes=_nbytes(weights), optimizer_bytes=_nbytes(opt_state),
        scaler_bytes=_nbytes(scaler_state) if scaler_state is not None else 0,
        host_cycles=host_cycles, n_params=len(weights))


def write_checkpoint_file(path, contents) -> int:
    """`torch.save(contents)` to `path` with its sha256 digest at the end (module
    docstring), atomically. Returns the file's size in bytes."""
    buf = io.BytesIO()
    torch.save(contents, buf)
    data = bytearray(buf.getbuffer())
    if data[-_EOCD_BYTES:-_EOCD_BYTES + 4] != _EOCD or data[-2:] != b"\0\0":
        raise RuntimeError("write_checkpoint_file: torch.save did not end its zip archive with "
                           "an end record without comment; cannot append the digest")
    data[-2:] = _TRAILER.to_bytes(2, "little")  # the comment's length, under the digest too
    data += _DIGEST_TAG + hashlib.sha256(data).hexdigest().encode()
    write_atomic(path, lambda f: f.write(data))
    return len(data)


def read_checkpoint_file(path):
    """What `write_checkpoint_file` stored in `path`, once its digest matches every byte.

    Raises:
        CheckpointError: no file, the file is not one `write_checkpoint_file` wrote or is
            truncated (no digest at its end), is corrupt (the digest does not match), or
            cannot be unpickled with `weights_only=True`.
    """
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {name!r}: no such file") from None
    except OSError as e:
        raise CheckpointError(f"checkpoint {name!r} cannot be read: {e}") from e
    body, trailer = data[:-_TRAILER], data[-_TRAILER:]
    if len(data) < _TRAILER or not trailer.startswith(_DIGEST_TAG):
        raise CheckpointError(
            f"checkpoint {name!r} does not end with the sha256 digest a format-{FORMAT} "
            f"training checkpoint ends with: it is truncated, or not a training checkpoint "
            f"(format 1 had no digest)")
    if trailer[len(_DIGEST_TAG):] != hashlib.sha256(body).hexdigest().encode():
        raise CheckpointError(f"checkpoint {name!r} is corrupt: the sha256 of its first "
                              f"{len(body)} bytes does not match the digest saved at its end")
    try:
        # the bytes just checked, not the file again: what is loaded is what was verified
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for bytes it cannot read
        raise CheckpointError(f"checkpoint {name!r} is unreadable although its digest "
                              f"matches (torch.load: {type(e).__name__}: {e})") from e


def _read(path) -> dict:
    """The checkpoint dict in `path`, or a CheckpointError saying why it is not one."""
    ckpt = read_checkpoint_file(path)
    if not (isinstance(ckpt, dict) and set(ckpt) == _KEYS and ckpt["format"] == FORMAT):
        got = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"load_checkpoint: {os.fspath(path)!r} is not a format-{FORMAT} "
                              f"checkpoint: want the keys {sorted(_KEYS)}, got {got}")
    return ckpt


def _check_weights(where: str, weights, optimizer) -> None:
    if not isinstance(weights, dict):
        raise CheckpointError(f"{where}: 'weights' is a {type(weights).__name__}, not a dict")
    names = set(optimizer.param_names)
    missing, extra = sorted(names - set(weights)), sorted(set(weights) - names)
    if missing or extra:
        raise CheckpointError(f"{where}: parameter names differ: missing from the "
                              f"checkpoint {missing}, not in the optimizer {extra}")
    for name in optimizer.param_names:
        w = weights[name]
        m, n, _ = optimizer.layout(name)
        shape = tuple(optimizer.sources[name].shape)
        if not isinstance(w, torch.Tensor) or w.dtype != torch.float32:
            raise CheckpointError(f"{where}: weights of {name!r} must be an fp32 tensor, got "
                                  f"{getattr(w, 'dtype', type(w).__name__)}")
        if tuple(w.shape) != shape:
            raise CheckpointError(f"{where}: parameter {name!r} has shape {tuple(w.shape)} in "
                                  f"the checkpoint, {shape} in the optimizer (an {m} x {n} "
                                  "matrix on the fabric)")


def load_checkpoint(path, optimizer, grad_scaler=None, check_extra=None):
    """Write the weights and optimizer state of the checkpoint at `path` onto the fabric of
    `optimizer` (host I/O) and restore `grad_scaler` from it. Everything is checked before
    anything is written. Returns the checkpoint's `extra`.

    `check_extra(extra)`, if given, is called once the file is verified and before anything
    is checked against `optimizer` and `grad_scaler`: it raises to refuse a checkpoint by
    what its `extra` says (the Trainer refuses one of another run's precision, which would
    otherwise fail on the scaler state with a less telling message).

    Raises:
        CheckpointError: the file is missing, not a checkpoint, truncated or corrupt, or its
            parameters or state do not fit `optimizer` and `grad_scaler`.
    """
    where = f"load_checkpoint: {os.fspath(path)!r}"
    ckpt = _read(path)
    if check_extra is not None:
        check_extra(ckpt["extra"])
    _check_weights(where, ckpt["weights"], optimizer)
    if grad_scaler is not None and ckpt["scaler"] is None:
        raise CheckpointError(f"{where}: a grad_scaler was given but the checkpoint holds no "
                              "scaler state")
    state = ckpt["optimizer"]
    for name, entry in state.get("state", {}).items():
        for key, t in entry.items():
            shape = tuple(optimizer.sources[name].shape) if name in optimizer.sources else None
            if isinstance(t, torch.Tensor) and shape is not None and tuple(t.shape) != shape:
                raise CheckpointError(f"{where}: optimizer state {key} of parameter {name!r} "
                                      f"has shape {tuple(t.shape)}, the parameter {shape}")
    try:
        optimizer.load_state_dict(state)
        if grad_scaler is not None:
            grad_scaler.load_state_dict(ckpt["scaler"])
    except (KeyError, ValueError, TypeError) as e:
        # a KeyError's text is the bare key: say it is one that is missing
        what = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise CheckpointError(f"{where}: optimizer or scaler state: {what}") from e
    optimizer.load_parameters(ckpt["weights"])
    return ckpt["extra"]
