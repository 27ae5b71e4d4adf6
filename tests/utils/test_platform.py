"""Platform facts, forcing them, setup_multiprocessing and the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fastreid.utils import platform as plat

REPO = Path(__file__).resolve().parents[2]


def test_forced_facts_nest_and_restore():
    real = (plat.is_windows(), plat.is_macos(), plat.is_rocm(), plat.cuda_available())
    with plat.forced_platform("windows", cuda=True):
        assert plat.is_windows() and not plat.is_linux() and plat.cuda_available()
        assert plat.available_start_methods() == ["spawn"]
        assert plat.shared_memory_bytes() is None
        with plat.forced_platform("macos", rocm=True):
            assert plat.is_macos() and plat.is_rocm() and plat.cuda_available()
        assert plat.is_windows() and plat.is_rocm() == real[2]
    assert (plat.is_windows(), plat.is_macos(), plat.is_rocm(), plat.cuda_available()) == real


def test_forced_platform_rejects_unknown_os():
    with pytest.raises(ValueError, match="unknown os"), plat.forced_platform("solaris"):
        pass


@pytest.mark.parametrize(
    ("os_name", "cpus", "expected"), [("windows", 16, 0), ("linux", 16, 8), ("linux", 2, 2), ("macos", 4, 4)]
)
def test_recommended_workers(os_name, cpus, expected):
    with plat.forced_platform(os_name, cpu_count=cpus):
        assert plat.get_recommended_num_workers() == expected


@pytest.mark.parametrize(
    ("os_name", "rocm", "method"),
    [
        ("linux", False, "fork"),
        ("linux", True, "spawn"),
        ("macos", False, "spawn"),
        ("windows", False, "spawn"),
    ],
)
def test_preferred_start_method(os_name, rocm, method):
    with plat.forced_platform(os_name, rocm=rocm):
        assert plat.preferred_start_method()[0] == method


def test_real_facts_are_sane():
    assert plat.cpu_count() >= 1
    assert plat.current_start_method() in ("fork", "spawn", "forkserver")
    if sys.platform.startswith("linux"):
        assert plat.is_linux() and plat.shared_memory_bytes() > 0


def test_report_lists_facts_and_policy(capsys):
    from fastreid.cli import platform as command

    with plat.forced_platform("windows", cpu_count=4):
        assert command.main(["--workers", "0", "2"]) == 0
    out = capsys.readouterr().out
    for needle in ("Python", "torch", "CUDA available", "start method", "CPU count", "/dev/shm", "requested"):
        assert needle in out
    assert "WINDOWS_SAFE" in out  # the policy's reason shows for Windows
    assert "HSA_OVERRIDE_GFX_VERSION" in out and "MIOPEN_FIND_MODE" in out  # the ROCm section


def test_rocm_section_shows_and_never_sets(monkeypatch):
    import os

    from fastreid.data.loading.report import rocm_report

    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    monkeypatch.delenv("MIOPEN_FIND_MODE", raising=False)
    before = dict(os.environ)
    text = rocm_report()
    assert os.environ == before
    line = next(row for row in text.splitlines() if row.startswith("HSA_OVERRIDE_GFX_VERSION"))
    assert "10.3.0" in line and "gfx" in line
    assert "(not set)" in next(row for row in text.splitlines() if row.startswith("MIOPEN_FIND_MODE"))


@pytest.mark.slow
def test_setup_multiprocessing_and_module_entry_point():
    code = (
        "import multiprocessing, logging\n"
        "logging.basicConfig()\n"
        "from fastreid.utils.platform import setup_multiprocessing\n"
        "print('FIRST', setup_multiprocessing())\n"
        "print('AGAIN', setup_multiprocessing('spawn'))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert f"FIRST {expected}" in proc.stdout and f"AGAIN {expected}" in proc.stdout
    if expected == "fork":
        assert "too late" in proc.stderr
    for module in (
        "fastreid.cli.platform",
        "fastreid.utils.platform",
    ):  # the new home and the old command
        report = subprocess.run(
            [sys.executable, "-m", module, "--workers", "0", "4", "--as-os", "windows", "--as-rocm"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert report.returncode == 0, report.stderr
        assert "CPU count" in report.stdout and "requested" in report.stdout
        assert "WINDOWS_SAFE" in report.stdout  # --as-os reached the policy
        assert "ROCm (HIP) build" in report.stdout and "not a ROCm build" not in report.stdout  # --as-rocm
