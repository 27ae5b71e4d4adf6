"""Datasets for the loader tests, defined at module level so that spawned workers can import them."""

from __future__ import annotations

import os
import signal
import time

import torch

from fastreid.data.loading.seeds import sample_index, sample_seed

# The pid of the process that imported this module: in a spawned worker that is the worker
# itself; in a forked worker it is the parent (the module came with the fork).
IMPORTED_IN_PID = os.getpid()


class KeyedAugDataset:
    """Tiny images made from the index, augmented with randomness from the sample key only."""

    accepts_sample_keys = True

    def __init__(self, n: int = 24, height: int = 12, width: int = 6):
        self.n = n
        self.height = height
        self.width = width
        self.img_items = [(f"/fake/{i:04d}_c1s1_000000_00.jpg", i % 5, 1) for i in range(n)]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item):
        index = sample_index(item)
        if not 0 <= index < self.n:
            raise IndexError(index)
        base = torch.Generator().manual_seed(index)
        image = torch.randint(0, 256, (3, self.height + 4, self.width + 2), generator=base, dtype=torch.uint8)
        g = torch.Generator().manual_seed(sample_seed(item))
        top = int(torch.randint(0, 5, (1,), generator=g))
        left = int(torch.randint(0, 3, (1,), generator=g))
        image = image[:, top : top + self.height, left : left + self.width]
        if torch.rand((), generator=g) < 0.5:
            image = image.flip(-1)
        noise = torch.randint(-8, 9, image.shape, generator=g)
        image = (image.int() + noise).clamp(0, 255).to(torch.uint8)
        return {
            "images": image,
            "index": index,
            "pid": os.getpid(),
            "imported_here": os.getpid() == IMPORTED_IN_PID,
        }


class FailingDataset(KeyedAugDataset):
    """Raises for one index, with a message naming a file, like read_image does."""

    def __init__(self, bad_index: int, n: int = 24):
        super().__init__(n)
        self.bad_index = bad_index

    def __getitem__(self, item):
        if sample_index(item) == self.bad_index:
            raise ValueError(f"cannot decode {self.img_items[self.bad_index][0]}")
        return super().__getitem__(item)


class DyingDataset(KeyedAugDataset):
    """The worker process loading ``bad_index`` dies: SIGKILL (``how="kill"``) or os._exit(3)."""

    def __init__(self, bad_index: int, how: str = "kill", n: int = 24):
        super().__init__(n)
        self.bad_index = bad_index
        self.how = how
        self.main_pid = os.getpid()

    def __getitem__(self, item):
        if sample_index(item) == self.bad_index and os.getpid() != self.main_pid:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return super().__getitem__(item)


class SlowDataset(KeyedAugDataset):
    """One sample takes ``delay`` seconds."""

    def __init__(self, slow_index: int, delay: float, n: int = 24):
        super().__init__(n)
        self.slow_index = slow_index
        self.delay = delay

    def __getitem__(self, item):
        if sample_index(item) == self.slow_index:
            time.sleep(self.delay)
        return super().__getitem__(item)


class GlobalRandDataset:
    """A user's dataset without sample keys: its randomness comes from the global generators
    (torch.rand, numpy, random), as torchvision's classic transforms do."""

    def __init__(self, n: int = 22):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        import random

        import numpy as np

        return {
            "index": index,
            "torch": torch.rand(3),
            "numpy": torch.tensor(np.random.rand()),
            "python": torch.tensor(random.random()),
            "pid": os.getpid(),
        }
