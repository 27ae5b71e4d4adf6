"""The config keys of FastReID's task families, added the upstream way when a config names one.

Upstream's projects call ``add_attr_config(cfg)`` (``add_retri_config``, ...) in their own
``train_net.py`` before ``merge_from_file``. Here a config file that names a family's meta
architecture, backbone, head or data set gets that family's keys by itself, so ``fastreid-train
--config-file configs/Attr/pa100.yml`` and ``cfg.merge_from_file(...)`` in a user's script work with
no extra call (calling the ``add_*_config`` function first, as upstream does, still works: each is
idempotent).

:data:`FAMILIES` is a table, not an import: a name a config may use -> ``"module:function"``. The
module is imported (which registers the family's data sets, backbones, heads and meta architectures) and the
function adds its keys, only when a config names one of its names. A family adds a line per name.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Mapping
from typing import Any, Callable

__all__ = ["FAMILIES", "family_names", "extend_for_names", "names_in"]

_ATTR = "fastreid.projects.attr:add_attr_config"  # pedestrian attributes (upstream's FastAttr)
_PARTIAL = "fastreid.projects.partial:add_partialreid_config"  # partial re-ID (upstream's PartialReID)
_DISTILL = "fastreid.projects.distill:add_distill_config"  # distillation (upstream's FastDistill)
_RETRI = "fastreid.projects.retri:add_retri_config"  # image retrieval (upstream's FastRetri)
_FACE = "fastreid.projects.face:add_face_config"  # face recognition (upstream's FastFace)
_CLAS = "fastreid.projects.clas:add_clas_config"  # image classification (upstream's FastClas)
_UDA = "fastreid.projects.uda:add_uda_config"  # unsupervised / domain-adaptive re-ID (Cluster Contrast)

#: A META_ARCHITECTURE, BACKBONE.NAME, HEADS.NAME or data set name -> "module:function adding the family's keys".
FAMILIES: dict[str, str] = {
    "AttrBaseline": _ATTR,
    "AttrHead": _ATTR,
    "PA100K": _ATTR,
    "Market1501Attr": _ATTR,
    "DukeMTMCAttr": _ATTR,
    "PartialBaseline": _PARTIAL,
    "DSRHead": _PARTIAL,
    "PartialREID": _PARTIAL,
    "PartialiLIDS": _PARTIAL,
    "OccludedREID": _PARTIAL,
    "DistillerOverhaul": _DISTILL,
    "build_resnet_backbone_distill": _DISTILL,
    "CUB": _RETRI,
    "Cars196": _RETRI,
    "SOP": _RETRI,
    "InShop": _RETRI,
    "FaceBaseline": _FACE,
    "FaceHead": _FACE,
    "MS1MV2": _FACE,
    "LFW": _FACE,
    "CFP_FP": _FACE,
    "CFP_FF": _FACE,
    "AgeDB_30": _FACE,
    "CALFW": _FACE,
    "CPLFW": _FACE,
    "VGG2_FP": _FACE,
    "ClasHead": _CLAS,
    "Hymenoptera": _CLAS,
    "ClusterContrast": _UDA,
}


def names_in(loaded: Mapping[str, Any]) -> set[str]:
    """The names a loaded YAML mapping (``_BASE_`` chain merged) uses that may belong to a family:
    ``MODEL.META_ARCHITECTURE``, ``MODEL.BACKBONE.NAME``, ``MODEL.HEADS.NAME``, ``DATASETS.NAMES``
    and ``DATASETS.TESTS``."""
    model = loaded.get("MODEL") or {}
    datasets = loaded.get("DATASETS") or {}
    found: set[str] = set()
    if isinstance(model, Mapping):
        found.add(str(model.get("META_ARCHITECTURE", "")))
        backbone = model.get("BACKBONE") or {}
        if isinstance(backbone, Mapping):
            found.add(str(backbone.get("NAME", "")))
        heads = model.get("HEADS") or {}
        if isinstance(heads, Mapping):
            found.add(str(heads.get("NAME", "")))
    if isinstance(datasets, Mapping):
        for key in ("NAMES", "TESTS"):
            found.update(_listed(datasets.get(key) or ()))
    found.discard("")
    return found


def _listed(value: Any) -> list[str]:
    """The names of a ``DATASETS.NAMES`` value: a list, or a string such as ``("CUB",)`` (upstream's
    YAML spelling of a tuple, which YAML reads as a string and the config decodes) or ``CUB``."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return [value]
        if isinstance(value, str):
            return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def _function(target: str) -> Callable[[Any], Any]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def family_names() -> list[str]:
    """Every name that brings in a family's keys."""
    return sorted(FAMILIES)


def extend_for_names(cfg: Any, names: Iterable[str]) -> list[str]:
    """Add the keys of every family one of ``names`` belongs to (each family once); the targets
    applied, in order."""
    applied: list[str] = []
    for name in sorted(set(names)):
        target = FAMILIES.get(name)
        if target is None or target in applied:
            continue
        _function(target)(cfg)
        applied.append(target)
    return applied
