"""Checkpoints of a `Simulator` session: the whole fabric state and the host counters in one
file, so that a long run can stop and go on later with the same result, bit for bit.

A checkpoint is an `.npz` archive: one array per `FabricState` leaf (`state/<field>`) and a
JSON header (`header`) with the format tag and version, `host_cycles`, a sha256 of every
state leaf, and fingerprints of the config (its fields) and of the built program (a digest
per table). Loading checks them all, so a checkpoint never resumes damaged, or under another
config or program, without saying so. The zip's CRCs catch most damage already; the leaf
digests also catch an archive rewritten consistently around a changed array.

Files are written atomically (`write_atomic`): a crash mid-save leaves the previous file
under the checkpoint's name, and at worst a stale `<name>.<random>.tmp` beside it that
nothing reads.

Example:
    >>> sim.run(max_cycles=500, raise_on_limit=False)      # doctest: +SKIP
    >>> save_checkpoint(sim, "run.ckpt")                     # doctest: +SKIP
    >>> sim = fabric.load_checkpoint("run.ckpt", config, program)  # doctest: +SKIP
    >>> stats = sim.run()                                    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import zipfile

import jax.numpy as jnp
import numpy as np

from fabric.config import FabricConfig
from fabric.errors import FabricError
from fabric.state import FabricState

FORMAT = "wafer-fabric checkpoint"
VERSION = 7  # 2: DSD slots carry the 16-bit format field; 3: FIFO control bit planes,
# slot readiness words; 4: the header holds a sha256 per state leaf; 5: and the table rows;
# 6: the bank-conflict wait and its counter; 7: DSD slots keep the task that issued them
HEADER_KEYS = {"format", "version", "host_cycles", "last_run_cycles", "config", "tables",
               "table_rows", "state"}


class CheckpointError(FabricError, ValueError):
    """A checkpoint cannot be loaded: not a checkpoint, damaged, or made under another
    config or program (the message names what differs)."""


def config_fields(config: FabricConfig) -> dict:
    """The config's fields as JSON values (tuples become lists, as they do in the file)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def array_digest(arr) -> str:
    """sha256 of an array's dtype, shape and bytes (hex)."""
    arr = np.ascontiguousarray(np.asarray(arr))
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def table_digests(tables) -> dict:
    """sha256 of each table array (shape and dtype included) of a built program."""
    return {f.name: array_digest(getattr(tables, f.name)) for f in dataclasses.fields(tables)}


def write_atomic(path, write) -> None:
    """Make the file `path` by `write(f)` on a binary file object, atomically: `path` is
    either its old self or the complete new file, even if the process dies mid-write.

    The data goes to a new temporary file in the same directory (a rename is atomic only
    within one file system), is flushed to disk, then renamed over `path`. The temporary
    name is unique and created exclusively, so it never overwrites another file (not even
    one left by a killed save) and nothing ever reads it: a stale one only takes space.
    """
    path = os.fspath(path)
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points to it
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # POSIX: the rename itself is durable once the directory is
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_checkpoint(sim, path) -> None:
    """Write the fabric state and host counters of `sim` (a `fabric.Simulator`) to `path`
    (the exact name given; atomically, see `write_atomic`)."""
    arrays = {f"state/{f.name}": np.asarray(getattr(sim.state, f.name))
              for f in dataclasses.fields(FabricState)}
    header = {
        "format": FORMAT,
        "version": VERSION,
        "host_cycles": sim.host_cycles,
        "last_run_cycles": sim.last_run_cycles,
        "config": config_fields(sim.config),
        "tables": table_digests(sim.tables),
        # the session's table rows (its build's min_table_rows decided them): a resumed
        # session is built with the same ones
        "table_rows": [int(sim.tables.instr.shape[0]), int(sim.tables.dsd.shape[0])],
        "state": {name: array_digest(arr) for name, arr in arrays.items()},
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    write_atomic(path, lambda f: np.savez(f, **arrays))


@dataclasses.dataclass(frozen=True)
class SavedRun:
    """A checkpoint read from `path` whose format and config were checked: its header and
    its arrays, ready for `restore_checkpoint`; `table_rows` are the (instruction, DSD) table
    rows of the saved session, the `min_table_rows` to build the resumed one with."""

    path: object
    header: dict
    arrays: dict

    @property
    def table_rows(self) -> tuple[int, int]:
        instr, dsd = self.header["table_rows"]
        return int(instr), int(dsd)


def read_checkpoint(path, config: FabricConfig) -> SavedRun:
    """Read the checkpoint at `path` and check it was saved under `config` (before a
    program is built for it: a program of another config would not build).

    Raises:
        CheckpointError: `path` is not a checkpoint, is truncated or corrupt, has another
            format version, or was saved under another config.
    """
    header, arrays = _read(path)
    _check_config(path, header, config)
    return SavedRun(path, header, arrays)


def restore_checkpoint(sim, saved: SavedRun):
    """`sim` (a new `fabric.Simulator` on the checkpoint's config) with the fabric state and
    host counters of `saved`; returns `sim`. `fabric.load_checkpoint` reads the file, makes
    the session and calls this.

    Raises:
        CheckpointError: the checkpoint was saved under another program, or its state does
            not fit the session's.
    """
    path, header, arrays = saved.path, saved.header, saved.arrays
    _check_tables(path, header, sim.tables)
    leaves = {}
    for field in dataclasses.fields(FabricState):
        fresh = getattr(sim.state, field.name)
        arr = arrays.get(f"state/{field.name}")
        if arr is None or arr.shape != fresh.shape or arr.dtype != fresh.dtype:
            got = "missing" if arr is None else f"{arr.dtype}{list(arr.shape)}"
            raise CheckpointError(f"{path}: state leaf {field.name!r} is {got}; expected "
                                  f"{fresh.dtype}{list(fresh.shape)}")
        leaves[field.name] = jnp.asarray(arr)
    sim.state = FabricState(**leaves)
    sim.host_cycles = int(header["host_cycles"])
    sim.last_run_cycles = int(header["last_run_cycles"])
    return sim


def _read(path):
    """(header dict, {name: array}) with every array read, so damage shows up here."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{path}: not a wafer-fabric checkpoint, or truncated or "
                              f"corrupt ({type(err).__name__}: {err})") from None
    try:
        header = json.loads(arrays.pop("header").tobytes().decode())
        fmt, version = header["format"], header["version"]
        missing = HEADER_KEYS - header.keys()
    except (KeyError, ValueError, TypeError, AttributeError):
        raise CheckpointError(f"{path}: not a wafer-fabric checkpoint (no valid header)") \
            from None
    if fmt != FORMAT:
        raise CheckpointError(f"{path}: not a wafer-fabric checkpoint (format {fmt!r})")
    if version != VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version}; this simulator "
                              f"reads version {VERSION}")
    if missing:
        raise CheckpointError(f"{path}: checkpoint header lacks {', '.join(sorted(missing))}")
    saved = header["state"]
    differ = sorted(name for name in saved.keys() | arrays.keys()
                    if name not in arrays or saved.get(name) != array_digest(arrays[name]))
    if differ:
        raise CheckpointError(f"{path}: corrupt: the stored arrays {', '.join(differ)} do "
                              "not match the sha256 digests in the checkpoint's header")
    return header, arrays


def _check_config(path, header, config):
    saved, given = header["config"], config_fields(config)
    differ = [f"{k}: saved {saved.get(k)!r}, given {given.get(k)!r}"
              for k in sorted(saved.keys() | given.keys()) if saved.get(k) != given.get(k)]
    if differ:
        raise CheckpointError(f"{path}: saved under another config; " + "; ".join(differ))


def _check_tables(path, header, tables):
    saved, given = header["tables"], table_digests(tables)
    differ = sorted(k for k in saved.keys() | given.keys() if saved.get(k) != given.get(k))
    if differ:
        raise CheckpointError(f"{path}: saved under another program; its built tables "
                              f"differ in {', '.join(differ)}")
