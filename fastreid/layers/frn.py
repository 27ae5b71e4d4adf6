"""Filter Response Normalisation with its Thresholded Linear Unit (Singh & Krishnan, CVPR 2020),
and upstream FastReID's helpers that turn a model's ``BatchNorm2d`` + ``ReLU`` pairs into
``FRN`` + ``TLU`` (``fastreid.layers.frn``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import torch
from torch import nn

__all__ = ["FRN", "TLU", "bnrelu_to_frn", "bnrelu_to_frn2", "convert", "remove_flags"]

_RELUS = (nn.ReLU, nn.LeakyReLU)


class TLU(nn.Module):
    """``max(x, tau)`` with a learned threshold ``tau`` per channel."""

    def __init__(self, num_features: int) -> None:
        super().__init__()
        self.num_features = num_features
        self.tau = nn.Parameter(torch.zeros(num_features))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.tau)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, self.tau.view(1, self.num_features, 1, 1))


class FRN(nn.Module):
    """``weight * x / sqrt(mean(x^2 over H, W) + |eps|) + bias`` per sample and channel; ``eps`` a
    buffer, or a parameter with ``is_eps_leanable`` (upstream's spelling)."""

    def __init__(self, num_features: int, eps: float = 1e-6, is_eps_leanable: bool = False) -> None:
        super().__init__()
        self.num_features = num_features
        self.init_eps = eps
        self.is_eps_leanable = is_eps_leanable
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.eps: torch.Tensor
        if is_eps_leanable:
            self.eps = nn.Parameter(torch.full((1,), float(eps)))
        else:
            self.register_buffer("eps", torch.tensor([float(eps)]))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)
        if self.is_eps_leanable:
            nn.init.constant_(self.eps, self.init_eps)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}, eps={self.init_eps}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nu2 = x.pow(2).mean(dim=[2, 3], keepdim=True)
        x = x * torch.rsqrt(nu2 + self.eps.abs())
        shape = (1, self.num_features, 1, 1)
        return self.weight.view(shape) * x + self.bias.view(shape)


def bnrelu_to_frn(module: nn.Module) -> nn.Module:
    """Replace, recursively and in place, every ``BatchNorm2d`` directly followed (among its
    siblings) by a ``ReLU``/``LeakyReLU`` with ``FRN``, and that activation with ``TLU``."""
    previous: tuple[str, Any] = ("", None)
    for name, child in list(module.named_children()):
        before_name, before = previous
        if isinstance(before, nn.BatchNorm2d) and isinstance(child, _RELUS):
            module.add_module(before_name, FRN(before.num_features))
            module.add_module(name, TLU(before.num_features))
        else:
            bnrelu_to_frn(child)
        previous = (name, child)
    return module


def convert(module: nn.Module, flag_name: str) -> nn.Module:
    """Replace, recursively and in place, the flagged children (attribute ``flag_name`` true):
    a ``BatchNorm2d`` with ``FRN``, a ``ReLU``/``LeakyReLU`` with ``TLU`` of the last converted
    norm's width."""
    channels = None
    for name, child in list(module.named_children()):
        if getattr(child, flag_name, False):
            if isinstance(child, nn.BatchNorm2d):
                channels = child.num_features
                module.add_module(name, FRN(child.num_features))
            elif isinstance(child, _RELUS):
                if channels is None:
                    raise ValueError(f"convert: {name} is flagged but no flagged BatchNorm2d precedes it")
                module.add_module(name, TLU(channels))
        else:
            convert(child, flag_name)
    return module


def remove_flags(module: nn.Module, flag_name: str) -> nn.Module:
    """Delete the attribute ``flag_name`` from every submodule that has it."""
    for child in module.modules():
        if flag_name in vars(child):
            delattr(child, flag_name)
    return module


def bnrelu_to_frn2(
    model: nn.Module,
    input_size: Union[Sequence[int], Sequence[Sequence[int]]] = (3, 128, 128),
    batch_size: int = 2,
    flag_name: str = "is_convert_frn",
) -> nn.Module:
    """``bnrelu_to_frn`` for pairs that are not siblings: one forward pass on random input finds
    every ``ReLU`` that runs right after a ``BatchNorm2d`` (in execution order), those pairs are
    flagged and converted (:func:`convert`), and the flags removed."""
    executed: list[nn.Module] = []
    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(lambda mod, inp, out: executed.append(mod)) for m in leaves]
    sizes = [input_size] if isinstance(input_size[0], int) else list(input_size)
    try:
        with torch.no_grad():
            model(*[torch.rand(batch_size, *size) for size in sizes])  # type: ignore[misc]
    finally:
        for h in handles:
            h.remove()
    for before, after in zip(executed, executed[1:]):
        if isinstance(before, nn.BatchNorm2d) and isinstance(after, _RELUS):
            setattr(before, flag_name, True)
            setattr(after, flag_name, True)
    return remove_flags(convert(model, flag_name), flag_name)
