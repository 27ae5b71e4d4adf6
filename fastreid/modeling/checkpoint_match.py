"""Which model a checkpoint belongs to: its tensors' names and shapes against the models the
configs build (built on the ``meta`` device, so no memory is allocated and no weights are read).

Used by ``tools/convert_checkpoint.py``. Classifier rows (the number of training identities) may
differ: such a checkpoint still loads strictly once ``MODEL.HEADS.NUM_CLASSES`` matches, and
fine-tuning on another data set replaces the classifier anyway.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from fastreid.config import get_cfg

from .meta_arch.build import META_ARCH_REGISTRY

__all__ = [
    "ConfigMatch",
    "model_signature",
    "checkpoint_state",
    "match_configs",
    "is_classifier_key",
    "config_files",
]

Shapes = dict[str, tuple[int, ...]]


def is_classifier_key(key: str) -> bool:
    """The identity classifier of a head (``heads.weight``, MGN's ``b1_head.weight``, ...)."""
    return key == "heads.weight" or (key.endswith("_head.weight") and key.count(".") == 1)


def checkpoint_state(checkpoint: Any) -> dict[str, torch.Tensor]:
    """The model's tensors out of a checkpoint: ``{"model": ...}``, ``{"state_dict": ...}`` or a
    bare state dict; DataParallel's ``module.`` prefix removed."""
    state = checkpoint
    for wrapper in ("model", "state_dict"):
        if isinstance(state, Mapping) and isinstance(state.get(wrapper), Mapping):
            state = state[wrapper]
    if not isinstance(state, Mapping):
        raise ValueError(f"the file holds a {type(state).__name__}, not a state dict")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ValueError("the file holds no tensors")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module.") :]: v for k, v in tensors.items()}
    return tensors


def model_signature(cfg) -> Shapes:
    """``key -> shape`` of the state dict of the model ``cfg`` builds (on the meta device)."""
    cfg = cfg.clone()
    cfg.defrost()
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.DEVICE = "cpu"
    if cfg.MODEL.HEADS.NUM_CLASSES <= 0:
        cfg.MODEL.HEADS.NUM_CLASSES = 1  # compared without the classifier rows
    with torch.device("meta"):
        model = META_ARCH_REGISTRY.get(cfg.MODEL.META_ARCHITECTURE)(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@dataclass
class ConfigMatch:
    """How a checkpoint fits the model of ``configs`` (configs building the same model)."""

    configs: list[str]
    description: str
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    num_classes: int | None = None
    error: str = ""

    @property
    def strict(self) -> bool:
        return not (self.error or self.missing or self.unexpected or self.mismatched)

    @property
    def distance(self) -> int:
        return 10**9 if self.error else len(self.missing) + len(self.unexpected) + len(self.mismatched)


def _compare(state: Shapes, model: Shapes) -> tuple[list[str], list[str], dict, int | None]:
    missing = sorted(set(model) - set(state))
    unexpected = sorted(set(state) - set(model))
    mismatched, num_classes = {}, None
    for key in sorted(set(state) & set(model)):
        got, want = state[key], model[key]
        if is_classifier_key(key) and len(got) == len(want) == 2 and got[1] == want[1]:
            num_classes = got[0]
            continue
        if got != want:
            mismatched[key] = (got, want)
    return missing, unexpected, mismatched, num_classes


def _describe(cfg) -> str:
    bb = cfg.MODEL.BACKBONE
    parts = [cfg.MODEL.META_ARCHITECTURE, f"{bb.NAME} {bb.DEPTH}"]
    parts += [flag for flag, on in (("IBN", bb.WITH_IBN), ("SE", bb.WITH_SE), ("NL", bb.WITH_NL)) if on]
    return ", ".join(parts)


def match_configs(
    state: Mapping[str, torch.Tensor], config_files: Iterable[str], overrides: list[str] | None = None
) -> list[ConfigMatch]:
    """Every config's fit, best first. Configs building the same model are grouped."""
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    by_model: dict[str, ConfigMatch] = {}
    for path in config_files:
        cfg = get_cfg()
        try:
            cfg.merge_from_file(path)
            if overrides:
                cfg.merge_from_list(overrides)
            key = cfg.MODEL.dump() + str(cfg.INPUT.SIZE_TRAIN)  # ViT's position grid follows the input size
            if key in by_model:
                by_model[key].configs.append(path)
                continue
            missing, unexpected, mismatched, num_classes = _compare(shapes, model_signature(cfg))
            by_model[key] = ConfigMatch([path], _describe(cfg), missing, unexpected, mismatched, num_classes)
        except Exception as e:  # a config that does not build here is reported, not fatal
            by_model.setdefault(f"error:{path}", ConfigMatch([path], "", error=f"{type(e).__name__}: {e}"))
    return sorted(by_model.values(), key=lambda m: (m.distance, m.configs[0]))


def config_files(folders: Iterable[str]) -> list[str]:
    """The ``*.yml``/``*.yaml`` files under ``folders`` (sorted), skipping ``Base-*`` files."""
    found = []
    for folder in folders:
        for root, _, files in os.walk(folder):
            found += [
                os.path.join(root, f)
                for f in files
                if f.endswith((".yml", ".yaml")) and not f.startswith("Base-")
            ]
    return sorted(found)
