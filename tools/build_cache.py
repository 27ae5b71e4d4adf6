#!/usr/bin/env python
"""Build the decoded-image cache (DATALOADER.CACHE) ahead of training (see
``fastreid/cli/build_cache.py``; installed as ``fastreid-build-cache``).

    python tools/build_cache.py --config-file configs/Market1501/bagtricks_R50.yml
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str] | None = None) -> int:
    if REPO not in sys.path:  # a checkout used without installing the package
        sys.path.insert(0, REPO)
    from fastreid.cli.build_cache import main as build_cache

    return build_cache(argv)


if __name__ == "__main__":
    sys.exit(main())
