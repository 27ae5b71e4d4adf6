"""``fastreid-serve``: a small local web app that finds a query photo's nearest gallery images.

The model is loaded once (:class:`~fastreid.inference.FeatureExtractor`), the gallery indexed once
with faiss (:class:`~fastreid.inference.search.GalleryIndex`, from a folder of images or from
features written by ``fastreid-extract``); :func:`create_app` serves a page, ``POST /search`` (a
multipart ``image``, optional ``k``), ``GET /gallery/{i}`` (a thumbnail, by index: no client path is
ever opened) and ``GET /health``. Uploads are read with a size limit and decoded in memory with the
pixel limit of training's image reader; nothing is written to disk. FastAPI and uvicorn are the
``serve`` extra.
"""

from .gallery import Gallery
from .uploads import UploadRejectedError, read_upload

__all__ = ["Gallery", "UploadRejectedError", "create_app", "read_upload"]


def create_app(*args, **kwargs):
    """:func:`fastreid.serve.app.create_app` (imported on use: it needs the ``serve`` extra)."""
    from .app import create_app as _create_app

    return _create_app(*args, **kwargs)
