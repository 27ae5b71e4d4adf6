"""``UdaTrainer``: :class:`~fastreid.engine.DefaultTrainer` for ``ClusterContrast`` (registered for
it, so ``fastreid-train --config-file configs/UDA/...`` trains with it).

Each epoch starts with the pseudo-label step (:class:`PseudoLabelHook`, the first hook):

1. features of every target image by the evaluation's extractor (test transforms, flip-averaging
   with ``TEST.FLIP.ENABLED``, the folded inference copy and precision of the evaluation);
2. DBSCAN on their sparse k-reciprocal Jaccard graph (:mod:`.clustering`); outliers sit the epoch
   out; a clustering that cannot train stops the run with one line naming ``UDA.CLUSTER.EPS``,
   after a checkpoint of what was trained;
3. the cluster memory starts from the cluster means (:meth:`.ClusterContrast.set_memory`);
4. the epoch's loader: the clustered images with their pseudo labels, ``DATALOADER.SAMPLER_TRAIN``
   (a P x K identity sampler) seeded with ``(SEED, epoch)``.

The pseudo labels and the memory are training state (the hook's ``state_dict``, in every
checkpoint, the one a stop signal writes included): ``--resume`` in the middle of an epoch goes on
with the same labels, memory and batches; at an epoch's start it clusters again, as the
uninterrupted run does. The epoch's cluster count, outlier share and, where the target has
identities, NMI, ARI and pair precision / recall go to the log and to ``metrics.json``
(``pseudo_labels/...``), which the run report shows.

The target's identities are read by the measure only: the labels, the memory and the batches come
from the images alone.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional, cast

import numpy as np
import torch

from fastreid.config import CfgNode, ConfigError
from fastreid.data.build import build_reid_test_loader, build_reid_train_loader
from fastreid.data.common import CommDataset
from fastreid.data.loading.seeds import mix_seed
from fastreid.data.transforms import build_transforms
from fastreid.engine import DefaultTrainer, hooks
from fastreid.engine.defaults import inference_runner
from fastreid.engine.train_loop import HookBase
from fastreid.engine.trainers import register_trainer
from fastreid.inference.extractor import features_of_loader
from fastreid.utils import comm
from fastreid.utils.checkpoint import unwrap_model
from fastreid.utils.precision import precision_of_cfg
from fastreid.utils.rng import rng_isolated

from .cluster_contrast import ClusterContrast
from .clustering import (
    ClusteringError,
    PseudoLabels,
    check_clustering,
    check_target_size,
    cluster_centroids,
    pseudo_labels,
)
from .config import check_uda_config
from .target import TargetImages, target_images

__all__ = ["PendingLabels", "PseudoLabelHook", "UdaTrainer", "extract_features"]

logger = logging.getLogger("fastreid.uda")


class _EpochSize:
    """What the trainer reads of a train set before the first epoch: how many samples an epoch
    draws (``len``) and no classes (the memory, not a classifier, holds the clusters)."""

    num_classes = 0

    def __init__(self, samples: int) -> None:
        self._samples = int(samples)

    def __len__(self) -> int:
        return self._samples


class PendingLabels:
    """The train loader until the pseudo-label step gives the epoch's own: ``target`` and the
    epoch's size; drawing a batch from it is a bug (the hook replaces it first)."""

    def __init__(self, target: TargetImages, samples_per_epoch: int) -> None:
        self.target = target
        self.dataset = _EpochSize(samples_per_epoch)

    def __iter__(self) -> PendingLabels:
        return self

    def __next__(self) -> Any:
        raise RuntimeError("the pseudo-label step did not run before the epoch (PseudoLabelHook missing)")


@torch.no_grad()
def extract_features(cfg: CfgNode, model: torch.nn.Module, target: TargetImages) -> torch.Tensor:
    """N x D features (float32, CPU) of the target's images in order, as the evaluation computes
    them: test transforms, the inference copy of the model (``TEST.FOLD_BN``), its precision,
    flip-averaged with ``TEST.FLIP.ENABLED``. The model's mode is left as it was."""
    model = unwrap_model(model)
    device = next(model.parameters()).device.type
    precision = precision_of_cfg(cfg, device, log=False)
    runner = inference_runner(cfg, model, precision)
    items = [(path, 0, camid) for path, camid in zip(target.paths, target.camids)]
    test_set = CommDataset(
        items, build_transforms(cfg, is_train=False), relabel=True, max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS
    )
    loader, _ = build_reid_test_loader(cfg, test_set=test_set, num_query=0)
    try:
        with precision.autocast(training=False):
            feats, _, _, _ = features_of_loader(runner, loader, flip=cfg.TEST.FLIP.ENABLED)
    finally:
        shutdown = getattr(loader, "shutdown", None)
        if callable(shutdown):
            shutdown()
    return feats


class PseudoLabelHook(HookBase):
    """The pseudo-label step before each epoch (see the module docstring); owns the pseudo labels
    and the cluster memory as training state."""

    def __init__(self, cfg: CfgNode, target: TargetImages) -> None:
        self.cfg = cfg
        self.target = target
        self.labels: Optional[np.ndarray] = None
        self.labelled_epoch = -1

    @property
    def model(self) -> ClusterContrast:
        return unwrap_model(self.trainer.model)  # type: ignore[attr-defined, return-value]  # the trainer's ClusterContrast

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        if self.labels is None:
            return {}
        return {
            "epoch": int(self.labelled_epoch),
            "labels": torch.from_numpy(self.labels.copy()),
            "memory": self.model.memory.detach().to("cpu").clone(),
            "num_images": len(self.target),
        }

    def load_state_dict(self, state: Any) -> None:
        if "labels" not in state:
            return
        if int(state["num_images"]) != len(self.target):
            logger.warning(
                f"The checkpoint's pseudo labels are for {int(state['num_images'])} target images, the target has "
                f"{len(self.target)}: the target is clustered again"
            )
            return
        self.labels = torch.as_tensor(state["labels"]).numpy().astype(np.int64)
        self.labelled_epoch = int(state["epoch"])
        self.model.set_memory(torch.as_tensor(state["memory"]), normalize=False)  # bit for bit

    # ------------------------------------------------------------------ the step

    def before_epoch(self) -> None:
        trainer = self.trainer
        epoch = trainer.iter // trainer.iters_per_epoch
        offset = trainer.iter - epoch * trainer.iters_per_epoch
        if self.labelled_epoch != epoch:
            if offset:
                logger.warning(
                    f"Resuming inside epoch {epoch + 1} without its pseudo labels (an older checkpoint): "
                    "clustering the target again"
                )
            self._relabel(epoch)
        assert self.labels is not None
        with rng_isolated():  # the loader draws its base seed: the training streams stay as they are
            loader = UdaTrainer.build_pseudo_label_loader(self.cfg, self.target, self.labels, epoch, offset)
            cast("UdaTrainer", trainer).use_train_loader(loader)

    def _relabel(self, epoch: int) -> None:
        cfg = self.cfg
        cc = cfg.UDA.CLUSTER
        start = time.perf_counter()
        with rng_isolated():
            feats = extract_features(cfg, self.model, self.target)
        extracted = time.perf_counter()
        result = pseudo_labels(
            feats,
            k1=cc.K1,
            k2=cc.K2,
            eps=cc.EPS,
            min_samples=cc.MIN_SAMPLES,
            identities=self.target.identities,
        )
        clustered = time.perf_counter()
        logger.info(
            f"Pseudo labels for epoch {epoch + 1}: {result.describe()} (features {extracted - start:.1f} s, "
            f"clustering {clustered - extracted:.1f} s)"
        )
        self._put_scalars(result)  # a clustering that stops the run shows in metrics.json too
        try:
            check_clustering(
                result,
                eps=cc.EPS,
                min_samples=cc.MIN_SAMPLES,
                identities_per_batch=_identities_per_batch(cfg),
                epoch=epoch,
            )
        except ClusteringError:
            self._save_what_was_trained()
            raise
        unit = torch.nn.functional.normalize(feats, dim=1)
        self.model.set_memory(cluster_centroids(unit, result.labels, result.num_clusters))
        self.labels = result.labels
        self.labelled_epoch = epoch

    def _put_scalars(self, result: PseudoLabels) -> None:
        storage = self.trainer.storage
        storage.iter = self.trainer.iter  # before_step has not set it yet
        for name, value in result.scalars().items():
            storage.put_scalar(f"pseudo_labels/{name}", value, smoothing_hint=False)

    def _save_what_was_trained(self) -> None:
        """Before the run stops here: a checkpoint after the last trained iteration, unless one is
        on disk (the epoch's, or the one this run started from)."""
        trainer = self.trainer
        done = trainer.iter - 1
        saver = next((h for h in trainer.hooks if isinstance(h, hooks.PeriodicCheckpointer)), None)
        if done < trainer.start_iter or saver is None:
            return
        trainer.iter = done
        try:
            path = saver.save_unless_saved("the pseudo-label step stopped the run")
        finally:
            trainer.iter = done + 1
        logger.info(f"What was trained is in {path} (resume with --resume after changing the config)")


def _identities_per_batch(cfg: CfgNode) -> int:
    if cfg.DATALOADER.SAMPLER_TRAIN == "TrainingSampler":
        return 1
    return max(1, cfg.SOLVER.IMS_PER_BATCH // max(1, cfg.DATALOADER.NUM_INSTANCE))


class UdaTrainer(DefaultTrainer):
    """DefaultTrainer with the pseudo-label step before each epoch (see the module docstring)."""

    def __init__(self, cfg: CfgNode) -> None:
        check_uda_config(cfg)
        if comm.get_world_size() > 1:
            raise ConfigError(
                "ClusterContrast trains in one process (its cluster memory is updated by every image of "
                "the batch in order); run it without --num-gpus / torchrun"
            )
        if cfg.DATALOADER.CACHE:
            raise ConfigError(
                "DATALOADER.CACHE is not supported by ClusterContrast (each epoch trains another subset of "
                "the target); set DATALOADER.CACHE False"
            )
        super().__init__(cfg)

    def build_hooks(self) -> list[HookBase]:
        pending = self._trainer.data_loader
        if not isinstance(pending, PendingLabels):
            raise TypeError(f"{type(self).__name__}.build_train_loader must return PendingLabels")
        self.target = pending.target
        cc = self.cfg.UDA.CLUSTER
        check_target_size(len(self.target), k1=cc.K1, eps=cc.EPS, min_samples=cc.MIN_SAMPLES)
        return [PseudoLabelHook(self.cfg, self.target), *super().build_hooks()]

    def use_train_loader(self, loader: Any) -> None:
        """Train on ``loader`` from the next iteration on (its iterator made now); the loader it
        replaces is shut down."""
        old = self._trainer.data_loader
        self._trainer.reset_data_loader(loader)
        self._trainer._data_loader_iter = iter(loader)
        shutdown = getattr(old, "shutdown", None)
        if callable(shutdown):
            shutdown()

    @property
    def pseudo_labels(self) -> Optional[np.ndarray]:
        """The current epoch's pseudo label of every target image (-1: outlier), or None."""
        hook = next((h for h in self._hooks if isinstance(h, PseudoLabelHook)), None)
        return None if hook is None else hook.labels

    @classmethod
    def build_train_loader(cls, cfg: CfgNode, start_iter: int = 0) -> PendingLabels:
        """The target's images (:func:`.target.target_images`), standing in for the loader until
        the pseudo-label step builds the epoch's; an epoch draws ``UDA.ITERS_PER_EPOCH`` batches
        (0: the target's images // ``SOLVER.IMS_PER_BATCH``)."""
        logger.info("Prepare the target's training images (their identities are not used)")
        target = target_images(cfg)
        iters = int(cfg.UDA.ITERS_PER_EPOCH)
        samples = iters * cfg.SOLVER.IMS_PER_BATCH if iters > 0 else len(target)
        return PendingLabels(target, samples)

    @classmethod
    def build_pseudo_label_loader(
        cls, cfg: CfgNode, target: TargetImages, labels: np.ndarray, epoch: int, start_iter: int = 0
    ) -> Any:
        """The loader of one epoch: the clustered images with their pseudo labels, the config's
        sampler and transforms, seeded with ``(SEED, epoch)``, positioned ``start_iter`` batches in."""
        epoch_cfg = cfg.clone()
        epoch_cfg.defrost()
        if cfg.SEED >= 0:
            epoch_cfg.SEED = mix_seed(cfg.SEED, epoch) & 0x7FFFFFFF
        train_set = CommDataset(
            target.items(labels),
            build_transforms(cfg, is_train=True),
            relabel=True,
            max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS,
        )
        return build_reid_train_loader(epoch_cfg, start_iter=start_iter, train_set=train_set)

    def _precise_bn_loader(self) -> Any:
        """Precise BN reads the target's images (all of them, shuffled)."""
        items = [(path, 0, camid) for path, camid in zip(self.target.paths, self.target.camids)]
        cfg = self.cfg.clone()
        cfg.defrost()
        cfg.DATALOADER.NUM_WORKERS = 0
        cfg.DATALOADER.SAMPLER_TRAIN = "TrainingSampler"
        train_set = CommDataset(
            items, build_transforms(cfg, is_train=True), max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS
        )
        return build_reid_train_loader(cfg, train_set=train_set)


register_trainer(ClusterContrast, UdaTrainer)
