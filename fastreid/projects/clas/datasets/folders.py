"""Image classification data sets stored as folders: ``<split>/<class name>/<image>`` (upstream
FastClas's layout, torchvision's ``ImageFolder``), read into ``(img_path, class_name, "0")`` items.

:class:`ImageFolderDataset` is the base a classification data set subclasses, as upstream's
``Hymenoptera`` does: set ``dataset_dir`` (the folder under the data sets root holding ``train/``
and ``val/``), register the class, name it in ``DATASETS.NAMES`` / ``DATASETS.TESTS``. ``train``
trains; ``val`` (upstream's ``query``) evaluates.

Mistakes stop here, before training, with one line naming the path and the fix: a split with no
class folder, a class folder with no image, a file whose extension or first bytes are no image
format the loader reads, an image outside any class folder, and a ``val`` class with no training
folder (the model could never predict it).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from tabulate import tabulate
from termcolor import colored

from fastreid.data.datasets.bases import DatasetFormatError, ImageDataset
from fastreid.data.datasets.parsing import IMAGE_EXTENSIONS, list_subfolders

__all__ = ["ImageFolderDataset", "ClassFolderItem", "read_class_folders", "image_format"]

logger = logging.getLogger("fastreid.clas_dataset")

ClassFolderItem = tuple  # (img_path, class_name, "0"): upstream's items, the camera a constant

#: The first bytes of the formats the loader decodes, by the extensions that may hold them.
_SIGNATURES = {"JPEG": (b"\xff\xd8\xff",), "PNG": (b"\x89PNG\r\n\x1a\n",), "BMP": (b"BM",)}


def image_format(path: str) -> str:
    """``"JPEG"``, ``"PNG"`` or ``"BMP"`` from the file's first bytes, or ``""`` for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise DatasetFormatError(f"cannot read {path} ({e.strerror}); check its permissions") from None
    for name, signatures in _SIGNATURES.items():
        if head.startswith(signatures):
            return name
    return ""


def _unknown_format(path: str, why: str) -> DatasetFormatError:
    return DatasetFormatError(
        f"{path} {why}, not an image format the loader reads ({', '.join(IMAGE_EXTENSIONS)}: JPEG, PNG, "
        f"BMP); convert it to JPEG or move it out of {os.path.dirname(path)}"
    )


def _class_images(owner: str, class_dir: str) -> list[str]:
    """The image files of one class folder, sorted; every other (not hidden) file is an error."""
    images, subfolders = [], []
    for name in sorted(os.listdir(class_dir)):
        path = os.path.join(class_dir, name)
        if name.startswith("."):
            continue  # .DS_Store and the like
        if os.path.isdir(path):
            subfolders.append(name)
            continue
        if not name.lower().endswith(IMAGE_EXTENSIONS):
            raise _unknown_format(path, f"has the extension {os.path.splitext(name)[1] or '(none)'!r}")
        if not image_format(path):
            raise _unknown_format(path, "does not start as a JPEG, PNG or BMP file does")
        images.append(path)
    if subfolders:
        logger.warning(
            f"{owner}: left out {len(subfolders)} sub-folder(s) of {class_dir} ({subfolders[0]} ...): "
            "a class's images are the files directly in its folder"
        )
    if not images:
        raise DatasetFormatError(
            f"{owner}: the class folder {class_dir} holds no images; add its images "
            f"({', '.join(IMAGE_EXTENSIONS)}) or remove the folder"
        )
    return images


def read_class_folders(owner: str, split_dir: str) -> list[ClassFolderItem]:
    """``(img_path, class_name, "0")`` of every image of ``split_dir/<class>/``, sorted by class
    then file name (upstream: ``os.scandir`` and ``glob`` order, the file system's)."""
    classes = list_subfolders(split_dir)
    if not classes:
        raise DatasetFormatError(
            f"{owner}: {split_dir} has no class folders; put each class's images in {split_dir}/<class name>/"
        )
    stray = [
        n
        for n in sorted(os.listdir(split_dir))
        if n.lower().endswith(IMAGE_EXTENSIONS) and not n.startswith(".")
    ]
    if stray:
        more = f" (and the {len(stray) - 1} other images there)" if len(stray) > 1 else ""
        raise DatasetFormatError(
            f"{owner}: {os.path.join(split_dir, stray[0])} is in no class folder; move it{more} "
            f"into {split_dir}/<its class name>/"
        )
    items: list[ClassFolderItem] = []
    for name in classes:
        items += [(path, name, "0") for path in _class_images(owner, os.path.join(split_dir, name))]
    return items


class ImageFolderDataset(ImageDataset):
    """``dataset_dir/train/<class>/*`` and ``dataset_dir/val/<class>/*`` under the data sets root.

    ``train``, ``query`` (upstream's name for ``val``, what its ``ClasTrainer`` evaluates) and an
    empty ``gallery``; ``classes`` are the training classes, sorted. ``val`` classes must be
    training classes (a ``val`` class may be left out: the model then never has to predict it)."""

    #: What the re-ID loaders check: a classification set is not a re-ID set.
    task = "image class"
    #: How to train it, for the error a re-ID config naming it gets.
    usage_hint = "train it with MODEL.HEADS.NAME ClasHead (e.g. configs/Clas/base-clas.yml)"
    dataset_dir = ""
    dataset_name = "image_folder"
    train_split = "train"
    val_split = "val"
    #: A command writing a synthetic copy, ``{root}`` standing for the data sets folder.
    synthetic_command = ""

    def __init__(self, root: str = "datasets", **kwargs: Any) -> None:
        if kwargs.pop("combineall", False):
            raise DatasetFormatError(
                f"{type(self).__name__}: DATASETS.COMBINEALL would train on the val images of a "
                "classification data set; set DATASETS.COMBINEALL False"
            )
        self.root = root
        self.dataset_dir = os.path.join(root, type(self).dataset_dir)
        self.train_dir = os.path.join(self.dataset_dir, self.train_split)
        self.val_dir = os.path.join(self.dataset_dir, self.val_split)
        self.synthetic_available = bool(self.synthetic_command)
        self.check_before_run([self.dataset_dir, self.train_dir, self.val_dir], root=root)
        train = read_class_folders(type(self).__name__, self.train_dir)
        val = read_class_folders(type(self).__name__, self.val_dir)
        self.classes = sorted({item[1] for item in train})
        self._check_val_classes(val)
        super().__init__(train, val, [], **kwargs)

    def _check_val_classes(self, val: list[ClassFolderItem]) -> None:
        known = set(self.classes)
        unknown = sorted({item[1] for item in val} - known)
        if unknown:
            extra = f" (and {len(unknown) - 1} more val classes)" if len(unknown) > 1 else ""
            raise DatasetFormatError(
                f"{type(self).__name__}: {os.path.join(self.val_dir, unknown[0])} is a class with no "
                f"training folder {os.path.join(self.train_dir, unknown[0])}{extra}; the model can only "
                "predict training classes: add its training images there, or remove it from val"
            )

    @property
    def val(self) -> list:
        """The validation images (upstream keeps them as ``query``)."""
        return self.query

    def combine_all(self) -> None:
        raise DatasetFormatError(f"{type(self).__name__}: DATASETS.COMBINEALL is not supported; set it False")

    def _class_table(self, rows: list) -> str:
        table = tabulate(rows, headers=["subset", "# classes", "# images"], tablefmt="pipe", numalign="left")
        return colored(table, "cyan")

    def show_train(self) -> None:
        rows = [["train", len({i[1] for i in self.train}), len(self.train)]]
        logger.info(f"=> Loaded {type(self).__name__}: \n" + self._class_table(rows))

    def show_test(self) -> None:
        rows = [["val", len({i[1] for i in self.query}), len(self.query)]]
        logger.info(f"=> Loaded {type(self).__name__}: \n" + self._class_table(rows))

    def show_summary(self) -> None:
        rows = [[s, len({i[1] for i in d}), len(d)] for s, d in (("train", self.train), ("val", self.query))]
        logger.info(f"=> Loaded {type(self).__name__}: \n" + self._class_table(rows))
