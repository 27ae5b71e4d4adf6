"""SWA, stochastic weight averaging (Izmailov et al., UAI 2018), as upstream FastReID's optimizer
wrapper (``fastreid.solver.optim.swa``, after torchcontrib): it steps the wrapped optimizer and
keeps a running average of the parameters, every ``swa_freq`` steps (automatic mode) or when
``update_swa`` is called (manual mode); ``swap_swa_param`` exchanges the parameters and the
averages (call it at the end, then recompute BatchNorm statistics, e.g. with
``torch.optim.swa_utils.update_bn``)."""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any, Callable, Optional

import torch
from torch.optim import Optimizer

__all__ = ["SWA"]


class SWA(Optimizer):
    def __init__(
        self, optimizer: Optimizer, swa_freq: Optional[int] = None, swa_lr_factor: Optional[float] = None
    ) -> None:
        self._auto_mode = swa_freq is not None
        self.swa_freq = int(swa_freq) if swa_freq is not None else None
        self.swa_lr_factor = swa_lr_factor
        if self.swa_freq is not None and self.swa_freq < 1:
            raise ValueError(f"Invalid swa_freq: {swa_freq}")
        self.optimizer = optimizer
        self.defaults = self.optimizer.defaults
        self.param_groups = self.optimizer.param_groups
        self.state: defaultdict = defaultdict(dict)
        self.opt_state = self.optimizer.state
        for group in self.param_groups:
            group["n_avg"] = 0
            group["step_counter"] = 0

    def reset_lr_to_swa(self) -> None:
        """Scale every group's ``initial_lr`` (what LR schedules start from) by ``swa_lr_factor``."""
        if self.swa_lr_factor is None:
            return
        for group in self.param_groups:
            group["initial_lr"] = self.swa_lr_factor * group["lr"]

    @torch.no_grad()
    def update_swa_group(self, group: dict[str, Any]) -> None:
        """Add the parameters of ``group`` to their running averages."""
        weight = 1.0 / float(group["n_avg"] + 1)
        for p in group["params"]:
            state = self.state[p]
            if "swa_buffer" not in state:
                state["swa_buffer"] = torch.zeros_like(p)
            state["swa_buffer"].add_((p - state["swa_buffer"]) * weight)
        group["n_avg"] += 1

    def update_swa(self) -> None:
        for group in self.param_groups:
            self.update_swa_group(group)

    @torch.no_grad()
    def swap_swa_param(self) -> None:
        """Exchange every parameter with its running average (again to swap back)."""
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "swa_buffer" not in state:
                    warnings.warn(
                        f"SWA was not applied to a parameter of shape {tuple(p.shape)}; skipping it",
                        stacklevel=2,
                    )
                    continue
                current = p.detach().clone()
                p.copy_(state["swa_buffer"])
                state["swa_buffer"].copy_(current)

    def step(self, closure: Optional[Callable[[], float]] = None) -> Any:
        loss = self.optimizer.step(closure)
        for group in self.param_groups:
            group["step_counter"] += 1
            if self._auto_mode and self.swa_freq and group["step_counter"] % self.swa_freq == 0:
                self.update_swa_group(group)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """``opt_state`` (the wrapped optimizer's), ``swa_state`` (the averages) and ``param_groups``."""
        wrapped = self.optimizer.state_dict()
        ids = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        swa_state = {ids[id(p)]: v for p, v in self.state.items() if id(p) in ids}
        return {
            "opt_state": wrapped["state"],
            "swa_state": swa_state,
            "param_groups": wrapped["param_groups"],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(
            {"state": state_dict["opt_state"], "param_groups": state_dict["param_groups"]}
        )
        params = [p for g in self.param_groups for p in g["params"]]
        self.state = defaultdict(dict, {params[int(i)]: v for i, v in state_dict["swa_state"].items()})
        self.opt_state = self.optimizer.state

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        param_group["n_avg"] = 0
        param_group["step_counter"] = 0
        self.optimizer.add_param_group(param_group)
