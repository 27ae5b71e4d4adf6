"""Data loading benchmark (the same as benchmarks/dataloader.py); see that file for the options."""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "dataloader.py"
    sys.argv[0] = str(script)
    runpy.run_path(str(script), run_name="__main__")
