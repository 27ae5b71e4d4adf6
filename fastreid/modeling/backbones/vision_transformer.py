"""Vision Transformer backbone with upstream FastReID's keys (``patch_embed.proj``, ``cls_token``,
``pos_embed``, ``sie_embed``, ``blocks.i.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``,
``norm``) and DEPTH presets ``small``/``base``.

Patches are cut with stride ``STRIDE_SIZE`` (overlapping when smaller than 16), so the model is
built for one input size, ``INPUT.SIZE_TRAIN``. The output is the class token as an
N x D x 1 x 1 map (heads use ``POOL_LAYER Identity``).

Side information embedding (SIE, TransReID): with ``MODEL.BACKBONE.SIE_CAMERAS`` > 1 (a
``[fastreid]`` key; upstream's builder never turns it on) a learnt per-camera vector times
``SIE_COE`` is added to every token; the meta-architecture then passes the batch's ``camids``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping
from typing import Any, Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import DropPath, to_2tuple, trunc_normal_

from ...utils.checkpoint_report import load_state_dict_with_report
from .build import BACKBONE_REGISTRY
from .pretrained import PretrainUnavailableError, extract_backbone_state_dict, read_checkpoint_file

__all__ = [
    "VisionTransformer",
    "Mlp",
    "Attention",
    "Block",
    "PatchEmbed",
    "PatchEmbed_overlap",
    "HybridEmbed",
    "resize_pos_embed",
    "build_vit_backbone",
    "VIT_PRESETS",
    "adapt_pretrained_vit_state",
]

logger = logging.getLogger(__name__)

# DEPTH -> (layers, heads, mlp ratio, qkv bias, attention scale or None for head_dim ** -0.5)
VIT_PRESETS = {
    "small": (8, 8, 3.0, False, 768**-0.5),
    "base": (12, 12, 4.0, True, None),
}


class Mlp(nn.Module):
    """Linear to ``hidden_features``, activation, linear to ``out_features`` (both default to
    ``in_features``), with dropout after each."""

    def __init__(
        self,
        in_features: int,
        hidden_features: int | None = None,
        out_features: int | None = None,
        act_layer: Callable[[], nn.Module] = nn.GELU,
        drop: float = 0.0,
    ) -> None:
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Attention(nn.Module):
    """Multi-head self-attention (``F.scaled_dot_product_attention``); ``qk_scale`` replaces the
    usual ``head_dim ** -0.5`` (the small preset uses ``768 ** -0.5``)."""

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        qk_scale: float | None = None,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = qk_scale or (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, dim = x.shape
        q, k, v = (
            self.qkv(x).reshape(n, tokens, 3, self.num_heads, dim // self.num_heads).permute(2, 0, 3, 1, 4)
        )
        dropout = self.attn_drop.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=self.scale)
        return self.proj_drop(self.proj(y.transpose(1, 2).reshape(n, tokens, dim)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``, each branch
    dropped per sample with probability ``drop_path`` in training."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        qk_scale: float | None = None,
        drop: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
        act_layer: Callable[[], nn.Module] = nn.GELU,
        norm_layer: Callable[[int], nn.Module] = nn.LayerNorm,
    ) -> None:
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads, qkv_bias, qk_scale, attn_drop, drop)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer=act_layer, drop=drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


def _check_input_size(x: torch.Tensor, img_size: tuple[int, int]) -> None:
    if tuple(x.shape[2:]) != img_size:
        raise ValueError(
            f"This ViT was built for {img_size[0]}x{img_size[1]} images "
            f"(INPUT.SIZE_TRAIN); got {x.shape[2]}x{x.shape[3]}. Set INPUT.SIZE_TEST equal to it"
        )


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch_size`` patches projected to ``embed_dim`` channels (a strided conv)."""

    def __init__(
        self, img_size: Any = 224, patch_size: Any = 16, in_chans: int = 3, embed_dim: int = 768
    ) -> None:
        super().__init__()
        self.img_size = cast("tuple[int, int]", tuple(to_2tuple(img_size)))
        self.patch_size = cast("tuple[int, int]", tuple(to_2tuple(patch_size)))
        self.num_y = self.img_size[0] // self.patch_size[0]
        self.num_x = self.img_size[1] // self.patch_size[1]
        self.num_patches = self.num_y * self.num_x
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input_size(x, self.img_size)
        return self.proj(x).flatten(2).transpose(1, 2)


class PatchEmbed_overlap(nn.Module):  # noqa: N801  (upstream's class name)
    """``patch_size`` patches taken every ``stride_size`` pixels (overlapping when the stride is
    smaller), projected to ``embed_dim`` channels; the projection starts as N(0, 2 / (k * k * out))."""

    def __init__(
        self,
        img_size: Any = 224,
        patch_size: Any = 16,
        stride_size: Any = 20,
        in_chans: int = 3,
        embed_dim: int = 768,
    ) -> None:
        super().__init__()
        self.img_size = cast("tuple[int, int]", tuple(to_2tuple(img_size)))
        self.patch_size = cast("tuple[int, int]", tuple(to_2tuple(patch_size)))
        stride = cast("tuple[int, int]", tuple(to_2tuple(stride_size)))
        self.num_y = (self.img_size[0] - self.patch_size[0]) // stride[0] + 1
        self.num_x = (self.img_size[1] - self.patch_size[1]) // stride[1] + 1
        if self.num_y < 1 or self.num_x < 1:
            raise ConfigError(
                f"INPUT.SIZE_TRAIN {list(self.img_size)} is smaller than one "
                f"{self.patch_size[0]}x{self.patch_size[1]} ViT patch"
            )
        self.num_patches = self.num_y * self.num_x
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=stride)
        fan_out = self.patch_size[0] * self.patch_size[1] * embed_dim
        nn.init.normal_(self.proj.weight, 0, math.sqrt(2.0 / fan_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input_size(x, self.img_size)
        return self.proj(x).flatten(2).transpose(1, 2)


class HybridEmbed(nn.Module):
    """Tokens from a CNN's last feature map, projected to ``embed_dim`` channels by a 1x1 conv.
    Without ``feature_size`` the map's size and channels are measured by running the CNN once on
    an ``img_size`` image."""

    def __init__(
        self,
        backbone: nn.Module,
        img_size: Any = 224,
        feature_size: Any = None,
        in_chans: int = 3,
        embed_dim: int = 768,
    ) -> None:
        super().__init__()
        if not isinstance(backbone, nn.Module):
            raise TypeError(f"HybridEmbed needs an nn.Module backbone, got {type(backbone).__name__}")
        self.img_size = cast("tuple[int, int]", tuple(to_2tuple(img_size)))
        self.backbone = backbone
        if feature_size is None:
            training = backbone.training
            backbone.eval()
            with torch.no_grad():
                out = self._last_map(self.backbone(torch.zeros(1, in_chans, *self.img_size)))
            backbone.train(training)
            feature_size, feature_dim = out.shape[-2:], out.shape[1]
        else:
            feature_size = to_2tuple(feature_size)
            info = getattr(backbone, "feature_info", None)
            feature_dim = int(info.channels()[-1] if info is not None else cast(Any, backbone).num_features)
        self.num_patches = feature_size[0] * feature_size[1]
        self.proj = nn.Conv2d(feature_dim, embed_dim, 1)

    @staticmethod
    def _last_map(out: Any) -> torch.Tensor:
        """The last feature map of a backbone that returns a list or tuple of them."""
        return out[-1] if isinstance(out, (list, tuple)) else out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self._last_map(self.backbone(x))).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    """ViT with overlapping patches (``stride_size``) or a CNN stem (``hybrid_backbone``), a class
    token, learnt position embeddings and, with ``camera`` > 1, camera embeddings times
    ``sie_xishu`` (TransReID's SIE; ``forward(x, camera_id)``). Output: the normalised class token
    as an N x D x 1 x 1 map."""

    def __init__(
        self,
        img_size: Any = 224,
        patch_size: Any = 16,
        stride_size: Any = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = False,
        qk_scale: float | None = None,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        camera: int = 0,
        drop_path_rate: float = 0.0,
        hybrid_backbone: nn.Module | None = None,
        norm_layer: Callable[[int], nn.Module] = functools.partial(nn.LayerNorm, eps=1e-6),
        sie_xishu: float = 1.0,
    ) -> None:
        super().__init__()
        self.num_features = self.out_channels = self.embed_dim = embed_dim
        self.patch_embed: nn.Module
        if hybrid_backbone is not None:
            self.patch_embed = HybridEmbed(
                hybrid_backbone, img_size=img_size, in_chans=in_chans, embed_dim=embed_dim
            )
        else:
            self.patch_embed = PatchEmbed_overlap(img_size, patch_size, stride_size, in_chans, embed_dim)
        num_patches = cast(int, self.patch_embed.num_patches)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.cam_num = camera
        self.sie_xishu = sie_xishu
        self.uses_camera_ids = camera > 1
        if self.uses_camera_ids:
            self.sie_embed = nn.Parameter(torch.zeros(camera, 1, embed_dim))
            trunc_normal_(self.sie_embed, std=0.02)
        self.pos_drop = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, depth, device="cpu").tolist()
        self.blocks = nn.ModuleList(
            Block(
                embed_dim,
                num_heads,
                mlp_ratio,
                qkv_bias,
                qk_scale,
                drop_rate,
                attn_drop_rate,
                rate,
                norm_layer=norm_layer,
            )
            for rate in rates
        )
        self.norm = norm_layer(embed_dim)
        trunc_normal_(self.cls_token, std=0.02)
        trunc_normal_(self.pos_embed, std=0.02)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.zeros_(m.bias)
            nn.init.ones_(m.weight)

    @torch.jit.ignore
    def no_weight_decay(self) -> set[str]:
        """Parameters that should not be weight-decayed."""
        return {"pos_embed", "cls_token"}

    def forward(self, x: torch.Tensor, camera_id: torch.Tensor | None = None) -> torch.Tensor:
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.size(0), -1, -1), x), dim=1) + self.pos_embed
        if self.uses_camera_ids:
            if camera_id is None:
                raise ValueError(
                    "This ViT uses camera embeddings (MODEL.BACKBONE.SIE_CAMERAS > 1): pass the camids"
                )
            camera_id = camera_id.to(x.device).long()
            if camera_id.numel() and (int(camera_id.min()) < 0 or int(camera_id.max()) >= self.cam_num):
                raise ValueError(
                    f"camids must lie in [0, {self.cam_num}) (MODEL.BACKBONE.SIE_CAMERAS); "
                    f"got {int(camera_id.min())}..{int(camera_id.max())}"
                )
            x = x + self.sie_xishu * self.sie_embed[camera_id]
        x = self.pos_drop(x)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)[:, 0].reshape(x.size(0), -1, 1, 1)


def resize_pos_embed(posemb: torch.Tensor, posemb_new: torch.Tensor, hight: int, width: int) -> torch.Tensor:
    """An ImageNet model's square grid of position embeddings ``posemb`` (class token first),
    bilinearly resized to ``hight`` x ``width`` (upstream's spelling) patches for a model whose
    embeddings are ``posemb_new``."""
    token, grid = posemb[:, :1], posemb[0, 1:]
    side = int(math.sqrt(grid.size(0)))
    logger.info(
        f"Resized position embedding from size:{tuple(posemb.shape)} to size: {tuple(posemb_new.shape)} "
        f"with height:{hight} width: {width}"
    )
    grid = grid.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(hight, width), mode="bilinear", align_corners=False)
    return torch.cat([token, grid.permute(0, 2, 3, 1).reshape(1, hight * width, -1)], dim=1)


def adapt_pretrained_vit_state(
    state: Mapping[str, torch.Tensor], model: VisionTransformer, distilled: bool = False
) -> dict[str, torch.Tensor]:
    """ImageNet ViT weights (timm/jx layout) for ``model``: classifier dropped, linear patch
    projections reshaped to convs, position embeddings resized to the model's patch grid."""
    adapted = {}
    for key, value in state.items():
        if key.startswith("head") or "dist" in key:
            continue
        if key == "patch_embed.proj.weight" and value.dim() < 4:
            value = value.reshape(cast(nn.Conv2d, model.patch_embed.proj).weight.shape)
        elif key == "pos_embed" and value.shape != model.pos_embed.shape:
            if distilled:  # DeiT-distilled: drop the distillation token
                value = torch.cat([value[:, :1], value[:, 2:]], dim=1)
            embed = cast(PatchEmbed_overlap, model.patch_embed)
            value = resize_pos_embed(value, model.pos_embed.data, embed.num_y, embed.num_x)
        adapted[key] = value
    return adapted


@BACKBONE_REGISTRY.register()
def build_vit_backbone(cfg) -> VisionTransformer:
    """ViT from ``MODEL.BACKBONE.*`` (DEPTH small/base, STRIDE_SIZE, SIE_COE, SIE_CAMERAS, DROP_*,
    VIT_* size overrides, PRETRAIN[_PATH]) for ``INPUT.SIZE_TRAIN`` images."""
    bb = cfg.MODEL.BACKBONE
    depth = str(bb.DEPTH)
    if depth not in VIT_PRESETS:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {depth!r} is not a ViT preset; expected one of {', '.join(VIT_PRESETS)}"
        )
    layers, heads, mlp_ratio, qkv_bias, scale = VIT_PRESETS[depth]
    model = VisionTransformer(
        img_size=tuple(cfg.INPUT.SIZE_TRAIN),
        stride_size=tuple(bb.STRIDE_SIZE),
        embed_dim=bb.VIT_EMBED_DIM or 768,
        depth=bb.VIT_NUM_LAYERS or layers,
        num_heads=bb.VIT_NUM_HEADS or heads,
        mlp_ratio=mlp_ratio,
        qkv_bias=qkv_bias,
        qk_scale=scale,
        drop_rate=bb.DROP_RATIO,
        attn_drop_rate=bb.ATT_DROP_RATE,
        drop_path_rate=bb.DROP_PATH_RATIO,
        camera=bb.SIE_CAMERAS,
        sie_xishu=bb.SIE_COE,
    )
    if bb.PRETRAIN:
        if not bb.PRETRAIN_PATH:
            raise PretrainUnavailableError(
                "MODEL.BACKBONE.PRETRAIN is True but MODEL.BACKBONE.PRETRAIN_PATH is empty: ViT needs a local "
                "ImageNet weights file (upstream uses jx_vit_base_p16_224-80ecf9dd.pth from "
                "https://github.com/rwightman/pytorch-image-models/releases/download/v0.1-vitjx/"
                "jx_vit_base_p16_224-80ecf9dd.pth), or set MODEL.BACKBONE.PRETRAIN False."
            )
        logger.info(f"Loading pretrained ViT-{depth} weights from {bb.PRETRAIN_PATH}")
        state: dict[str, torch.Tensor] = extract_backbone_state_dict(
            read_checkpoint_file(bb.PRETRAIN_PATH), bb.PRETRAIN_PATH, ()
        )
        state = adapt_pretrained_vit_state(state, model, distilled="distilled" in bb.PRETRAIN_PATH)
        load_state_dict_with_report(model, state, logger=logger)
    return model
