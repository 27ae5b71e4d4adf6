"""``python -m fastreid.data.synthetic --root datasets``: the synthetic Market-1501."""

import logging
import sys

from .persons import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
