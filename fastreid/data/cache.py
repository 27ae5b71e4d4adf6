"""Decoded-image cache: images decoded and resized once into a uint8 memory-mapped file.

With ``DATALOADER.CACHE True`` the loader reads each image as one slice of a memory map instead
of decoding a JPEG; this matters most with zero worker processes (the Windows default).

Files, next to the data unless ``DATALOADER.CACHE_DIR`` is set (``<folder>/.cache/``):

- ``<name>.u8``   N x 3 x H x W uint8 pixels (the tensor layout: a read is one copy), row i = image i of the list;
- ``<name>.json`` the index: version, size, count and a fingerprint of every file's path, size
  and modification time. A different list, a changed file or another target size gives a
  different fingerprint, and the cache is rebuilt.

Transforms run after the cache as before; only the first resize is skipped (AutoAugment, which
upstream applies before resizing, then sees the resized image).

The cache never deletes or replaces a file it did not write: a ``.u8`` or ``.json`` of the cache's
name is only replaced when its index (the ``.json``) is one the cache wrote; otherwise building
stops with :class:`CacheOwnershipError` naming the file. The index is written (marked incomplete)
before the pixels, so a build killed half way leaves files that are still recognised as the
cache's own and are rebuilt next time.

The memory map is opened lazily in the process that reads it and is never pickled, so the
cache object is safe to send to spawn workers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from tqdm import tqdm

from fastreid.utils.errors import UserError

__all__ = ["DecodedCache", "default_cache_dir", "is_cache_file", "CacheOwnershipError"]

logger = logging.getLogger(__name__)

CACHE_VERSION = 1
INDEX_TAG = "fastreid decoded cache"
_CACHE_NAME = re.compile(r"^decoded_\d+x\d+_\d+_[0-9a-f]{12}\.(u8|json)(\.tmp\d*)?$")


class CacheOwnershipError(UserError, FileExistsError):
    """A file where the cache would write exists and was not written by the cache."""


def _read_index(index_file: str) -> Optional[dict]:
    try:
        with open(index_file, encoding="utf-8") as f:
            index = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(index, dict):
        return None
    ours = index.get("tag") == INDEX_TAG or (
        index.get("version") == 1 and "fingerprint" in index
    )  # 1st format
    return index if ours else None


def is_cache_file(path: str) -> bool:
    """True for a file the decoded cache writes: named like the cache's files and next to an
    index the cache wrote."""
    folder, name = os.path.split(path)
    match = _CACHE_NAME.match(name)
    if match is None:
        return False
    stem = name[: match.start(1) - 1]
    return _read_index(os.path.join(folder, stem + ".json")) is not None


def default_cache_dir(paths: Sequence[str]) -> str:
    """``<deepest folder holding every image>/.cache``."""
    folders = {os.path.dirname(os.path.abspath(p)) for p in paths}
    return os.path.join(os.path.commonpath(sorted(folders)), ".cache")


def _fingerprint(paths: Sequence[str], size: Sequence[int]) -> str:
    h = hashlib.sha1()
    h.update(f"v{CACHE_VERSION} size={list(size)} n={len(paths)}\n".encode())
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            raise FileNotFoundError(f"decoded cache: image {p!r} is missing") from None
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


class DecodedCache:
    """Images of ``paths`` decoded (RGB) and resized to ``size`` ([h, w]), stored as uint8.

    ``ensure()`` checks the index and builds the cache if it is missing or stale;
    ``read(i)`` returns image ``i`` as a 3xHxW uint8 tensor (its own memory, writable).
    """

    def __init__(self, paths: Sequence[str], size: Sequence[int], cache_dir: Optional[str] = None):
        if len(size) != 2 or min(size) <= 0:
            raise ValueError(f"decoded cache: the target size must be [height, width], got {list(size)}")
        if not paths:
            raise ValueError("decoded cache: no images")
        self.size = (int(size[0]), int(size[1]))
        self.count = len(paths)
        self.cache_dir = cache_dir or default_cache_dir(paths)
        names = hashlib.sha1(("\n".join(os.path.abspath(p) for p in paths) + f"\n{self.size}").encode())
        name = f"decoded_{self.size[0]}x{self.size[1]}_{self.count}_{names.hexdigest()[:12]}"
        self.data_file = os.path.join(self.cache_dir, name + ".u8")
        self.index_file = os.path.join(self.cache_dir, name + ".json")
        self._paths: Optional[list[str]] = list(paths)  # dropped when pickled
        self._mm: Optional[np.memmap] = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.count, 3, self.size[0], self.size[1])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_mm"] = None
        state["_paths"] = None
        return state

    def is_valid(self) -> bool:
        """True when the index matches the current files and the pixel file is complete."""
        if self._paths is None:
            raise RuntimeError("decoded cache: validity can only be checked where the file list is known")
        index = _read_index(self.index_file)
        if index is None:
            return False
        expected_bytes = int(np.prod(self.shape))
        return (
            index.get("version") == CACHE_VERSION
            and index.get("fingerprint") == _fingerprint(self._paths, self.size)
            and os.path.isfile(self.data_file)
            and os.path.getsize(self.data_file) == expected_bytes
        )

    def ensure(self, progress: bool = True) -> bool:
        """Build the cache unless it is valid. Returns True when it was (re)built."""
        if self.is_valid():
            return False
        self.build(progress=progress)
        return True

    def build(self, progress: bool = True) -> None:
        """Decode, resize and write every image, then the index (so a crash leaves no valid cache)."""
        # torchvision (seconds to import): only building the cache decodes and resizes; the
        # synthetic data generator (is_cache_file) and the loaders reading the cache do neither
        from .data_utils import read_image_tensor
        from .transforms import Resize  # torchvision, as above

        try:
            os.makedirs(self.cache_dir, exist_ok=True)
        except OSError as e:
            raise OSError(
                f"decoded cache: cannot create {self.cache_dir!r} ({e.strerror}); "
                "set DATALOADER.CACHE_DIR to a writable folder"
            ) from None
        assert self._paths is not None, "decoded cache: build where the file list is known (not in a worker)"
        fingerprint = _fingerprint(self._paths, self.size)
        self._check_ownership()
        self._write_index({"tag": INDEX_TAG, "version": CACHE_VERSION, "complete": False})
        tmp = self.data_file + f".tmp{os.getpid()}"
        resize = Resize(list(self.size))
        out = np.memmap(tmp, dtype=np.uint8, mode="w+", shape=self.shape)
        try:
            bar = tqdm(
                self._paths,
                desc=f"decoding into {os.path.basename(self.data_file)}",
                unit="img",
                disable=not progress,
                mininterval=0.5,
            )
            for i, path in enumerate(bar):
                img = resize(read_image_tensor(path), None)
                out[i] = img.numpy()
            out.flush()
        finally:
            del out
        os.replace(tmp, self.data_file)
        self._write_index(
            {
                "tag": INDEX_TAG,
                "version": CACHE_VERSION,
                "complete": True,
                "size": list(self.size),
                "count": self.count,
                "fingerprint": fingerprint,
            }
        )
        self._mm = None
        logger.info(
            f"Decoded cache written: {self.data_file} ({self.count} images, {self.size[0]}x{self.size[1]})"
        )

    def _check_ownership(self) -> None:
        """Refuse to replace a data or index file that the cache did not write."""
        if _read_index(self.index_file) is not None:
            return
        for path in (self.index_file, self.data_file):
            if os.path.lexists(path):
                raise CacheOwnershipError(
                    f"decoded cache: {path} exists but was not written by the cache (no cache index "
                    f"{os.path.basename(self.index_file)} next to it); nothing was changed. Move it away or "
                    "set DATALOADER.CACHE_DIR to another folder."
                )

    def _write_index(self, index: dict) -> None:
        tmp = self.index_file + f".tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(index, f)
        os.replace(tmp, self.index_file)

    def _open(self) -> np.memmap:
        if self._mm is None:
            if not os.path.isfile(self.data_file):
                raise FileNotFoundError(
                    f"decoded cache {self.data_file!r} is missing; build it with "
                    "`fastreid-build-cache --config-file <your config>` (python tools/build_cache.py in a checkout) "
                    "or set DATALOADER.CACHE False"
                )
            self._mm = np.memmap(self.data_file, dtype=np.uint8, mode="r", shape=self.shape)
        return self._mm

    def read(self, index: int) -> torch.Tensor:
        row = np.array(self._open()[index])  # copy out of the page cache: a writable tensor
        return torch.from_numpy(row)
