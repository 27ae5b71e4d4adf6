"""Runs one of upstream FastReID's projects against this checkout's package: the project's own
``train_net.setup``, its Trainer's ``build_model``, an evaluation forward and a training step with
backward, on random images (no data set needed). For contributors checking library compatibility;
the test suite has projects of the same shape written here (tests/projects).

    python tools/dev/check_upstream_projects.py UPSTREAM_CHECKOUT PROJECT CONFIG [KEY VALUE ...]
    python tools/dev/check_upstream_projects.py ~/fast-reid PartialReID partial_market.yml MODEL.HEADS.NUM_CLASSES 2

SHIM_CUDA=1 turns a project's own ``.cuda()`` calls into no-ops (some projects hard-code CUDA).
Prints ``OK ...`` or ``FAIL ... at <stage>`` with the last frames."""

import importlib
import os
import sys
import tempfile
import traceback

upstream, proj, cfgname = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
root = os.path.join(os.path.abspath(upstream), "projects", proj)
here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(root)
sys.path[:0] = [here, root]
import torch  # noqa: E402 (after the path set-up)

import fastreid  # noqa: E402

if os.environ.get("SHIM_CUDA"):
    torch.Tensor.cuda = lambda self, *a, **k: self  # the project's own .cuda() calls, on a CPU machine
assert fastreid.__file__.startswith(here), fastreid.__file__
stage = "import"
try:
    tn = importlib.import_module("train_net")
    from fastreid.engine import default_argument_parser

    out = tempfile.mkdtemp()
    args = default_argument_parser().parse_args(
        [
            "--config-file",
            f"configs/{cfgname}",
            "MODEL.DEVICE",
            "cpu",
            "MODEL.BACKBONE.PRETRAIN",
            "False",
            "OUTPUT_DIR",
            out,
            *extra,
        ]
    )
    stage = "setup"
    cfg = tn.setup(args)
    stage = "build_model"
    trainer_cls = getattr(tn, "Trainer", None) or fastreid.engine.DefaultTrainer
    if proj == "FastAttr":
        trainer_cls = tn.AttrTrainer
        trainer_cls.sample_weights = torch.full(
            (cfg.MODEL.HEADS.NUM_CLASSES,), 0.3
        )  # build_train_loader sets it
    model = trainer_cls.build_model(cfg)
    B = 4
    H, W = cfg.INPUT.SIZE_TEST if len(cfg.INPUT.SIZE_TEST) == 2 else (112, 112)
    batch = {
        "images": torch.rand(B, 3, H, W) * 255,
        "targets": torch.tensor([0, 0, 1, 1]),
        "camids": torch.tensor([0, 1, 0, 1]),
    }
    if proj == "FastAttr":
        batch["targets"] = torch.randint(0, 2, (B, cfg.MODEL.HEADS.NUM_CLASSES)).float()
    stage = "eval forward"
    model.eval()
    with torch.no_grad():
        o = model(batch)
    shape = (
        getattr(o, "shape", None)
        if not isinstance(o, dict)
        else {k: tuple(v.shape) for k, v in o.items() if hasattr(v, "shape")}
    )
    stage = "train step"
    model.train()
    H, W = cfg.INPUT.SIZE_TRAIN if len(cfg.INPUT.SIZE_TRAIN) == 2 else (H, W)
    batch["images"] = torch.rand(B, 3, H, W) * 255
    losses = model(batch)
    total = sum(losses.values()) if isinstance(losses, dict) else losses
    total.backward()
    print(
        f"OK {proj} {cfgname}: eval out {shape}; losses {sorted(losses) if isinstance(losses, dict) else 'tensor'}"
    )
except Exception as e:
    print(f"FAIL {proj} {cfgname} at {stage}: {type(e).__name__}: {e}")
    traceback.print_exc(limit=-4)
