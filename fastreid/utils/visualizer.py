"""Drawing re-ID results (upstream FastReID's ``fastreid.utils.visualizer``): rank-list strips,
CMC and ROC curves, distance histograms, and upstream's ``Visualizer`` class built on them.

Rank-list strips are composed with PIL (query, then the top-k gallery images with a green border for
a true match and red for a false one); curves and histograms use matplotlib's Agg backend (files
only, no display), imported by :func:`agg_pyplot` when something is drawn: matplotlib takes about
half a second to import, and this module is on every training run's import path
(``roc_curve`` is the evaluation's).
"""

from __future__ import annotations

import io
import os
import pickle
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Optional

import numpy as np
from PIL import Image, ImageDraw

from fastreid.utils.file_io import PathManager

__all__ = [
    "Visualizer",
    "agg_pyplot",
    "plot_cmc",
    "plot_distance_histogram",
    "plot_roc",
    "rank_list_image",
    "roc_curve",
]

GREEN, RED, GREY = (0, 170, 0), (220, 0, 0), (128, 128, 128)


def agg_pyplot() -> ModuleType:
    """``matplotlib.pyplot``, imported on first use: on the Agg backend (files only, never a window:
    plots are drawn on servers and in tests) unless the program imported pyplot itself, whose
    choice of backend (a notebook's, say) is left alone. Every module of the package that draws
    with matplotlib gets it here, so that importing the package never loads matplotlib."""
    if "matplotlib.pyplot" not in sys.modules:
        import matplotlib  # heavy (~0.5 s with pyparsing, fontTools, ...): only code that draws pays

        matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the backend, as above

    return plt


def _load(item, size: tuple[int, int]) -> Image.Image:
    """An image from a path, a PIL image or an HxWx3 uint8 array, resized to (width, height)."""
    if isinstance(item, Image.Image):
        img = item
    elif isinstance(item, np.ndarray):
        img = Image.fromarray(item.astype(np.uint8))
    else:
        try:
            img = Image.open(item)
        except OSError as e:
            raise OSError(f"cannot read image {item!r} for the rank list: {e}") from e
    return img.convert("RGB").resize(size)


def rank_list_image(
    query,
    gallery: Sequence,
    matches: Sequence[bool | None],
    size=(64, 128),
    border=4,
    captions: Sequence[str] | None = None,
) -> Image.Image:
    """One strip: the query (grey border), a gap, then the gallery images (green = match, red = not,
    grey = unknown when ``matches`` holds None)."""
    w, h = size
    cell = (w + 2 * border, h + 2 * border + 14)
    gap = 12
    strip = Image.new("RGB", (cell[0] * (len(gallery) + 1) + gap, cell[1]), "white")
    draw = ImageDraw.Draw(strip)
    items = [(query, GREY, "query")] + [
        (g, GREY if m is None else GREEN if m else RED, captions[i] if captions else str(i + 1))
        for i, (g, m) in enumerate(zip(gallery, matches))
    ]
    for i, (img, colour, text) in enumerate(items):
        x = i * cell[0] + (gap if i else 0)
        draw.rectangle([x, 0, x + cell[0] - 1, h + 2 * border - 1], fill=colour)
        strip.paste(_load(img, size), (x + border, border))
        draw.text((x + border, h + 2 * border + 1), text, fill="black")
    return strip


def plot_cmc(cmc: np.ndarray, path: str, label: str = "", max_rank: int | None = None) -> str:
    plt = agg_pyplot()
    cmc = np.asarray(cmc)[: max_rank or None]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot(np.arange(1, len(cmc) + 1), cmc * 100, marker="o", markersize=3, label=label or None)
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_title("CMC")
    ax.grid(True, alpha=0.3)
    if label:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_roc(fpr: np.ndarray, tpr: np.ndarray, path: str, label: str = "") -> str:
    """ROC with a logarithmic FPR axis (the interesting part is FPR 1e-4..1e-2)."""
    plt = agg_pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    keep = fpr > 0
    ax.plot(fpr[keep], tpr[keep], label=label or None)
    ax.set_xscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("ROC")
    ax.grid(True, which="both", alpha=0.3)
    if label:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_distance_histogram(pos: np.ndarray, neg: np.ndarray, path: str, bins: int = 100) -> str:
    """Densities of true-match vs non-match distances (their overlap is what ranking errors come from)."""
    plt = agg_pyplot()
    pos, neg = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    values = np.concatenate([pos, neg])
    edges: Any = np.linspace(values.min(), values.max(), bins + 1) if len(values) else bins
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.hist(neg, bins=edges, density=True, alpha=0.5, color="red", label=f"non-match ({len(neg)})")
    ax.hist(pos, bins=edges, density=True, alpha=0.5, color="green", label=f"true match ({len(pos)})")
    ax.set_xlabel("distance")
    ax.set_ylabel("density")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def roc_curve(labels: np.ndarray, scores: np.ndarray, drop_intermediate: bool = True):
    """``(fpr, tpr, thresholds)`` with the semantics of ``sklearn.metrics.roc_curve`` (label 1 positive,
    higher score = more positive), so numbers can be compared with upstream without scikit-learn."""
    y = np.asarray(labels).astype(np.float64) == 1
    s = np.asarray(scores)
    order = np.argsort(s, kind="mergesort")[::-1]
    s, y = s[order], y[order]
    distinct = np.where(np.diff(s))[0]
    ends = np.r_[distinct, len(y) - 1]
    tps = np.cumsum(y)[ends].astype(np.float64)
    fps = 1 + ends - tps
    thresholds = s[ends]
    if drop_intermediate and len(fps) > 2:
        keep = np.where(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])[0]
        fps, tps, thresholds = fps[keep], tps[keep], thresholds[keep]
    fps, tps = np.r_[0, fps], np.r_[0, tps]
    thresholds = np.r_[np.inf, thresholds]
    if fps[-1] <= 0 or tps[-1] <= 0:
        raise ValueError("ROC needs both true-match and non-match pairs")
    return fps / fps[-1], tps / tps[-1], thresholds


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays, numbers and containers, and nothing that could run code."""

    _ALLOWED = {
        ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"), ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"), ("builtins", "dict"), ("builtins", "list"),
    }  # fmt: skip

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a ROC info file")
        return super().find_class(module, name)


class Visualizer:
    """Rank lists and ROC curves of an evaluation (upstream's class and methods).

    ``dataset``: the test set, queries first, each item a dict with ``images`` (a 3 x H x W
    tensor or array), ``camids`` and ``img_paths`` (e.g. a ``CommDataset`` with the test
    transforms). ``get_model_output`` gives it the evaluation's per-query AP and distances.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def get_model_output(self, all_ap, dist, q_pids, g_pids, q_camids, g_camids) -> None:
        self.all_ap = np.asarray(all_ap)
        self.dist = np.asarray(dist)
        self.sim = 1 - self.dist
        self.q_pids, self.g_pids = np.asarray(q_pids), np.asarray(g_pids)
        self.q_camids, self.g_camids = np.asarray(q_camids), np.asarray(g_camids)
        self.indices = np.argsort(self.dist, axis=1, kind="stable")
        self.matches = (self.g_pids[self.indices] == self.q_pids[:, None]).astype(np.int32)
        self.num_query = len(self.q_pids)

    def get_matched_result(self, q_index: int) -> tuple[np.ndarray, np.ndarray]:
        """``(matches, gallery order)`` of query ``q_index`` without its same-camera true matches."""
        order = self.indices[q_index]
        junk = (self.g_pids[order] == self.q_pids[q_index]) & (self.g_camids[order] == self.q_camids[q_index])
        return self.matches[q_index][~junk], order[~junk]

    def _image(self, index: int) -> tuple[np.ndarray, Any]:
        item = self.dataset[index]
        img = item["images"]
        array = np.asarray(img.numpy() if hasattr(img, "numpy") else img, dtype=np.uint8)
        return np.moveaxis(array, 0, -1) if array.shape[0] == 3 else array, item["camids"]

    def save_rank_result(
        self,
        query_indices: Sequence[int],
        output: str,
        max_rank: int = 5,
        vis_label: bool = False,
        label_sort: str = "ascending",
        actmap: bool = False,
    ) -> list[str]:
        """One picture per query: the query, its ``max_rank`` nearest gallery images (red frame:
        true match, blue: false) and, with ``vis_label``, a second row with its true matches."""
        if actmap:
            raise NotImplementedError("Visualizer: activation maps (actmap=True) are not supported")
        plt = agg_pyplot()
        PathManager.mkdirs(output)
        written = []
        for count, q_idx in enumerate(query_indices):
            matches, order = self.get_matched_result(q_idx)
            rows = 2 if vis_label else 1
            fig, axes = plt.subplots(rows, max_rank + 1, figsize=(3 * max_rank, 6 * rows), squeeze=False)
            for ax in axes.ravel():
                ax.axis("off")
            query, cam = self._image(q_idx)
            axes[0, 0].imshow(query)
            axes[0, 0].set_title(f"{self.all_ap[q_idx]:.4f}/cam{cam}")
            for i in range(min(max_rank, len(order))):
                img, cam = self._image(self.num_query + int(order[i]))
                label, colour = ("true", (1, 0, 0)) if matches[i] else ("false", (0, 0, 1))
                ax = axes[0, i + 1]
                ax.imshow(img)
                ax.add_patch(
                    plt.Rectangle(
                        (0, 0), img.shape[1] - 1, img.shape[0] - 1, edgecolor=colour, fill=False, linewidth=5
                    )
                )
                ax.set_title(f"{self.sim[q_idx, order[i]]:.3f}/{label}/cam{cam}")
            if vis_label:
                true_ranks = np.flatnonzero(matches == 1)
                if label_sort == "ascending":
                    true_ranks = true_ranks[::-1]
                for i, rank in enumerate(true_ranks[:max_rank]):
                    img, cam = self._image(self.num_query + int(order[rank]))
                    ax = axes[1, i + 1]
                    ax.imshow(img)
                    ax.add_patch(
                        plt.Rectangle(
                            (0, 0),
                            img.shape[1] - 1,
                            img.shape[0] - 1,
                            edgecolor=(1, 0, 0),
                            fill=False,
                            linewidth=5,
                        )
                    )
                    ax.set_title(f"{self.sim[q_idx, order[rank]]:.3f}/cam{cam}")
            fig.tight_layout()
            path = os.path.join(output, f"{count}.jpg")
            fig.savefig(path)
            plt.close(fig)
            written.append(path)
        return written

    def vis_rank_list(
        self,
        output: str,
        vis_label: bool,
        num_vis: int = 100,
        rank_sort: str = "ascending",
        label_sort: str = "ascending",
        max_rank: int = 5,
        actmap: bool = False,
    ) -> list[str]:
        """Rank lists of ``num_vis`` queries, the lowest AP first (``rank_sort`` ascending) or the highest."""
        if rank_sort not in ("ascending", "descending"):
            raise ValueError(f"rank_sort must be 'ascending' or 'descending', got {rank_sort!r}")
        order = np.argsort(self.all_ap, kind="stable")
        if rank_sort == "descending":
            order = order[::-1]
        chosen = [int(q) for q in order[: int(num_vis)]]
        return self.save_rank_result(chosen, output, max_rank, vis_label, label_sort, actmap)

    def vis_roc_curve(self, output: str) -> tuple[np.ndarray, np.ndarray, list[float], list[float]]:
        """``roc.jpg`` in ``output`` from all query-gallery pairs; returns ``(fpr, tpr, pos, neg)``."""
        plt = agg_pyplot()
        PathManager.mkdirs(output)
        pos: list[float] = []
        neg: list[float] = []
        for i in range(self.num_query):
            matches, order = self.get_matched_result(i)
            pos.extend(self.dist[i][order[matches == 1]])
            neg.extend(self.dist[i][order[matches == 0]])
        labels = np.r_[np.zeros(len(pos)), np.ones(len(neg))]  # upstream's: a false pair is "positive"
        fpr, tpr, _ = roc_curve(labels, np.r_[pos, neg])
        fig = self.plot_roc_curve(fpr, tpr)
        fig.savefig(os.path.join(output, "roc.jpg"))
        plt.close(fig)
        return fpr, tpr, pos, neg

    @staticmethod
    def plot_roc_curve(fpr, tpr, name: str = "model", fig: Optional[Any] = None) -> Any:
        plt = agg_pyplot()
        if fig is None:
            fig = plt.figure()
            plt.semilogx(
                np.arange(0, 1, 0.01), np.arange(0, 1, 0.01), "r", linestyle="--", label="Random guess"
            )
        plt.semilogx(fpr, tpr, label=f"ROC curve with {name}")
        plt.title("Receiver Operating Characteristic")
        plt.xlabel("False Positive Rate")
        plt.ylabel("True Positive Rate")
        plt.legend(loc="best")
        return fig

    @staticmethod
    def plot_distribution(pos, neg, name: str = "model", fig: Optional[Any] = None) -> Any:
        """Densities of true- and false-pair distances, each with its fitted normal curve."""
        plt = agg_pyplot()
        if fig is None:
            fig = plt.figure()
        for values, kind, alpha in ((pos, "positive", 0.7), (neg, "negative", 0.5)):
            values = np.asarray(values, np.float64)
            colour = "green" if kind == "positive" else "red"
            _, bins, _ = plt.hist(
                values, bins=80, alpha=alpha, density=True, color=colour, label=f"{kind} with {name}"
            )
            mu, sigma = values.mean(), max(values.std(), 1e-12)
            density = np.exp(-0.5 * ((bins - mu) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
            plt.plot(bins, density, color=colour)
        plt.xticks(np.arange(0, 1.5, 0.1))
        plt.title("positive and negative pairs distribution")
        plt.legend(loc="best")
        return fig

    @staticmethod
    def save_roc_info(output: str, fpr, tpr, pos, neg) -> str:
        """``roc_info.pickle`` in ``output`` (upstream's file: a dict of numpy arrays)."""
        path = os.path.join(output, "roc_info.pickle")
        arrays = {
            "fpr": np.asarray(fpr),
            "tpr": np.asarray(tpr),
            "pos": np.asarray(pos),
            "neg": np.asarray(neg),
        }
        with open(path, "wb") as f:
            pickle.dump(arrays, f, protocol=pickle.HIGHEST_PROTOCOL)
        return path

    @staticmethod
    def load_roc_info(path: str) -> dict[str, np.ndarray]:
        """A ``roc_info.pickle`` file, read without running code from it (arrays only)."""
        with open(path, "rb") as f:
            return _ArraysOnly(io.BytesIO(f.read())).load()
