"""Regenerate the files in this folder from upstream FastReID's own backbone code.

    python tests/modeling/data/upstream/make_references.py /path/to/upstream-fastreid [case ...]

Run with upstream's checkout (not this project) importable: the script puts it first on
``sys.path`` and works from its folder (upstream's RegNet reads its YAML files by relative path).
Not a test: the test suite only reads what this writes.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_reference_helpers():
    path = os.path.join(HERE, "..", "..", "upstream_reference.py")
    spec = importlib.util.spec_from_file_location("upstream_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(upstream: str, only: list[str]) -> None:
    ref = _load_reference_helpers()
    upstream = os.path.abspath(upstream)
    commit = subprocess.run(
        ["git", "-C", upstream, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    sys.path.insert(0, upstream)
    os.chdir(upstream)
    import torch

    from fastreid.config import get_cfg
    from fastreid.modeling.backbones import build_backbone
    from fastreid.modeling.backbones.regnet import config as regnet_config

    # Upstream merges each RegNet/EfficientNet YAML into one global cfg, so a RegNetX built after a
    # RegNetY keeps SE_ON=True. Each case here starts from the pristine defaults instead.
    pristine = regnet_config.cfg.clone()
    torch.set_num_threads(1)
    for case, (overrides, with_output) in ref.CASES.items():
        if only and case not in only:
            continue
        regnet_config.cfg.merge_from_other_cfg(pristine)
        cfg = get_cfg()
        cfg.MODEL.BACKBONE.PRETRAIN = False
        for key, value in overrides.items():
            setattr(cfg.MODEL.BACKBONE, key, value)
        model = build_backbone(cfg).eval()
        name = cfg.MODEL.BACKBONE.NAME
        module_file = os.path.relpath(sys.modules[type(model).__module__].__file__, upstream)
        header = (
            f"# upstream FastReID {module_file} ({name}), commit {commit}\n"
            f"# MODEL.BACKBONE overrides: {overrides}\n# key shape dtype\n"
        )
        ref.write_keys(os.path.join(HERE, f"{case}.keys.txt"), model.state_dict(), header)
        if with_output:
            keys = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
            model.load_state_dict(ref.deterministic_state_dict(keys), strict=True)
            with torch.no_grad():
                out = model(ref.reference_input())
            summary = ref.summarize_output(out)
            summary["source"] = f"{module_file} @ {commit}"
            torch.save(summary, os.path.join(HERE, f"{case}.out.pt"))
        print(case, "written", "with output" if with_output else "")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
