"""A retrieval project shaped like upstream's FastRetri and PartialReID (``retriproj``): its
config keys, an ImageDataset in DATASET_REGISTRY, a DatasetEvaluator, and a Trainer overriding
build_evaluator, test, build_optimizer (upstream's pair) and auto_scale_hyperparams (a
staticmethod, as FastClas's), run through its ``main``: training (precise BN, the final evaluation
through the overridden test), resume of the finished run, and ``--eval-only`` with precise BN
run by hand as PartialReID's script does."""

from __future__ import annotations

import json

import tinynet  # noqa: F401  (registers the project's backbone)
import torch
from retriproj import recall_at_ks, train_net


def test_trains_through_the_overridden_evaluator_and_test(project_args, tmp_path):
    train_net.Trainer.tested = train_net.Trainer.optimizers_built = 0
    results = train_net.main(project_args("retriproj/configs/tiny_retri.yml"))
    assert train_net.Trainer.tested == 1 and train_net.Trainer.optimizers_built == 1
    assert json.loads((tmp_path / "out" / "identities.json").read_text()) == {"num_classes": 6}
    assert set(results) == {"Recall@1", "Recall@2", "metric", "Recall@mean"}
    assert results["metric"] == results["Recall@1"]

    # resumed after its last iteration: nothing to train, the final evaluation is not repeated
    out = tmp_path / "out"
    trainer = train_net.Trainer(train_net.setup(project_args("retriproj/configs/tiny_retri.yml", "--resume")))
    trainer.resume_or_load(resume=True)
    assert trainer.start_iter == trainer.max_iter == 1
    assert trainer._pending_rng_states is not None  # the saved RNG states, restored when training starts
    assert trainer.hooks[[type(h).__name__ for h in trainer.hooks].index("EvalHook")]._last_eval_iter == 0
    again = train_net.main(project_args("retriproj/configs/tiny_retri.yml", "--resume"))
    assert again is None and train_net.Trainer.tested == 1

    config = str(out / "config.yaml")
    weights = str(out / "model_final.pth")
    evaluated = train_net.main(project_args(config, "--eval-only", "MODEL.WEIGHTS", weights, output="eval"))
    assert train_net.Trainer.tested == 2
    assert set(evaluated) == set(results)


def test_recall_at_ks():
    query = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    gallery = torch.tensor([[0.9, 0.1], [0.1, 0.9], [1.0, 1.0]])
    # query 0 (label 1): nearest labels 2, 2; query 1 (label 2): nearest labels 1, 2
    recalls = recall_at_ks(query, torch.tensor([1, 2]), gallery, torch.tensor([2, 1, 2]), [1, 2])
    assert recalls == {1: 0.0, 2: 50.0}
