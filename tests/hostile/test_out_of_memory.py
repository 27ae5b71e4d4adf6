"""A batch too large for the device's memory ends training with one line naming the batch setting
and the memory PyTorch asked for; the checkpoints already written stay as they were. (The real
out-of-memory error needs a GPU: ``make gpu-check`` row 10 runs it there; here the model raises
PyTorch's own ``torch.cuda.OutOfMemoryError`` with PyTorch's message.)"""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

from fastreid.cli.train import run
from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.utils.device import DeviceOutOfMemoryError, describe_batch, out_of_memory_error

TORCH_MESSAGE = (
    "CUDA out of memory. Tried to allocate 12.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
    "3.06 GiB is free. Including non-PyTorch memory, this process has 76.12 GiB memory in use. Of the "
    "allocated memory 75.1 GiB is allocated by PyTorch. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)


def test_the_message_names_the_setting_the_batch_and_the_memory_asked_for():
    error = out_of_memory_error(
        torch.cuda.OutOfMemoryError(TORCH_MESSAGE),
        doing="training iteration 9",
        batch=describe_batch({"images": torch.zeros(32, 3, 256, 128, dtype=torch.uint8)}),
        settings="SOLVER.IMS_PER_BATCH",
    )
    assert isinstance(error, DeviceOutOfMemoryError)
    text = str(error)
    assert "training iteration 9" in text and "32 images of 3x256x128" in text
    assert "asked for 12.50 GiB more" in text and "Lower SOLVER.IMS_PER_BATCH" in text
    assert "PYTORCH_CUDA_ALLOC_CONF" not in text  # torch's advice stays in the logged traceback
    assert describe_batch({"targets": torch.zeros(3)}) == "?"


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("where", ["training", "evaluation"])
def test_out_of_memory_is_one_line_and_keeps_the_checkpoints(
    where, output_dir_copy, tiny_config, data_root, monkeypatch, capsys
):
    out = output_dir_copy  # a finished two-iteration run: model_final.pth, last_checkpoint
    with open(os.path.join(out, "last_checkpoint"), encoding="utf-8") as f:
        last = os.path.join(out, f.read().strip())
    before = {name: _sha256(os.path.join(out, name)) for name in os.listdir(out) if name.endswith(".pth")}
    forward = Baseline.forward

    def out_of_memory(self, batched_inputs):
        if self.training == (where == "training"):
            raise torch.cuda.OutOfMemoryError(TORCH_MESSAGE)
        return forward(self, batched_inputs)

    monkeypatch.setattr(Baseline, "forward", out_of_memory)
    monkeypatch.setenv("FASTREID_DATASETS", data_root)
    argv = ["--config-file", tiny_config, "OUTPUT_DIR", out]
    if where == "training":
        argv[2:2] = ["--resume"]
        argv += ["SOLVER.MAX_ITER", "4"]
    else:
        argv[2:2] = ["--eval-only"]
        argv += ["MODEL.WEIGHTS", last, "OUTPUT_DIR", os.path.join(out, "eval")]
    capsys.readouterr()
    assert run(argv) == 1
    printed = capsys.readouterr()
    err = [line for line in printed.err.splitlines() if line.strip() and "it/s]" not in line]  # tqdm's bar
    assert len(err) == 1, err
    assert "Traceback" not in printed.err + printed.out
    setting = "SOLVER.IMS_PER_BATCH" if where == "training" else "TEST.IMS_PER_BATCH"
    assert err[0].startswith("DeviceOutOfMemoryError: Out of device memory in ")
    assert setting in err[0] and "12.50 GiB" in err[0], err[0]
    if where == "training":
        assert "iteration 3" in err[0] and "--resume" in err[0]
    after = {name: _sha256(os.path.join(out, name)) for name in os.listdir(out) if name.endswith(".pth")}
    assert after == before
    with open(os.path.join(out, "last_checkpoint"), encoding="utf-8") as f:
        assert os.path.join(out, f.read().strip()) == last
