"""Writes upstream_dsr.npz by running upstream FastReID's own DSR code (JDAI-CV/fast-reid,
``projects/PartialReID/partialreid/dsr_distance.py`` and ``dsr_evaluation.py``) on the generated
spatial features of ``tests/partial/spatial_cases.py``.

    python make_upstream_reference.py /path/to/fast-reid upstream_dsr.npz

Upstream's code runs on CUDA in float32; here it runs on the CPU in float64, its source changed
as it is loaded by exactly these textual replacements (each checked to occur): ``.cuda()``
removed, ``torch.FloatTensor`` -> ``torch.DoubleTensor``, and the distance matrix and the ridge
term created as float64. Everything else, the evaluator's lambda search and upstream's own
``evaluate_rank`` (its Python version: ``fastreid/evaluation/rank.py`` loaded alone), is
upstream's code as it is. The evaluator's ``fastreid`` imports other than ``rank`` are stand-ins
(the base class, ``comm.get_world_size`` = 1). Not run by the test suite (it needs upstream's
code); the file it wrote is stored next to it.
"""

import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from spatial_cases import checksum, make_case  # noqa: E402

REPLACEMENTS = [
    (".cuda()", "", 7),
    ("torch.FloatTensor", "torch.DoubleTensor", 4),
    ("torch.ones(len(array1), len(array2))", "torch.ones(len(array1), len(array2), dtype=torch.float64)", 1),
    ("torch.eye(110)", "torch.eye(110, dtype=torch.float64)", 1),
]


def load(name: str, path: str, patch: bool = False):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    if patch:
        for old, new, count in REPLACEMENTS:
            assert source.count(old) == count, (old, source.count(old))
            source = source.replace(old, new)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def load_upstream(upstream: str):
    for name in ("fastreid", "fastreid.evaluation", "fastreid.utils", "partialreid"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["partialreid"].__path__ = []
    evaluator = types.ModuleType("fastreid.evaluation.evaluator")
    evaluator.DatasetEvaluator = type("DatasetEvaluator", (), {})
    sys.modules["fastreid.evaluation.evaluator"] = evaluator
    comm = types.ModuleType("fastreid.utils.comm")
    comm.get_world_size = lambda: 1
    sys.modules["fastreid.utils.comm"] = comm
    sys.modules["fastreid.utils"].comm = comm
    load("fastreid.evaluation.rank", os.path.join(upstream, "fastreid", "evaluation", "rank.py"))
    project = os.path.join(upstream, "projects", "PartialReID", "partialreid")
    distance = load("partialreid.dsr_distance", os.path.join(project, "dsr_distance.py"), patch=True)
    evaluation = load("partialreid.dsr_evaluation", os.path.join(project, "dsr_evaluation.py"))
    return distance, evaluation


class Cfg(types.SimpleNamespace):
    pass


def run(distance, evaluation, case: dict, dsr: bool) -> dict:
    cfg = Cfg(TEST=Cfg(METRIC="cosine", DSR=Cfg(ENABLED=dsr)))
    ev = evaluation.DsrEvaluator(cfg, case["num_query"])
    ev.reset()
    feats = torch.from_numpy(case["features"])
    spatial = torch.from_numpy(case["spatial"])
    scores = torch.from_numpy(case["scores"])
    n = feats.shape[0]
    for start in range(0, n, 16):  # batches, as the loader gives them
        sl = slice(start, start + 16)
        inputs = {"targets": list(case["pids"][sl]), "camids": list(case["camids"][sl])}
        ev.process(inputs, (feats[sl], spatial[sl], scores[sl]))
    results = ev.evaluate()
    return {k: float(v) for k, v in results.items()}


def main(upstream: str, out: str) -> None:
    distance, evaluation = load_upstream(upstream)
    case = make_case()
    nq = case["num_query"]
    feats = torch.nn.functional.normalize(torch.from_numpy(case["features"]))
    spatial = torch.nn.functional.normalize(torch.from_numpy(case["spatial"])).numpy()
    dist = 1 - torch.mm(feats[:nq], feats[nq:].t()).numpy()
    dsr_dist = distance.compute_dsr_dist(
        spatial[:nq], spatial[nq:], dist, torch.from_numpy(case["scores"][:nq])
    )
    with_dsr = run(distance, evaluation, case, True)
    without = run(distance, evaluation, case, False)
    keys = list(with_dsr)
    print("DSR on: ", with_dsr)
    print("DSR off:", without)
    np.savez_compressed(
        out,
        checksum=np.asarray(checksum(case)),
        dsr_dist=np.asarray(dsr_dist, dtype=np.float64),
        metric_names=np.asarray(keys),
        metrics_dsr=np.asarray([with_dsr[k] for k in keys]),
        metrics_global=np.asarray([without[k] for k in keys]),
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
