"""Small inline copies of the query and gallery images, so the report needs no other file."""

from __future__ import annotations

import base64
import functools
import io
import logging

from PIL import Image, UnidentifiedImageError

__all__ = ["THUMB_SIZE", "thumbnail_uri"]

logger = logging.getLogger(__name__)

THUMB_SIZE = (48, 96)  # width x height: a person crop's aspect
# A grey box for an image that cannot be read (moved, deleted, damaged since the evaluation).
_MISSING_SVG = (
    "<svg xmlns='http://www.w3.org/2000/svg' width='48' height='96'><rect width='48' height='96' "
    "fill='#ccc'/><text x='24' y='52' font-size='9' text-anchor='middle' fill='#555'>missing</text></svg>"
)
MISSING_URI = "data:image/svg+xml;base64," + base64.b64encode(_MISSING_SVG.encode()).decode()


@functools.lru_cache(maxsize=4096)
def thumbnail_uri(path: str, size: tuple[int, int] = THUMB_SIZE) -> str:
    """A ``data:image/jpeg`` URI of ``path`` shrunk to ``size`` (aspect kept, padded), or a grey
    "missing" box when the file cannot be read (logged once per file)."""
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            img.thumbnail(size, Image.Resampling.BILINEAR)
            canvas = Image.new("RGB", size, (255, 255, 255))
            canvas.paste(img, ((size[0] - img.width) // 2, (size[1] - img.height) // 2))
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as e:
        logger.warning(f"Report: image {path} cannot be read ({e}); shown as missing")
        return MISSING_URI
    buffer = io.BytesIO()
    canvas.save(buffer, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
