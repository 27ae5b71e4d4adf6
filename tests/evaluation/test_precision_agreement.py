"""bf16 evaluation agrees with fp32: the same weights give features of the same direction and the
same metrics, up to bounds derived from bfloat16's precision (where the CPU has native bf16)."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from fastreid.config import get_cfg
from fastreid.data.build import build_reid_test_loader
from fastreid.evaluation import DatasetEvaluators, ReidEvaluator, inference_on_dataset
from fastreid.modeling import build_model
from fastreid.modeling.compile import optimize_for_inference
from fastreid.utils.precision import decide, native_bf16

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NATIVE, FACT = native_bf16()
pytestmark = pytest.mark.skipif(not NATIVE, reason=f"bfloat16 is not native here ({FACT})")

# bfloat16 keeps 8 significant bits: unit roundoff u = 2**-8. Autocast rounds the inputs of each
# convolution / matrix product to it (accumulation stays float32), so a ResNet-18 feature passes ~20
# roundings; with independent errors the relative error of a feature is ~u * sqrt(20) = 0.017, and
# 1 - cos(a, b) ~ err**2 / 2 = 1.5e-4 for a random error direction. The bound 1 - 1e-3 is ~7x that.
MIN_COSINE = 0.999
# Slack for the evaluator's own float32 distances against the float64 ones computed here.
DISTANCE_SLACK = 1e-5


class _Capture:
    """Keeps the features, identities and cameras of the pass (an evaluator with no results)."""

    def reset(self) -> None:
        self.feats: list[torch.Tensor] = []
        self.pids: list[torch.Tensor] = []
        self.camids: list[torch.Tensor] = []

    def process(self, inputs: dict, outputs: torch.Tensor) -> None:
        assert outputs.dtype == torch.float32  # whatever the autocast dtype
        self.feats.append(outputs.cpu())
        self.pids.append(torch.as_tensor(inputs["targets"]).cpu())
        self.camids.append(torch.as_tensor(inputs["camids"]).cpu())

    def evaluate(self) -> dict:
        return {}


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Tiny models: one torch thread (see tests/conftest.py)."""


@pytest.fixture(scope="module")
def cfg_and_model(tiny_resnet18_opts):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Demo", "bagtricks_demo.yml"))
    cfg.merge_from_list([*tiny_resnet18_opts, "MODEL.HEADS.NUM_CLASSES", 12, "TEST.IMS_PER_BATCH", 16])
    torch.manual_seed(5)
    model = build_model(cfg, log_summary=False)
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return cfg, model.eval()


def _evaluate(cfg, model: nn.Module, precision_name: str) -> tuple[dict, _Capture, int]:
    precision = decide(precision_name, "cpu")
    loader, num_query = build_reid_test_loader(cfg, dataset_name="Market1501")
    capture = _Capture()
    results = inference_on_dataset(
        optimize_for_inference(model, precision),
        loader,
        DatasetEvaluators([ReidEvaluator(cfg, num_query), capture]),
        precision=precision,
    )
    return results, capture, num_query


def _cosine_distances(feats: torch.Tensor, num_query: int) -> torch.Tensor:
    f = torch.nn.functional.normalize(feats.double(), dim=1)
    return 1 - f[:num_query] @ f[num_query:].T


def _metric_bounds(
    dist: torch.Tensor, delta: float, pids: torch.Tensor, camids: torch.Tensor, num_query: int
) -> tuple[float, float]:
    """How far Rank-1 and mAP (percent) can move when every query-gallery distance moves by at most
    ``delta``, computed from the fp32 distances ``dist``.

    A query's AP is (1/P) * sum_k k / (k + n_k), n_k the non-matches ranked before its k-th match.
    The k-th smallest match distance moves by at most delta, so n_k lies between the non-matches
    closer than d_k - 2 delta and those closer than d_k + 2 delta; AP falls as n_k grows. Rank-1
    counts n_1 == 0. Same-identity same-camera gallery items are left out, as the evaluator does.
    """
    margin = 2 * delta + DISTANCE_SLACK
    qp, gp = pids[:num_query], pids[num_query:]
    qc, gc = camids[:num_query], camids[num_query:]
    rank1_spread, ap_spread, valid = 0, 0.0, 0
    for q in range(num_query):
        keep = ~((gp == qp[q]) & (gc == qc[q]))
        d, match = dist[q][keep], (gp == qp[q])[keep]
        positives = d[match].sort().values
        negatives = d[~match]
        if not len(positives):
            continue  # no valid match: the evaluator skips the query
        valid += 1
        fewest = (negatives[None, :] < positives[:, None] - margin).sum(dim=1).double()
        most = (negatives[None, :] <= positives[:, None] + margin).sum(dim=1).double()
        k = torch.arange(1, len(positives) + 1, dtype=torch.float64)
        ap_spread += float((k / (k + fewest)).mean() - (k / (k + most)).mean())
        rank1_spread += int(fewest[0] == 0 and most[0] > 0)
    return 100.0 * rank1_spread / valid, 100.0 * ap_spread / valid


def test_bf16_features_and_metrics_agree_with_fp32(synthetic_market_root, monkeypatch, cfg_and_model):
    monkeypatch.setenv("FASTREID_DATASETS", synthetic_market_root)
    cfg, model = cfg_and_model
    fp32, run32, num_query = _evaluate(cfg, model, "fp32")
    bf16, run16, _ = _evaluate(cfg, model, "bf16")
    feats32, feats16 = torch.cat(run32.feats), torch.cat(run16.feats)
    pids, camids = torch.cat(run32.pids), torch.cat(run32.camids)
    assert torch.equal(pids, torch.cat(run16.pids))
    assert feats16.dtype == torch.float32 and feats16.shape == feats32.shape
    assert not torch.equal(feats16, feats32)  # bf16 did run

    cosine = torch.nn.functional.cosine_similarity(feats16.double(), feats32.double(), dim=1)
    assert float(cosine.min()) >= MIN_COSINE

    d32 = _cosine_distances(feats32, num_query)
    delta = float((_cosine_distances(feats16, num_query) - d32).abs().max())
    rank1_bound, map_bound = _metric_bounds(d32, delta, pids, camids, num_query)
    assert abs(bf16["Rank-1"] - fp32["Rank-1"]) <= rank1_bound + 1e-9
    assert abs(bf16["mAP"] - fp32["mAP"]) <= map_bound + 1e-9
