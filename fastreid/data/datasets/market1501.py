"""Market-1501 (Zheng et al., ICCV 2015)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .market_format import parse_market_folder

__all__ = ["Market1501"]


@DATASET_REGISTRY.register()
class Market1501(ImageDataset):
    """Market-1501: 1501 identities, 6 cameras; 12936 train, 3368 query, 15913 gallery images.

    Train pids and camids are ``"market1501_<n>"`` strings (upstream's convention, relabelled
    to 0..N-1 by ``CommDataset``); query and gallery keep integer pids, pid 0 (distractors)
    included, junk (pid -1) dropped. Camera ids are 0-based.
    """

    _junk_pids = (0, -1)
    dataset_name = "market1501"
    # upstream's folder, torchreid's, the bare names, and upstream's deprecated "splits in the root"
    folder_names = (
        "Market-1501-v15.09.15",
        "market1501/Market-1501-v15.09.15",
        "Market-1501",
        "market1501",
        "",
    )
    synthetic_available = True
    url = "http://www.liangzheng.org/Project/project_reid.html (Market-1501-v15.09.15.zip)"
    layout = """\
  {root}/Market-1501-v15.09.15/   (or {root}/market1501/Market-1501-v15.09.15/, {root}/Market-1501/)
      bounding_box_train/   0002_c1s1_000451_03.jpg ...  (pid_camera+sequence_frame_box)
      bounding_box_test/    gallery; pid 0000 = distractor, pid -1 = junk (ignored)
      query/
      images/               only with market1501_500k=True (the 500k distractors)"""

    def __init__(self, root: str = "datasets", market1501_500k: bool = False, **kwargs):
        self.root = root
        self.data_dir = self.locate(root, self.folder_names, probe="bounding_box_train")
        self.train_dir = os.path.join(self.data_dir, "bounding_box_train")
        self.query_dir = os.path.join(self.data_dir, "query")
        self.gallery_dir = os.path.join(self.data_dir, "bounding_box_test")
        self.extra_gallery_dir = os.path.join(self.data_dir, "images")
        self.market1501_500k = market1501_500k

        required = [self.train_dir, self.query_dir, self.gallery_dir]
        if market1501_500k:
            required.append(self.extra_gallery_dir)
        self.check_before_run(required, root=root)

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
        return parse_market_folder(folder, num_cams=6, prefix=prefix, max_pid=1501, owner=type(self).__name__)
