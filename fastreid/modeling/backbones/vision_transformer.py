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

import logging
import math
from collections.abc import Mapping
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import StochasticDepth

from fastreid.config import ConfigError

from ...utils.checkpoint_report import load_state_dict_with_report
from .build import BACKBONE_REGISTRY
from .pretrained import extract_backbone_state_dict, read_checkpoint_file

__all__ = ["VisionTransformer", "build_vit_backbone", "VIT_PRESETS", "adapt_pretrained_vit_state"]

logger = logging.getLogger(__name__)

# DEPTH -> (layers, heads, mlp ratio, qkv bias, attention scale or None for head_dim ** -0.5)
VIT_PRESETS = {
    "small": (8, 8, 3.0, False, 768**-0.5),
    "base": (12, 12, 4.0, True, None),
}


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int, drop: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Attention(nn.Module):
    def __init__(
        self,
        dim: int,
        num_heads: int,
        qkv_bias: bool,
        scale: float | None,
        attn_drop: float,
        proj_drop: float,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = scale if scale is not None else (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, dim = x.shape
        q, k, v = (
            self.qkv(x).reshape(n, tokens, 3, self.num_heads, dim // self.num_heads).permute(2, 0, 3, 1, 4)
        )
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.0, scale=self.scale
        )
        return self.proj_drop(self.proj(y.transpose(1, 2).reshape(n, tokens, dim)))


class Block(nn.Module):
    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float,
        qkv_bias: bool,
        scale: float | None,
        drop: float,
        attn_drop: float,
        drop_path: float,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, qkv_bias, scale, attn_drop, drop)
        self.drop_path = StochasticDepth(drop_path, "row") if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Module):
    """16x16 patches taken every ``stride`` pixels, projected to ``dim`` channels."""

    def __init__(self, img_size: tuple[int, int], stride: tuple[int, int], dim: int, patch: int = 16) -> None:
        super().__init__()
        self.img_size = tuple(img_size)
        self.num_y = (img_size[0] - patch) // stride[0] + 1
        self.num_x = (img_size[1] - patch) // stride[1] + 1
        if self.num_y < 1 or self.num_x < 1:
            raise ConfigError(
                f"INPUT.SIZE_TRAIN {list(img_size)} is smaller than one {patch}x{patch} ViT patch"
            )
        self.num_patches = self.num_y * self.num_x
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=cast("tuple[int, int]", tuple(stride)))
        nn.init.normal_(self.proj.weight, 0, math.sqrt(2.0 / (patch * patch * dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[2:]) != self.img_size:
            raise ValueError(
                f"This ViT was built for {self.img_size[0]}x{self.img_size[1]} images "
                f"(INPUT.SIZE_TRAIN); got {x.shape[2]}x{x.shape[3]}. Set INPUT.SIZE_TEST equal to it"
            )
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(
        self,
        img_size: tuple[int, int] = (256, 128),
        stride_size: tuple[int, int] = (16, 16),
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        qk_scale: float | None = None,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        camera: int = 0,
        sie_coe: float = 3.0,
    ) -> None:
        super().__init__()
        self.out_channels = self.embed_dim = embed_dim
        self.patch_embed = PatchEmbed(img_size, stride_size, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.cam_num = camera
        self.sie_coe = sie_coe
        self.uses_camera_ids = camera > 1
        if self.uses_camera_ids:
            self.sie_embed = nn.Parameter(torch.zeros(camera, 1, embed_dim))
            nn.init.trunc_normal_(self.sie_embed, std=0.02)
        self.pos_drop = nn.Dropout(drop_rate)
        rates = torch.linspace(0, drop_path_rate, depth, device="cpu").tolist()
        self.blocks = nn.ModuleList(
            Block(embed_dim, num_heads, mlp_ratio, qkv_bias, qk_scale, drop_rate, attn_drop_rate, rate)
            for rate in rates
        )
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor, camera_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.size(0), -1, -1), x), dim=1) + self.pos_embed
        if self.uses_camera_ids:
            if camera_ids is None:
                raise ValueError(
                    "This ViT uses camera embeddings (MODEL.BACKBONE.SIE_CAMERAS > 1): pass the camids"
                )
            camera_ids = camera_ids.to(x.device).long()
            if camera_ids.numel() and (int(camera_ids.min()) < 0 or int(camera_ids.max()) >= self.cam_num):
                raise ValueError(
                    f"camids must lie in [0, {self.cam_num}) (MODEL.BACKBONE.SIE_CAMERAS); "
                    f"got {int(camera_ids.min())}..{int(camera_ids.max())}"
                )
            x = x + self.sie_coe * self.sie_embed[camera_ids]
        x = self.pos_drop(x)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)[:, 0].reshape(x.size(0), -1, 1, 1)


def _resize_pos_embed(pos: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """An ImageNet model's square grid of position embeddings, resized to ``rows`` x ``cols``."""
    token, grid = pos[:, :1], pos[0, 1:]
    side = int(math.sqrt(grid.size(0)))
    grid = grid.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(rows, cols), mode="bilinear", align_corners=False)
    return torch.cat([token, grid.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)], dim=1)


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
            value = value.reshape(model.patch_embed.proj.weight.shape)
        elif key == "pos_embed" and value.shape != model.pos_embed.shape:
            if distilled:  # DeiT-distilled: drop the distillation token
                value = torch.cat([value[:, :1], value[:, 2:]], dim=1)
            value = _resize_pos_embed(value, model.patch_embed.num_y, model.patch_embed.num_x)
            logger.info(
                f"Resized position embeddings to {tuple(value.shape)} "
                f"({model.patch_embed.num_y} x {model.patch_embed.num_x} patches)"
            )
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
        sie_coe=bb.SIE_COE,
    )
    if bb.PRETRAIN:
        if not bb.PRETRAIN_PATH:
            from .pretrained import PretrainUnavailableError

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
