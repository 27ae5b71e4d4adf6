"""Checkpoints in upstream FastReID's format: the one writer and the one loader of ``.pth`` files.

A checkpoint is a dict with ``model`` (the state dict, without a DDP ``module.`` prefix), one
entry per checkpointable (``optimizer``, ``lr_sched``, ``warmup_sched``, ``grad_scaler``, ...)
``trainer`` (the trainer's own state: iteration, RNG states, each hook's state) and upstream's
extra data (``epoch``, ``iteration``).

Writing (:meth:`Checkpointer.write`): a temporary file in the same folder, flushed to disk and
renamed with ``os.replace``, then its SHA-256 sidecar (:mod:`fastreid.utils.checksum`); the
``last_checkpoint`` file is replaced the same way. A kill at any moment leaves either the old
file or the new one, never a truncated one. A full disk or a Ctrl-C during a write is reported as
such (:class:`~fastreid.utils.atomic.DiskFullError`, ``KeyboardInterrupt``), not as torch's
``inline_container`` error.

Reading (:meth:`Checkpointer.read`): :func:`fastreid.utils.safe_load.load_torch_file` (weights-only
unpickling, checksum verified, one-line :class:`~fastreid.utils.errors.CheckpointError` naming the
file), with the file's later updates applied: :meth:`Checkpointer.save_update` replaces entries of
a written checkpoint (e.g. the trainer's state once the final evaluation is over) through a small
``<file>.update`` next to it, so ``model_final.pth`` is written once per run.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import torch
from fvcore.common.checkpoint import Checkpointer as _FvCheckpointer
from termcolor import colored
from torch import nn

from fastreid.utils.atomic import atomic_write
from fastreid.utils.checkpoint_report import enforce_strict_load, load_state_dict_with_report
from fastreid.utils.checksum import discard_checksum, file_sha256, recorded_checksum, write_checksum
from fastreid.utils.errors import CheckpointError
from fastreid.utils.file_io import PathManager
from fastreid.utils.safe_load import CheckpointNotFoundError, load_torch_file

__all__ = [
    "Checkpointer",
    "PathManager",
    "PeriodicCheckpointer",
    "get_missing_parameters_message",
    "get_unexpected_parameters_message",
    "remove_checkpoint",
    "unwrap_model",
    "update_path",
]

logger = logging.getLogger(__name__)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside a DataParallel / DistributedDataParallel wrapper (or the model)."""
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        return model.module
    return model


def update_path(path: str) -> str:
    """The file holding the later updates of checkpoint ``path`` (:meth:`Checkpointer.save_update`)."""
    return f"{path}.update"


def remove_checkpoint(path: str) -> None:
    """Delete a checkpoint file this package wrote, with its checksum and update files."""
    for name in (update_path(path), path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)
        discard_checksum(name)


class Checkpointer(_FvCheckpointer):
    """fvcore's Checkpointer (upstream's class) with atomic writes, checksums, DDP-free keys, safe
    and strict loading.

    With ``strict_load`` (``MODEL.WEIGHTS_STRICT``, default True) a checkpoint that leaves model
    tensors missing, unexpected or mis-shaped is refused (classifier-only differences excepted);
    ``trust_checkpoint`` (default: the process-wide ``MODEL.TRUST_CHECKPOINT``) allows files that
    need full unpickling. ``last_checkpoint`` may only name a file inside ``save_dir``.
    """

    def __init__(
        self,
        model: nn.Module,
        save_dir: str = "",
        *,
        save_to_disk: bool = True,
        strict_load: bool = True,
        trust_checkpoint: Optional[bool] = None,
        **checkpointables: Any,
    ):
        super().__init__(unwrap_model(model), save_dir, save_to_disk=save_to_disk, **checkpointables)
        self.logger = logging.getLogger("fastreid.checkpoint")
        self.strict_load = bool(strict_load)
        self.trust_checkpoint = trust_checkpoint
        self._loading: str = ""

    # ------------------------------------------------------------------ write side

    @staticmethod
    def write(path: str, data: Mapping[str, Any]) -> None:
        """Write ``data`` to ``path`` with ``torch.save``, atomically, followed by its SHA-256
        sidecar; the old file's sidecar and updates are discarded first, so a kill in between
        never leaves them next to the new file. Every ``.pth`` file of this package is written here."""
        discard_checksum(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(update_path(path))
        discard_checksum(update_path(path))
        atomic_write(path, lambda f: torch.save(dict(data), f))
        write_checksum(path)

    def save(self, name: str, *, tag_as_last: bool = True, **kwargs: Any) -> None:
        """Write ``{save_dir}/{name}.pth``; ``kwargs`` are stored as extra data. With
        ``tag_as_last`` the ``last_checkpoint`` file then names it."""
        if not self.save_dir or not self.save_to_disk:
            return
        basename = f"{name}.pth"
        save_file = os.path.join(self.save_dir, basename)
        self.logger.info(f"Saving checkpoint to {save_file}")
        self.write(save_file, self.snapshot(**kwargs))
        if tag_as_last:
            self.tag_last_checkpoint(basename)

    def snapshot(self, **kwargs: Any) -> dict[str, Any]:
        """What :meth:`save` writes: the model's and every checkpointable's state, then ``kwargs``."""
        data: dict[str, Any] = {"model": self.model.state_dict()}
        for key, obj in self.checkpointables.items():
            data[key] = obj.state_dict()
        data.update(kwargs)
        return data

    def save_update(self, name: str, **entries: Any) -> None:
        """Replace ``entries`` of the written checkpoint ``{save_dir}/{name}.pth`` without writing
        it again: they go to ``{name}.pth.update`` (bound to the checkpoint's SHA-256), which
        :meth:`read` applies over the file. For state that changes after the weights were saved."""
        if not self.save_dir or not self.save_to_disk:
            return
        path = os.path.join(self.save_dir, f"{name}.pth")
        digest = recorded_checksum(path) or file_sha256(path)
        self.logger.info(f"Saving {', '.join(sorted(entries))} of {path} to {update_path(path)}")
        self.write(update_path(path), {"checkpoint_sha256": digest, **entries})

    def tag_last_checkpoint(self, last_filename_basename: str) -> None:
        path = os.path.join(self.save_dir, "last_checkpoint")
        atomic_write(path, lambda f: f.write(last_filename_basename.encode("utf-8")))

    # ------------------------------------------------------------------ load side

    def read(self, path: str) -> Any:
        """What checkpoint ``path`` holds, read safely, with its updates (:meth:`save_update`)
        applied. An update that belongs to another version of the file is ignored with a warning."""
        loaded = load_torch_file(path, trust=self.trust_checkpoint, description="Checkpoint")
        update = update_path(path)
        if not (isinstance(loaded, dict) and os.path.isfile(update)):
            return loaded
        entries = load_torch_file(update, trust=False, description="Checkpoint update")
        if not isinstance(entries, dict):
            raise CheckpointError(f"Checkpoint update {update} does not hold a dict; delete it")
        digest = entries.pop("checkpoint_sha256", None)
        if digest != (recorded_checksum(path) or file_sha256(path)):
            self.logger.warning(f"{update} belongs to another version of {path}; ignoring it")
            return loaded
        loaded.update(entries)
        return loaded

    def get_checkpoint_file(self) -> str:
        """The file named by ``save_dir/last_checkpoint``, which must lie inside ``save_dir``."""
        tag = os.path.join(self.save_dir, "last_checkpoint")
        try:
            with open(tag, encoding="utf-8", errors="replace") as f:
                name = f.read().strip()
        except FileNotFoundError:
            return ""  # removed by another process meanwhile
        except OSError as e:
            raise CheckpointError(f"Cannot read {tag}: {e.strerror or e}") from e
        if not name:
            raise CheckpointError(f"{tag} is empty; delete it, or run without --resume")
        path = os.path.join(self.save_dir, name)
        folder = os.path.realpath(self.save_dir)
        if os.path.commonpath([folder, os.path.realpath(path)]) != folder:
            raise CheckpointError(
                f"{tag} names {name!r}, which is outside OUTPUT_DIR {self.save_dir}; refusing to load it "
                "(last_checkpoint may only name a file in its own folder)"
            )
        return path

    def resume_or_load(self, path: str, *, resume: bool = True) -> dict[str, Any]:
        if resume and self.has_checkpoint():
            last = self.get_checkpoint_file()
            if last and not os.path.isfile(last):
                raise CheckpointError(
                    f"{os.path.join(self.save_dir, 'last_checkpoint')} names {last}, which does not exist; "
                    "restore that file, point last_checkpoint at another model_*.pth, or run without --resume"
                )
            if last:
                return self.load(last)
        return self.load(path, checkpointables=[])

    def load(self, path: str, checkpointables: Optional[list[str]] = None) -> dict[str, Any]:
        if path and "://" not in path and not os.path.isfile(path):
            raise CheckpointNotFoundError(
                f"Checkpoint {path} not found; check MODEL.WEIGHTS (or the last_checkpoint file in "
                f"{self.save_dir or 'OUTPUT_DIR'})"
            )
        self._loading = path
        try:
            return super().load(path, checkpointables)
        finally:
            self._loading = ""

    def _load_file(self, f: str) -> dict[str, Any]:
        loaded = self.read(f)
        if not isinstance(loaded, dict):
            raise CheckpointError(f"Checkpoint {f} does not hold a dict (got {type(loaded).__name__})")
        if "model" not in loaded:
            if loaded and all(isinstance(v, torch.Tensor) for v in loaded.values()):
                loaded = {"model": loaded}  # a bare state dict
            else:
                raise CheckpointError(
                    f"Checkpoint {f} has no 'model' entry; keys: {sorted(map(str, loaded))[:10]}"
                )
        if not isinstance(loaded["model"], dict):
            raise CheckpointError(
                f"Checkpoint {f}: 'model' is not a state dict ({type(loaded['model']).__name__})"
            )
        return loaded

    def _load_model(self, checkpoint: Any) -> None:
        state_dict = checkpoint.pop("model")
        self._convert_ndarray_to_tensor(state_dict)
        if state_dict and all(k.startswith("module.") for k in state_dict):
            state_dict = {k[len("module.") :]: v for k, v in state_dict.items()}
        report = load_state_dict_with_report(self.model, state_dict, logger=self.logger)
        if self.strict_load:
            enforce_strict_load(report, f"Checkpoint {self._loading}".rstrip(), logger=self.logger)
        return None


class PeriodicCheckpointer:
    """Upstream's epoch schedule of checkpoints: :meth:`step` is called after every epoch and saves
    ``model_{epoch:04d}.pth`` every ``period`` epochs and ``model_final.pth`` after epoch
    ``max_epoch - 1``. A ``metric`` passed to :meth:`step` on such an epoch that beats the best so
    far also saves ``model_best.pth`` (before the epoch's file, as upstream).

    ``period`` <= 0 saves only the final checkpoint; without ``max_epoch`` there is none.
    ``max_to_keep`` keeps only the newest periodic files (their sidecars go with them).
    """

    def __init__(
        self,
        checkpointer: Any,
        period: int,
        max_epoch: Optional[int] = None,
        *,
        max_to_keep: Optional[int] = None,
        file_prefix: str = "model",
    ) -> None:
        self.checkpointer = checkpointer
        self.period = int(period)
        self.max_epoch = max_epoch
        self.max_to_keep = max_to_keep
        self.file_prefix = file_prefix
        self.best_metric = -1.0
        self.recent_checkpoints: list[str] = []

    def saves_at(self, epoch: int) -> Optional[str]:
        """The name :meth:`step` saves after ``epoch`` (without ``.pth``), or None."""
        epoch = int(epoch)
        if self.max_epoch is not None and epoch >= self.max_epoch - 1:
            return f"{self.file_prefix}_final"
        if self.period > 0 and (epoch + 1) % self.period == 0:
            return f"{self.file_prefix}_{epoch:04d}"
        return None

    def step(self, epoch: int, **kwargs: Any) -> None:
        """Save what is due after ``epoch`` (0-based); ``kwargs`` are stored as extra data."""
        name = self.saves_at(epoch)
        if name is None:
            return
        state = {"epoch": int(epoch), **kwargs}
        metric = kwargs.get("metric")
        if metric is not None and metric > self.best_metric:
            self.checkpointer.save(f"{self.file_prefix}_best", **state)
            self.best_metric = metric
        self.checkpointer.save(name, **state)
        if self.max_to_keep is not None and not name.endswith("_final"):
            self.recent_checkpoints.append(os.path.join(self.checkpointer.save_dir, f"{name}.pth"))
            while len(self.recent_checkpoints) > self.max_to_keep:
                remove_checkpoint(self.recent_checkpoints.pop(0))

    def save(self, name: str, **kwargs: Any) -> None:
        """Save ``name`` outside the schedule (as :meth:`Checkpointer.save`)."""
        self.checkpointer.save(name, **kwargs)


def _grouped_keys(keys: Iterable[str]) -> list[str]:
    """Keys of one module on one line, in first-seen order: ``a.b.weight``, ``a.b.bias`` ->
    ``a.b.{weight, bias}``."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        head, dot, tail = key.rpartition(".")
        if dot:
            groups.setdefault(head, []).append(tail)
        else:
            groups.setdefault(key, [])
    lines = []
    for head, tails in groups.items():
        if not tails:
            lines.append(head)
        elif len(tails) == 1:
            lines.append(f"{head}.{tails[0]}")
        else:
            lines.append(f"{head}.{{{', '.join(tails)}}}")
    return lines


def get_missing_parameters_message(keys: list[str]) -> str:
    """A log message listing model tensors (``keys``) that a checkpoint does not hold, grouped by
    module (upstream's text)."""
    lines = "\n".join("  " + colored(line, "blue") for line in _grouped_keys(keys))
    return "Some model parameters or buffers are not found in the checkpoint:\n" + lines


def get_unexpected_parameters_message(keys: list[str]) -> str:
    """A log message listing checkpoint tensors (``keys``) that the model does not have, grouped by
    module (upstream's text)."""
    lines = "\n".join("  " + colored(line, "magenta") for line in _grouped_keys(keys))
    return "The checkpoint state_dict contains keys that are not used by the model:\n" + lines
