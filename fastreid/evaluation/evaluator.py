"""The evaluator protocol (reset / process / evaluate) and the inference loop that drives it."""

from __future__ import annotations

import datetime
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from typing import Any, Optional

import torch
from torch import nn
from tqdm import tqdm

from fastreid.utils import comm
from fastreid.utils.device import describe_batch, out_of_memory_error
from fastreid.utils.precision import PrecisionDecision

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


def _as_float32(outputs: Any) -> Any:
    """``outputs`` with float16/bfloat16 tensors (autocast's) as float32; dicts and sequences come back
    as dict and list."""
    if torch.is_tensor(outputs):
        return outputs.float() if outputs.is_floating_point() and outputs.dtype.itemsize < 4 else outputs
    if isinstance(outputs, Mapping):
        return {k: _as_float32(v) for k, v in outputs.items()}
    if isinstance(outputs, (list, tuple)):
        return [_as_float32(v) for v in outputs]
    return outputs


def inference_on_dataset(
    model: nn.Module,
    data_loader,
    evaluator: DatasetEvaluator,
    flip_test: bool = False,
    *,
    precision: Optional[PrecisionDecision] = None,
):
    """Run ``model`` over ``data_loader`` (eval mode, no grad) feeding ``evaluator``; returns its results.

    With ``flip_test`` the features of each image and of its horizontal mirror are averaged (upstream's
    ``TEST.FLIP.ENABLED``). ``precision`` (:mod:`fastreid.utils.precision`): the forward runs under its
    evaluation autocast; the evaluator gets float32 either way. Shows a progress bar on the main process.
    """
    num_devices = comm.get_world_size()
    try:
        total = len(data_loader)
    except TypeError:
        total = None
    logger.info(
        "Start inference on %s batches (%d process(es))", total if total is not None else "?", num_devices
    )
    evaluator.reset()

    def forward(batch: dict) -> Any:
        if precision is None or precision.eval_dtype is None:
            return model(batch)
        with precision.autocast(training=False):
            return _as_float32(model(batch))

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
            try:
                outputs = forward(inputs)
                if flip_test:
                    flipped = dict(inputs)
                    flipped["images"] = _flip(inputs["images"])
                    outputs = (outputs + forward(flipped)) / 2
            except torch.cuda.OutOfMemoryError as e:
                raise out_of_memory_error(
                    e, doing="evaluation", batch=describe_batch(inputs), settings="TEST.IMS_PER_BATCH"
                ) from e
            evaluator.process(inputs, outputs)
    total_time = time.perf_counter() - start
    logger.info("Total inference time: %s", datetime.timedelta(seconds=int(total_time)))
    results = evaluator.evaluate()
    # An evaluator may return None on non-main processes; callers expect a dict.
    return {} if results is None else results
