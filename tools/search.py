#!/usr/bin/env python
"""Nearest gallery images of each query with faiss (see ``fastreid/cli/search.py``).

    python tools/search.py --query logs/demo/query_feats --gallery logs/demo/gallery_feats \
        --output logs/demo/search --evaluate
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fastreid.cli.search import run

    sys.exit(run())
