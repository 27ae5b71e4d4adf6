"""What a training run does not pay for at start (tests/test_layering.py checks the imports of the
package statically; these check the two costs that are calls, not imports): the environment table
of every run names faiss's version without loading faiss (and the OpenMP runtime it brings), the
evaluation finds glibc's ``malloc_trim`` without running ``ldconfig`` (``ctypes.util.find_library``),
and a search's driver hands Ray Tune its trial function without loading torch."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys

import pytest

from fastreid.evaluation.memory import release_freed_memory
from fastreid.utils.collect_env import collect_env_info


def test_the_environment_table_names_faiss_without_importing_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "faiss", raising=False)  # as in a run that never searched
    info = collect_env_info()
    assert "faiss" not in sys.modules
    line = next(row for row in info.splitlines() if row.startswith("faiss "))
    assert line.split()[-1] == importlib.metadata.version("faiss-cpu")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's"
)
def test_freed_memory_goes_back_to_the_system_on_glibc():
    assert release_freed_memory() is True


def test_the_search_driver_does_not_load_torch():
    # fastreid-tune's driver imports the trial function to hand it to Tune; torch and the trainer
    # load in the trials' Ray workers (each driver of a search paid ~4 CPU-s for them before)
    probe = (
        "import sys; from fastreid.tune.search import run_search; from fastreid.tune.trial import run_trial; "
        "print([m for m in ('torch', 'torchvision', 'fastreid.engine') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
