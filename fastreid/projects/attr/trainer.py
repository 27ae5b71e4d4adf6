"""``AttrTrainer``: :class:`~fastreid.engine.DefaultTrainer` for attribute recognition (upstream
FastAttr's ``train_net.AttrTrainer``), registered for ``AttrBaseline`` so that the standard
``fastreid-train --config-file configs/Attr/pa100.yml`` trains with it
(:mod:`fastreid.engine.trainers`).

What differs from re-ID training: the data sets are attribute sets wrapped in
:class:`~.attr_dataset.AttrDataset` (images and label vectors, no identities), the training set's
positive ratios become the model's ``sample_weights`` (the weighted binary cross-entropy), the
test set is each data set's ``test`` split, and the evaluator is :class:`~.attr_evaluation.AttrEvaluator`.
Before anything trains, the attribute counts of the files, of the other data sets and of
``MODEL.HEADS.NUM_CLASSES`` are checked against each other (one-line errors naming the file).
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Optional

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.data.build import (
    attach_decoded_cache,
    build_reid_test_loader,
    build_reid_train_loader,
    datasets_root,
)
from fastreid.data.datasets import DATASET_REGISTRY, UnknownDatasetError
from fastreid.data.datasets.bases import Dataset as ReidDataset
from fastreid.data.transforms import build_transforms
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer
from fastreid.utils import comm

from .attr_dataset import AttrDataset
from .attr_evaluation import AttrEvaluator
from .datasets import ATTRIBUTE_DATASETS
from .datasets.bases import DatasetFormatError
from .modeling import AttrBaseline

__all__ = ["AttrTrainer", "attribute_dataset"]

logger = logging.getLogger("fastreid.attr_dataset")


def attribute_dataset(name: str) -> Any:
    """The registered attribute data set class ``name``; an unknown name, or a re-ID set, is an
    :class:`UnknownDatasetError` naming the closest attribute set."""
    cls = DATASET_REGISTRY.get(name) if name in DATASET_REGISTRY else None
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, ReidDataset)):
        return cls
    known = sorted(
        {*ATTRIBUTE_DATASETS, *(n for n, c in DATASET_REGISTRY if getattr(c, "task", "") == "attribute")}
    )
    close = [n for n in known if n.lower() == name.lower()] or difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "a re-ID data set" if cls is not None else "not a registered data set"
    raise UnknownDatasetError(
        f"{name!r} in DATASETS.NAMES / DATASETS.TESTS is {what}, not an attribute data set.{hint} "
        f"Attribute data sets: {', '.join(known)}."
    )


def _source(dataset: Any, name: str) -> str:
    return getattr(dataset, "annotation_file", "") or name


def check_num_classes(cfg: Any, dataset: Any, name: str) -> None:
    """``MODEL.HEADS.NUM_CLASSES`` (unless 0: taken from the data) must be ``dataset``'s attribute count."""
    num_attrs = len(dataset.attr_dict)
    num_classes = cfg.MODEL.HEADS.NUM_CLASSES
    if num_classes and num_classes != num_attrs:
        raise ConfigError(
            f"{_source(dataset, name)} has {num_attrs} attributes but MODEL.HEADS.NUM_CLASSES is "
            f"{num_classes}: set MODEL.HEADS.NUM_CLASSES {num_attrs} (or 0, to take it from the data)"
        )


def check_sampler(cfg: Any) -> None:
    sampler = cfg.DATALOADER.SAMPLER_TRAIN
    if sampler != "TrainingSampler":
        raise ConfigError(
            f"DATALOADER.SAMPLER_TRAIN {sampler} samples by identity, and attribute data sets have "
            "no identities: set DATALOADER.SAMPLER_TRAIN TrainingSampler"
        )


def _device(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


class AttrTrainer(DefaultTrainer):
    """Upstream's ``AttrTrainer``: ``sample_weights`` (the positive ratio of each attribute in
    the training set) is set by :meth:`build_train_loader` and given to the model by
    :meth:`build_model` when ``MODEL.LOSSES.BCE.WEIGHT_ENABLED``."""

    sample_weights: Optional[torch.Tensor] = None

    @classmethod
    def build_model(cls, cfg: Any) -> nn.Module:
        model = super().build_model(cfg)
        weights = cls.sample_weights if cfg.MODEL.LOSSES.BCE.WEIGHT_ENABLED else None
        # a plain attribute, as upstream sets it (not a buffer: checkpoints stay upstream's)
        setattr(model, "sample_weights", None if weights is None else weights.to(_device(model)))  # noqa: B010
        return model

    @classmethod
    def build_train_loader(cls, cfg: Any, start_iter: int = 0) -> Any:
        check_sampler(cfg)
        logger.info("Prepare training set")
        train_items: list = []
        attr_dict = None
        first = ""
        for name in cfg.DATASETS.NAMES:
            dataset = attribute_dataset(name)(root=datasets_root(), combineall=cfg.DATASETS.COMBINEALL)
            if comm.is_main_process():
                dataset.show_train()
            if attr_dict is None:
                attr_dict, first = dataset.attr_dict, _source(dataset, name)
            elif attr_dict != dataset.attr_dict:
                raise DatasetFormatError(
                    f"{_source(dataset, name)} names {len(dataset.attr_dict)} attributes that differ from "
                    f"the {len(attr_dict)} of {first}: data sets trained together need the same attributes "
                    "in the same order; train on one of them (DATASETS.NAMES)"
                )
            check_num_classes(cfg, dataset, name)
            train_items.extend(dataset.train)
        if attr_dict is None:
            raise ConfigError("DATASETS.NAMES is empty: name an attribute data set, e.g. ('PA100K',)")

        train_set = AttrDataset(
            train_items,
            build_transforms(cfg, is_train=True),
            attr_dict,
            max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS,
        )
        attach_decoded_cache(cfg, train_set, is_train=True)
        data_loader = build_reid_train_loader(cfg, train_set=train_set, start_iter=start_iter)
        cls.sample_weights = train_set.sample_weights
        return data_loader

    @classmethod
    def _test_set(cls, cfg: Any, dataset_name: str) -> AttrDataset:
        dataset = attribute_dataset(dataset_name)(root=datasets_root())
        if comm.is_main_process():
            dataset.show_test()
        check_num_classes(cfg, dataset, dataset_name)
        test_set = AttrDataset(
            dataset.test,
            build_transforms(cfg, is_train=False),
            dataset.attr_dict,
            max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS,
        )
        attach_decoded_cache(cfg, test_set, is_train=False)
        return test_set

    @classmethod
    def build_test_loader(cls, cfg: Any, dataset_name: str) -> Any:
        """The loader of ``dataset_name``'s test split (upstream's: the loader alone)."""
        data_loader, _ = build_reid_test_loader(cfg, test_set=cls._test_set(cfg, dataset_name))
        return data_loader

    @classmethod
    def build_evaluator(cls, cfg: Any, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        test_set = cls._test_set(cfg, dataset_name)
        data_loader, _ = build_reid_test_loader(cfg, test_set=test_set)
        return data_loader, AttrEvaluator(cfg, test_set.attr_dict, cfg.TEST.THRES, output_dir)


register_trainer(AttrBaseline, AttrTrainer)
