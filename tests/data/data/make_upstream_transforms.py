"""Write ``upstream_transforms.npz`` by running upstream FastReID's own transform functions.

Run by hand against a checkout of upstream (JDAI-CV/fast-reid)::

    python tests/data/data/make_upstream_transforms.py /path/to/upstream-fastreid

Loads upstream's ``fastreid/data/transforms/functional.py`` and ``autoaugment.py`` as standalone
files (they import only numpy, torch and PIL) and records, on a fixed 24x16 image:
``to_tensor`` of an array and of a PIL image; each PIL op of ``functional`` at level 3 after
``np.random.seed(k)``; each AutoAugment op's level-to-argument values at levels 0..10 after
``random.seed(0)``; each policy's (op function, probability, level) triples. Not run by the suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_transforms.npz")


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_image() -> Image.Image:
    rng = np.random.default_rng(5)
    return Image.fromarray(rng.integers(0, 256, (24, 16, 3), dtype=np.uint8))


PIL_OPS = ["autocontrast", "equalize", "posterize", "rotate", "solarize", "shear_x", "shear_y",
           "translate_x", "translate_y", "color", "contrast", "brightness", "sharpness"]  # fmt: skip


def main(upstream: str) -> None:
    folder = os.path.join(upstream, "fastreid", "data", "transforms")
    functional = _load(os.path.join(folder, "functional.py"), "upstream_functional")
    autoaugment = _load(os.path.join(folder, "autoaugment.py"), "upstream_autoaugment")
    img = reference_image()
    out = {
        "to_tensor_array": functional.to_tensor(np.asarray(img)).numpy(),
        "to_tensor_pil": functional.to_tensor(img).numpy(),
    }
    for k, name in enumerate(PIL_OPS):
        np.random.seed(100 + k)
        out[f"op_{name}"] = np.asarray(getattr(functional, name)(img, 3))
    levels = {}
    hparams = dict(autoaugment._HPARAMS_DEFAULT)
    for name, level_fn in autoaugment.LEVEL_TO_ARG.items():
        random.seed(0)
        levels[name] = [list(level_fn(lv, hparams)) if level_fn else [] for lv in range(11)]
    policies = {}
    for name in ("original", "originalr", "v0", "v0r"):
        policies[name] = [
            [[op.aug_fn.__name__, op.prob, op.magnitude] for op in sub]
            for sub in autoaugment.auto_augment_policy(name)
        ]
    out["levels"] = np.array(json.dumps(levels))
    out["policies"] = np.array(json.dumps(policies))
    np.savez_compressed(OUT, **out)
    print("written", OUT)


if __name__ == "__main__":
    main(sys.argv[1])
