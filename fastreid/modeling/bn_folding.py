"""Batch-norm folding for inference: a copy of a model whose convolutions absorb the BatchNorm
that follows them.

In eval mode a BatchNorm after a convolution is an affine map per channel with fixed statistics,
``y = (conv(x) - mean) / sqrt(var + eps) * gamma + beta``, so it can be folded into the
convolution's weight and bias once; the forward then skips a full pass over every activation
(53 norms in a ResNet-50). Only the copy changes: the model given, which training may go on
updating, is never touched.

Pairs are found with ``torch.fx``: the model is traced with convolutions and norms as leaves
(the root first; a module that cannot be traced, e.g. a meta-architecture taking a batch dict,
has its children traced instead). A norm is folded into the convolution before it when the
convolution's output goes to that norm and nowhere else, and each is called exactly once.
The module tree stays as it was (the folded norm becomes ``nn.Identity``), so the model's own
``forward`` code and attributes are kept. Convolutions or norms whose class overrides
``forward`` with other arithmetic are left alone.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import fx, nn
from torchvision.ops.misc import FrozenBatchNorm2d

from fastreid.layers.batch_norm import GhostBatchNorm
from fastreid.layers.batch_norm import SyncBatchNorm as FastreidSyncBatchNorm

__all__ = ["fold_batchnorm", "foldable_pairs"]

logger = logging.getLogger(__name__)

_NORM_TYPES = (nn.modules.batchnorm._BatchNorm, FrozenBatchNorm2d)
# forward methods whose eval-mode arithmetic is the running-statistics affine map folded here
_NORM_FORWARDS = {
    nn.modules.batchnorm._BatchNorm.forward,
    nn.SyncBatchNorm.forward,
    FastreidSyncBatchNorm.forward,
    GhostBatchNorm.forward,
    FrozenBatchNorm2d.forward,
}


class _LeafTracer(fx.Tracer):
    """Traces through everything but convolutions and norms (and torch's own leaf modules)."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, (nn.Conv2d, *_NORM_TYPES)) or super().is_leaf_module(m, module_qualified_name)


def _is_plain_conv(m: nn.Module) -> bool:
    return (
        isinstance(m, nn.Conv2d)
        and type(m).forward is nn.Conv2d.forward
        and m.padding_mode == "zeros"
        and isinstance(m.weight, torch.Tensor)
    )


def _is_foldable_norm(m: nn.Module) -> bool:
    if type(m).forward not in _NORM_FORWARDS:
        return False
    if isinstance(m, FrozenBatchNorm2d):
        return True
    assert isinstance(m, nn.modules.batchnorm._BatchNorm)
    return not m.training and m.running_mean is not None and m.running_var is not None


def _traced_pairs(module: nn.Module) -> list[tuple[str, str]] | None:
    """(conv, norm) qualified names (relative to ``module``) of the foldable pairs in ``module``'s
    traced graph; None when ``module`` cannot be traced."""
    try:
        graph = _LeafTracer().trace(module)
    except Exception:  # any Python the tracer cannot follow: trace the children instead
        return None
    modules = dict(module.named_modules())
    calls = Counter(node.target for node in graph.nodes if node.op == "call_module")
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or not _is_foldable_norm(modules[str(node.target)]):
            continue
        source = node.args[0] if node.args else None
        if not isinstance(source, fx.Node) or source.op != "call_module":
            continue
        conv = modules[str(source.target)]
        norm = modules[str(node.target)]
        if (
            _is_plain_conv(conv)
            and len(source.users) == 1
            and len(node.args) == 1
            and not node.kwargs
            and calls[source.target] == 1
            and calls[node.target] == 1
            and conv.out_channels == norm.weight.shape[0]
        ):
            pairs.append((str(source.target), str(node.target)))
    return pairs


def _pairs(module: nn.Module, prefix: str = "") -> Iterator[tuple[str, str]]:
    pairs = _traced_pairs(module)
    if pairs is not None:
        for conv, norm in pairs:
            yield prefix + conv, prefix + norm
        return
    for name, child in module.named_children():
        yield from _pairs(child, f"{prefix}{name}.")


def foldable_pairs(model: nn.Module) -> list[tuple[str, str]]:
    """Qualified names ``(conv, norm)`` of the pairs :func:`fold_batchnorm` would fold in ``model``
    (which must be in eval mode for its BatchNorms to count)."""
    return list(_pairs(model))


def _norm_tensors(norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """``(mean, var, gamma, beta, eps)`` of a foldable norm, in float64 (gamma 1, beta 0 when it has
    no affine part)."""
    tensors = {}
    for name in ("running_mean", "running_var", "weight", "bias"):
        value = getattr(norm, name, None)
        tensors[name] = value.detach().double() if isinstance(value, torch.Tensor) else None
    mean, var = tensors["running_mean"], tensors["running_var"]
    assert mean is not None and var is not None  # checked by _is_foldable_norm
    gamma = tensors["weight"] if tensors["weight"] is not None else torch.ones_like(mean)
    beta = tensors["bias"] if tensors["bias"] is not None else torch.zeros_like(mean)
    return mean, var, gamma, beta, float(cast(Any, norm).eps)


def _fold(conv: nn.Conv2d, norm: nn.Module) -> None:
    """Fold ``norm``'s eval-mode affine map into ``conv`` (computed in float64)."""
    mean, var, gamma, beta, eps = _norm_tensors(norm)
    scale = gamma * torch.rsqrt(var + eps)
    weight = conv.weight
    bias = conv.bias.detach().double() if conv.bias is not None else torch.zeros_like(mean)
    shape = (-1,) + (1,) * (weight.dim() - 1)
    new_weight = weight.detach().double() * scale.reshape(shape)
    new_bias = (bias - mean) * scale + beta
    conv.weight = nn.Parameter(new_weight.to(weight.dtype), requires_grad=False)
    conv.bias = nn.Parameter(new_bias.to(weight.dtype), requires_grad=False)


def _set_submodule(root: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, module)


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` (in eval mode) with every foldable BatchNorm folded into the
    convolution before it and replaced by ``nn.Identity``; ``model`` itself is not modified.

    The copy is for inference only: its folded parameters do not train, and its state dict lacks
    the folded norms' entries (save the original model, not the copy).
    """
    folded = copy.deepcopy(model).eval()
    pairs = foldable_pairs(folded)
    with torch.no_grad():
        for conv_name, norm_name in pairs:
            conv = folded.get_submodule(conv_name)
            assert isinstance(conv, nn.Conv2d)
            _fold(conv, folded.get_submodule(norm_name))
            _set_submodule(folded, norm_name, nn.Identity())
    logger.debug("BatchNorm folding: %d norm(s) folded into convolutions", len(pairs))
    return folded
