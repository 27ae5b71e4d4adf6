"""The outside classifier's checkpoints: a Checkpointer subclass with its own file content and
its own ``last_weight_<rank>`` tag, and a PeriodicCheckpointer hook subclass with its own schedule."""

import os

import torch

from fastreid.engine.hooks import PeriodicCheckpointer
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer


class PfcPeriodicCheckpointer(PeriodicCheckpointer):
    def step(self, epoch, **kwargs):
        rank = comm.get_rank()
        if (epoch + 1) % self.period == 0 and epoch < self.max_epoch - 1:
            self.checkpointer.save(f"softmax_weight_{epoch:04d}_rank_{rank:02d}")
        if epoch >= self.max_epoch - 1:
            self.checkpointer.save(f"softmax_weight_{rank:02d}")


class PfcCheckpointer(Checkpointer):
    def __init__(self, model, save_dir, *, save_to_disk=True, **checkpointables):
        super().__init__(model, save_dir, save_to_disk=save_to_disk, **checkpointables)
        self.rank = comm.get_rank()

    def save(self, name, **kwargs):
        if not self.save_dir or not self.save_to_disk:
            return
        data = {"model": {"weight": self.model.weight.data, "momentum": self.model.weight_mom}}
        for key, obj in self.checkpointables.items():
            data[key] = obj.state_dict()
        data.update(kwargs)
        basename = f"{name}.pth"
        with open(os.path.join(self.save_dir, basename), "wb") as f:
            torch.save(data, f)
        self.tag_last_checkpoint(basename)

    def _load_model(self, checkpoint):
        state = checkpoint.pop("model")
        self.model.weight.data.copy_(state.pop("weight"))
        self.model.weight_mom.copy_(state.pop("momentum"))

    def has_checkpoint(self):
        return os.path.exists(os.path.join(self.save_dir, f"last_weight_{self.rank:02d}"))

    def get_checkpoint_file(self):
        try:
            with open(os.path.join(self.save_dir, f"last_weight_{self.rank:02d}")) as f:
                return os.path.join(self.save_dir, f.read().strip())
        except OSError:
            return ""

    def tag_last_checkpoint(self, last_filename_basename):
        with open(os.path.join(self.save_dir, f"last_weight_{self.rank:02d}"), "w") as f:
            f.write(last_filename_basename)
