"""The calls users copy from the guides this project grew out of, and upstream's DataLoaderX call."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from keyed_dataset_for_tests import GlobalRandDataset, KeyedAugDataset

from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.factories import create_dataloader
from fastreid.data.loading.report import print_dataloader_config
from fastreid.utils.env import enable_all_patches, setup_multiprocessing
from fastreid.utils.reproducibility import verify_reproducibility

REPO = Path(__file__).resolve().parents[2]


def test_create_dataloader_short_calls():
    loader = create_dataloader(KeyedAugDataset(n=40), num_workers=0)
    sizes = [len(b["index"]) for b in loader]
    assert sizes == [32, 8]
    first = [b["index"].tolist() for b in create_dataloader(KeyedAugDataset(n=40), num_workers=0, seed=42)]
    again = [b["index"].tolist() for b in create_dataloader(KeyedAugDataset(n=40), num_workers=0, seed=42)]
    assert first == again and first[0] != list(range(32))  # shuffled, reproducibly


def test_print_dataloader_config_from_arguments_and_from_a_loader():
    out = io.StringIO()
    text = print_dataloader_config(num_workers=2, batch_size=32, seed=42, shuffle=True, file=out)
    assert out.getvalue().strip() == text.strip()
    assert (
        "worker processes" in text
        and "batch size: 32" in text
        and "seed: 42" in text
        and "shuffle: True" in text
    )
    loader = create_dataloader(GlobalRandDataset(), num_workers=0, seed=1)
    text = print_dataloader_config(loader, file=io.StringIO())
    assert "global RNGs seeded per sample" in text


def test_verify_reproducibility_is_usable_in_an_if():
    assert verify_reproducibility(verbose=False) is True


@pytest.mark.slow
def test_setup_multiprocessing_and_enable_all_patches_in_a_fresh_process(tmp_path):
    code = (
        "from fastreid.utils.env import enable_all_patches\n"
        "import os\n"
        "os.environ.pop('TORCH_HOME', None)\n"
        "result = enable_all_patches()\n"
        "print('METHOD', result['start_method'])\n"
        "print('SET', sorted(result['environment']))\n"
        "print('TORCH_HOME', os.environ['TORCH_HOME'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert f"METHOD {expected}" in proc.stdout
    set_line = next(line for line in proc.stdout.splitlines() if line.startswith("SET "))
    assert "'TORCH_HOME'" in set_line and str(tmp_path / ".torch_cache") in proc.stdout
    assert callable(setup_multiprocessing) and callable(enable_all_patches)


def test_upstream_call_with_local_rank_first():
    loader = DataLoaderX(0, dataset=KeyedAugDataset(n=10), batch_size=4, shuffle=False)
    assert loader.device == torch.device("cuda:0")
    batches = list(loader)
    assert [b["index"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0]["images"].device.type == ("cuda" if torch.cuda.is_available() else "cpu")
