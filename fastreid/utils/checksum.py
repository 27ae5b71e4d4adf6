"""SHA-256 sidecar files for checkpoints: ``model_final.pth`` -> ``model_final.pth.sha256``.

The sidecar holds one line in ``sha256sum`` format (``<hex digest>  <file name>``), so
``sha256sum -c model_final.pth.sha256`` checks a file by hand too. Files without a sidecar
(upstream's model zoo, files copied without it) are not verified.

Writers call :func:`discard_checksum` before replacing a file and :func:`write_checksum` after:
a kill in between leaves a file without a sidecar (loaded unverified), never a file next to a
stale sidecar (which would refuse a good checkpoint).
"""

from __future__ import annotations

import contextlib
import hashlib
import os

from fastreid.utils.atomic import atomic_write
from fastreid.utils.errors import CheckpointError

__all__ = [
    "checksum_path",
    "discard_checksum",
    "file_sha256",
    "recorded_checksum",
    "verify_checksum",
    "write_checksum",
]

_CHUNK = 1 << 20


def checksum_path(path: str) -> str:
    """The sidecar file of ``path``."""
    return f"{path}.sha256"


def file_sha256(path: str) -> str:
    """Hex SHA-256 digest of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksum(path: str) -> str:
    """Write ``<path>.sha256`` (atomically: temporary file, then rename) and return the digest."""
    digest = file_sha256(path)
    line = f"{digest}  {os.path.basename(path)}\n".encode()
    atomic_write(checksum_path(path), lambda f: f.write(line))
    return digest


def discard_checksum(path: str) -> None:
    """Remove ``<path>.sha256`` if present (before ``path`` is replaced by new content)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(checksum_path(path))


def recorded_checksum(path: str) -> str:
    """The digest ``path``'s sidecar records (not checked against the file), or "" without one.
    Raises :class:`CheckpointError` when the sidecar does not hold a SHA-256 digest."""
    sidecar = checksum_path(path)
    if not os.path.isfile(sidecar):
        return ""
    with open(sidecar, encoding="utf-8", errors="replace") as f:
        fields = f.read().split()
    digest = fields[0].lower() if fields else ""
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise CheckpointError(
            f"Checksum file {sidecar} does not hold a SHA-256 digest; delete it to load {path} unverified"
        )
    return digest


def verify_checksum(path: str) -> bool:
    """Check ``path`` against its sidecar. Returns False when there is no sidecar (nothing to
    verify), True when the digest matches; raises :class:`CheckpointError` on a mismatch or an
    unreadable sidecar."""
    expected = recorded_checksum(path)
    if not expected:
        return False
    sidecar = checksum_path(path)
    actual = file_sha256(path)
    if actual != expected:
        raise CheckpointError(
            f"Checkpoint {path} does not match its checksum {sidecar} (SHA-256 {actual[:12]}... != "
            f"{expected[:12]}...): the file is corrupt or was modified after it was written; refusing to load it"
        )
    return True
