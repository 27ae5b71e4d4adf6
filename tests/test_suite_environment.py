"""What the commands the suite starts inherit from it (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys


def test_a_command_started_by_a_test_takes_ctrl_c():
    # a suite run as a background job (`make test &`) has SIGINT ignored, and every command it
    # started ignored Ctrl+C: fastreid-serve --replicas outlived the test's SIGINT by a minute
    probe = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
