"""Load a state dict into a module and report, as a short table, what did not fit.

``torch.nn.Module.load_state_dict(strict=False)`` silently ignores missing and unexpected keys
and fails outright on a shape mismatch. Here shape-mismatched tensors are skipped (the module
keeps its own values), and every key that was not loaded is listed, grouped by module, so a
wrong checkpoint is obvious at a glance.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from tabulate import tabulate
from torch import nn

__all__ = ["LoadReport", "load_state_dict_with_report", "format_load_report"]

_MAX_ROWS = 12  # rows per category in the table; the rest is summarised in one line


@dataclass
class LoadReport:
    """What happened to each key. ``mismatched_keys`` holds (key, checkpoint shape, model shape)."""

    loaded_keys: list[str] = field(default_factory=list)
    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    mismatched_keys: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    # Checkpoint entries for buffers the module does not save (e.g. pixel_mean in old checkpoints).
    ignored_keys: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every model key was loaded from a tensor of the right shape."""
        return not (self.missing_keys or self.unexpected_keys or self.mismatched_keys)


def _non_persistent_buffers(module: nn.Module) -> set[str]:
    names = set()
    for prefix, sub in module.named_modules():
        for name in getattr(sub, "_non_persistent_buffers_set", ()):
            names.add(f"{prefix}.{name}" if prefix else name)
    return names


def _group(keys: list[str]) -> list[str]:
    """``a.b.weight``, ``a.b.bias`` -> ``a.b.{bias,weight}`` (keys of one module on one line)."""
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for key in keys:
        prefix, _, leaf = key.rpartition(".")
        groups.setdefault(prefix, []).append(leaf)
    lines = []
    for prefix, leaves in groups.items():
        body = leaves[0] if len(leaves) == 1 else "{" + ",".join(leaves) + "}"
        lines.append(f"{prefix}.{body}" if prefix else body)
    return lines


def format_load_report(report: LoadReport) -> str:
    """The report as a table (status, keys, detail); empty string when everything loaded."""
    rows: list[tuple[str, str, str]] = []

    def add(status: str, entries: list[tuple[str, str]]) -> None:
        for key, detail in entries[:_MAX_ROWS]:
            rows.append((status, key, detail))
        if len(entries) > _MAX_ROWS:
            rows.append((status, f"... and {len(entries) - _MAX_ROWS} more modules", ""))

    add("missing", [(k, "not in checkpoint: keeps its initial value") for k in _group(report.missing_keys)])
    add("unexpected", [(k, "not in model: ignored") for k in _group(report.unexpected_keys)])
    add("shape mismatch", [(k, f"checkpoint {list(c)} vs model {list(m)}: skipped")
                           for k, c, m in report.mismatched_keys])
    if not rows:
        return ""
    return tabulate(rows, headers=["status", "keys", "detail"], tablefmt="pipe")


def load_state_dict_with_report(
    module: nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    logger: logging.Logger | None = None,
) -> LoadReport:
    """Load ``state_dict`` into ``module`` (non-strict), skipping shape-mismatched tensors, and log
    a table of missing, unexpected and shape-mismatched keys (a warning when there are any)."""
    logger = logger or logging.getLogger(__name__)
    own = module.state_dict()
    non_persistent = _non_persistent_buffers(module)

    report = LoadReport()
    to_load: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in state_dict.items():
        if key in own:
            target = own[key]
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else ()
            if isinstance(value, torch.Tensor) and shape != tuple(target.shape):
                report.mismatched_keys.append((key, shape, tuple(target.shape)))
                continue
            to_load[key] = value
        elif key in non_persistent:
            report.ignored_keys.append(key)
        else:
            to_load[key] = value  # reported as unexpected by load_state_dict below

    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        to_load._metadata = metadata  # type: ignore[attr-defined]
    incompatible = module.load_state_dict(to_load, strict=False)

    mismatched = {k for k, _, _ in report.mismatched_keys}
    report.missing_keys = [k for k in incompatible.missing_keys if k not in mismatched]
    report.unexpected_keys = list(incompatible.unexpected_keys)
    unexpected = set(report.unexpected_keys)
    report.loaded_keys = [k for k in to_load if k not in unexpected]

    table = format_load_report(report)
    name = type(module).__name__
    if table:
        logger.warning(
            f"Loaded {len(report.loaded_keys)}/{len(own)} tensors of {name}; "
            f"{len(report.missing_keys)} missing, {len(report.unexpected_keys)} unexpected, "
            f"{len(report.mismatched_keys)} shape-mismatched:\n{table}"
        )
    else:
        logger.info(f"Loaded all {len(report.loaded_keys)} tensors of {name}.")
    if report.ignored_keys:
        logger.info(f"Ignored checkpoint entries for buffers that are not saved: {', '.join(report.ignored_keys)}")
    return report
