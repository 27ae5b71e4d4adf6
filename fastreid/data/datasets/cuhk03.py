"""CUHK03 (Li et al., CVPR 2014) with the new 767/700 protocol (Zhong et al., CVPR 2017)."""

from __future__ import annotations

import json
import os

from fastreid.utils.errors import UserError

from . import DATASET_REGISTRY
from .bases import DatasetFormatError, DatasetUsageError, ImageDataset
from .parsing import parse_entries

__all__ = ["CUHK03", "MissingDependencyError"]


class MissingDependencyError(UserError, ImportError):
    """An optional package a data set needs is not installed; the message names it."""


LAYOUT = """\
  {root}/cuhk03/
      images_labeled/  images_detected/           extracted images
      splits_new_labeled.json  splits_new_detected.json   (splits_classic_*.json for the classic protocol)
  or, to extract them on first use (needs `pip install h5py scipy`):
      cuhk03_release/cuhk-03.mat
      cuhk03_new_protocol_config_labeled.mat  cuhk03_new_protocol_config_detected.mat
  The json files are those written by upstream FastReID / deep-person-reid: a list of splits,
  each {"train": [[path, pid, camid], ...], "query": [...], "gallery": [...]}."""


@DATASET_REGISTRY.register()
class CUHK03(ImageDataset):
    """CUHK03: 1467 identities, 2 views x 5 camera pairs; new protocol 767 train / 700 test ids.

    ``cuhk03_labeled`` picks hand-labelled (True) or detected (False) boxes. Image paths in the
    split files are relative to ``<root>/cuhk03`` or absolute; both are accepted.
    """

    dataset_dir = "cuhk03"
    dataset_name = "cuhk03"
    url = (
        "http://www.ee.cuhk.edu.hk/~xgwang/CUHK_identification.html (cuhk03_release.zip); new-protocol "
        "files: https://github.com/zhunzhong07/person-re-ranking/tree/master/evaluation/data/CUHK03"
    )
    layout = LAYOUT

    def __init__(
        self,
        root: str = "datasets",
        split_id: int = 0,
        cuhk03_labeled: bool = True,
        cuhk03_classic_split: bool = False,
        **kwargs,
    ):
        self.root = root
        self.dataset_dir = self.locate(root, (type(self).dataset_dir,))
        layout = LAYOUT.replace("{root}", root)
        kind = "labeled" if cuhk03_labeled else "detected"
        protocol = "classic" if cuhk03_classic_split else "new"
        split_path = os.path.join(self.dataset_dir, f"splits_{protocol}_{kind}.json")
        if not os.path.isfile(split_path):
            self._extract_from_mat(layout, protocol)

        try:
            with open(split_path, encoding="utf-8") as f:
                splits = json.load(f)
            split = splits[split_id] if 0 <= split_id < len(splits) else None
            subsets = {k: split[k] for k in ("train", "query", "gallery")} if split is not None else None
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise DatasetFormatError(
                f"CUHK03: cannot read the split file {split_path} ({e}); expected a list of "
                '{"train": [[path, pid, camid], ...], "query": ..., "gallery": ...}'
            ) from None
        if subsets is None:
            raise DatasetUsageError(
                f"CUHK03: split_id {split_id} is outside 0..{len(splits) - 1} of {split_path}"
            )
        prefix = self.dataset_name

        def parse(train: bool):
            def one(entry) -> tuple:
                path, pid, cam = entry
                if train:
                    return (self._path(path), f"{prefix}_{int(pid)}", f"{prefix}_{int(cam)}")
                return (self._path(path), int(pid), int(cam))

            return one

        items = {
            k: parse_entries(
                "CUHK03",
                f"{split_path} [{k}]",
                [(f"{split_path} {k}[{i}]", e) for i, e in enumerate(v)],
                parse(k == "train"),
                "[path, pid, camid] items",
            )
            for k, v in subsets.items()
        }
        super().__init__(items["train"], items["query"], items["gallery"], **kwargs)

    def _path(self, path: str) -> str:
        if os.path.isabs(path) or os.path.exists(path):
            return path
        return os.path.join(self.dataset_dir, path)

    def _extract_from_mat(self, layout: str, protocol: str) -> None:
        """Write ``images_{labeled,detected}/`` and the split files of ``protocol`` from the official
        .mat files. Files that already exist are left as they are."""
        raw_mat = os.path.join(self.dataset_dir, "cuhk03_release", "cuhk-03.mat")
        configs = {
            k: os.path.join(self.dataset_dir, f"cuhk03_new_protocol_config_{k}.mat")
            for k in ("labeled", "detected")
        }
        self.check_before_run(
            [raw_mat, *(configs.values() if protocol == "new" else ())], root=self.root, layout=layout
        )
        try:
            import h5py  # optional: the 'cuhk03' extra, only to extract the released .mat file
            from scipy import io as sio  # optional: the 'cuhk03' extra, as h5py
        except ImportError:
            raise MissingDependencyError(
                "CUHK03: extracting images from cuhk-03.mat needs h5py and scipy "
                "(pip install h5py scipy), or provide the extracted layout:\n" + layout
            ) from None

        with h5py.File(raw_mat, "r") as mat:
            for kind in ("labeled", "detected"):
                meta = self._extract_images(mat, kind)
                if protocol == "classic":
                    splits = _classic_splits(mat, meta)
                else:
                    splits = [_new_protocol_split(sio.loadmat(configs[kind]), f"images_{kind}")]
                _write_json_once(os.path.join(self.dataset_dir, f"splits_{protocol}_{kind}.json"), splits)

    def _extract_images(self, mat, kind: str) -> list[tuple[int, int, list[str]]]:
        """PNG files of one box kind; returns ``(pair, pid, image paths)`` (1-based, as upstream)."""
        # only the one-off extraction needs numpy and PIL: the data set registry (every data set
        # module) imports without them
        import numpy as np
        from PIL import Image  # as numpy

        img_dir = os.path.join(self.dataset_dir, f"images_{kind}")
        os.makedirs(img_dir, exist_ok=True)
        meta = []
        for pair, pair_ref in enumerate(mat[kind][0]):
            cells = mat[pair_ref][:].T
            for pid in range(cells.shape[0]):
                paths = []
                for imgid, ref in enumerate(cells[pid, :]):
                    img = mat[ref][:].T
                    if img.size == 0 or img.ndim < 3:
                        continue  # an empty cell: some persons have fewer images
                    view = 1 if imgid < 5 else 2
                    name = f"{pair + 1:01d}_{pid + 1:03d}_{view:01d}_{imgid + 1:02d}.png"
                    out = os.path.join(img_dir, name)
                    if not os.path.isfile(out):
                        Image.fromarray(np.ascontiguousarray(img).astype(np.uint8)).save(out)
                    paths.append(os.path.join(f"images_{kind}", name))
                if paths:
                    meta.append((pair + 1, pid + 1, paths))
        return meta


def _write_json_once(path: str, data) -> None:
    if os.path.exists(path):
        return
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _classic_splits(mat, meta: list) -> list[dict]:
    """The 20 classic splits (Li et al., CVPR 2014): each test set is 100 (pair, pid) persons of
    ``testsets``; the rest train. Ids are numbered in order within each part; query = gallery."""
    splits = []
    for split_ref in mat["testsets"][0]:
        test_persons = {(int(a), int(b)) for a, b in mat[split_ref][:].T.tolist()}
        parts: dict[str, list[list]] = {"train": [], "test": []}
        counts = {"train": 0, "test": 0}
        for pair, pid, paths in meta:
            part = "test" if (pair, pid) in test_persons else "train"
            for path in paths:
                parts[part].append([path, counts[part], int(os.path.basename(path).split("_")[2]) - 1])
            counts[part] += 1
        splits.append({"train": parts["train"], "query": parts["test"], "gallery": parts["test"]})
    return splits


def _new_protocol_split(cfg: dict, img_dir: str) -> dict:
    labels = cfg["labels"].flatten()
    filelist = cfg["filelist"].flatten()

    def items(key: str, relabel: bool) -> list:
        idxs = cfg[key].flatten() - 1
        pids = sorted({int(labels[i]) for i in idxs})
        pid2label = {p: i for i, p in enumerate(pids)}
        out = []
        for i in idxs:
            name = str(filelist[i][0])
            pid = int(labels[i])
            out.append(
                [os.path.join(img_dir, name), pid2label[pid] if relabel else pid, int(name.split("_")[2]) - 1]
            )
        return out

    return {
        "train": items("train_idx", True),
        "query": items("query_idx", False),
        "gallery": items("gallery_idx", False),
    }
