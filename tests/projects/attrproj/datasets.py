"""The tiny pedestrians with colour attributes, registered in fastreid's DATASET_REGISTRY."""

import logging
import os

import tiny_people

from fastreid.data.datasets import DATASET_REGISTRY

logger = logging.getLogger("fastreid.attrproj")


@DATASET_REGISTRY.register()
class TinyPeopleAttr:
    """``train`` and ``test``: lists of (image path, 0/1 attribute list); ``attr_dict``: index -> name."""

    def __init__(self, root="datasets", **kwargs):
        folder = os.path.join(root, tiny_people.FOLDER)
        names = [f"{part}_{colour}" for part in ("upper", "lower") for colour in tiny_people.COLOURS]
        self.attr_dict = dict(enumerate(names))
        self.train = self._items(os.path.join(folder, "train"), names)
        self.test = self._items(os.path.join(folder, "query"), names)
        self.test += self._items(os.path.join(folder, "gallery"), names)

    @staticmethod
    def _items(split_dir, names):
        items = []
        for name in sorted(os.listdir(split_dir)):
            pid, _ = tiny_people.parse_name(name)
            upper, lower = tiny_people.colours_of(pid)
            on = {f"upper_{upper}", f"lower_{lower}"}
            items.append((os.path.join(split_dir, name), [int(n in on) for n in names]))
        return items

    def show_train(self):
        logger.info(f"TinyPeopleAttr: {len(self.train)} training images, {len(self.attr_dict)} attributes")

    def show_test(self):
        logger.info(f"TinyPeopleAttr: {len(self.test)} test images")
