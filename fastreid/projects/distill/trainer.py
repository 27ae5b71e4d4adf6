"""``DistillTrainer``: :class:`~fastreid.engine.DefaultTrainer` for ``DistillerOverhaul``
(registered for it, so ``fastreid-train`` picks it), which puts the teachers' numbers beside the
student's.

Before the first training step each teacher (not the EMA copy of the student) is evaluated once on
``DATASETS.TESTS`` (when ``TEST.EVAL_PERIOD`` > 0) and its results logged; after every evaluation
of the student a table gives, per data set and metric, the teachers' values and the student's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

from tabulate import tabulate
from torch import nn

from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer
from fastreid.utils import comm
from fastreid.utils.checkpoint import unwrap_model

from .overhaul import DistillerOverhaul

__all__ = ["DistillTrainer", "side_by_side"]

logger = logging.getLogger("fastreid.distill")


def _by_dataset(results: Mapping[str, Any], tests: tuple) -> dict[str, Mapping[str, Any]]:
    if len(tests) == 1 and not all(isinstance(v, Mapping) for v in results.values()):
        return {tests[0]: results}
    return {k: v for k, v in results.items() if isinstance(v, Mapping)}


def side_by_side(
    teachers: list[tuple[str, Mapping[str, Any]]], student: Mapping[str, Any], tests: tuple
) -> str:
    """A table: one row per data set and metric, a column per teacher, then the student's."""
    student_sets = _by_dataset(student, tests)
    teacher_sets = [(name, _by_dataset(res, tests)) for name, res in teachers]
    rows = []
    for dataset, metrics in student_sets.items():
        for metric, value in metrics.items():
            row: list[Any] = [dataset, metric]
            row += [sets.get(dataset, {}).get(metric, float("nan")) for _, sets in teacher_sets]
            rows.append([*row, value])
    headers = ["dataset", "metric", *(f"teacher {name}" for name, _ in teachers), "student"]
    return tabulate(rows, headers=headers, tablefmt="pipe", floatfmt=".2f")


class DistillTrainer(DefaultTrainer):
    """DefaultTrainer that evaluates the teachers once and logs them beside the student."""

    @classmethod
    def _teachers(cls, model: nn.Module) -> list[nn.Module]:
        model = unwrap_model(model)
        teachers = list(model.__dict__.get("teachers", []))
        return [t for t in teachers if "teacher_config" in t.__dict__]  # the EMA copy has none

    def train(self):
        student = unwrap_model(self.model)
        if self.cfg.TEST.EVAL_PERIOD > 0 and "teacher_results" not in student.__dict__:
            results = []
            for teacher in self._teachers(self.model):
                name = teacher.__dict__["teacher_config"]
                logger.info(f"Evaluating teacher {name} once, before training")
                res = DefaultTrainer.test(self.cfg, teacher)
                teacher.eval()  # test() restores the mode it found: eval
                results.append((name, res))
            student.__dict__["teacher_results"] = results  # not a module attribute: never saved
        return super().train()

    @classmethod
    def test(cls, cfg: Any, model: nn.Module) -> dict:
        results = super().test(cfg, model)
        teachers: Optional[list] = unwrap_model(model).__dict__.get("teacher_results")
        if teachers and comm.is_main_process() and results:
            logger.info(
                "Teachers and student:\n" + side_by_side(teachers, results, tuple(cfg.DATASETS.TESTS))
            )
        return results


register_trainer(DistillerOverhaul, DistillTrainer)
