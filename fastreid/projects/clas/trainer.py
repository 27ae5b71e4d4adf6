"""``ClasTrainer``: :class:`~fastreid.engine.DefaultTrainer` for image classification (upstream
FastClas's ``fastclas.trainer.ClasTrainer``), registered for the image-folder data sets (``Hymenoptera`` and
every :class:`~.datasets.folders.ImageFolderDataset`) so that the
standard ``fastreid-train --config-file configs/Clas/base-clas.yml`` trains with it (upstream's
config uses the plain ``Baseline``; :mod:`fastreid.engine.trainers`).

What differs from re-ID training: the data sets are classification sets wrapped in
:class:`~.dataset.ClasDataset` (images and class indices, the classes the training set's folder
names, sorted); the class index (index -> class name) is written to ``OUTPUT_DIR/idx2class.json``
as upstream does; the test set is each data set's ``val`` split (upstream's ``query``), indexed
with the training classes; the evaluator is :class:`~fastreid.evaluation.ClasEvaluator`.

The class index of an evaluation: the one the training in this process built (same data sets and
root), else ``idx2class.json`` next to ``MODEL.WEIGHTS`` (``--eval-only``, as upstream's
``train_net.py`` reads it), else the training sets' class folders. Upstream falls back to the val
set's own classes, which silently shifts the indices when val lacks a class.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from typing import Any, Optional

from fastreid.config import ConfigError
from fastreid.data.build import (
    attach_decoded_cache,
    build_reid_test_loader,
    build_reid_train_loader,
    datasets_root,
)
from fastreid.data.datasets import DATASET_REGISTRY, UnknownDatasetError
from fastreid.data.datasets.bases import DatasetFormatError
from fastreid.data.transforms import build_transforms
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer
from fastreid.evaluation.clas_evaluator import ClasEvaluator
from fastreid.utils import comm
from fastreid.utils.atomic import atomic_write

from .dataset import ClasDataset
from .datasets import CLASSIFICATION_DATASETS, ImageFolderDataset

__all__ = ["ClasTrainer", "classification_dataset", "IDX2CLASS_FILE"]

logger = logging.getLogger("fastreid.clas_dataset")

#: Where training writes the class index (upstream's name), in OUTPUT_DIR.
IDX2CLASS_FILE = "idx2class.json"


def classification_dataset(name: str) -> Any:
    """The registered classification data set class ``name``; an unknown name, or a set of
    another task, is an :class:`UnknownDatasetError` naming the closest classification set."""
    cls = DATASET_REGISTRY.get(name) if name in DATASET_REGISTRY else None
    if cls is not None and getattr(cls, "task", "reid") == "image class":
        return cls
    known = sorted(
        {
            *CLASSIFICATION_DATASETS,
            *(n for n, c in DATASET_REGISTRY if getattr(c, "task", "") == "image class"),
        }
    )
    close = [n for n in known if n.lower() == name.lower()] or difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "a data set of another task" if cls is not None else "not a registered data set"
    raise UnknownDatasetError(
        f"{name!r} in DATASETS.NAMES / DATASETS.TESTS is {what}, not an image classification data set.{hint} "
        f"Classification data sets: {', '.join(known)} (or subclass "
        "fastreid.projects.clas.ImageFolderDataset and register it)."
    )


def check_num_classes(cfg: Any, num_classes: int, source: str) -> None:
    """``MODEL.HEADS.NUM_CLASSES`` (unless 0: taken from the data) must be the number of classes."""
    configured = cfg.MODEL.HEADS.NUM_CLASSES
    if configured and configured != num_classes:
        raise ConfigError(
            f"{source} has {num_classes} classes but MODEL.HEADS.NUM_CLASSES is {configured}: set "
            f"MODEL.HEADS.NUM_CLASSES {num_classes} (or 0, to take it from the data)"
        )


def _check_combineall(cfg: Any) -> None:
    if cfg.DATASETS.COMBINEALL:
        raise ConfigError(
            "DATASETS.COMBINEALL would train on the val images of the classification data sets; "
            "set DATASETS.COMBINEALL False"
        )


def _train_items(cfg: Any, show: bool) -> tuple[list, str]:
    """The training items of ``DATASETS.NAMES`` and a name for them in messages."""
    if not cfg.DATASETS.NAMES:
        raise ConfigError("DATASETS.NAMES is empty: name a classification data set, e.g. ('Hymenoptera',)")
    items: list = []
    folders = []
    for name in cfg.DATASETS.NAMES:
        dataset = classification_dataset(name)(root=datasets_root())
        if show and comm.is_main_process():
            dataset.show_train()
        items.extend(dataset.train)
        folders.append(getattr(dataset, "train_dir", name))
    return items, " + ".join(folders)


def read_idx2class(path: str) -> dict[int, str]:
    """The class index a training run wrote (``{"0": "ants", ...}``), checked."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        mapping = {int(k): str(v) for k, v in raw.items()}
    except (OSError, ValueError, AttributeError, TypeError) as e:
        raise DatasetFormatError(
            f"{path} is not a class index ({e}); it must map 0..N-1 to class names, as training writes it "
            "(delete it to take the classes from the training folders)"
        ) from None
    if sorted(mapping) != list(range(len(mapping))):
        raise DatasetFormatError(
            f"{path} does not index its classes 0..{len(mapping) - 1}; use the file training wrote "
            "(or delete it to take the classes from the training folders)"
        )
    return mapping


class ClasTrainer(DefaultTrainer):
    """Upstream's ``ClasTrainer``: ``idx2class`` (index -> class name) is set by
    :meth:`build_train_loader` and saved to ``OUTPUT_DIR/idx2class.json`` by
    :meth:`auto_scale_hyperparams`."""

    idx2class: Optional[dict] = None
    _idx2class_of: Optional[tuple] = None  # (DATASETS.NAMES, data sets root) idx2class was built from

    @classmethod
    def build_train_loader(cls, cfg: Any, start_iter: int = 0) -> Any:
        logger.info("Prepare training set")
        _check_combineall(cfg)
        items, source = _train_items(cfg, show=True)
        train_set = ClasDataset(
            items, build_transforms(cfg, is_train=True), max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS
        )
        check_num_classes(cfg, train_set.num_classes, source)
        attach_decoded_cache(cfg, train_set, is_train=True)
        cls.idx2class = dict(train_set.idx_to_class)
        cls._idx2class_of = (tuple(cfg.DATASETS.NAMES), datasets_root())
        return build_reid_train_loader(cfg, train_set=train_set, start_iter=start_iter)

    @classmethod
    def auto_scale_hyperparams(cls, cfg: Any, num_classes: int) -> Any:
        """``MODEL.HEADS.NUM_CLASSES`` 0 becomes the number of classes; the class index is saved
        to ``OUTPUT_DIR/idx2class.json`` (upstream's name and format: ``{"0": "ants", ...}``).
        A class method (upstream: a static one) so that a subclass writes its own index."""
        cfg = DefaultTrainer.auto_scale_hyperparams(cfg, num_classes)
        output_dir = cfg.OUTPUT_DIR
        if comm.is_main_process() and output_dir and cls.idx2class is not None:
            text = json.dumps({str(k): v for k, v in cls.idx2class.items()})
            atomic_write(os.path.join(output_dir, IDX2CLASS_FILE), lambda f: f.write(text.encode("utf-8")))
        return cfg

    @classmethod
    def class_index(cls, cfg: Any) -> dict[int, str]:
        """The class index the test sets are labelled with (see the module's docstring)."""
        if cls.idx2class is not None and cls._idx2class_of == (tuple(cfg.DATASETS.NAMES), datasets_root()):
            return {int(k): v for k, v in cls.idx2class.items()}
        if cfg.MODEL.WEIGHTS:
            path = os.path.join(os.path.dirname(cfg.MODEL.WEIGHTS), IDX2CLASS_FILE)
            if os.path.isfile(path):
                logger.info(f"Classes: {path}")
                return read_idx2class(path)
        items, source = _train_items(cfg, show=False)
        logger.info(f"Classes: the class folders of {source}")
        return dict(ClasDataset(items).idx_to_class)

    @classmethod
    def _test_set(cls, cfg: Any, dataset_name: str) -> ClasDataset:
        dataset = classification_dataset(dataset_name)(root=datasets_root())
        if comm.is_main_process():
            dataset.show_test()
        idx2class = cls.class_index(cfg)
        check_num_classes(cfg, len(idx2class), f"the class index of {dataset_name}")
        test_set = ClasDataset(
            dataset.query,
            build_transforms(cfg, is_train=False),
            idx2class,
            max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS,
        )
        attach_decoded_cache(cfg, test_set, is_train=False)
        return test_set

    @classmethod
    def build_test_loader(cls, cfg: Any, dataset_name: str) -> Any:
        """The loader of ``dataset_name``'s val split (upstream's: the loader alone)."""
        data_loader, _ = build_reid_test_loader(cfg, test_set=cls._test_set(cfg, dataset_name))
        return data_loader

    @classmethod
    def build_evaluator(cls, cfg: Any, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        return cls.build_test_loader(cfg, dataset_name), ClasEvaluator(cfg, output_dir)


register_trainer(ImageFolderDataset, ClasTrainer)
