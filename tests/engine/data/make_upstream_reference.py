"""Writes upstream_engine.json by running upstream FastReID's own engine
(JDAI-CV/fast-reid, c9bc3ce) on the scenarios of ``tests/engine/upstream_scenarios.py``.

    python make_upstream_reference.py /path/to/upstream-checkout

Modules used: ``fastreid/engine/train_loop.py`` (``SimpleTrainer``, ``TrainerBase``),
``fastreid/engine/hooks.py`` (``LRScheduler``, ``SWA``, ``CallbackHook``, ``EvalHook``,
``PreciseBN``) and ``fastreid/utils/checkpoint.py`` (``PeriodicCheckpointer``, ``Checkpointer``,
``get_missing_parameters_message``, ``get_unexpected_parameters_message``). Upstream's package
imports scikit-learn and ``collections.Mapping`` (gone in Python 3.10) at import time, neither used
by these modules: both are stubbed here. The load messages are recorded with termcolor's colours
forced on and off. Not run by the test suite (it needs upstream's code); the files it wrote are
stored next to it.
"""

import collections
import collections.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def _importable_upstream(checkout: str) -> None:
    sys.path.insert(0, checkout)
    for name in ("Mapping", "Sequence", "Iterable", "MutableMapping"):
        setattr(collections, name, getattr(collections.abc, name))
    for name in ("sklearn", "sklearn.metrics"):
        stub = types.ModuleType(name)
        stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = stub
    sys.modules["sklearn"].metrics = sys.modules["sklearn.metrics"]


def _messages(checkpoint, scenarios) -> dict:
    out = {}
    for mode in ("colour", "plain"):
        with scenarios.termcolor_mode(mode):
            out[mode] = scenarios.load_messages(checkpoint)
    return out


def _upstream_checkpoint(checkpoint, scenarios) -> dict:
    """What upstream's Checkpointer writes (model, optimizer after one step, extra data), as JSON."""
    import torch

    model = scenarios.TinyRegressor(seed=5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sum(model(scenarios._batches(seed=6, count=1)[0]).values()).backward()
    optimizer.step()
    with tempfile.TemporaryDirectory() as folder:
        checkpoint.Checkpointer(model, folder, optimizer=optimizer).save("model_0001", epoch=1, metric=42.5)
        written = torch.load(os.path.join(folder, "model_0001.pth"), weights_only=True)
    return scenarios.to_json(written)


def main() -> None:
    _importable_upstream(os.path.abspath(sys.argv[1]))
    sys.path.insert(0, os.path.dirname(HERE))
    import upstream_scenarios as scenarios

    from fastreid.engine import hooks, train_loop
    from fastreid.utils import checkpoint

    assert "upstream" in train_loop.__file__ or sys.argv[1] in train_loop.__file__, train_loop.__file__
    reference = {
        "training": {
            "plain": scenarios.training_schedule(train_loop, hooks, swa=False),
            "swa": scenarios.training_schedule(train_loop, hooks, swa=True),
        },
        "hook_order": scenarios.hook_order(train_loop, hooks),
        "evaluation_epochs": {
            f"{max_epoch}/{period}": scenarios.evaluation_epochs(train_loop, hooks, max_epoch, period)
            for max_epoch, period in ((5, 1), (5, 2), (6, 4), (3, 5))
        },
        "precise_bn": scenarios.precise_bn_statistics(hooks),
        "periodic_saves": [
            {
                "period": period,
                "metrics": metrics,
                "saves": scenarios.periodic_saves(checkpoint, period, len(metrics), metrics),
            }
            for period, metrics in (
                (2, [10.0, 5.0, 20.0, 15.0, 30.0]),
                (3, [1.0, 2.0, 3.0, 0.5, 0.5, 0.5, 0.25]),
            )
        ],
        "messages": _messages(checkpoint, scenarios),
        "checkpoint": _upstream_checkpoint(checkpoint, scenarios),
    }
    with open(os.path.join(HERE, "upstream_engine.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
