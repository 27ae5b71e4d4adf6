"""Writes upstream_overhaul.npz by running upstream FastReID's own overhaul distillation
(JDAI-CV/fast-reid, ``projects/FastDistill/fastdistill/overhaul.py``: ``get_margin_from_BN``,
``build_feature_connector`` and ``DistillerOverhaul.losses``) on the generated tensors of
``tests/distill/overhaul_cases.py``, in float64 on the CPU.

    python make_upstream_reference.py /path/to/fast-reid upstream_overhaul.npz

The file is loaded as it is; its two ``fastreid`` imports are stand-ins: ``META_ARCH_REGISTRY``
(a registry that registers nothing) and ``Distiller`` (an ``nn.Module`` whose ``losses`` returns
an empty dict, so ``losses`` gives ``loss_overhaul`` alone; the logit loss is tested with the
project's Distiller). The connectors are upstream's (``torch.manual_seed(0)``), their weights
recorded; they run in training mode (batch statistics), as in training. Not run by the test
suite (it needs upstream's code and scipy); the file it wrote is stored next to it.
"""

import os
import sys
import types

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from overhaul_cases import STUDENT_CHANNELS, TEACHER_CHANNELS, make_case  # noqa: E402


def load_upstream(upstream: str):
    for name in ("fastreid", "fastreid.modeling"):
        sys.modules[name] = types.ModuleType(name)
    meta = types.ModuleType("fastreid.modeling.meta_arch")
    meta.META_ARCH_REGISTRY = types.SimpleNamespace(register=lambda: lambda cls: cls)

    class Distiller(nn.Module):
        def losses(self, s_outputs, t_outputs, gt_labels):
            return {}

    meta.Distiller = Distiller
    sys.modules["fastreid.modeling.meta_arch"] = meta
    path = os.path.join(upstream, "projects", "FastDistill", "fastdistill", "overhaul.py")
    module = types.ModuleType("upstream_overhaul")
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module


def main(upstream: str, out: str) -> None:
    up = load_upstream(upstream)
    case = make_case()
    torch.manual_seed(0)
    model = up.DistillerOverhaul.__new__(up.DistillerOverhaul)
    nn.Module.__init__(model)
    arrays = {}
    for i in range(len(case["t_feats"])):
        connectors = nn.ModuleList(
            up.build_feature_connector(t, s) for t, s in zip(TEACHER_CHANNELS, STUDENT_CHANNELS)
        )
        setattr(model, f"connectors_{i}", connectors.double().train())
        for j in range(4):
            arrays[f"connector{i}_{j}"] = connectors[j][0].weight.detach().numpy()
            bn = nn.BatchNorm2d(TEACHER_CHANNELS[j])
            bn.weight.data = torch.from_numpy(case["bn_weight"][i][j]).float()
            bn.bias.data = torch.from_numpy(case["bn_bias"][i][j]).float()
            margin = up.get_margin_from_BN(bn)
            arrays[f"margin{i}_{j + 1}"] = margin.numpy()
            model.register_buffer(f"margin{i}_{j + 1}", margin.unsqueeze(1).unsqueeze(2).unsqueeze(0))
    s_feats = [torch.from_numpy(f) for f in case["s_feats"]]
    t_feats = [[torch.from_numpy(f) for f in feats] for feats in case["t_feats"]]
    gt = torch.arange(s_feats[0].shape[0])
    loss = model.losses({}, s_feats, [{}] * len(t_feats), t_feats, gt)["loss_overhaul"]
    print("loss_overhaul", float(loss))
    np.savez_compressed(out, loss_overhaul=np.float64(loss.item()), **arrays)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
