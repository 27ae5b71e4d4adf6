"""``make demo-uda`` (``tools/demo.py --family uda``) run whole on the small synthetic domains, in
this process: the source model on domain A, its adaptation to domain B's images and the model on B's
labels, each in its sub-folder of one run folder, and the closing table with the three figures. The
figures themselves (adapted at least 5 mAP points above direct transfer at the demo's size) are
recorded in docs/uda.md; at this size they only have to be measured."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The demo's configs made small (every stage takes them): 32 x 16 images, one epoch, batches of 16
# (the adaptation's epoch stays its config's 20 iterations: UDA keys are not the other stages')
SMALL = ["INPUT.SIZE_TRAIN", "[32,16]", "INPUT.SIZE_TEST", "[32,16]", "SOLVER.IMS_PER_BATCH", "16",
         "SOLVER.MAX_EPOCH", "1", "SOLVER.STEPS", "[1]", "SOLVER.WARMUP_ITERS", "0",
         "SOLVER.CHECKPOINT_PERIOD", "1", "TEST.EVAL_PERIOD", "1", "TEST.IMS_PER_BATCH", "64",
         "TEST.REPORT", "False"]  # fmt: skip


def _demo_module():
    spec = importlib.util.spec_from_file_location(
        "fastreid_tools_demo", os.path.join(REPO, "tools", "demo.py")
    )
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = demo
    spec.loader.exec_module(demo)
    return demo


@pytest.mark.slow  # ~30 s: three trainings (the adaptation: 20 iterations, its config's epoch) and two domains
def test_the_demo_trains_the_three_models_and_prints_their_table(tmp_path, run_tool, monkeypatch):
    pytest.importorskip("sklearn")
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_persons

    root = tmp_path / "datasets"
    # the demo's 8-16 images per identity (its clustering's k1 15 expects that many: at 4-6 DBSCAN
    # joins half the images in one cluster), 12 identities
    spec = SyntheticSpec(
        num_train_ids=12, num_test_ids=6, max_query_per_id=2, num_distractors=5, num_junk=3, seed=3
    )
    for domain in ("A", "B"):
        generate_persons(str(root), spec, domain)
    monkeypatch.chdir(tmp_path)
    demo = _demo_module()
    out = tmp_path / "demo_uda"
    done = run_tool(demo.main, "--family", "uda", "--root", str(root), "--output", str(out), *SMALL)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    for stage in ("source", "adapted", "supervised"):
        assert (out / stage / "model_final.pth").is_file(), stage
    adapted = (out / "adapted" / "config.yaml").read_text()
    assert str(out / "source" / "model_final.pth") in (adapted + (out / "adapted" / "log.txt").read_text())

    rows = {}
    for line in done.stdout.splitlines():
        m = re.match(
            r"^\| (direct transfer|adapted|supervised)\b.*?\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|$", line
        )
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    assert set(rows) == {"direct transfer", "adapted", "supervised"}, done.stdout[-2000:]
    for name, folder in (("direct transfer", "source"), ("adapted", "adapted"), ("supervised", "supervised")):
        with open(out / folder / "evaluation_results.json", encoding="utf-8") as f:
            results = json.load(f)
        assert rows[name] == pytest.approx((results["Rank-1"], results["mAP"]), abs=0.051), name
