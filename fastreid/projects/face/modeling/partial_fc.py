"""Partial FC (An et al., "Partial FC: Training 10 Million Identities on a Single Machine", 2021;
upstream FastFace's ``modeling/partial_fc.py``, after InsightFace's ``arcface_torch``).

The class centres (``num_classes`` x ``embedding_size``) do not live in the model: with ``W``
processes, process ``r`` keeps the contiguous block of classes ``[class_start, class_start +
num_local)`` (the first ``num_classes % W`` processes one class more). Each step:

1. the labels (and the embeddings) of every process are gathered, so each process sees the
   whole global batch;
2. each process samples ``num_sample = int(sample_rate * num_local)`` of its centres, the
   classes of the batch that it keeps always among them (with ``sample_rate`` 1 it uses all);
3. logits = the cosine of embeddings and sampled centres (plain dot products for ``Linear``),
   with ``MODEL.HEADS.CLS_LAYER``'s margin and scale; the softmax over *all* processes' sampled
   classes is computed with an all-reduce of the row maxima and of the sums of exponentials,
   and the loss is the mean cross-entropy over the global batch;
4. the gradient of the logits goes back to the sampled centres of this process (its optimizer
   steps them; momentum is kept per centre) and to the gathered embeddings, whose gradients
   are summed over processes; each process takes its own rows, times ``W`` because DDP averages
   the backbone's gradients over the processes.

On one process this is the full softmax cross-entropy (with ``sample_rate`` 1) or its sampled
version. With several, the result equals one process training on the global batch
(tests/face/test_partial_fc_ddp.py). Works with any torch.distributed backend: the embeddings'
gradients are all-reduced (gloo has no reduce-scatter), not reduce-scattered as upstream does.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from fastreid.layers.any_softmax import Linear, build_cls_layer
from fastreid.modeling.losses.utils import concat_all_gather
from fastreid.utils import comm

__all__ = ["PartialFC", "class_shard"]

logger = logging.getLogger("fastreid.partial_fc")


def class_shard(num_classes: int, world_size: int, rank: int) -> tuple[int, int]:
    """``(class_start, num_local)``: the block of classes process ``rank`` keeps."""
    num_local = num_classes // world_size + int(rank < num_classes % world_size)
    class_start = num_classes // world_size * rank + min(rank, num_classes % world_size)
    return class_start, num_local


def _distributed() -> bool:
    return comm.get_world_size() > 1


class PartialFC(nn.Module):
    """``PartialFC(embedding_size, num_classes, sample_rate, cls_type, scale, margin)`` (upstream's
    signature). ``weight`` / ``weight_mom``: this process's centres and their SGD momentum;
    ``sub_weight``: the parameter the optimizer steps (the sampled centres). Use
    :meth:`forward_backward` in the training step, then ``optimizer.step()`` and :meth:`update`.
    :meth:`full_state` / :meth:`load_full_state` give and take every process's centres at once
    (checkpoints that do not depend on the number of processes)."""

    def __init__(
        self,
        embedding_size: int,
        num_classes: int,
        sample_rate: float,
        cls_type: str,
        scale: float,
        margin: float,
        *,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if not 0.0 < float(sample_rate) <= 1.0:
            raise ValueError(f"MODEL.HEADS.PFC.SAMPLE_RATE must be in (0, 1], got {sample_rate}")
        if num_classes <= 0:
            raise ValueError("Partial FC needs MODEL.HEADS.NUM_CLASSES > 0 (0 is set from the training data)")
        self.embedding_size = int(embedding_size)
        self.num_classes = int(num_classes)
        self.sample_rate = float(sample_rate)
        self.world_size = comm.get_world_size()
        self.rank = comm.get_rank()
        if self.num_classes < self.world_size:
            raise ValueError(
                f"Partial FC shards {self.num_classes} classes over {self.world_size} processes; "
                "every process needs at least one class"
            )
        self.class_start, self.num_local = class_shard(self.num_classes, self.world_size, self.rank)
        self.num_sample = int(self.sample_rate * self.num_local)
        self.sample_all = self.sample_rate >= 1.0
        self.cls_layer = build_cls_layer(cls_type, num_classes, scale, margin)

        device = torch.device("cpu") if device is None else torch.device(device)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        self.weight = torch.normal(0, 0.01, (self.num_local, self.embedding_size), device=device, dtype=dtype)
        self.weight_mom = torch.zeros_like(self.weight)
        self.index: Optional[torch.Tensor] = None
        if self.sample_all:
            self.sub_weight = nn.Parameter(
                self.weight
            )  # shares the storage: the optimizer steps weight itself
            self.sub_weight_mom = self.weight_mom
        else:
            self.sub_weight = nn.Parameter(torch.empty((0, self.embedding_size), device=device, dtype=dtype))
            self.sub_weight_mom = torch.empty_like(self.sub_weight)
        logger.info(
            f"Partial FC: classes {self.class_start}..{self.class_start + self.num_local - 1} of "
            f"{self.num_classes} on process {self.rank} of {self.world_size}, sample rate {self.sample_rate}"
        )

    # ------------------------------------------------------------------ a training step

    def forward(self, total_features: torch.Tensor) -> torch.Tensor:
        """The logits of ``total_features`` against the sampled centres (before margin and scale)."""
        if type(self.cls_layer) is Linear:
            return F.linear(total_features, self.sub_weight)
        return F.linear(F.normalize(total_features), F.normalize(self.sub_weight))

    @torch.no_grad()
    def sample(self, total_targets: torch.Tensor) -> torch.Tensor:
        """Choose this step's centres; returns the targets as indices into them (-1: a class of
        another process). Replaces ``sub_weight`` unless every centre is used."""
        local = total_targets - self.class_start
        mine = (local >= 0) & (local < self.num_local)
        local = torch.where(mine, local, torch.full_like(local, -1))
        if self.sample_all:
            return local
        positive = torch.unique(local[mine], sorted=True)
        if self.num_sample - positive.numel() >= 0:
            perm = torch.rand(self.num_local, device=self.weight.device)
            perm[positive] = 2.0
            index = torch.topk(perm, k=self.num_sample)[1].sort()[0]
        else:
            index = positive
        self.index = index
        local[mine] = torch.searchsorted(index, local[mine])
        self.sub_weight = nn.Parameter(self.weight[index])
        self.sub_weight_mom = self.weight_mom[index]
        return local

    def prepare(self, targets: torch.Tensor, optimizer: torch.optim.Optimizer) -> torch.Tensor:
        """Gather the labels, sample the centres and point the optimizer's last parameter group at
        ``sub_weight`` with its momentum; returns the gathered labels as local indices."""
        total_targets = concat_all_gather(targets) if _distributed() else targets
        local_targets = self.sample(total_targets)
        group = optimizer.param_groups[-1]
        old = group["params"][0]
        optimizer.state.pop(old, None)
        group["params"][0] = self.sub_weight
        optimizer.state[self.sub_weight]["momentum_buffer"] = self.sub_weight_mom
        return local_targets

    def forward_backward(
        self, features: torch.Tensor, targets: torch.Tensor, optimizer: torch.optim.Optimizer
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gradient of the loss w.r.t. features, loss)`` of this process's ``features``
        (N x D) and ``targets`` (N labels in 0..num_classes-1); the sampled centres' gradients are
        left in ``sub_weight.grad`` for ``optimizer``."""
        local_targets = self.prepare(targets, optimizer)
        total_features = concat_all_gather(features.detach()) if _distributed() else features.detach()
        total_features = total_features.clone().requires_grad_(True)

        logits = self.cls_layer(self.forward(total_features), local_targets)
        with torch.no_grad():
            max_fc = torch.max(logits, dim=1, keepdim=True)[0]
            if _distributed():
                dist.all_reduce(max_fc, dist.ReduceOp.MAX)
            logits_exp = torch.exp(logits - max_fc)
            logits_sum_exp = logits_exp.sum(dim=1, keepdim=True)
            if _distributed():
                dist.all_reduce(logits_sum_exp, dist.ReduceOp.SUM)
            grad = logits_exp.div_(logits_sum_exp)  # the softmax over every process's classes

            rows = torch.nonzero(local_targets != -1).flatten()
            cols = local_targets[rows]
            loss = torch.zeros(grad.size(0), 1, device=grad.device, dtype=grad.dtype)
            loss[rows, 0] = grad[rows, cols]
            if _distributed():
                dist.all_reduce(loss, dist.ReduceOp.SUM)
            loss_v = loss.clamp_min_(1e-30).log_().mean() * (-1)

            grad[rows, cols] -= 1
            grad.div_(logits.size(0))
        logits.backward(grad)

        x_grad = total_features.grad
        assert x_grad is not None  # the logits depend on every row
        if _distributed():
            dist.all_reduce(x_grad, dist.ReduceOp.SUM)
            n = features.size(0)
            x_grad = x_grad[self.rank * n : (self.rank + 1) * n]
        return x_grad * self.world_size, loss_v

    @torch.no_grad()
    def update(self) -> None:
        """Write the stepped centres and their momentum back (after ``optimizer.step()``)."""
        if self.sample_all or self.index is None:
            return
        self.weight[self.index] = self.sub_weight.detach()
        self.weight_mom[self.index] = self.sub_weight_mom

    def momentum_from(self, optimizer: torch.optim.Optimizer) -> None:
        """Take the momentum the optimizer's step left for ``sub_weight`` (SGD replaces a buffer
        it created itself) before :meth:`update`."""
        buffer = optimizer.state.get(self.sub_weight, {}).get("momentum_buffer")
        if buffer is not None and buffer is not self.sub_weight_mom:
            self.sub_weight_mom.copy_(buffer)

    # ------------------------------------------------------------------ every process's centres

    @torch.no_grad()
    def full_state(self) -> dict[str, Any]:
        """``{"weight", "momentum"}`` of all ``num_classes`` centres (a collective call with
        several processes: every process gets them), on the CPU."""
        return {
            "weight": self._gather(self.weight),
            "momentum": self._gather(self.weight_mom),
            "num_classes": self.num_classes,
            "embedding_size": self.embedding_size,
        }

    def _gather(self, shard: torch.Tensor) -> torch.Tensor:
        if not _distributed():
            return shard.detach().cpu().clone()
        sizes = [class_shard(self.num_classes, self.world_size, r)[1] for r in range(self.world_size)]
        largest = max(sizes)
        padded = shard.new_zeros((largest, shard.size(1)))
        padded[: shard.size(0)] = shard
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        return torch.cat([p[:s] for p, s in zip(parts, sizes)]).cpu()

    @torch.no_grad()
    def load_full_state(self, state: dict[str, Any], source: str = "the checkpoint") -> None:
        """Take this process's block of ``state["weight"]`` / ``state["momentum"]`` (all classes)."""
        weight = torch.as_tensor(state["weight"])
        expected = (self.num_classes, self.embedding_size)
        if tuple(weight.shape) != expected:
            raise ValueError(
                f"{source} holds {tuple(weight.shape)[0]} class centres of dimension {tuple(weight.shape)[-1]}, "
                f"the model has {expected[0]} of dimension {expected[1]}: it belongs to another training set "
                "or MODEL.HEADS.EMBEDDING_DIM; start without --resume or point OUTPUT_DIR elsewhere"
            )
        momentum = torch.as_tensor(state.get("momentum", torch.zeros_like(weight)))
        block = slice(self.class_start, self.class_start + self.num_local)
        self.weight.copy_(weight[block].to(self.weight))
        self.weight_mom.copy_(momentum[block].to(self.weight_mom))

    def extra_repr(self) -> str:
        return (
            f"embedding_size={self.embedding_size}, num_classes={self.num_classes}, "
            f"local={self.class_start}..{self.class_start + self.num_local - 1}, sample_rate={self.sample_rate}"
        )
