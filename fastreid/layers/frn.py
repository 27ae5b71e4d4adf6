"""Filter Response Normalization and the Thresholded Linear Unit (Singh & Krishnan, CVPR 2020),
and the conversions of a network's "BatchNorm2d + ReLU" pairs into "FRN + TLU".

FRN normalises each sample and channel by the mean square of its activations (no batch
statistics), then applies an affine transform; TLU is ``max(x, tau)`` with a learnt ``tau`` per
channel. ``bnrelu_to_frn`` converts pairs that follow each other among a module's children;
``bnrelu_to_frn2`` finds the pairs by running the model once and converts those that run one
after the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["TLU", "FRN", "bnrelu_to_frn", "convert", "remove_flags", "bnrelu_to_frn2"]

_RELUS = (nn.ReLU, nn.LeakyReLU)


class TLU(nn.Module):
    """``max(x, tau)`` per channel (``tau`` starts at 0, i.e. a ReLU)."""

    def __init__(self, num_features: int) -> None:
        super().__init__()
        self.num_features = num_features
        self.tau = nn.Parameter(torch.empty(num_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.tau)

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, self.tau.view(1, self.num_features, 1, 1))


class FRN(nn.Module):
    """``weight * x / sqrt(mean_hw(x^2) + |eps|) + bias`` per sample and channel; ``eps`` is learnt
    when ``is_eps_leanable`` (upstream's spelling), else a buffer."""

    eps: torch.Tensor

    def __init__(self, num_features: int, eps: float = 1e-6, is_eps_leanable: bool = False) -> None:
        super().__init__()
        self.num_features = num_features
        self.init_eps = eps
        self.is_eps_leanable = is_eps_leanable
        self.weight = nn.Parameter(torch.empty(num_features))
        self.bias = nn.Parameter(torch.empty(num_features))
        if is_eps_leanable:
            self.eps = nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.tensor([eps]))
        self.reset_parameters()

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
    """Replace, among each module's children, a ``BatchNorm2d`` directly followed by a ReLU (or
    LeakyReLU) by FRN + TLU of its width; recurses into the other children. In place; returns
    ``module``."""
    previous_name, previous = None, None
    for name, child in list(module.named_children()):
        if isinstance(previous, nn.BatchNorm2d) and isinstance(child, _RELUS):
            assert previous_name is not None
            module.add_module(previous_name, FRN(previous.num_features))
            module.add_module(name, TLU(previous.num_features))
        else:
            bnrelu_to_frn(child)
        previous_name, previous = name, child
    return module


def convert(module: nn.Module, flag_name: str) -> nn.Module:
    """Replace every child marked with a true ``flag_name`` attribute: a ``BatchNorm2d`` by FRN, a
    ReLU by TLU of the width of the marked norm before it; recurses into unmarked children."""
    channels = None
    for name, child in list(module.named_children()):
        if getattr(child, flag_name, False):
            if isinstance(child, nn.BatchNorm2d):
                channels = child.num_features
                module.add_module(name, FRN(child.num_features))
            if isinstance(child, _RELUS):
                if channels is None:
                    raise ValueError(f"{name}: a marked ReLU with no marked BatchNorm2d before it")
                module.add_module(name, TLU(channels))
        else:
            convert(child, flag_name)
    return module


def remove_flags(module: nn.Module, flag_name: str) -> nn.Module:
    """Delete the ``flag_name`` attribute from every submodule that has it; returns ``module``."""
    for child in module.children():
        if hasattr(child, flag_name):
            delattr(child, flag_name)
        remove_flags(child, flag_name)
    return module


def bnrelu_to_frn2(
    model: nn.Module,
    input_size: tuple[int, ...] | Sequence[tuple[int, ...]] = (3, 128, 128),
    batch_size: int = 2,
    flag_name: str = "is_convert_frn",
) -> nn.Module:
    """Run ``model`` once on random ``batch_size`` x ``input_size`` inputs (a list of sizes for a
    model with several inputs), mark each ``BatchNorm2d`` whose output goes straight into a ReLU
    (in the order modules run) and convert the marked pairs to FRN + TLU (:func:`convert`)."""
    order: list[nn.Module | None] = []  # modules as they finish; None for containers

    def record(module: nn.Module, inputs: object, output: object) -> None:
        is_container = isinstance(module, (nn.Sequential, nn.ModuleList)) or module is model
        order.append(None if is_container else module)

    handles = [m.register_forward_hook(record) for m in model.modules()]
    sizes = [input_size] if isinstance(input_size, tuple) else list(input_size)
    try:
        with torch.no_grad():
            model(*[torch.rand(batch_size, *size) for size in sizes])
    finally:
        for handle in handles:
            handle.remove()
    for first, second in zip(order, order[1:]):
        if isinstance(first, nn.BatchNorm2d) and isinstance(second, _RELUS):
            setattr(first, flag_name, True)
            setattr(second, flag_name, True)
    model = convert(model, flag_name=flag_name)
    return remove_flags(model, flag_name=flag_name)
