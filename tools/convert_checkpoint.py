#!/usr/bin/env python
"""Which model a checkpoint (.pth) belongs to, and whether it loads strictly
(see ``fastreid/cli/convert.py``; installed as ``fastreid-convert``).

    python tools/convert_checkpoint.py model_final.pth
    python tools/convert_checkpoint.py model_final.pth --config-file configs/Market1501/sbs_R50-ibn.yml
    python tools/convert_checkpoint.py model_final.pth --output clean.pth
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fastreid.cli.convert import run

    sys.exit(run())
