"""``fastreid-serve``: a small local web app that finds a query photo's nearest gallery images.

The model is loaded once (:class:`~fastreid.inference.FeatureExtractor`), the gallery indexed once
with faiss (:class:`~fastreid.inference.search.GalleryIndex`, from a folder of images or from
features written by ``fastreid-extract``): :mod:`.gallery`. :func:`create_app` (:mod:`.app`) serves
the page (:mod:`.page`), ``POST /search`` (a multipart ``image``, optional ``k``), ``GET
/gallery/{i}`` (a thumbnail, by index: no client path is ever opened) and ``GET /health``. Uploads
(:mod:`.uploads`) are read with a size limit while they arrive and decoded in memory with the pixel
limit of training's image reader; nothing is written to disk. FastAPI and uvicorn are the ``serve``
extra.
"""

from __future__ import annotations

from .app import create_app
from .gallery import Gallery, GalleryError
from .uploads import UploadRejectedError, decode_upload, read_search_form, read_upload

__all__ = [
    "Gallery",
    "GalleryError",
    "UploadRejectedError",
    "create_app",
    "decode_upload",
    "read_search_form",
    "read_upload",
]
