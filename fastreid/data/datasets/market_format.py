"""Parser of folders of Market-1501-style file names: ``PPPP_cCsS_FFFFFF_NN.jpg`` (also DukeMTMC's
``PPPP_cC_fFFFFFFF.jpg`` and VeRi's ``PPPP_cCCC_FFFFFFFF_N.jpg``)."""

from __future__ import annotations

import os
import re
from typing import Optional

from .parsing import IMAGE_EXTENSIONS, MalformedEntryError, list_images, parse_entries

__all__ = ["parse_market_folder", "list_images", "IMAGE_EXTENSIONS"]

_PATTERN = re.compile(r"^(-?\d+)_c(\d+)")


def parse_market_folder(
    folder: str,
    num_cams: int,
    *,
    prefix: Optional[str] = None,
    drop_junk: bool = True,
    max_pid: Optional[int] = None,
    owner: str = "",
    extensions: tuple = IMAGE_EXTENSIONS,
    allow_empty: bool = False,
) -> list[tuple]:
    """``(img_path, pid, camid)`` of every image of ``folder``; camid is 0-based.

    ``prefix`` (training splits) turns pid and camid into ``"<prefix>_<n>"`` strings, upstream's
    way of keeping identities of several datasets apart. pid -1 (junk) is dropped when
    ``drop_junk``; pid 0 (distractors) is kept. Names that do not parse, cameras outside
    1..``num_cams`` and pids outside -1..``max_pid`` are skipped with one warning (an error when
    nothing valid remains).
    """

    def parse(path: str) -> Optional[tuple]:
        match = _PATTERN.match(os.path.basename(path))
        if match is None:
            raise MalformedEntryError("")
        pid, camid = int(match.group(1)), int(match.group(2))
        if pid == -1 and drop_junk:
            return None
        if not 1 <= camid <= num_cams:
            raise MalformedEntryError(f"camera c{camid} outside 1..{num_cams}")
        if pid < -1 or (max_pid is not None and pid > max_pid):
            raise MalformedEntryError(f"person id {pid} outside -1..{max_pid}")
        camid -= 1
        if prefix is not None:
            return (path, f"{prefix}_{pid}", f"{prefix}_{camid}")
        return (path, pid, camid)

    entries = [(p, p) for p in list_images(folder, extensions)]
    return parse_entries(
        owner or "dataset",
        folder,
        entries,
        parse,
        "names like '0002_c1s1_000451_03.jpg' (<pid>_c<camera>...)",
        allow_empty=allow_empty,
    )
