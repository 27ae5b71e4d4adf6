import os
import subprocess
import sys

import pytest

from fastreid.utils.env import limit_worker_threads, rocm_environment, setup_environment


def test_sets_defaults_where_missing(tmp_path):
    env = {}
    changed = setup_environment(torch_home=str(tmp_path / "cache"), environ=env)
    assert env["TORCH_HOME"] == str(tmp_path / "cache")
    assert env["KMP_DUPLICATE_LIB_OK"] == "TRUE"
    assert "CUDA_LAUNCH_BLOCKING" not in env
    assert changed == env


def test_default_torch_home_is_dot_torch_cache():
    env = {}
    setup_environment(environ=env)
    assert env["TORCH_HOME"] == os.path.abspath(".torch_cache")


def test_never_overwrites_user_values():
    env = {
        "TORCH_HOME": "/mine",
        "KMP_DUPLICATE_LIB_OK": "FALSE",
        "CUDA_LAUNCH_BLOCKING": "0",
        "MIOPEN_USER_DB_PATH": "/db",
        "HSA_OVERRIDE_GFX_VERSION": "10.3.0",
    }
    before = dict(env)
    changed = setup_environment(cuda_launch_blocking=True, environ=env)
    assert env == before
    assert changed == {}
    assert rocm_environment(env) == {"MIOPEN_USER_DB_PATH": "/db", "HSA_OVERRIDE_GFX_VERSION": "10.3.0"}


def test_cuda_launch_blocking_only_on_request():
    env = {}
    setup_environment(cuda_launch_blocking=True, environ=env)
    assert env["CUDA_LAUNCH_BLOCKING"] == "1"


def test_acts_on_os_environ_by_default(monkeypatch):
    monkeypatch.delenv("KMP_DUPLICATE_LIB_OK", raising=False)
    monkeypatch.setenv("TORCH_HOME", "/user/choice")
    setup_environment()
    assert os.environ["KMP_DUPLICATE_LIB_OK"] == "TRUE"
    assert os.environ["TORCH_HOME"] == "/user/choice"


@pytest.mark.slow
def test_limit_worker_threads_in_a_child_process():
    code = (
        "import torch, os\n"
        "from fastreid.utils.env import limit_worker_threads\n"
        "limit_worker_threads()\n"
        "print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "1"]
    assert callable(limit_worker_threads)
