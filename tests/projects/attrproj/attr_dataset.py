"""A torch Dataset of (image, attribute vector) items, read with fastreid's ``read_image``."""

import torch
from torch.utils.data import Dataset

from fastreid.data.data_utils import read_image


class AttrDataset(Dataset):
    def __init__(self, img_items, transform, attr_dict):
        self.img_items = img_items
        self.transform = transform
        self.attr_dict = attr_dict

    def __len__(self):
        return len(self.img_items)

    def __getitem__(self, index):
        img_path, labels = self.img_items[index]
        img = read_image(img_path)
        if self.transform is not None:
            img = self.transform(img)
        return {"images": img, "targets": torch.as_tensor(labels, dtype=torch.float32), "img_paths": img_path}

    @property
    def num_classes(self):
        return len(self.attr_dict)

    @property
    def sample_weights(self):
        """How often each attribute is on in the set."""
        on = torch.stack([torch.as_tensor(labels, dtype=torch.float32) for _, labels in self.img_items])
        return on.mean(dim=0)
