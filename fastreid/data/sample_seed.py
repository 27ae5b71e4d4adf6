"""Per-sample seeds; moved to :mod:`fastreid.data.loading.seeds` (this import path stays)."""

from fastreid.data.loading.seeds import *  # noqa: F403  (the same public names)
from fastreid.data.loading.seeds import __all__ as __all__
