"""Train and test loaders of re-ID data, built from the config.

Both go through ``fastreid.data.loading.build_dataloader``, which decides workers, start method
and pin memory for the platform, and wraps the batch sampler so that every sample gets its own
seed (same seed, same batches, whatever the loader mode).

Each builder has a config form, ``build_reid_train_loader(cfg, start_iter=0)``, and an explicit
form that takes no config: the data set, the sizes, a :class:`LoaderRequest` (``loader=``), the
seed and the device (as detectron2's ``build_detection_train_loader``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import torch
from torch.utils.data import BatchSampler

from fastreid.config import configurable
from fastreid.utils import comm

from . import samplers
from .cache import DecodedCache
from .common import CommDataset
from .datasets import DATASET_REGISTRY
from .datasets.bases import DatasetUsageError
from .loading.factories import build_dataloader
from .loading.request import LoaderRequest
from .transforms import build_transforms, input_size

__all__ = [
    "build_reid_train_loader",
    "build_reid_test_loader",
    "fast_batch_collator",
    "trivial_batch_collator",
    "datasets_root",
    "build_train_sampler",
    "attach_decoded_cache",
]

logger = logging.getLogger(__name__)

TRAIN_SAMPLERS = ("TrainingSampler", "NaiveIdentitySampler", "BalancedIdentitySampler", "SetReWeightSampler")


def datasets_root() -> str:
    """``$FASTREID_DATASETS``, default ``datasets`` (read at call time, not import time)."""
    return os.getenv("FASTREID_DATASETS", "datasets")


#: Upstream's module attribute: the datasets root as it was when this module was imported (code
#: written against upstream reads it; this package calls :func:`datasets_root` at call time).
_root = datasets_root()


def _request(loader: Optional[LoaderRequest], num_workers: Optional[int]) -> Optional[LoaderRequest]:
    """The loading request: ``loader`` when given, else upstream's ``num_workers`` argument."""
    if loader is not None or num_workers is None:
        return loader
    return LoaderRequest(num_workers=int(num_workers))


def _per_rank(total: int, what: str) -> int:
    world = comm.get_world_size()
    if total % world or total < world:
        raise ValueError(f"{what} ({total}) must be a positive multiple of the number of processes ({world})")
    return total // world


def build_train_sampler(cfg, train_set: CommDataset, mini_batch_size: int, start: int = 0):
    """The sampler named by ``DATALOADER.SAMPLER_TRAIN``, seeded with ``SEED``, skipping ``start``
    of this rank's indices."""
    name = cfg.DATALOADER.SAMPLER_TRAIN
    seed = cfg.SEED if cfg.SEED >= 0 else None
    common: dict[str, Any] = {"seed": seed, "start": start}
    logger.info(f"Using training sampler {name}")
    if name == "TrainingSampler":
        return samplers.TrainingSampler(len(train_set), **common)
    num_instance = cfg.DATALOADER.NUM_INSTANCE
    if name == "NaiveIdentitySampler":
        return samplers.NaiveIdentitySampler(train_set.img_items, mini_batch_size, num_instance, **common)
    if name == "BalancedIdentitySampler":
        return samplers.BalancedIdentitySampler(train_set.img_items, mini_batch_size, num_instance, **common)
    if name == "SetReWeightSampler":
        return samplers.SetReWeightSampler(
            train_set.img_items, mini_batch_size, num_instance, cfg.DATALOADER.SET_WEIGHT, **common
        )
    raise ValueError(f"Unknown DATALOADER.SAMPLER_TRAIN {name!r}; choose one of {', '.join(TRAIN_SAMPLERS)}")


def attach_decoded_cache(cfg, dataset: Any, is_train: bool) -> None:
    """With ``DATALOADER.CACHE``: build (rank 0) or check the decoded cache, and read from it.
    ``dataset``: a :class:`CommDataset`, or any data set with ``img_items`` (image path first) and
    ``set_cache`` (the attribute sets' ``AttrDataset``)."""
    if not cfg.DATALOADER.CACHE:
        return
    size = input_size(cfg, is_train)
    if size is None or len(size) != 2:
        raise ValueError("DATALOADER.CACHE needs INPUT.SIZE_TRAIN / SIZE_TEST as [height, width]")
    cache = DecodedCache([item[0] for item in dataset.img_items], size, cfg.DATALOADER.CACHE_DIR or None)
    if comm.is_main_process():
        cache.ensure(progress=True)
    comm.synchronize()
    dataset.set_cache(cache)


def _reid_dataset(name: str, **kwargs):
    """Data set ``name`` for a re-ID loader; a set of another task (pedestrian attributes: no
    identities, no query/gallery) is a one-line error saying how to train it."""
    data = DATASET_REGISTRY.get(name)(root=datasets_root(), **kwargs)
    task = getattr(data, "task", "reid")
    if task != "reid":
        hint = getattr(data, "usage_hint", "")
        raise DatasetUsageError(
            f"{name} is a data set for {task} recognition, not re-ID" + (f": {hint}" if hint else "")
        )
    return data


def _train_loader_from_config(
    cfg, start_iter: int = 0, *, train_set=None, transforms=None, sampler=None, **kwargs
) -> dict:
    if transforms is None:
        transforms = build_transforms(cfg, is_train=True)
    if train_set is None:
        train_items = []
        for name in cfg.DATASETS.NAMES:
            data = _reid_dataset(name, combineall=cfg.DATASETS.COMBINEALL, **kwargs)
            if comm.is_main_process():
                data.show_train()
            train_items.extend(data.train)
        train_set = CommDataset(train_items, transforms, relabel=True, max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS)
        attach_decoded_cache(cfg, train_set, is_train=True)
    mini_batch_size = _per_rank(cfg.SOLVER.IMS_PER_BATCH, "SOLVER.IMS_PER_BATCH")
    if sampler is None:
        sampler = build_train_sampler(cfg, train_set, mini_batch_size, start=start_iter * mini_batch_size)
    return {
        "train_set": train_set,
        "sampler": sampler,
        "total_batch_size": cfg.SOLVER.IMS_PER_BATCH,
        "start_iter": start_iter,
        "loader": LoaderRequest.from_cfg(cfg),
        "seed": cfg.SEED,
        "device": cfg.MODEL.DEVICE,
    }


@configurable(from_config=_train_loader_from_config)
def build_reid_train_loader(
    train_set,
    *,
    sampler=None,
    total_batch_size: int,
    num_workers: Optional[int] = None,
    start_iter: int = 0,
    loader: Optional[LoaderRequest] = None,
    seed: Optional[int] = None,
    device: Optional[str] = None,
):
    """Infinite loader of training batches (dicts; see ``fast_batch_collator``).

    Usual call: ``build_reid_train_loader(cfg, start_iter=0)``; keyword overrides
    (``train_set=``, ``transforms=``, ``sampler=``, dataset kwargs) replace the parts built from
    the config. Explicit form: ``build_reid_train_loader(train_set, total_batch_size=64,
    loader=LoaderRequest(num_workers=4), seed=0, device="cpu")`` (no config). ``start_iter``
    positions the sampler and the per-sample seeds where a run that stopped after ``start_iter``
    iterations left off. A custom ``sampler`` must be positioned by the caller.
    """
    mini_batch_size = _per_rank(total_batch_size, "the total batch size")
    if sampler is None:
        sampler = samplers.TrainingSampler(len(train_set), seed=seed, start=start_iter * mini_batch_size)
    batch_sampler = BatchSampler(sampler, mini_batch_size, drop_last=True)
    request = _request(loader, num_workers)
    return _reid_loader(
        train_set, batch_sampler, request, seed, device, is_train=True, start_batch=start_iter
    )


def _test_loader_from_config(
    cfg, dataset_name: Optional[str] = None, *, test_set=None, num_query: int = 0, transforms=None, **kwargs
) -> dict:
    if transforms is None:
        transforms = build_transforms(cfg, is_train=False)
    if test_set is None:
        if dataset_name is None:
            if not cfg.DATASETS.TESTS:
                raise ValueError("build_reid_test_loader: no dataset_name and DATASETS.TESTS is empty")
            dataset_name = cfg.DATASETS.TESTS[0]
        data = _reid_dataset(dataset_name, **kwargs)
        if comm.is_main_process():
            data.show_test()
        test_set = CommDataset(
            data.query + data.gallery, transforms, relabel=False, max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS
        )
        attach_decoded_cache(cfg, test_set, is_train=False)
        num_query = len(data.query)
    return {
        "test_set": test_set,
        "test_batch_size": cfg.TEST.IMS_PER_BATCH,
        "num_query": num_query,
        "loader": LoaderRequest.from_cfg(cfg),
        "seed": cfg.SEED,
        "device": cfg.MODEL.DEVICE,
    }


@configurable(from_config=_test_loader_from_config)
def build_reid_test_loader(
    test_set,
    test_batch_size: int,
    num_query: int,
    num_workers: int = 4,
    *,
    loader: Optional[LoaderRequest] = None,
    seed: Optional[int] = None,
    device: Optional[str] = None,
):
    """``(loader, num_query)``: every query, then every gallery image, once and in order
    (sharded across ranks). Usual call: ``build_reid_test_loader(cfg, "Market1501")``; explicit
    form: ``build_reid_test_loader(test_set, 64, num_query)`` (upstream's, ``num_workers`` worker
    processes requested from the loading policy) or with ``loader=LoaderRequest(...)``."""
    mini_batch_size = _per_rank(test_batch_size, "TEST.IMS_PER_BATCH")
    batch_sampler = BatchSampler(samplers.InferenceSampler(len(test_set)), mini_batch_size, drop_last=False)
    request = _request(loader, num_workers)
    return _reid_loader(test_set, batch_sampler, request, seed, device, is_train=False), num_query


def _reid_loader(
    dataset,
    batch_sampler: BatchSampler,
    loader: Optional[LoaderRequest],
    seed: Optional[int],
    device: Optional[str],
    *,
    is_train: bool,
    start_batch: int = 0,
):
    """``build_dataloader`` with the re-ID batch collator (``loader`` None: default settings)."""
    return build_dataloader(
        dataset,
        batch_sampler=batch_sampler,
        collate_fn=fast_batch_collator,
        request=loader if loader is not None else LoaderRequest(),
        device=device,
        seed=seed,
        start_batch=start_batch,
        is_train=is_train,
    )


def trivial_batch_collator(batch: list) -> list:
    """A collator that returns the list of samples as is."""
    return batch


def fast_batch_collator(batched_inputs: Sequence) -> Any:
    """Stack a list of samples: tensors into one tensor, ints into int64, floats into float64,
    strings into a list, dicts key by key. Top-level, so it pickles for spawn workers."""
    elem = batched_inputs[0]
    if isinstance(elem, torch.Tensor):
        out = torch.empty((len(batched_inputs), *elem.shape), dtype=elem.dtype)
        return torch.stack(list(batched_inputs), out=out)
    if isinstance(elem, Mapping):
        return {key: fast_batch_collator([d[key] for d in batched_inputs]) for key in elem}
    if isinstance(elem, float):
        return torch.tensor(batched_inputs, dtype=torch.float64)
    if isinstance(elem, int):
        return torch.tensor(batched_inputs, dtype=torch.int64)
    if isinstance(elem, str):
        return list(batched_inputs)
    raise TypeError(f"fast_batch_collator: cannot collate {type(elem).__name__} values")
