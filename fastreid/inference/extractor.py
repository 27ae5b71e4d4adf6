"""``FeatureExtractor``: features of your own images from a config and a checkpoint.

    from fastreid.inference import FeatureExtractor

    extractor = FeatureExtractor(config_file="logs/market/config.yaml", weights="logs/market/model_final.pth")
    feats = extractor(["a.jpg", "b.jpg"])                   # N x D float32
    feats = extractor(cv2.imread("c.jpg"), bgr=True)       # OpenCV arrays are BGR
    feats = extractor(pil_images, normalize=True)          # L2-normalised rows

Images go through the evaluation's test transforms (``INPUT.SIZE_TEST``, ``INPUT.CROP``) and,
with ``TEST.FLIP.ENABLED``, through the evaluation's flip-averaging, so a picture gets the same
feature here as in ``tools/train_net.py --eval-only``. Image files are read by the project's
loader (``DataLoaderX`` with the platform policy: ``DATALOADER.NUM_WORKERS`` / ``NUM_THREADS``
decode while the model runs); in-memory images are transformed in this process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, SequentialSampler
from tqdm import tqdm

from fastreid.config import CfgNode, get_cfg
from fastreid.data.build import fast_batch_collator
from fastreid.data.common import CommDataset
from fastreid.data.loading.factories import build_dataloader
from fastreid.data.transforms import build_transforms
from fastreid.engine.defaults import DefaultPredictor
from fastreid.evaluation.evaluator import inference_context
from fastreid.utils.platform import cuda_available

from .backends import FeatureBackend, TorchBackend, backend_device, create_backend
from .inputs import ImageInput, is_path, split_batch, to_image_tensor

__all__ = ["FeatureExtractor", "build_inference_config", "features_of_loader", "pick_device"]

logger = logging.getLogger(__name__)


def pick_device(device: Optional[str]) -> Optional[str]:
    """``"auto"``: CUDA, then MPS, then the CPU. Other names are returned as given (a missing CUDA
    then falls back to the CPU with one log line, as in training)."""
    if device != "auto":
        return device
    if cuda_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def build_inference_config(
    config_file: Optional[str] = None,
    weights: Optional[str] = None,
    device: Optional[str] = "auto",
    opts: Sequence[str] = (),
    cfg: Optional[CfgNode] = None,
) -> CfgNode:
    """The config from ``config_file`` (or ``cfg``) and the ``KEY VALUE`` list ``opts``, with
    ``weights`` as ``MODEL.WEIGHTS`` and ``device`` (``None``: keep ``MODEL.DEVICE``)."""
    if cfg is None:
        cfg = get_cfg()
        if config_file:
            cfg.merge_from_file(os.fspath(config_file))
    else:
        cfg = cfg.clone()
    cfg.defrost()
    cfg.merge_from_list(list(opts))
    if weights is not None:
        cfg.MODEL.WEIGHTS = os.fspath(weights)
    if device is not None:
        cfg.MODEL.DEVICE = pick_device(device)
    cfg.freeze()
    return cfg


def features_of_loader(
    model: torch.nn.Module, loader: Any, flip: bool = False, progress: bool = False
) -> tuple[torch.Tensor, np.ndarray, np.ndarray, list[str]]:
    """``(features, pids, camids, paths)`` of every batch of a re-ID test loader, in loader order:
    eval mode and no grad (the previous mode is restored), flip-averaged as the evaluation does
    with ``flip``, features float32 on the CPU."""
    feats, pids, camids, paths = [], [], [], []
    if progress:
        loader = tqdm(loader, desc="features", dynamic_ncols=True, leave=False)
    with inference_context(model), torch.no_grad():
        for batch in loader:
            out = model(batch)
            if flip:
                flipped = dict(batch)
                flipped["images"] = batch["images"].flip(dims=[3])
                out = (out + model(flipped)) / 2
            feats.append(out.detach().to("cpu", torch.float32))
            pids.append(torch.as_tensor(batch["targets"]).cpu())
            camids.append(torch.as_tensor(batch["camids"]).cpu())
            paths.extend(batch["img_paths"])
    return torch.cat(feats), torch.cat(pids).numpy(), torch.cat(camids).numpy(), paths


class FeatureExtractor:
    """Features of images given as paths, PIL images, numpy arrays or tensors.

    ``config_file`` / ``cfg``: the model's config (usually the ``config.yaml`` a training run saved);
    ``weights``: the checkpoint (default ``MODEL.WEIGHTS``); ``device``: ``"auto"`` (CUDA, MPS,
    CPU), a device name, or ``None`` for ``MODEL.DEVICE``; ``opts``: config overrides as a
    ``KEY VALUE`` list; ``batch_size``: default ``TEST.IMS_PER_BATCH``; ``flip``: default
    ``TEST.FLIP.ENABLED``. ``backend``: ``torch`` (the model, default), or ``onnxruntime`` /
    ``openvino`` running ``model_file``, a model written by ``fastreid-export --format onnx`` (fp32
    or int8), on the CPU with ``threads`` threads (:mod:`fastreid.inference.backends`); the images
    are read, transformed, batched and flip-averaged the same way for every backend.
    """

    def __init__(
        self,
        config_file: Optional[str] = None,
        weights: Optional[str] = None,
        device: Optional[str] = "auto",
        opts: Sequence[str] = (),
        *,
        cfg: Optional[CfgNode] = None,
        batch_size: Optional[int] = None,
        flip: Optional[bool] = None,
        backend: str = "torch",
        model_file: Optional[str] = None,
        threads: Optional[int] = None,
    ) -> None:
        config = build_inference_config(config_file, weights, backend_device(backend, device), opts, cfg)
        self.backend: FeatureBackend = create_backend(backend, config, model_file, threads)
        self.cfg = self.backend.cfg
        self.batch_size = int(batch_size or self.cfg.TEST.IMS_PER_BATCH)
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        self.flip = bool(self.cfg.TEST.FLIP.ENABLED if flip is None else flip)
        self.transform = build_transforms(self.cfg, is_train=False)
        #: The loader policy's decision for the last path loader (workers, threads; for reports).
        self.last_loader_decision: Any = None

    @property
    def predictor(self) -> DefaultPredictor:
        """The torch backend's :class:`~fastreid.engine.DefaultPredictor`."""
        return self._torch_backend().predictor

    @property
    def model(self) -> torch.nn.Module:
        return self._torch_backend().model

    def _torch_backend(self) -> TorchBackend:
        if not isinstance(self.backend, TorchBackend):
            raise AttributeError(
                f"the {self.backend.name} backend runs an exported file: it has no torch model"
            )
        return self.backend

    @property
    def device(self) -> torch.device:
        return self.backend.device

    def features_of_batch(self, images: torch.Tensor) -> torch.Tensor:
        """Features of an already transformed batch (N x 3 x H x W, 0..255), flip-averaged with
        ``flip`` exactly as the evaluation does."""
        feats = self.backend(images)
        if self.flip:
            feats = (feats + self.backend(images.flip(dims=[3]))) / 2
        return feats

    def __call__(self, inputs: Any, *, bgr: bool = False, normalize: bool = False) -> torch.Tensor:
        """N x D float32 features (CPU) of one image, a list of images, or a stacked batch.

        A list made only of paths is read by the data loader; anything else is converted here
        (``bgr=True``: arrays/tensors are in OpenCV's B, G, R order). ``normalize``: L2-normalise rows.
        """
        items = split_batch(inputs)
        if not items:
            raise ValueError("no images given")
        if all(is_path(item) for item in items):
            paths = [os.fspath(p) for p in items]  # type: ignore[arg-type]  # all of them are paths
            chunks = [feats for _, feats in self.iter_path_features(paths)]
        else:
            chunks = [
                self.features_of_batch(self.preprocess(items[i : i + self.batch_size], bgr))
                for i in range(0, len(items), self.batch_size)
            ]
        feats = torch.cat(chunks)
        return F.normalize(feats, dim=1) if normalize else feats

    def preprocess(self, items: Sequence[ImageInput], bgr: bool = False) -> torch.Tensor:
        """The transformed batch (N x 3 x H x W uint8) of in-memory images or paths, as the model gets it."""
        # The test transforms draw no random numbers; a fixed generator keeps the global RNG untouched.
        g = torch.Generator().manual_seed(0)
        images = [self.transform(to_image_tensor(item, bgr), g) for item in items]
        shapes = {tuple(img.shape) for img in images}
        if len(shapes) > 1:
            raise ValueError(
                f"images of different sizes after the test transforms ({sorted(shapes)}); "
                "set INPUT.SIZE_TEST to [height, width]"
            )
        return torch.stack(images)

    def iter_path_features(self, paths: Sequence[str]) -> Iterator[tuple[list[str], torch.Tensor]]:
        """``(paths of the batch, their features)`` for every batch of ``paths``, in order, read by
        ``DataLoaderX`` under the loader policy (``DATALOADER.*``)."""
        dataset = CommDataset([(p, 0, 0) for p in paths], self.transform, relabel=False)
        loader = build_dataloader(
            dataset,
            batch_sampler=BatchSampler(SequentialSampler(dataset), self.batch_size, drop_last=False),
            collate_fn=fast_batch_collator,
            cfg=self.cfg,
            device=self.cfg.MODEL.DEVICE,
            seed=self.cfg.SEED,
            is_train=False,
        )
        self.last_loader_decision = getattr(loader, "decision", None)
        try:
            for batch in loader:
                yield list(batch["img_paths"]), self.features_of_batch(batch["images"])
        finally:
            shutdown = getattr(loader, "shutdown", None)
            if callable(shutdown):
                shutdown()
