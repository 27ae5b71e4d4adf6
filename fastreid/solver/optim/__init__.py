"""Optimizers upstream FastReID adds to torch's (``fastreid.solver.optim``): LAMB, RAdam (torch's,
with upstream's decoupled weight decay) and the SWA wrapper; torch's own are re-exported, as
upstream's ``from torch.optim import *`` does."""

from torch.optim import *  # noqa: F403  (upstream's package exposes every torch optimizer)

from .lamb import Lamb
from .radam import PlainRAdam, RAdam  # type: ignore[assignment]  # ours replaces torch's RAdam
from .swa import SWA

__all__ = ["Lamb", "PlainRAdam", "RAdam", "SWA"]
