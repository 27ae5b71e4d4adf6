"""The family against cluster-contrast-reid's own code, run on recorded inputs
(``tests/evaluation/data/cluster_contrast_reference.npz``, written by
``tests/evaluation/data/make_cluster_contrast_reference.py``): the pseudo labels its training script
makes (its Jaccard distance, then DBSCAN) and its cluster memory (``cm``: outputs, gradient, the
momentum update), in float64."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from fastreid.projects.uda import pseudo_labels
from fastreid.projects.uda.cluster_contrast import _MemoryLogits

DATA = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "evaluation", "data", "cluster_contrast_reference.npz"
)


@pytest.fixture(scope="module")
def cc_ref():
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


def test_pseudo_labels_are_cluster_contrasts(cc_ref):
    result = pseudo_labels(torch.from_numpy(cc_ref["feats"]), k1=30, k2=6, eps=0.6, min_samples=4)
    want = cc_ref["labels_k30_6_eps0.6_min4"]
    np.testing.assert_array_equal(result.labels, want)
    assert result.num_clusters == want.max() + 1 and 0 < result.outlier_share < 0.1


def test_cluster_memory_is_cluster_contrasts(cc_ref):
    features = torch.tensor(cc_ref["cm_inputs"], requires_grad=True)
    memory = torch.tensor(cc_ref["cm_memory_before"])
    targets = torch.tensor(cc_ref["cm_targets"])
    out = _MemoryLogits.apply(features, targets, memory, float(cc_ref["cm_momentum"]))
    np.testing.assert_allclose(out.detach().numpy(), cc_ref["cm_outputs"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(memory.numpy(), cc_ref["cm_memory_before"])  # the forward pass leaves it
    out.backward(torch.tensor(cc_ref["cm_grad_outputs"]))
    np.testing.assert_allclose(features.grad.numpy(), cc_ref["cm_grad_inputs"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(memory.numpy(), cc_ref["cm_memory_after"], rtol=0, atol=1e-12)
