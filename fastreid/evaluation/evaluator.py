"""The evaluator protocol (reset / process / evaluate) and the inference loop that drives it."""

from __future__ import annotations

import datetime
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import contextmanager

import torch
from torch import nn

from fastreid.utils import comm

__all__ = ["DatasetEvaluator", "DatasetEvaluators", "inference_on_dataset", "inference_context"]

logger = logging.getLogger(__name__)


class DatasetEvaluator:
    """Consumes (inputs, outputs) pairs batch by batch, then summarises them.

    ``reset()`` before a pass, ``process(inputs, outputs)`` for each batch, ``evaluate()`` at the end;
    ``evaluate`` returns a dict of results on the main process (and may return ``{}`` elsewhere).
    """

    def reset(self) -> None:
        pass

    def process(self, inputs: dict, outputs) -> None:
        raise NotImplementedError

    def evaluate(self) -> dict:
        raise NotImplementedError


class DatasetEvaluators(DatasetEvaluator):
    """Several evaluators run on the same pass; their results are merged (keys must not collide)."""

    def __init__(self, evaluators: Iterable[DatasetEvaluator]):
        super().__init__()
        self._evaluators = list(evaluators)

    def reset(self) -> None:
        for evaluator in self._evaluators:
            evaluator.reset()

    def process(self, inputs: dict, outputs) -> None:
        for evaluator in self._evaluators:
            evaluator.process(inputs, outputs)

    def evaluate(self) -> dict:
        results: OrderedDict = OrderedDict()
        for evaluator in self._evaluators:
            result = evaluator.evaluate()
            if comm.is_main_process() and result is not None:
                for k, v in result.items():
                    if k in results:
                        raise KeyError(f"Different evaluators produce results with the same key {k!r}")
                    results[k] = v
        return results


@contextmanager
def inference_context(model: nn.Module):
    """Eval mode for the duration of the block, then the previous training mode again."""
    training_mode = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(training_mode)


def _flip(images: torch.Tensor) -> torch.Tensor:
    return images.flip(dims=[3])


def inference_on_dataset(model: nn.Module, data_loader, evaluator: DatasetEvaluator, flip_test: bool = False):
    """Run ``model`` over ``data_loader`` (eval mode, no grad) feeding ``evaluator``; returns its results.

    With ``flip_test`` the features of each image and of its horizontal mirror are averaged (upstream's
    ``TEST.FLIP.ENABLED``). Shows a progress bar on the main process.
    """
    from tqdm import tqdm

    num_devices = comm.get_world_size()
    try:
        total = len(data_loader)
    except TypeError:
        total = None
    logger.info(
        "Start inference on %s batches (%d process(es))", total if total is not None else "?", num_devices
    )
    evaluator.reset()
    start = time.perf_counter()
    with inference_context(model), torch.no_grad():
        bar = tqdm(
            data_loader,
            total=total,
            desc="inference",
            disable=not comm.is_main_process(),
            dynamic_ncols=True,
            leave=False,
        )
        for inputs in bar:
            outputs = model(inputs)
            if flip_test:
                flipped = dict(inputs)
                flipped["images"] = _flip(inputs["images"])
                outputs = (outputs + model(flipped)) / 2
            evaluator.process(inputs, outputs)
    total_time = time.perf_counter() - start
    logger.info("Total inference time: %s", datetime.timedelta(seconds=int(total_time)))
    results = evaluator.evaluate()
    # An evaluator may return None on non-main processes; callers expect a dict.
    return {} if results is None else results
