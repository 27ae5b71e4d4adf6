#!/usr/bin/env python
"""Export a model to ONNX or TorchScript and check it on real images (see
``fastreid/cli/export.py`` and ``docs/deploy.md``).

    python tools/deploy/export.py --config-file logs/demo/config.yaml --format onnx --dynamic-batch \
        --output logs/demo/model.onnx MODEL.WEIGHTS logs/demo/model_final.pth
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from fastreid.cli.export import run

    sys.exit(run())
