"""Parser of folders of Market-1501-style file names: ``PPPP_cCsS_FFFFFF_NN.jpg``."""

from __future__ import annotations

import os
import re

__all__ = ["parse_market_folder", "list_images"]

_PATTERN = re.compile(r"^([-\d]+)_c(\d+)")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")


def list_images(folder: str) -> list[str]:
    """Image files of ``folder``, sorted by name (a fixed order on every OS and file system)."""
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(IMAGE_EXTENSIONS))
    return [os.path.join(folder, n) for n in names]


def parse_market_folder(folder: str, num_cams: int, *, prefix: str | None = None,
                        drop_junk: bool = True, max_pid: int | None = None) -> list[tuple]:
    """``(img_path, pid, camid)`` of every image of ``folder``; camid is 0-based.

    ``prefix`` (training splits) turns pid and camid into ``"<prefix>_<n>"`` strings, upstream's
    way of keeping identities of several datasets apart. pid -1 (junk) is dropped when
    ``drop_junk``; pid 0 (distractors) is kept.
    """
    data = []
    for path in list_images(folder):
        name = os.path.basename(path)
        match = _PATTERN.match(name)
        if match is None:
            raise ValueError(
                f"Cannot read pid and camera from the file name {path!r}: expected names like "
                "'0002_c1s1_000451_03.jpg' (PPPP_cCsS_FFFFFF_NN.jpg). Move other files out of the folder."
            )
        pid, camid = int(match.group(1)), int(match.group(2))
        if pid == -1 and drop_junk:
            continue
        if not 1 <= camid <= num_cams:
            raise ValueError(f"Camera c{camid} of {path!r} is outside 1..{num_cams}")
        if max_pid is not None and not -1 <= pid <= max_pid:
            raise ValueError(f"Person id {pid} of {path!r} is outside -1..{max_pid}")
        camid -= 1
        if prefix is not None:
            data.append((path, f"{prefix}_{pid}", f"{prefix}_{camid}"))
        else:
            data.append((path, pid, camid))
    return data
