"""Fetch published ImageNet weights (``pretrained_urls``) into ``TORCH_HOME`` once, then reuse them.

Files land in ``torch.hub.get_dir()/checkpoints`` (``$TORCH_HOME/hub/checkpoints``, where torch and
torchvision keep theirs), downloaded with a progress bar and, where the publisher names one, a
SHA-256 prefix check. A file already in ``$TORCH_HOME/checkpoints`` (where upstream FastReID saves
IBN-Net, OSNet and RegNet weights) is used as is. In a distributed run the first process of each
machine downloads while the others wait at a barrier; every process then checks the file, so a
failed download ends every process with the same message instead of a hang.
"""

from __future__ import annotations

import logging
import os

import torch

from fastreid.utils import comm
from fastreid.utils.errors import UserError

from .pretrained_urls import PretrainedWeights

__all__ = ["PretrainUnavailableError", "download_folder", "fetch_pretrained", "torch_home"]


class PretrainUnavailableError(UserError, RuntimeError):
    """Pretrained weights were requested but cannot be obtained (no file, no network)."""


logger = logging.getLogger(__name__)


def torch_home() -> str:
    """``$TORCH_HOME``, else ``$XDG_CACHE_HOME/torch``, else ``~/.cache/torch`` (torch's rule)."""
    default = os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")
    return os.path.expanduser(os.getenv("TORCH_HOME", default))


def download_folder() -> str:
    return os.path.join(torch.hub.get_dir(), "checkpoints")


def _existing_file(weights: PretrainedWeights) -> str | None:
    for folder in (download_folder(), os.path.join(torch_home(), "checkpoints")):
        candidate = os.path.join(folder, weights.file_name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _is_html(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(64).lstrip().lower()
    return head.startswith((b"<!doctype", b"<html", b"<"))


def _unavailable(weights: PretrainedWeights, description: str, reason: str) -> Exception:
    target = os.path.join(download_folder(), weights.file_name)
    how = "Download it with a browser (or gdown)" if weights.browser_only else "Download it"
    return PretrainUnavailableError(
        f"Could not fetch the ImageNet weights for {description} ({reason}). {how} from {weights.url} "
        f"and save it as {weights.file_name} in {download_folder()} (i.e. {target}), or set "
        "MODEL.BACKBONE.PRETRAIN_PATH to a local weights file, or set MODEL.BACKBONE.PRETRAIN False "
        "to train from scratch."
    )


def _download(weights: PretrainedWeights, target: str) -> str | None:
    """Download into ``target``; the reason on failure, None on success."""
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        logger.info(f"Downloading {weights.url} to {target}")
        torch.hub.download_url_to_file(weights.url, target, hash_prefix=weights.hash_prefix, progress=True)
    except Exception as e:  # network, proxy, disk, HTTP and hash errors all end here
        return f"{type(e).__name__}: {e}"
    if _is_html(target):
        os.remove(target)
        return f"{weights.url} answered with a web page instead of the file"
    return None


def fetch_pretrained(weights: PretrainedWeights, description: str) -> str:
    """Local path of ``weights``, downloading it first when it is not cached.

    Raises ``PretrainUnavailableError`` naming the URL, the file name and the folder to put it in.
    """
    found = _existing_file(weights)
    if found is not None:
        return found
    target = os.path.join(download_folder(), weights.file_name)
    reason = None
    if comm.get_local_rank() == 0:
        reason = _download(weights, target)
    comm.synchronize()
    if reason is not None:
        raise _unavailable(weights, description, reason)
    if not os.path.isfile(target):
        raise _unavailable(weights, description, "the first process on this machine did not download it")
    return target
