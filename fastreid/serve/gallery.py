"""The gallery a server searches: its features in a faiss index, its file names, and thumbnails
read by index (never by a path a client names). Queries are searched in batches
(:meth:`Gallery.search_batch`); a gallery served from an extraction folder may change while it is
served (:meth:`Gallery.add`, :meth:`Gallery.remove`), the folder updated as one change
(:func:`fastreid.inference.shards.update_features`)."""

from __future__ import annotations

import functools
import io
import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Optional

import numpy as np
import torch
from PIL import Image

from fastreid.data.data_utils import read_image
from fastreid.inference.extractor import FeatureExtractor
from fastreid.inference.inputs import IMAGE_EXTENSIONS, list_image_files
from fastreid.inference.search import GalleryIndex, IndexSpec, market_ids
from fastreid.inference.shards import META, load_features, update_features
from fastreid.utils.atomic import atomic_write
from fastreid.utils.errors import UserError

__all__ = ["ADDED_IMAGES", "MAX_NAME", "Gallery", "GalleryError", "GalleryUpdateError"]

logger = logging.getLogger(__name__)

THUMBNAIL_HEIGHT = 160
#: Thumbnails kept in memory (a few KB each).
THUMBNAIL_CACHE = 512
#: The folder (inside the extraction folder) that holds the images added while serving.
ADDED_IMAGES = "images"
MAX_NAME = 128
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")  # no folder, no hidden file


class GalleryError(UserError, ValueError):
    """A gallery that cannot be served with this model (no images, features of another model, ...)."""


class GalleryUpdateError(UserError):
    """A gallery change the server refuses; ``status`` is the HTTP status of the answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _extraction_settings(features: str) -> dict[str, Any]:
    """``meta.json`` of a ``fastreid-extract`` output (the folder, or the folder of its .npy file)."""
    folder = features if os.path.isdir(features) else os.path.dirname(os.path.abspath(features))
    path = os.path.join(folder, META)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        logger.warning(f"{path} cannot be read ({e}); the gallery's extraction settings are not checked")
        return {}
    return meta if isinstance(meta, dict) else {}


def check_image_name(name: str) -> str:
    """``name`` if it can name an image added to the gallery (a file name of letters, digits,
    ``._-`` with an image extension, no folder), else a 400."""
    if not (0 < len(name) <= MAX_NAME and _NAME.fullmatch(name) and name.lower().endswith(IMAGE_EXTENSIONS)):
        raise GalleryUpdateError(
            400,
            f"Cannot name a gallery image {name[:MAX_NAME]!r}: use a file name of letters, digits, '.', '_' "
            f"and '-' (at most {MAX_NAME} characters, no folder) ending in {', '.join(IMAGE_EXTENSIONS)}",
        )
    return name


def _write_bytes(data: bytes, f: BinaryIO) -> None:
    f.write(data)


@dataclass(frozen=True)
class _State:
    """One version of the gallery: a search reads one and sees its rows, names and index agree."""

    feats: np.ndarray
    files: tuple[str, ...]
    index: GalleryIndex
    ids: tuple[Optional[tuple[int, int]], ...]  # (pid, camid) of Market-1501-style names


class Gallery:
    """A model and the gallery it searches. :meth:`search_batch` (and :meth:`search`) are safe from
    several threads: the model runs one forward at a time, under a lock, and a gallery change
    replaces the gallery's state as a whole.

    ``feats`` must come from the same model: their width is checked against the model's features
    at construction (``source`` names them in the error). ``folder``: the extraction folder the
    features came from, when the gallery may change while served (None: it may not)."""

    def __init__(
        self,
        extractor: FeatureExtractor,
        feats: np.ndarray,
        files: Sequence[str],
        *,
        source: str = "the gallery features",
        folder: Optional[str] = None,
    ) -> None:
        if len(feats) != len(files):
            raise GalleryError(f"{source}: {len(feats)} gallery features but {len(files)} file names")
        self.extractor = extractor
        self.folder = None if folder is None else os.path.abspath(folder)
        self._model_lock = threading.Lock()
        self._update_lock = threading.Lock()
        height, width = (int(v) for v in extractor.cfg.INPUT.SIZE_TEST)
        self.feature_dim = int(
            self.features(self.preprocess(torch.zeros(3, height, width, dtype=torch.uint8))).shape[1]
        )
        if feats.ndim != 2 or feats.shape[1] != self.feature_dim:
            raise GalleryError(
                f"{source}: features of shape {tuple(feats.shape)}, but the model makes {self.feature_dim}-d "
                "features; extract the gallery again with this model (fastreid-extract)"
            )
        self._state = self._make_state(np.asarray(feats, np.float32), [os.path.abspath(f) for f in files])
        self._thumbnail = functools.lru_cache(maxsize=THUMBNAIL_CACHE)(self._make_thumbnail)

    @staticmethod
    def _make_state(feats: np.ndarray, files: Sequence[str]) -> _State:
        feats = np.ascontiguousarray(feats, np.float32)
        index = GalleryIndex.build(feats, list(files), IndexSpec())
        return _State(feats, tuple(files), index, tuple(market_ids(f) for f in files))

    @classmethod
    def build(
        cls,
        extractor: FeatureExtractor,
        folder: Optional[str] = None,
        features: Optional[str] = None,
        *,
        editable: bool = False,
    ) -> Gallery:
        """From a folder of images (their features computed now) or from ``fastreid-extract``'s
        output (``features``: its folder or file). ``editable``: the gallery may change while it is
        served, and ``features`` must be the extraction folder, which each change updates."""
        if editable and not (features and os.path.isdir(features)):
            raise GalleryError(
                "gallery updates change the gallery's features folder in place: serve it with --features "
                "FOLDER, the folder fastreid-extract wrote (extract the gallery first: fastreid-extract "
                "--input IMAGES --output FOLDER ...)"
            )
        if features:
            feats, files = load_features(features)  # finishes an update a killed server left
            if not files:
                raise GalleryError(
                    f"{features} has no files.txt naming its images; the page could not show them "
                    "(write the features with fastreid-extract)"
                )
            cls._check_extraction(extractor, features, files)
            logger.info(f"Gallery: {len(files)} features from {features}")
            return cls(extractor, feats, files, source=features, folder=features if editable else None)
        if folder:
            files = list_image_files(folder)
            logger.info(f"Gallery: extracting the features of {len(files)} images in {folder}")
            feats = torch.cat([f for _, f in extractor.iter_path_features(files)]).numpy()
            return cls(extractor, feats, files, source=folder)
        raise GalleryError("a gallery needs a folder of images or a features file")

    @staticmethod
    def _check_extraction(extractor: FeatureExtractor, features: str, files: Sequence[str]) -> None:
        """Warn when ``features`` were made with other weights or test settings than ``extractor``
        (the distances would compare two models' features), or when their images are missing
        (their thumbnails cannot be shown)."""
        meta = _extraction_settings(features)
        weights = extractor.cfg.MODEL.WEIGHTS
        ours = {
            "weights": os.path.abspath(weights) if weights else "",
            "flip": extractor.flip,
            "size_test": list(extractor.cfg.INPUT.SIZE_TEST),
        }
        for key, value in ours.items():
            if key in meta and meta[key] != value:
                logger.warning(
                    f"{features} was extracted with {key} {meta[key]!r}, the server's model has {value!r}: "
                    "query and gallery features may not be comparable"
                )
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            logger.warning(
                f"{len(missing)} of the {len(files)} gallery images named by {features} are missing "
                f"(e.g. {missing[0]}); their thumbnails cannot be shown"
            )

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._state.files)

    @property
    def files(self) -> list[str]:
        """The gallery's image paths, row by row (of the current version)."""
        return list(self._state.files)

    @property
    def feats(self) -> np.ndarray:
        """The gallery's features, row by row (of the current version; not to be changed)."""
        return self._state.feats

    @property
    def editable(self) -> bool:
        return self.folder is not None

    def name(self, i: int) -> str:
        """The file name (no folder) of gallery image ``i``: what a client is shown."""
        return os.path.basename(self._state.files[i])

    def preprocess(self, image: torch.Tensor) -> torch.Tensor:
        """The 1 x 3 x H x W batch of one 3 x H x W uint8 RGB image, as the model takes it (any
        size: the test transforms resize it)."""
        return self.extractor.preprocess([image])

    def features(self, batch: torch.Tensor) -> np.ndarray:
        """The N x D features of a preprocessed batch (one forward, under the model's lock)."""
        with self._model_lock, torch.inference_mode():
            return self.extractor.features_of_batch(batch).float().cpu().numpy()

    def search_batch(self, batch: torch.Tensor, ks: Sequence[int]) -> list[list[dict]]:
        """For each image of the preprocessed ``batch``, its ``ks[i]`` nearest gallery images: rank,
        index, name, distance (and pid, camid for Market-1501-style names), nearest first. One
        forward and one index search for the whole batch."""
        feats = self.features(batch)
        state = self._state
        dist, idx = state.index.search(feats, max(ks))
        answers = []
        for row, k in enumerate(ks):
            results = []
            for rank, (d, i) in enumerate(zip(dist[row][:k], idx[row][:k]), start=1):
                if i < 0:
                    continue
                entry = {
                    "rank": rank,
                    "index": int(i),
                    "name": os.path.basename(state.files[i]),
                    "distance": max(0.0, float(d)),  # 1 - cos: below 0 only by rounding
                }
                ids = state.ids[i]
                if ids is not None:
                    entry.update(pid=ids[0], camid=ids[1])
                results.append(entry)
            answers.append(results)
        return answers

    def search(self, image: torch.Tensor, k: int) -> list[dict]:
        """The ``k`` nearest gallery images of one 3 x H x W uint8 RGB ``image``."""
        return self.search_batch(self.preprocess(image), [k])[0]

    def thumbnail(self, i: int) -> bytes:
        """The gallery image ``i`` as a JPEG, ``THUMBNAIL_HEIGHT`` pixels high (the last
        ``THUMBNAIL_CACHE`` are kept)."""
        files = self._state.files
        if not 0 <= i < len(files):
            raise IndexError(f"no gallery image {i} (the gallery has {len(files)})")
        return self._thumbnail(files[i])

    def _make_thumbnail(self, path: str) -> bytes:
        image = read_image(path, "RGB")
        width = max(1, round(image.width * THUMBNAIL_HEIGHT / max(1, image.height)))
        out = io.BytesIO()
        image.resize((width, THUMBNAIL_HEIGHT), Image.Resampling.BILINEAR).save(out, "JPEG", quality=85)
        return out.getvalue()

    # ------------------------------------------------------------------ changing
    def require_editable(self) -> str:
        """The extraction folder that gallery changes update; 403 when the gallery may not change."""
        if self.folder is None:
            raise GalleryUpdateError(
                403,
                "This gallery cannot be changed while served: start fastreid-serve with --features FOLDER "
                "--allow-gallery-updates",
            )
        return self.folder

    def _rows_named(self, state: _State, name: str) -> list[int]:
        return [i for i, f in enumerate(state.files) if os.path.basename(f) == name]

    def add(self, images: Sequence[tuple[str, bytes, torch.Tensor]]) -> list[int]:
        """Add ``(name, file bytes, preprocessed 1 x 3 x H x W batch)`` images to the gallery: their
        files written to the extraction folder's ``images/``, their features computed, the folder's
        features and file list updated as one change, then the gallery served with them. Returns
        their rows. 409 if a name is taken."""
        folder = self.require_editable()
        names = [check_image_name(name) for name, _, _ in images]
        if len(set(names)) != len(names):
            raise GalleryUpdateError(400, "The same name twice in one request: give each image its own name")
        with self._update_lock:
            state = self._state
            taken = [n for n in names if self._rows_named(state, n)]
            if taken:
                raise GalleryUpdateError(
                    409,
                    f"The gallery has an image named {taken[0]!r} already: remove it first, or pick another name",
                )
            feats = self.features(torch.cat([batch for _, _, batch in images]))
            images_dir = os.path.join(folder, ADDED_IMAGES)
            paths = [os.path.join(images_dir, n) for n in names]
            for path, (_, data, _) in zip(paths, images):
                # not yet in the gallery: a file of this name is what an interrupted add left
                atomic_write(path, functools.partial(_write_bytes, data))
            new_feats = np.concatenate([state.feats, feats])
            new_files = [*state.files, *paths]
            update_features(folder, new_feats, new_files)
            self._state = self._make_state(new_feats, new_files)
            self._thumbnail.cache_clear()
        logger.info(f"Gallery: added {', '.join(names)} ({len(new_files)} images)")
        return list(range(len(state.files), len(new_files)))

    def remove(self, name: str) -> None:
        """Remove the gallery image named ``name`` (a file name, no folder): from the extraction
        folder's features and file list (one change), and its file when it is one the server added.
        404 if there is none, 409 if several images have that name or it is the last one."""
        folder = self.require_editable()
        with self._update_lock:
            state = self._state
            rows = self._rows_named(state, name)
            if not rows:
                raise GalleryUpdateError(404, f"The gallery has no image named {name[:MAX_NAME]!r}")
            if len(rows) > 1:
                raise GalleryUpdateError(
                    409,
                    f"{len(rows)} gallery images are named {name!r} (in different folders): none was removed",
                )
            if len(state.files) == 1:
                raise GalleryUpdateError(
                    409, f"{name!r} is the gallery's last image: a gallery cannot be empty"
                )
            row = rows[0]
            keep = np.arange(len(state.files)) != row
            new_files = [f for i, f in enumerate(state.files) if i != row]
            new_feats = state.feats[keep]
            update_features(folder, new_feats, new_files)
            self._state = self._make_state(new_feats, new_files)
            self._thumbnail.cache_clear()
            path = state.files[row]
            if os.path.dirname(path) == os.path.join(folder, ADDED_IMAGES):  # never a file the user brought
                try:
                    os.remove(path)
                except OSError as e:
                    logger.warning(f"Gallery: {name} was removed, but not its file ({e})")
        logger.info(f"Gallery: removed {name} ({len(new_files)} images)")
