"""``ContiguousParams`` (upstream FastReID's ``fastreid.utils.params``, after the
contiguous_params package): the parameters of each set of parameter groups with the same
hyper-parameters copied into one flat buffer, the parameters becoming views of it, so that an
optimizer can update one tensor per set instead of one per parameter.

It takes what :func:`fastreid.solver.build.get_default_optimizer_params` returns (dicts with
``params``, ``lr``, ``weight_decay`` and ``freeze_status``); :meth:`ContiguousParams.contiguous`
gives the optimizer's groups (one buffer each), :meth:`ContiguousParams.original` the groups it
was given. Updates must stay in place (optimizers' are): anything that re-points a parameter's
data or gradient breaks the link, which :meth:`ContiguousParams.assert_buffer_is_valid` detects.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Union

import torch

__all__ = ["ContiguousParams"]

ParamGroups = Union[Sequence[dict[str, Any]], Iterable[torch.Tensor]]


class ContiguousParams:
    def __init__(self, parameters: ParamGroups) -> None:
        items: list[Any] = list(parameters)
        # bare parameters: one set
        groups: list[dict[str, Any]] = [{"params": [p]} if isinstance(p, torch.Tensor) else p for p in items]
        if not groups:
            raise ValueError("ContiguousParams: no parameters given")
        self._parameters: list[dict[str, Any]] = groups
        first = groups[0]["params"][0]
        for group in groups:
            for p in group["params"]:
                if p.dtype != first.dtype or p.device != first.device:
                    raise ValueError(
                        "ContiguousParams: all parameters must share one dtype and device "
                        f"({first.dtype} on {first.device}; got {p.dtype} on {p.device})"
                    )
        # sets of groups with the same hyper-parameters, each becoming one buffer
        self._sets: OrderedDict[tuple, list[dict[str, Any]]] = OrderedDict()
        for group in groups:
            key = (group.get("freeze_status", "normal"), group.get("lr"), group.get("weight_decay"))
            self._sets.setdefault(key, []).append(group)
        self._param_buffer: list[torch.Tensor] = []
        self._grad_buffer: list[torch.Tensor] = []
        self.data_pointers: list[int] = []
        self.grad_pointers: list[int] = []
        self.make_params_contiguous()

    def make_params_contiguous(self) -> None:
        """Copy every parameter into its set's buffer and make it (and its gradient) a view of it."""
        first = self._parameters[0]["params"][0]
        for groups in self._sets.values():
            size = sum(p.numel() for g in groups for p in g["params"])
            data = torch.zeros(size, dtype=first.dtype, device=first.device)
            grad = torch.zeros(size, dtype=first.dtype, device=first.device)
            offset = 0
            for group in groups:
                for p in group["params"]:
                    n = p.numel()
                    data[offset : offset + n] = p.data.reshape(-1)
                    p.data = data[offset : offset + n].view_as(p)
                    p.grad = grad[offset : offset + n].view_as(p)
                    self.data_pointers.append(p.data.data_ptr())
                    self.grad_pointers.append(p.grad.data_ptr())
                    offset += n
            data.grad = grad  # the buffer's gradient is the parameters' gradients, laid end to end
            self._param_buffer.append(data)
            self._grad_buffer.append(grad)

    def contiguous(self) -> list[dict[str, Any]]:
        """The optimizer's parameter groups: one buffer per set, with its hyper-parameters."""
        out = []
        for (freeze_status, lr, weight_decay), buffer in zip(self._sets, self._param_buffer):
            group: dict[str, Any] = {"freeze_status": freeze_status, "params": [buffer]}
            if lr is not None:
                group["lr"] = lr
            if weight_decay is not None:
                group["weight_decay"] = weight_decay
            out.append(group)
        return out

    def original(self) -> list[dict[str, Any]]:
        """The parameter groups as given (their parameters now views of the buffers)."""
        return self._parameters

    def buffer_is_valid(self) -> bool:
        """Whether every parameter and gradient still lives in its buffer."""
        params = [p for groups in self._sets.values() for g in groups for p in g["params"]]
        for p, data_ptr, grad_ptr in zip(params, self.data_pointers, self.grad_pointers):
            if p.data.data_ptr() != data_ptr or p.grad is None or p.grad.data_ptr() != grad_ptr:
                return False
        return True

    def assert_buffer_is_valid(self) -> None:
        if not self.buffer_is_valid():
            raise ValueError(
                "ContiguousParams: a parameter or gradient no longer lives in the contiguous buffer; "
                "update parameters and gradients in place only (zero_grad(set_to_none=False))"
            )
