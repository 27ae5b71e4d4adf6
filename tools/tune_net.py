#!/usr/bin/env python
"""Search hyper-parameters on Ray Tune (see ``fastreid/cli/tune.py``; installed as ``fastreid-tune``).

python tools/tune_net.py --config-file configs/Market1501/bagtricks_R50.yml --space search.yml
python tools/tune_net.py --config-file ... --space search.yml --resume
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fastreid.cli.tune import run

    sys.exit(run())
