"""Where each backbone's ImageNet weights live: the URLs and file names upstream FastReID uses.

``pretrained_weights_for(family, variant)`` returns the entry used when ``MODEL.BACKBONE.PRETRAIN``
is True and ``PRETRAIN_PATH`` is empty; the file is then downloaded into
``$TORCH_HOME/checkpoints/<file_name>`` (see ``pretrained_download.py``), the folder and names
upstream uses, so a file fetched by upstream is found here too.

Facts, with their sources:

- IBN-Net (``XingangPan/IBN-Net`` release v1.0), ResNeSt (``zhanghang1989/ResNeSt`` release
  ``weights_step1``) and OSNet (Google Drive, saved as ``<key>_imagenet.pth``): upstream's
  ``resnet.py``, ``resnext.py``, ``resnest.py`` and ``osnet.py``.
- RegNet and EfficientNet: pycls's model zoo (``dl.fbaipublicfiles.com/pycls/dds_baselines``).
  Upstream's ``regnet.py`` maps ``800x`` to the RegNetX-200MF file (wrong widths) and its
  ``effnet.py`` gives B3 and B5 the B1 folder (404); here each variant has its own file, and
  200x/200y/400x/400y (upstream: no URL) have theirs.
- ``hash_prefix``: the leading hex digits of the file's SHA-256, only where upstream or the
  publisher checks them (ResNeSt, download.pytorch.org). IBN-Net's names carry 8 hex digits that
  nobody checks; they are not treated as a hash.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PretrainedWeights", "PRETRAINED_WEIGHTS", "pretrained_weights_for"]


@dataclass(frozen=True)
class PretrainedWeights:
    url: str
    file_name: str
    hash_prefix: str | None = None
    # Some hosts (Google Drive) answer a plain download with an HTML page for large files.
    browser_only: bool = False


def _named(url: str, hash_prefix: str | None = None) -> PretrainedWeights:
    return PretrainedWeights(url, url.rsplit("/", 1)[-1], hash_prefix)


_IBN = "https://github.com/XingangPan/IBN-Net/releases/download/v1.0/"
_RESNEST = "https://github.com/zhanghang1989/ResNeSt/releases/download/weights_step1/"
_PYCLS = "https://dl.fbaipublicfiles.com/pycls/dds_baselines/"
_GDRIVE = "https://drive.google.com/uc?id="


def _resnest(name: str, sha: str) -> PretrainedWeights:
    return _named(f"{_RESNEST}{name}-{sha}.pth", sha)


def _osnet(key: str, drive_id: str) -> PretrainedWeights:
    return PretrainedWeights(_GDRIVE + drive_id, f"{key}_imagenet.pth", None, browser_only=True)


# (family, variant) -> weights. Variants spell upstream's keys: DEPTH, prefixed "ibn_"/"se_".
PRETRAINED_WEIGHTS: dict[tuple[str, str], PretrainedWeights] = {
    ("resnet", "ibn_18x"): _named(_IBN + "resnet18_ibn_a-2f571257.pth"),
    ("resnet", "ibn_34x"): _named(_IBN + "resnet34_ibn_a-94bc1577.pth"),
    ("resnet", "ibn_50x"): _named(_IBN + "resnet50_ibn_a-d9d0bb7b.pth"),
    ("resnet", "ibn_101x"): _named(_IBN + "resnet101_ibn_a-59ea0ac6.pth"),
    ("resnet", "se_ibn_101x"): _named(_IBN + "se_resnet101_ibn_a-fabed4e2.pth"),
    ("resnext", "ibn_101x"): _named(_IBN + "resnext101_ibn_a-6ace051d.pth"),
    ("resnest", "50x"): _resnest("resnest50", "528c19ca"),
    ("resnest", "101x"): _resnest("resnest101", "22405ba7"),
    ("resnest", "200x"): _resnest("resnest200", "75117900"),
    ("resnest", "269x"): _resnest("resnest269", "0cc87c48"),
    ("osnet", "x1_0"): _osnet("osnet_x1_0", "1LaG1EJpHrxdAxKnSCJ_i0u-nbxSAeiFY"),
    ("osnet", "x0_75"): _osnet("osnet_x0_75", "1uwA9fElHOk3ZogwbeY5GkLI6QPTX70Hq"),
    ("osnet", "x0_5"): _osnet("osnet_x0_5", "16DGLbZukvVYgINws8u8deSaOqjybZ83i"),
    ("osnet", "x0_25"): _osnet("osnet_x0_25", "1rb8UN5ZzPKRc_xvtHlyDh-cSz88YX9hs"),
    ("osnet", "ibn_x1_0"): _osnet("osnet_ibn_x1_0", "1sr90V6irlYYDd4_4ISU2iruoRG8J__6l"),
    ("regnet", "200x"): _named(_PYCLS + "160905981/RegNetX-200MF_dds_8gpu.pyth"),
    ("regnet", "200y"): _named(_PYCLS + "176245422/RegNetY-200MF_dds_8gpu.pyth"),
    ("regnet", "400x"): _named(_PYCLS + "160905967/RegNetX-400MF_dds_8gpu.pyth"),
    ("regnet", "400y"): _named(_PYCLS + "160906449/RegNetY-400MF_dds_8gpu.pyth"),
    ("regnet", "800x"): _named(_PYCLS + "160906036/RegNetX-800MF_dds_8gpu.pyth"),
    ("regnet", "800y"): _named(_PYCLS + "160906567/RegNetY-800MF_dds_8gpu.pyth"),
    ("regnet", "1600x"): _named(_PYCLS + "160990626/RegNetX-1.6GF_dds_8gpu.pyth"),
    ("regnet", "1600y"): _named(_PYCLS + "160906681/RegNetY-1.6GF_dds_8gpu.pyth"),
    ("regnet", "3200x"): _named(_PYCLS + "160906139/RegNetX-3.2GF_dds_8gpu.pyth"),
    ("regnet", "3200y"): _named(_PYCLS + "160906834/RegNetY-3.2GF_dds_8gpu.pyth"),
    ("regnet", "4000x"): _named(_PYCLS + "160906383/RegNetX-4.0GF_dds_8gpu.pyth"),
    ("regnet", "4000y"): _named(_PYCLS + "160906838/RegNetY-4.0GF_dds_8gpu.pyth"),
    ("regnet", "6400x"): _named(_PYCLS + "161116590/RegNetX-6.4GF_dds_8gpu.pyth"),
    ("regnet", "6400y"): _named(_PYCLS + "160907112/RegNetY-6.4GF_dds_8gpu.pyth"),
    ("effnet", "b0"): _named(_PYCLS + "161305613/EN-B0_dds_8gpu.pyth"),
    ("effnet", "b1"): _named(_PYCLS + "161304979/EN-B1_dds_8gpu.pyth"),
    ("effnet", "b2"): _named(_PYCLS + "161305015/EN-B2_dds_8gpu.pyth"),
    ("effnet", "b3"): _named(_PYCLS + "161305060/EN-B3_dds_8gpu.pyth"),
    ("effnet", "b4"): _named(_PYCLS + "161305098/EN-B4_dds_8gpu.pyth"),
    ("effnet", "b5"): _named(_PYCLS + "161305138/EN-B5_dds_8gpu.pyth"),
}


def pretrained_weights_for(family: str, variant: str) -> PretrainedWeights | None:
    """The published weights for ``family`` (e.g. "resnest") ``variant`` (e.g. "50x", "ibn_101x"),
    or None when there are none (a local ``PRETRAIN_PATH`` is then required)."""
    return PRETRAINED_WEIGHTS.get((family, variant))
