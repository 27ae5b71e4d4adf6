"""Checkpoints in upstream FastReID's format (fvcore's Checkpointer), written atomically.

A checkpoint is a dict with ``model`` (the state dict, without a DDP ``module.`` prefix), one
entry per checkpointable (``optimizer``, ``lr_sched``, ``warmup_sched``, ``grad_scaler``, ...)
``trainer`` (the trainer's own state: iteration, RNG states, each hook's state) and upstream's
extra data (``epoch``, ``iteration``). Files are written to a temporary
name in the same folder, flushed to disk and renamed with ``os.replace``; the ``last_checkpoint``
file is replaced the same way. A kill at any moment leaves either the old file or the new one,
never a truncated one. A full disk or a Ctrl-C during a write is reported as such
(:class:`DiskFullError`, ``KeyboardInterrupt``), not as torch's ``inline_container`` error.

State that changes after a checkpoint was written (the trainer's, once the final evaluation has
run after ``model_final.pth`` was saved) goes to a small sidecar, ``<checkpoint>.state``, through
:meth:`Checkpointer.save_state`: the weights are written once. Loading the checkpoint applies the
sidecar's entries over the file's own.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

import torch
from fvcore.common.checkpoint import Checkpointer as _FvCheckpointer
from fvcore.common.checkpoint import PeriodicCheckpointer as _FvPeriodicCheckpointer
from fvcore.common.checkpoint import get_missing_parameters_message, get_unexpected_parameters_message
from torch import nn

from fastreid.utils.atomic import DiskFullError, atomic_write
from fastreid.utils.checkpoint_report import enforce_strict_load, load_state_dict_with_report
from fastreid.utils.checksum import discard_checksum, write_checksum
from fastreid.utils.errors import CheckpointError
from fastreid.utils.file_io import PathManager
from fastreid.utils.rng import capture_rng_states, restore_rng_states
from fastreid.utils.safe_load import CheckpointNotFoundError, load_torch_file

__all__ = [
    "Checkpointer",
    "PathManager",
    "get_missing_parameters_message",
    "get_unexpected_parameters_message",
    "DiskFullError",
    "PeriodicCheckpointer",
    "atomic_torch_save",
    "capture_rng_states",
    "restore_rng_states",
    "unwrap_model",
]


STATE_SUFFIX = ".state"  # model_final.pth -> model_final.pth.state (see Checkpointer.save_state)


def _discard_state(path: str) -> None:
    for stale in (path + STATE_SUFFIX, path + STATE_SUFFIX + ".sha256"):
        if os.path.exists(stale):
            os.remove(stale)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside a DataParallel / DistributedDataParallel wrapper (or the model)."""
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        return model.module
    return model


def atomic_torch_save(obj: Any, path: str) -> None:
    """``torch.save(obj, path)`` that never leaves a partial file at ``path``, followed by its
    SHA-256 sidecar (``path.sha256``, verified on load)."""
    discard_checksum(path)  # a kill before the new sidecar exists leaves no stale one behind
    atomic_write(path, lambda f: torch.save(obj, f))
    write_checksum(path)


class Checkpointer(_FvCheckpointer):
    """fvcore's Checkpointer with atomic writes, DDP-free keys, safe and strict loading.

    Loading goes through :func:`fastreid.utils.safe_load.load_torch_file` (weights-only
    unpickling, checksum verified, one-line :class:`CheckpointError` naming the file). With
    ``strict_load`` (``MODEL.WEIGHTS_STRICT``, default True) a checkpoint that leaves model tensors
    missing, unexpected or mis-shaped is refused (classifier-only differences excepted);
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

    def save(self, name: str, *, tag_as_last: bool = True, **kwargs: Any) -> None:
        """Write ``{save_dir}/{name}.pth`` (atomically); ``kwargs`` are stored as extra data.
        With ``tag_as_last`` the ``last_checkpoint`` file then names it."""
        if not self.save_dir or not self.save_to_disk:
            return
        data: dict[str, Any] = {"model": self.model.state_dict()}
        for key, obj in self.checkpointables.items():
            data[key] = obj.state_dict()
        data.update(kwargs)
        basename = f"{name}.pth"
        save_file = os.path.join(self.save_dir, basename)
        self.logger.info(f"Saving checkpoint to {save_file}")
        _discard_state(save_file)  # belongs to the file being replaced
        atomic_torch_save(data, save_file)
        if tag_as_last:
            self.tag_last_checkpoint(basename)

    def save_state(self, name: str, keys: tuple[str, ...] = ("trainer",)) -> None:
        """Write the current state of the checkpointables ``keys`` to ``{name}.pth.state``, the
        sidecar of the checkpoint ``{name}.pth`` (written before): loading that checkpoint applies
        it. The weights are not written again."""
        if not self.save_dir or not self.save_to_disk:
            return
        path = os.path.join(self.save_dir, f"{name}.pth")
        if not os.path.isfile(path):
            raise CheckpointError(f"save_state: {path} does not exist; save the checkpoint first")
        data = {key: self.checkpointables[key].state_dict() for key in keys}
        data["for_checkpoint"] = os.path.basename(path)
        self.logger.info(f"Saving the state after {os.path.basename(path)} to {path}{STATE_SUFFIX}")
        atomic_torch_save(data, path + STATE_SUFFIX)

    def tag_last_checkpoint(self, last_filename_basename: str) -> None:
        path = os.path.join(self.save_dir, "last_checkpoint")
        atomic_write(path, lambda f: f.write(last_filename_basename.encode("utf-8")))

    # ------------------------------------------------------------------ load side

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
        loaded = load_torch_file(f, trust=self.trust_checkpoint, description="Checkpoint")
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
        if os.path.isfile(f + STATE_SUFFIX):
            state = load_torch_file(
                f + STATE_SUFFIX, trust=self.trust_checkpoint, description="Checkpoint state"
            )
            if isinstance(state, dict) and state.pop("for_checkpoint", None) == os.path.basename(f):
                loaded.update(state)
            else:
                self.logger.warning(
                    f"Ignoring {f}{STATE_SUFFIX}: it does not belong to {os.path.basename(f)}"
                )
        return loaded

    def _load_model(self, checkpoint: Any):
        state_dict = checkpoint.pop("model")
        self._convert_ndarray_to_tensor(state_dict)
        if state_dict and all(k.startswith("module.") for k in state_dict):
            state_dict = {k[len("module.") :]: v for k, v in state_dict.items()}
        report = load_state_dict_with_report(self.model, state_dict, logger=self.logger)
        if self.strict_load:
            enforce_strict_load(report, f"Checkpoint {self._loading}".rstrip(), logger=self.logger)
        return None


class PeriodicCheckpointer(_FvPeriodicCheckpointer):
    """Saves ``model_{epoch:04d}.pth`` every ``period`` epochs and ``model_final.pth`` at the
    last epoch (``max_epoch``), keeping at most ``max_to_keep`` periodic files."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        period: int,
        max_epoch: Optional[int] = None,
        max_to_keep: Optional[int] = None,
        file_prefix: str = "model",
    ) -> None:
        super().__init__(
            checkpointer, period, max_iter=max_epoch, max_to_keep=max_to_keep, file_prefix=file_prefix
        )

    def step(self, epoch: int, **kwargs: Any) -> None:
        epoch = int(epoch)
        state = {"epoch": epoch, **kwargs}
        is_last = self.max_iter is not None and epoch >= self.max_iter - 1
        if self.period > 0 and (epoch + 1) % self.period == 0 and not is_last:
            self.checkpointer.save(f"{self.file_prefix}_{epoch:04d}", **state)
            if self.max_to_keep is not None:
                self.recent_checkpoints.append(self.checkpointer.get_checkpoint_file())
                if len(self.recent_checkpoints) > self.max_to_keep:
                    old = self.recent_checkpoints.pop(0)
                    if os.path.exists(old) and not old.endswith(f"{self.file_prefix}_final.pth"):
                        os.remove(old)
                        discard_checksum(old)
                        _discard_state(old)
        if is_last:
            self.checkpointer.save(f"{self.file_prefix}_final", **state)
