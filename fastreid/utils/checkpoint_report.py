"""Load a state dict into a module and report, as a short table, what did not fit.

``torch.nn.Module.load_state_dict(strict=False)`` silently ignores missing and unexpected keys
and fails outright on a shape mismatch. Here shape-mismatched tensors are skipped (the module
keeps its own values), and every key that was not loaded is listed, grouped by module, so a
wrong checkpoint is obvious at a glance.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from tabulate import tabulate
from torch import nn

from fastreid.utils.errors import CheckpointError

__all__ = [
    "LoadReport",
    "enforce_strict_load",
    "format_load_report",
    "is_classifier_key",
    "load_state_dict_with_report",
]

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
    add(
        "shape mismatch",
        [(k, f"checkpoint {list(c)} vs model {list(m)}: skipped") for k, c, m in report.mismatched_keys],
    )
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
        logger.info(
            f"Ignored checkpoint entries for buffers that are not saved: {', '.join(report.ignored_keys)}"
        )
        _warn_on_differing_buffers(module, state_dict, report.ignored_keys, logger)
    return report


def _warn_on_differing_buffers(
    module: nn.Module, state_dict: Mapping[str, torch.Tensor], keys: list[str], logger: logging.Logger
) -> None:
    """Upstream checkpoints hold ``pixel_mean``/``pixel_std``; ours come from the config. Say so
    when they differ (the model keeps the config's values)."""
    for key in keys:
        saved = state_dict[key]
        try:
            own = module.get_buffer(key)
        except AttributeError:
            continue
        if not isinstance(saved, torch.Tensor) or saved.numel() != own.numel():
            continue
        if not torch.allclose(
            saved.detach().float().reshape(-1).cpu(), own.detach().float().reshape(-1).cpu()
        ):
            logger.warning(
                f"The checkpoint's {key} {saved.reshape(-1).tolist()} differs from the config's "
                f"{own.reshape(-1).tolist()}; the config's value is used (MODEL.PIXEL_MEAN / MODEL.PIXEL_STD)"
            )


# The classifier of a head: a ``weight`` parameter directly on a module named ``heads`` /
# ``*_head`` (upstream's EmbeddingHead, ClasHead, MGN's b1_head ...), or a ``classifier`` layer in it.
_CLASSIFIER_KEY = re.compile(r"(^|\.)[A-Za-z0-9_]*heads?\.(weight|classifier\.(weight|bias))$")


def is_classifier_key(key: str) -> bool:
    """Whether ``key`` is an identity classifier's tensor, whose shape follows the number of
    training identities and so legitimately differs when fine-tuning on another data set."""
    return bool(_CLASSIFIER_KEY.search(key))


def enforce_strict_load(report: LoadReport, source: str, logger: logging.Logger | None = None) -> None:
    """Raise :class:`CheckpointError` when ``report`` shows model tensors missing, unexpected or
    mis-shaped, except classifier tensors (logged: a new number of identities when fine-tuning).

    The message is one line; the table was logged by :func:`load_state_dict_with_report`.
    """
    logger = logger or logging.getLogger(__name__)
    missing = [k for k in report.missing_keys if not is_classifier_key(k)]
    unexpected = [k for k in report.unexpected_keys if not is_classifier_key(k)]
    mismatched = [m for m in report.mismatched_keys if not is_classifier_key(m[0])]
    excepted = (
        [k for k in report.missing_keys if is_classifier_key(k)]
        + [k for k in report.unexpected_keys if is_classifier_key(k)]
        + [m[0] for m in report.mismatched_keys if is_classifier_key(m[0])]
    )
    if excepted:
        logger.info(
            f"Classifier tensors not loaded from {source} (the number of identities differs; they keep "
            f"their initial values): {', '.join(excepted)}"
        )
    if not (missing or unexpected or mismatched):
        return
    examples = []
    if missing:
        examples.append(f"missing e.g. {missing[0]}")
    if unexpected:
        examples.append(f"unexpected e.g. {unexpected[0]}")
    if mismatched:
        key, saved, own = mismatched[0]
        examples.append(f"shape mismatch e.g. {key} {list(saved)} in the file vs {list(own)} in the model")
    raise CheckpointError(
        f"{source} does not fit the model: {len(missing)} tensors missing, {len(unexpected)} unexpected, "
        f"{len(mismatched)} shape-mismatched ({'; '.join(examples)}); the table is in the log. "
        "Check MODEL.BACKBONE.* / MODEL.HEADS.* against the checkpoint's config, or set "
        "MODEL.WEIGHTS_STRICT False to accept a partial load"
    )
