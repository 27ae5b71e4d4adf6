"""What the package tells the user to run or set, followed as printed, must work.

- A missing data set that has a synthetic copy names the command that makes it; run (with
  ``--small``, the suite's size), the data set then loads.
- An evaluation where every query has same-camera matches only says to set
  ``TEST.KEEP_SAME_CAMERA True``; set, the evaluation gives its metrics.

Followed elsewhere: "Resume with: ..." (tests/engine/test_reliability_tool.py, each way of starting a
run; tests/tools/test_demo_runs.py; tests/tune/test_tune.py), "continue it with: ..." of a folder
holding a run and "evaluate with --eval-only MODEL.WEIGHTS ..." of a failed evaluation
(tests/engine/test_reliability_tool.py), "Write it later with: fastreid-report ..."
(tests/report/test_report_end_to_end.py), the demo's "write it with: fastreid-report ..."
(tests/test_docs_commands.py runs the demos without a report, then fastreid-report on their folders).
"""

from __future__ import annotations

import re
import runpy
import sys

import pytest
import torch

# importing a family registers its data sets
import fastreid.projects.attr
import fastreid.projects.clas
import fastreid.projects.face
import fastreid.projects.partial
import fastreid.projects.retri  # noqa: F401  (ruff sees no use of this one)
from fastreid.config import get_cfg
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetNotFoundError, DatasetUsageError
from fastreid.evaluation.rank import NoValidQueryError
from fastreid.evaluation.reid_evaluation import ReidEvaluator

SYNTHETIC = re.compile(r"python -m (fastreid\.data\.synthetic[\w.]*) --root (\S+)")
# every data set that offers a synthetic copy when it is missing (checked against the registry)
WITH_SYNTHETIC = ["Market1501", "VeRi", "PA100K", "Hymenoptera", "MS1MV2", "LFW", "CUB", "PartialREID",
                  "PartialiLIDS", "OccludedREID"]  # fmt: skip


def _items(name: str, root: str) -> list:
    """What the data set holds (its query, training or pairs list: what it has), read from ``root``."""
    dataset = DATASET_REGISTRY.get(name)(root=root)
    for kind in ("query", "train", "carray"):
        try:
            return list(getattr(dataset, kind))
        except DatasetUsageError:  # not a list this kind of data set has
            continue
    raise AssertionError(f"{name} has no query, train or carray")


def _offers_synthetic(cls) -> bool:
    if hasattr(cls, "synthetic_available"):
        return bool(cls.synthetic_available)
    return bool(getattr(cls, "synthetic_command", ""))


def test_the_list_holds_every_data_set_with_a_synthetic_copy():
    offering = {name for name, cls in DATASET_REGISTRY if isinstance(cls, type) and _offers_synthetic(cls)}
    assert offering <= set(WITH_SYNTHETIC), sorted(offering - set(WITH_SYNTHETIC))


@pytest.mark.parametrize("name", WITH_SYNTHETIC)
def test_a_missing_data_set_names_the_command_that_makes_it(name, tmp_path, monkeypatch):
    root = str(tmp_path)
    with pytest.raises(DatasetNotFoundError) as missing:
        _items(name, root)
    found = SYNTHETIC.search(str(missing.value))
    assert found and found.group(2).rstrip(".") == root, str(missing.value)
    module = found.group(1)
    monkeypatch.setattr(sys, "argv", [module, "--root", root, "--small"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert done.value.code in (0, None)
    assert len(_items(name, root)) > 0


def test_same_camera_only_matches_say_to_set_keep_same_camera():
    """Two identities, each seen by one camera only: no cross-camera match exists."""
    cfg = get_cfg()
    cfg.TEST.METRIC = "cosine"
    feats = torch.eye(4)[[0, 1, 0, 0, 1, 1]].float() + 0.01 * torch.arange(6.0)[:, None]
    inputs = {"targets": torch.tensor([1, 2, 1, 1, 2, 2]), "camids": torch.tensor([0, 1, 0, 0, 1, 1])}

    def evaluate():
        evaluator = ReidEvaluator(cfg, num_query=2)
        evaluator.process(inputs, feats)
        return evaluator.evaluate()

    with pytest.raises(NoValidQueryError) as error:
        evaluate()
    setting = re.search(r"set (TEST\.KEEP_SAME_CAMERA) (True)", str(error.value))
    assert setting, str(error.value)
    cfg.merge_from_list([setting.group(1), setting.group(2)])
    results = evaluate()
    assert results["Rank-1"] == 100.0 and results["mAP"] == 100.0
