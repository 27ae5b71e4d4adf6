"""Market-1501 (Zheng et al., ICCV 2015)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, ImageDataset
from .market_format import parse_market_folder

__all__ = ["Market1501"]

LAYOUT = """\
  {root}/Market-1501-v15.09.15/   (or {root}/Market-1501/)
      bounding_box_train/   0002_c1s1_000451_03.jpg ...  (pid_camera+sequence_frame_box)
      bounding_box_test/    gallery; pid 0000 = distractor, pid -1 = junk (ignored)
      query/
      images/               only with market1501_500k=True (the 500k distractors)"""


@DATASET_REGISTRY.register()
class Market1501(ImageDataset):
    """Market-1501: 1501 identities, 6 cameras; 12936 train, 3368 query, 15913 gallery images.

    Train pids and camids are ``"market1501_<n>"`` strings (upstream's convention, relabelled
    to 0..N-1 by ``CommDataset``); query and gallery keep integer pids, pid 0 (distractors)
    included, junk (pid -1) dropped. Camera ids are 0-based.
    """

    _junk_pids = (0, -1)
    dataset_name = "market1501"
    folder_names = ("Market-1501-v15.09.15", "Market-1501")
    synthetic_available = True

    def __init__(self, root: str = "datasets", market1501_500k: bool = False, **kwargs):
        self.root = root
        candidates = [os.path.join(root, name) for name in self.folder_names]
        self.data_dir = next((c for c in candidates if os.path.isdir(c)), candidates[0])
        self.train_dir = os.path.join(self.data_dir, "bounding_box_train")
        self.query_dir = os.path.join(self.data_dir, "query")
        self.gallery_dir = os.path.join(self.data_dir, "bounding_box_test")
        self.extra_gallery_dir = os.path.join(self.data_dir, "images")
        self.market1501_500k = market1501_500k

        layout = LAYOUT.format(root=root)
        if not os.path.isdir(self.data_dir):
            raise DatasetNotFoundError(self._missing_message(" or ".join(candidates), root, layout))
        required = [self.train_dir, self.query_dir, self.gallery_dir]
        if market1501_500k:
            required.append(self.extra_gallery_dir)
        self.check_before_run(required, root=root, layout=layout)

        def gallery() -> list:
            items = self._parse(self.gallery_dir)
            if market1501_500k:
                items += self._parse(self.extra_gallery_dir)
            return items

        super().__init__(
            lambda: self._parse(self.train_dir, prefix=self.dataset_name),
            lambda: self._parse(self.query_dir),
            gallery,
            **kwargs,
        )

    def _parse(self, folder: str, prefix: str | None = None) -> list:
        return parse_market_folder(folder, num_cams=6, prefix=prefix, max_pid=1501)
