"""Checkpoints of the Partial FC class centres (upstream FastFace's ``pfc_checkpointer.py``).

Upstream writes one file per process (``softmax_weight_<rank>.pth``, that process's block of
centres), so a run can only resume with the same number of processes. Here every process's block
is gathered and rank 0 writes one file holding all ``num_classes`` centres and their momentum::

    softmax_weight_<epoch>.pth / softmax_weight_final.pth / softmax_weight_iter<iteration>.pth
      model:        {"weight": num_classes x D, "momentum": num_classes x D}
      num_classes, embedding_size, iteration, lr_sched, warmup_sched
    last_weight     the name of the newest one

so a checkpoint written by 1 process resumes on 2 and the other way round (each process takes
its own block). Upstream's per-process files load when their block has this process's size (the
same number of processes); otherwise a one-line error says so.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

import torch

from fastreid.engine.train_loop import HookBase
from fastreid.utils import comm
from fastreid.utils.atomic import atomic_write
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.errors import CheckpointError
from fastreid.utils.safe_load import load_torch_file

from .modeling.partial_fc import PartialFC

__all__ = ["PfcCheckpointer", "PfcPeriodicCheckpointer", "TAG_FILE"]

logger = logging.getLogger("fastreid.partial_fc")

#: The file naming the newest centres checkpoint (upstream: ``last_weight_<rank>``).
TAG_FILE = "last_weight"


class PfcCheckpointer:
    """Saves and loads a :class:`PartialFC`'s centres (all processes' at once) and the LR
    schedules given as ``checkpointables``. :meth:`save` is a collective call."""

    def __init__(
        self, model: PartialFC, save_dir: str, *, save_to_disk: bool = True, **checkpointables: Any
    ) -> None:
        self.model = model
        self.save_dir = save_dir
        self.save_to_disk = save_to_disk
        self.checkpointables = checkpointables

    def save(self, name: str, **extra: Any) -> Optional[str]:
        """Write ``{save_dir}/{name}.pth`` (rank 0) and tag it in ``last_weight``; every process
        must call it. Returns the path written (rank 0)."""
        state = self.model.full_state()
        if not (self.save_dir and self.save_to_disk and comm.is_main_process()):
            return None
        data = {
            "model": {"weight": state["weight"], "momentum": state["momentum"]},
            "num_classes": state["num_classes"],
            "embedding_size": state["embedding_size"],
            **{key: obj.state_dict() for key, obj in self.checkpointables.items()},
            **extra,
        }
        path = os.path.join(self.save_dir, f"{name}.pth")
        logger.info(f"Saving the Partial FC centres to {path}")
        os.makedirs(self.save_dir, exist_ok=True)
        Checkpointer.write(path, data)
        atomic_write(os.path.join(self.save_dir, TAG_FILE), lambda f: f.write(f"{name}.pth".encode()))
        return path

    def has_checkpoint(self) -> bool:
        return bool(self.save_dir) and os.path.isfile(os.path.join(self.save_dir, TAG_FILE))

    def get_checkpoint_file(self) -> str:
        with open(os.path.join(self.save_dir, TAG_FILE), encoding="utf-8") as f:
            name = f.read().strip()
        if not name or os.path.basename(name) != name:
            raise CheckpointError(
                f"{os.path.join(self.save_dir, TAG_FILE)} must name a file in {self.save_dir}"
            )
        return os.path.join(self.save_dir, name)

    def load(self, path: str) -> dict[str, Any]:
        """Load the centres of ``path`` (this process's block) and the schedules; returns the rest."""
        data = load_torch_file(path, trust=False, description="Partial FC checkpoint")
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("model"), dict)
            or "weight" not in data["model"]
        ):
            raise CheckpointError(
                f"{path} holds no Partial FC centres (model.weight); point {TAG_FILE} at another file"
            )
        model = data.pop("model")
        weight = torch.as_tensor(model["weight"])
        pfc = self.model
        try:
            if "num_classes" in data or weight.shape[0] == pfc.num_classes:
                pfc.load_full_state({"weight": weight, "momentum": model.get("momentum")}, source=path)
            elif tuple(weight.shape) == (pfc.num_local, pfc.embedding_size):
                # upstream's per-process file, written with this number of processes
                with torch.no_grad():
                    pfc.weight.copy_(weight.to(pfc.weight))
                    pfc.weight_mom.copy_(
                        torch.as_tensor(model.get("momentum", torch.zeros_like(weight))).to(pfc.weight)
                    )
            else:
                raise ValueError(
                    f"{path} holds {weight.shape[0]} centres, one process's block of another number of processes "
                    f"(upstream's per-process files); resume with the number of processes that wrote it"
                )
        except ValueError as e:
            raise CheckpointError(str(e)) from None
        for key, obj in self.checkpointables.items():
            if key in data:
                obj.load_state_dict(data.pop(key))
        logger.info(f"Loaded the Partial FC centres from {path}")
        return data

    def resume_or_load(self, path: str = "", *, resume: bool = True) -> dict[str, Any]:
        """With ``resume`` and a ``last_weight`` tag: load the file it names; else ``path`` when
        given (upstream's signature); else nothing."""
        if resume and self.has_checkpoint():
            return self.load(self.get_checkpoint_file())
        if path:
            return self.load(path)
        return {}


class PfcPeriodicCheckpointer(HookBase):
    """Saves the centres on every process (a collective) when the model's checkpointer saves:
    ``softmax_weight_<epoch>`` every ``period`` epochs, ``softmax_weight_final`` after the last
    one, and ``softmax_weight_iter<iteration>`` when a stop signal ends the run."""

    def __init__(self, checkpointer: PfcCheckpointer, period: int) -> None:
        self.checkpointer = checkpointer
        self.period = int(period)
        self._saved_iter = -1

    def _save(self, name: str) -> None:
        self.checkpointer.save(name, iteration=int(self.trainer.iter))
        self._saved_iter = self.trainer.iter

    def after_epoch(self) -> None:
        epoch = self.trainer.epoch
        if epoch >= self.trainer.max_epoch - 1:
            self._save("softmax_weight_final")
        elif self.period > 0 and (epoch + 1) % self.period == 0:
            self._save(f"softmax_weight_{epoch:04d}")

    def after_train(self) -> None:
        if self._saved_iter == self.trainer.iter:
            return
        if getattr(self.trainer, "finished", False):  # SOLVER.MAX_ITER ending inside an epoch
            self._save("softmax_weight_final")
        elif getattr(self.trainer, "stopping", False):  # a stop signal, agreed by every process
            self._save(f"softmax_weight_iter{self.trainer.iter:07d}")
