#!/usr/bin/env python
"""Features of a folder, glob or list of images, resumable (see ``fastreid/cli/extract.py``).

    python tools/extract_features.py --config-file logs/demo/config.yaml \
        --input datasets/Market-1501-v15.09.15/query --output logs/demo/query_feats \
        MODEL.WEIGHTS logs/demo/model_final.pth
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fastreid.cli.extract import run

    sys.exit(run())
