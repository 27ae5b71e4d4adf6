"""Features of many images written as fixed-size shards, so an interrupted extraction resumes.

Layout of an output folder::

    files.txt                 the input images, one per line: row i of the features is line i
    meta.json                 shard size, number of files, feature size, how they were made
    shards/00000.npy ...      float32 rows [k * shard_size, (k + 1) * shard_size)
    features.npy              all rows (``.npy``), and/or
    features.pt               ``{"features": Tensor, "files": [...]}`` (``.pt``)
    pending-update.npz        only while an in-place update (:func:`update_features`) is applied

Every file is written under a temporary name and renamed, so a shard that exists is complete: a
run that was killed leaves finished shards, and the next run with the same inputs skips them.

A folder can be changed in place (``fastreid-serve``'s gallery updates): the new features and file
names are first written as one file, ``pending-update.npz`` (the commit point), then copied over the
merged files, ``files.txt`` and ``meta.json``, and the pending file removed. A reader that finds it
(the writer was killed in the middle) finishes the copy first, so it sees the whole update or none.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Optional

import numpy as np
import torch

from fastreid.utils.atomic import atomic_write
from fastreid.utils.errors import UserError
from fastreid.utils.safe_load import load_torch_file

__all__ = [
    "FeatureFileError",
    "FeatureShards",
    "FeatureStore",
    "OutputMismatchError",
    "finish_pending_update",
    "load_features",
    "update_features",
]

logger = logging.getLogger(__name__)

FILES = "files.txt"
META = "meta.json"
SHARDS = "shards"
PENDING_UPDATE = "pending-update.npz"
MERGED = ("features.npy", "features.pt")
_SHARD_NAME = re.compile(r"\d{5,}\.npy")
_PREADV = hasattr(os, "preadv")  # positioned reads (not on Windows)


class OutputMismatchError(UserError, ValueError):
    """The output folder holds an extraction of other inputs or settings."""


class FeatureFileError(UserError, ValueError):
    """A feature file that is missing, unfinished or of the wrong shape."""


def _atomic(path: str, write: Callable[[Any], None], mode: str = "wb") -> None:
    """``write(file)`` to a temporary file next to ``path``, then renamed (the checkpoints' writer)."""
    if mode == "w":
        atomic_write(path, lambda f: write(_TextSink(f)))
    else:
        atomic_write(path, write)


class _TextSink:
    """A binary file seen as a UTF-8 text file (``write`` and ``writelines`` of str)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        return self.raw.write(text.encode("utf-8"))


def _save_npy(path: str, array: np.ndarray) -> None:
    _atomic(path, lambda f: np.save(f, array, allow_pickle=False))


class FeatureStore:
    """An output folder of sharded features for ``files`` (see the module docstring).

    ``settings`` (e.g. weights, normalisation) are recorded in ``meta.json``; reopening the folder
    with other files, another shard size or other settings raises :class:`OutputMismatchError`
    (use another folder, or ``overwrite``, which deletes the shards this store wrote).
    """

    def __init__(
        self,
        folder: str,
        files: Sequence[str],
        shard_size: int,
        settings: dict | None = None,
        overwrite: bool = False,
    ) -> None:
        if shard_size <= 0:
            raise ValueError(f"shard size must be positive, got {shard_size}")
        self.folder = folder
        self.files = list(files)
        self.shard_size = int(shard_size)
        self.settings = dict(settings or {})
        os.makedirs(os.path.join(folder, SHARDS), exist_ok=True)
        if overwrite:
            self._remove_previous()
        self._check_or_write_header()

    # ------------------------------------------------------------------ layout
    @property
    def num_shards(self) -> int:
        return (len(self.files) + self.shard_size - 1) // self.shard_size

    def shard_path(self, k: int) -> str:
        return os.path.join(self.folder, SHARDS, f"{k:05d}.npy")

    def shard_rows(self, k: int) -> tuple[int, int]:
        return k * self.shard_size, min(len(self.files), (k + 1) * self.shard_size)

    def _meta(self) -> dict:
        return {"num_files": len(self.files), "shard_size": self.shard_size, **self.settings}

    def _remove_previous(self) -> None:
        shards = os.path.join(self.folder, SHARDS)
        for name in os.listdir(shards):
            if _SHARD_NAME.fullmatch(name):  # only what this store writes
                os.remove(os.path.join(shards, name))
        for name in (FILES, META, *MERGED):
            path = os.path.join(self.folder, name)
            if os.path.exists(path):
                os.remove(path)

    def _check_or_write_header(self) -> None:
        files_path, meta_path = os.path.join(self.folder, FILES), os.path.join(self.folder, META)
        if os.path.exists(meta_path) and os.path.exists(files_path):
            with open(meta_path, encoding="utf-8") as f:
                meta = json.load(f)
            with open(files_path, encoding="utf-8") as f:
                previous = f.read().splitlines()
            wanted = self._meta()
            changed = [
                k
                for k in sorted(set(meta) | set(wanted))
                if k != "feature_dim" and meta.get(k) != wanted.get(k)
            ]
            if previous != self.files:
                changed.insert(0, "the input files")
            if changed:
                raise OutputMismatchError(
                    f"{self.folder} holds an extraction with other {', '.join(changed)}; use another --output "
                    "or --overwrite to replace it"
                )
            self.settings.setdefault("feature_dim", meta.get("feature_dim"))
            return
        _atomic(files_path, lambda f: f.write("".join(p + "\n" for p in self.files)), mode="w")
        self._write_meta()

    def _write_meta(self) -> None:
        path = os.path.join(self.folder, META)
        _atomic(path, lambda f: json.dump(self._meta(), f, indent=2), mode="w")

    # ------------------------------------------------------------------ progress
    def is_done(self, k: int) -> bool:
        """Shard ``k`` is on disk with the expected number of rows."""
        path = self.shard_path(k)
        if not os.path.exists(path):
            return False
        start, end = self.shard_rows(k)
        try:
            rows = np.load(path, mmap_mode="r").shape[0]
        except (OSError, ValueError):
            return False
        return rows == end - start

    def pending_shards(self, rank: int = 0, world_size: int = 1) -> list[int]:
        """The unfinished shards, in order; of them, process ``rank`` of ``world_size`` owns
        shards ``rank``, ``rank + world_size``, ... (a fixed rule, so a re-run splits alike)."""
        return [k for k in range(rank, self.num_shards, world_size) if not self.is_done(k)]

    def shard_files(self, k: int) -> list[str]:
        start, end = self.shard_rows(k)
        return self.files[start:end]

    def pending_files(self, rank: int = 0, world_size: int = 1) -> list[str]:
        """Files of the unfinished shards (those ``rank`` owns), in order."""
        return [f for k in self.pending_shards(rank, world_size) for f in self.shard_files(k)]

    # ------------------------------------------------------------------ writing
    def write(
        self,
        batches: Iterable[tuple[Sequence[str], torch.Tensor]],
        on_rows: Optional[Callable[[int], None]] = None,
        shards: Optional[Sequence[int]] = None,
    ) -> int:
        """Fill ``shards`` (default: every unfinished one), in order, from ``(paths, features)``
        batches covering exactly their files; returns the number of shards written."""
        pending = iter(self.pending_shards() if shards is None else shards)
        shard = next(pending, None)
        buffer: list[np.ndarray] = []
        buffered = 0
        written = 0
        for paths, feats in batches:
            rows = feats.detach().to("cpu", torch.float32).numpy()
            offset = 0
            while offset < len(rows):
                if shard is None:
                    raise RuntimeError("more features than files in the unfinished shards")
                start, end = self.shard_rows(shard)
                take = min(len(rows) - offset, end - start - buffered)
                expected = self.files[start + buffered : start + buffered + take]
                if list(paths[offset : offset + take]) != expected:
                    raise RuntimeError(f"features arrive out of order at {expected[0]!r}")
                buffer.append(rows[offset : offset + take])
                buffered += take
                offset += take
                if buffered == end - start:
                    self._finish_shard(shard, np.concatenate(buffer))
                    written += 1
                    buffer, buffered = [], 0
                    shard = next(pending, None)
            if on_rows:
                on_rows(len(rows))
        if shard is not None:
            raise RuntimeError(f"the features stopped before shard {shard} was complete")
        return written

    def _finish_shard(self, k: int, rows: np.ndarray) -> None:
        if self.settings.get("feature_dim") is None:
            self.settings["feature_dim"] = int(rows.shape[1])
            self._write_meta()
        _save_npy(self.shard_path(k), np.ascontiguousarray(rows, dtype=np.float32))

    def merge(self, formats: Sequence[str]) -> list[str]:
        """Join the shards into ``features.npy`` and/or ``features.pt`` (written atomically)."""
        if self.pending_shards():
            raise RuntimeError("cannot merge: some shards are not finished")
        written = []
        dim = int(self.settings.get("feature_dim") or 0)
        if "npy" in formats:
            path = os.path.join(self.folder, "features.npy")
            tmp = f"{path}.tmp.{os.getpid()}.npy"
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(self.files), dim))
            for k in range(self.num_shards):
                start, end = self.shard_rows(k)
                out[start:end] = np.load(self.shard_path(k))
            out.flush()
            del out
            os.replace(tmp, path)
            written.append(path)
        if "pt" in formats:
            path = os.path.join(self.folder, "features.pt")
            feats = torch.from_numpy(
                np.concatenate([np.load(self.shard_path(k)) for k in range(self.num_shards)])
            )
            _atomic(path, lambda f: torch.save({"features": feats, "files": self.files}, f))
            written.append(path)
        return written


def _sync_folder(folder: str) -> None:
    """Make the renames in ``folder`` durable (a no-op where folders cannot be opened: Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def update_features(folder: str, feats: np.ndarray, files: Sequence[str]) -> None:
    """Replace the features and file names of the extraction folder ``folder`` by ``feats`` (N x D)
    and ``files``, as one change: killed at any point, the folder holds the old state or, once the
    pending file is written, the new one (the next reader finishes the update). Rewrites the merged
    files present (``features.npy`` when there is none), ``files.txt`` and ``meta.json``'s count;
    the shards of the extraction stay as they were and are not read while a merged file exists."""
    feats = np.ascontiguousarray(feats, dtype=np.float32)
    if feats.ndim != 2 or len(feats) != len(files):
        raise FeatureFileError(f"{folder}: an update needs N x D features for N files, got {feats.shape}")
    if not os.path.isdir(folder):
        raise FeatureFileError(f"{folder}: not an extraction folder (fastreid-extract's --output)")
    names = np.asarray(list(files), dtype=str)
    atomic_write(os.path.join(folder, PENDING_UPDATE), lambda f: np.savez(f, features=feats, files=names))
    _sync_folder(folder)
    finish_pending_update(folder)


def finish_pending_update(folder: str) -> bool:
    """Apply an update of ``folder`` that :func:`update_features` committed but did not finish
    (its process was killed); True if there was one. Every reader of a folder calls it first."""
    pending = os.path.join(folder, PENDING_UPDATE)
    if not os.path.isfile(pending):
        return False
    try:
        with np.load(pending, allow_pickle=False) as data:
            feats = np.ascontiguousarray(data["features"], dtype=np.float32)
            files = [str(f) for f in data["files"]]
        merged = [n for n in MERGED if os.path.exists(os.path.join(folder, n))] or ["features.npy"]
        as_pt = {"features": torch.from_numpy(feats), "files": files}
        for name in merged:
            path = os.path.join(folder, name)
            if name.endswith(".npy"):
                _save_npy(path, feats)
            else:
                _atomic(path, lambda f: torch.save(as_pt, f))
        _atomic(os.path.join(folder, FILES), lambda f: f.write("".join(p + "\n" for p in files)), mode="w")
        meta_path = os.path.join(folder, META)
        meta = {}
        if os.path.isfile(meta_path):
            with open(meta_path, encoding="utf-8") as f:
                meta = json.load(f)
        meta.update(num_files=len(files), feature_dim=int(feats.shape[1]))
        _atomic(meta_path, lambda f: json.dump(meta, f, indent=2), mode="w")
        os.remove(pending)
    except (OSError, ValueError, KeyError) as e:
        raise FeatureFileError(
            f"{folder}: an update of its features was interrupted and cannot be finished ({e}); "
            f"{PENDING_UPDATE} holds it: make the folder writable and read it again"
        ) from e
    _sync_folder(folder)
    logger.info(f"{folder}: finished the update of its features that was interrupted ({len(files)} rows)")
    return True


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def load_features(source: str) -> tuple[np.ndarray, list[str]]:
    """``(features float32 N x D, files)`` from an extraction folder (``features.npy``, else
    ``features.pt``, else the shards), a ``.npy`` file (with ``files.txt`` beside it, if any) or a
    ``.pt`` file (a tensor, or a dict with ``features`` and ``files``)."""
    finish_pending_update(source if os.path.isdir(source) else os.path.dirname(os.path.abspath(source)))
    if os.path.isdir(source):
        files_txt = os.path.join(source, FILES)
        files = _read_lines(files_txt) if os.path.exists(files_txt) else []
        for name in MERGED:
            path = os.path.join(source, name)
            if os.path.exists(path):
                found, stored_files = load_features(path)
                return found, stored_files or files
        shards = (
            sorted(os.listdir(os.path.join(source, SHARDS)))
            if os.path.isdir(os.path.join(source, SHARDS))
            else []
        )
        shards = sorted((s for s in shards if _SHARD_NAME.fullmatch(s)), key=lambda s: int(s[:-4]))
        if not shards:
            raise FeatureFileError(f"{source}: no features.npy, features.pt or shards/ found")
        stacked = np.concatenate([np.load(os.path.join(source, SHARDS, s)) for s in shards])
        if files and len(files) != len(stacked):
            raise FeatureFileError(
                f"{source}: the extraction is unfinished ({len(stacked)} of {len(files)} rows); "
                "run tools/extract_features.py again to finish it"
            )
        return stacked.astype(np.float32, copy=False), files
    if not os.path.isfile(source):
        raise FeatureFileError(f"feature file {source!r}: no such file or folder")
    feats: Any
    if source.endswith(".npy"):
        feats = np.load(source, mmap_mode="r")
        files_txt = os.path.join(os.path.dirname(source), FILES)
        files = _read_lines(files_txt) if os.path.exists(files_txt) else []
    elif source.endswith(".pt"):
        data = load_torch_file(source, trust=False, description="Feature file")
        if isinstance(data, dict):
            feats, files = data.get("features"), list(data.get("files", []))
        else:
            feats, files = data, []
        if not isinstance(feats, torch.Tensor):
            raise FeatureFileError(f"{source}: expected a tensor or a dict with 'features'")
        feats = feats.float().numpy()
    else:
        raise FeatureFileError(
            f"feature file {source!r}: expected a .npy or .pt file, or an extraction folder"
        )
    if feats.ndim != 2:
        raise FeatureFileError(f"{source}: features must be N x D, got shape {feats.shape}")
    if files and len(files) != len(feats):
        raise FeatureFileError(f"{source}: {len(feats)} feature rows but {len(files)} file names")
    return np.ascontiguousarray(feats, dtype=np.float32), files


def _shard_paths(folder: str) -> list[str]:
    shards_dir = os.path.join(folder, SHARDS)
    names = os.listdir(shards_dir) if os.path.isdir(shards_dir) else []
    names = sorted((s for s in names if _SHARD_NAME.fullmatch(s)), key=lambda s: int(s[:-4]))
    return [os.path.join(shards_dir, s) for s in names]


def _npy_header(path: str) -> tuple[tuple[int, int], bool, int]:
    """``(shape, rows readable in place (float32, C order, this machine's byte order), data offset)``."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            offset = f.tell()
    except (OSError, ValueError) as e:
        raise FeatureFileError(f"{path}: not a readable .npy array ({e})") from e
    if len(shape) != 2:
        raise FeatureFileError(f"{path}: features must be N x D, got shape {shape}")
    in_place = dtype == np.dtype(np.float32) and not fortran
    return (int(shape[0]), int(shape[1])), in_place, offset


class FeatureShards:
    """Gallery features left on disk: ``.npy`` files read by memory map, rows numbered across them.

    Row ``i`` of the gallery is row ``i - offsets[k]`` of file ``k`` (``offsets[k] <= i <
    offsets[k + 1]``), the numbering an index built shard by shard gives its vectors. Open an
    extraction folder (its ``features.npy``, else its ``shards/``), a ``.npy`` file, or wrap arrays
    already in memory with :meth:`from_arrays`. Nothing is read until asked: :meth:`chunks` maps one
    file at a time and copies a bounded number of rows, :meth:`take` reads arbitrary rows with
    positioned reads of just those rows. (Not through a long-lived memory map: the kernel maps the
    cached pages around each touched one, so gathering scattered rows from a map would count most of
    the cached gallery in the process's resident memory.)
    """

    def __init__(self, parts: Sequence[Any], files: Sequence[str] = (), source: Optional[str] = None) -> None:
        if not parts:
            raise FeatureFileError(f"{source or 'features'}: no feature rows")
        self._parts = list(parts)  # file paths (read when asked) or arrays
        headers = [_npy_header(p) if isinstance(p, str) else None for p in self._parts]
        # where row 0 starts in each file, for positioned reads of float32 C-order rows (else None: mapped)
        self._data_offset = [h[2] if h is not None and h[1] else None for h in headers]
        shapes = [h[0] if h is not None else self._shape(p) for h, p in zip(headers, self._parts)]
        dims = {s[1] for s in shapes}
        if len(dims) != 1:
            raise FeatureFileError(f"{source or 'features'}: shards of different widths {sorted(dims)}")
        self.dim = int(dims.pop())
        self.offsets = np.cumsum([0] + [s[0] for s in shapes]).astype(np.int64)
        self.files = list(files)
        self.source = source
        if self.files and len(self.files) != len(self):
            raise FeatureFileError(
                f"{source}: {len(self)} feature rows but {len(self.files)} file names; "
                "if it is an unfinished extraction, run fastreid-extract again to finish it"
            )

    @staticmethod
    def _shape(part: Any) -> tuple[int, int]:
        if len(part.shape) != 2:
            raise FeatureFileError(f"features must be N x D, got {part.shape}")
        return int(part.shape[0]), int(part.shape[1])

    @classmethod
    def open(cls, source: str) -> FeatureShards:
        """An extraction folder (``features.npy``, else ``shards/``) or a ``.npy`` file."""
        finish_pending_update(source if os.path.isdir(source) else os.path.dirname(os.path.abspath(source)))
        if os.path.isdir(source):
            files_txt = os.path.join(source, FILES)
            files = _read_lines(files_txt) if os.path.exists(files_txt) else []
            merged = os.path.join(source, "features.npy")
            parts = [merged] if os.path.exists(merged) else _shard_paths(source)
            if not parts:
                raise FeatureFileError(
                    f"{source}: no features.npy or shards/ to read from disk (a features.pt cannot be "
                    "memory-mapped: extract with --format npy)"
                )
            return cls(parts, files, os.path.abspath(source))
        if source.endswith(".npy") and os.path.isfile(source):
            files_txt = os.path.join(os.path.dirname(source), FILES)
            files = _read_lines(files_txt) if os.path.exists(files_txt) else []
            return cls([source], files, os.path.abspath(source))
        if not os.path.exists(source):
            raise FeatureFileError(f"feature file {source!r}: no such file or folder")
        raise FeatureFileError(
            f"{source}: only .npy features or an extraction folder can be read from disk by memory map "
            "(a .pt file cannot: extract with --format npy)"
        )

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray], files: Sequence[str] = ()) -> FeatureShards:
        """Features already in memory, numbered the same way (no ``source`` to reopen)."""
        return cls(list(arrays), files, None)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_parts(self) -> int:
        return len(self._parts)

    def part(self, k: int) -> np.ndarray:
        """Part ``k``: a memory map for a file (pages are read when touched), else the array."""
        p = self._parts[k]
        return np.load(p, mmap_mode="r") if isinstance(p, str) else p

    def chunks(self, max_rows: int = 65536) -> Iterable[tuple[int, np.ndarray]]:
        """``(first row, float32 copy of up to max_rows rows)``, in order; each file is mapped only while it
        is read, so the pages it touched leave the process with it."""
        for k, p in enumerate(self._parts):
            rows = np.load(p, mmap_mode="r") if isinstance(p, str) else p
            for s in range(0, len(rows), max_rows):
                yield int(self.offsets[k]) + s, np.array(rows[s : s + max_rows], dtype=np.float32)
            del rows

    def take(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (global numbers, each in ``[0, len)``) as a float32 ``len(ids) x dim`` array."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError(f"row ids must lie in [0, {len(self)}), got {ids.min()}..{ids.max()}")
        out = np.empty((len(ids), self.dim), np.float32)
        part_of = np.searchsorted(self.offsets, ids, side="right") - 1
        for k in np.unique(part_of).tolist():
            where = np.flatnonzero(part_of == k)
            local = ids[where] - self.offsets[k]
            order = np.argsort(local, kind="stable")  # ascending rows: forward reads through the file
            where, local = where[order], local[order]
            start = self._data_offset[k]
            if start is None:
                rows = self.part(k)
                out[where] = rows[local]
                del rows
                continue
            row_bytes = self.dim * 4
            with open(self._parts[k], "rb", buffering=0) as f:  # unbuffered: only the rows asked for
                fd = f.fileno()
                for j, r in zip(where.tolist(), local.tolist()):
                    buf = memoryview(out[j]).cast("B")
                    if _PREADV:  # one system call per row
                        got = os.preadv(fd, [buf], start + r * row_bytes)
                    else:  # Windows
                        f.seek(start + r * row_bytes)
                        got = f.readinto(buf)
                    if got != row_bytes:
                        raise FeatureFileError(f"{self._parts[k]}: row {r} is cut short; the file changed")
        return out

    def sample(self, count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted row ids, rows)`` of ``count`` distinct random rows."""
        ids = np.sort(np.random.default_rng(seed).choice(len(self), count, replace=False))
        return ids, self.take(ids)
