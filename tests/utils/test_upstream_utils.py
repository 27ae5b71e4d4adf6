"""fastreid.utils modules upstream's code imports: file_io, history_buffer, timer, params (in
tests/solver), precision_bn, summary, faiss_utils, collect_env, env, logger, compute_dist and the
visualizer."""

from __future__ import annotations

import logging
import os
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from fastreid.utils import collect_env, env, logger
from fastreid.utils.compute_dist import k_reciprocal_neigh
from fastreid.utils.faiss_utils import (
    index_init_cpu,
    index_init_gpu,
    search_index_pytorch,
    search_raw_array_pytorch,
)
from fastreid.utils.file_io import PathManager, get_cache_dir
from fastreid.utils.history_buffer import HistoryBuffer
from fastreid.utils.precision_bn import get_bn_modules, update_bn_stats
from fastreid.utils.summary import summary
from fastreid.utils.timer import Timer
from fastreid.utils.visualizer import Visualizer


def test_path_manager_does_local_file_operations(tmp_path):
    folder = str(tmp_path / "a" / "b")
    PathManager.mkdirs(folder)
    path = os.path.join(folder, "x.txt")
    with PathManager.open(path, "w") as f:
        f.write("hello")
    assert PathManager.exists(path) and PathManager.isfile(path) and PathManager.isdir(folder)
    assert PathManager.ls(folder) == ["x.txt"] and PathManager.get_local_path(path) == path
    assert PathManager.copy(path, path + ".copy")
    PathManager.rm(path)
    assert not PathManager.exists(path)
    assert get_cache_dir(str(tmp_path)) == str(tmp_path)


def test_history_buffer_and_timer_are_fvcores():
    buffer = HistoryBuffer()
    for i, v in enumerate([1.0, 5.0, 3.0]):
        buffer.update(v, i)
    assert buffer.median(3) == 3.0 and buffer.latest() == 3.0 and buffer.global_avg() == 3.0
    timer = Timer()
    timer.pause()
    assert timer.is_paused() and timer.seconds() >= 0


def test_precise_bn_recomputes_population_statistics():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 1, bias=False), nn.BatchNorm2d(4))
    batches = [torch.randn(8, 3, 5, 5) * 3 + 1 for _ in range(6)]
    assert get_bn_modules(model) == [model[1]]
    update_bn_stats(model, batches, num_iters=6)
    with torch.no_grad():
        feats = torch.cat([model[0](b) for b in batches])
    torch.testing.assert_close(model[1].running_mean, feats.mean(dim=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    assert torch.allclose(model[1].running_var, feats.var(dim=(0, 2, 3)), rtol=0.05)


def test_summary_prints_the_layer_table_and_runs_on_the_cpu_without_cuda(capsys):
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
    model(torch.zeros(1, 3, 6, 6))  # materialise the lazy layer
    text = summary(model, (3, 6, 6), device="cuda" if not torch.cuda.is_available() else "cpu")
    assert (
        "Conv2d-1" in text
        and "[-1, 8, 4, 4]" in text
        and f"Total params: {8 * 27 + 8 + 128 * 2 + 2:,}" in text
    )
    assert text in capsys.readouterr().out
    with pytest.raises(ValueError, match="device must be"):
        summary(model, (3, 6, 6), device="tpu")


def test_faiss_helpers_on_the_cpu_equal_brute_force():
    g = torch.Generator().manual_seed(0)
    base, query = torch.randn(50, 8, generator=g), torch.randn(5, 8, generator=g)
    brute = torch.cdist(query, base).square()
    want_d, want_i = brute.topk(3, largest=False)
    index = index_init_cpu(8)
    index.add(base.numpy())
    d, i = search_index_pytorch(index, query, 3)
    assert torch.equal(i, want_i) and torch.allclose(d, want_d, rtol=1e-4, atol=1e-4)
    out_d, out_i = torch.empty(5, 3), torch.empty(5, 3, dtype=torch.long)
    d2, i2 = search_raw_array_pytorch(None, base, query, 3, D=out_d, I=out_i)
    assert d2 is out_d and torch.equal(i2, want_i)
    with pytest.raises(RuntimeError, match="no GPU support|fewer than"):
        index_init_gpu(1, 8)


def test_collect_env_and_env_helpers(tmp_path, monkeypatch):
    assert "PyTorch built with" in collect_env.collect_torch_env()
    assert collect_env.get_env_module()[0] == "FASTREID_ENV_MODULE"
    assert "cannot find cuobjdump" in collect_env.detect_compute_compatibility(None, "lib.so")
    a = env.seed_all_rng(5)
    first = (np.random.rand(), torch.rand(1).item())
    env.seed_all_rng(a)
    assert (np.random.rand(), torch.rand(1).item()) == first
    script = tmp_path / "site_setup.py"
    script.write_text("import os\ndef setup_environment():\n    os.environ['FASTREID_TEST_SETUP'] = 'done'\n")
    monkeypatch.delenv("FASTREID_TEST_SETUP", raising=False)
    env.setup_custom_environment(str(script))
    assert os.environ["FASTREID_TEST_SETUP"] == "done"
    (tmp_path / "no_setup.py").write_text("x = 1\n")
    with pytest.raises(AttributeError, match="no callable setup_environment"):
        env.setup_custom_environment(str(tmp_path / "no_setup.py"))


def test_log_every_n(fr_log):
    for i in range(7):
        logger.log_every_n(logging.INFO, f"message {i}", n=3)
    records = {id(r): r for r in fr_log.records}  # a record can reach caplog's handler twice
    logged = [r.getMessage() for r in records.values() if r.getMessage().startswith("message")]
    assert logged == ["message 0", "message 3", "message 6"]


def test_k_reciprocal_neighbours():
    # 0 and 1 are each other's nearest; 2's nearest is 0, but 0 does not return the favour at k1=1
    initial_rank = np.array([[0, 1, 2], [1, 0, 2], [2, 0, 1]])
    assert k_reciprocal_neigh(initial_rank, 0, 1).tolist() == [0, 1]
    assert k_reciprocal_neigh(initial_rank, 2, 1).tolist() == [2]


class _TestSet:
    def __init__(self, n: int):
        rng = np.random.default_rng(0)
        self.items = [
            {"images": torch.from_numpy(rng.integers(0, 256, (3, 16, 8), dtype=np.uint8)), "camids": i % 2, "img_paths": f"{i}.jpg"}
            for i in range(n)
        ]  # fmt: skip

    def __getitem__(self, i):
        return self.items[i]


def test_visualizer_writes_rank_lists_and_roc_and_reads_roc_info_safely(tmp_path):
    q_pids, g_pids = np.array([0, 1]), np.array([0, 1, 0, 2, 1])
    q_cams, g_cams = np.array([0, 0]), np.array([1, 1, 0, 1, 0])
    dist = np.random.default_rng(1).random((2, 5))
    vis = Visualizer(_TestSet(7))
    vis.get_model_output(np.array([0.3, 0.9]), dist, q_pids, g_pids, q_cams, g_cams)
    matches, order = vis.get_matched_result(0)
    assert 2 not in order.tolist()  # the same identity from the same camera is left out
    written = vis.vis_rank_list(str(tmp_path / "ranks"), vis_label=True, num_vis=2, max_rank=3)
    assert [os.path.basename(p) for p in written] == ["0.jpg", "1.jpg"]
    fpr, tpr, pos, neg = vis.vis_roc_curve(str(tmp_path / "roc"))
    assert (tmp_path / "roc" / "roc.jpg").is_file() and len(pos) + len(neg) == 2 * 5 - 2
    path = Visualizer.save_roc_info(str(tmp_path), fpr, tpr, pos, neg)
    loaded = Visualizer.load_roc_info(path)
    np.testing.assert_array_equal(loaded["fpr"], fpr)
    with open(tmp_path / "evil.pickle", "wb") as f:
        pickle.dump({"x": os.system}, f)
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        Visualizer.load_roc_info(str(tmp_path / "evil.pickle"))
