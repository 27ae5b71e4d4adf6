"""FaceEvaluator: upstream's accuracy and threshold of the pairs' L2-normalised embeddings
(verification.evaluate, itself checked against upstream's function), TAR@FAR, the pairs' order
restored from the images' indices whatever order the batches came in, the ROC saved."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fastreid.projects.face import FaceEvaluator
from fastreid.projects.face.verification import calculate_val, evaluate


def _pairs(n_pairs=60, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    same = torch.rand(n_pairs, generator=g) < 0.5
    left = torch.randn(n_pairs, dim, generator=g)
    right = torch.where(
        same[:, None],
        left + 0.5 * torch.randn(n_pairs, dim, generator=g),
        torch.randn(n_pairs, dim, generator=g),
    )
    features = torch.stack([left, right], dim=1).reshape(2 * n_pairs, dim) * 3.0  # not normalised
    return features, same.numpy()


def test_the_results_are_the_verification_functions(tmp_path):
    features, same = _pairs()
    evaluator = FaceEvaluator(None, same, "LFW", str(tmp_path))
    evaluator.reset()
    order = torch.randperm(len(features), generator=torch.Generator().manual_seed(1))
    for chunk in order.split(16):  # batches in any order: the images' indices put them back
        evaluator.process({"targets": chunk}, features[chunk])
    results = evaluator.evaluate()
    embeddings = F.normalize(features, dim=1).numpy()
    _, _, accuracy, thresholds = evaluate(embeddings, same)
    assert list(results) == ["Accuracy", "Threshold", "TAR@FAR=1e-03", "TAR@FAR=1e-02", "metric"]
    assert results["Accuracy"] == pytest.approx(accuracy.mean() * 100, abs=1e-9)
    assert results["metric"] == results["Accuracy"] and results["Accuracy"] > 80
    assert results["Threshold"] == pytest.approx(thresholds.mean(), abs=1e-9)
    val, _, _ = calculate_val(np.arange(0, 4, 0.001), embeddings[0::2], embeddings[1::2], same, 1e-2)
    assert results["TAR@FAR=1e-02"] == pytest.approx(val * 100, abs=1e-9)
    roc = json.loads((tmp_path / "LFW_roc.json").read_text())
    assert len(roc["fpr"]) == len(roc["tpr"]) == 400
    assert (tmp_path / "LFW_roc.png").is_file()


def test_a_wrong_number_of_embeddings_is_refused():
    features, same = _pairs(20)
    evaluator = FaceEvaluator(None, same, "LFW")
    evaluator.process({"targets": torch.arange(10)}, features[:10])
    with pytest.raises(ValueError, match="10 embeddings for 20 pairs"):
        evaluator.evaluate()
