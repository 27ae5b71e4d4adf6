"""Parameter groups, optimizers, LR schedules and gradient clipping against hand-computed values."""

import math

import pytest
import torch
from torch import nn

from fastreid.config import ConfigError, get_cfg
from fastreid.engine.hooks import LRScheduler
from fastreid.engine.train_loop import TrainerBase
from fastreid.solver import (
    build_gradient_clipper,
    build_lr_scheduler,
    build_optimizer,
    get_default_optimizer_params,
    warmup_factor_at_iter,
)


class _Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
        self.heads = nn.Module()
        self.heads.weight = nn.Parameter(torch.zeros(5, 4))
        self.heads.bn = nn.BatchNorm1d(4)
        self.heads.bn.weight.requires_grad_(False)
        self.alias = self.backbone[0]  # shared module: its parameters must appear once


def _groups(**solver):
    cfg = get_cfg()
    for k, v in solver.items():
        setattr(cfg.SOLVER, k, v)
    return cfg, {g["name"]: g for g in build_optimizer(cfg, _Toy())[0].param_groups}


def test_param_groups_follow_upstream_rules():
    cfg, groups = _groups(
        OPT="SGD",
        BASE_LR=0.1,
        WEIGHT_DECAY=0.01,
        WEIGHT_DECAY_NORM=0.002,
        BIAS_LR_FACTOR=2.0,
        WEIGHT_DECAY_BIAS=0.0,
        HEADS_LR_FACTOR=10.0,
        MOMENTUM=0.8,
        NESTEROV=True,
    )
    expected = {
        "backbone.0.weight": (0.1, 0.01),
        "backbone.0.bias": (0.2, 0.0),
        "backbone.1.weight": (0.1, 0.002),  # norm layer
        "backbone.1.bias": (0.2, 0.0),  # the bias rule wins over the norm rule
        "heads.weight": (1.0, 0.01),  # heads LR factor
        "heads.bn.bias": (2.0, 0.0),  # bias LR, then heads factor
    }
    assert set(groups) == set(expected)  # frozen heads.bn.weight and the alias are left out
    for name, (lr, wd) in expected.items():
        assert groups[name]["lr"] == pytest.approx(lr), name
        assert groups[name]["weight_decay"] == pytest.approx(wd), name
        assert groups[name]["momentum"] == 0.8 and groups[name]["nesterov"] is True


def test_weight_decay_bias_defaults_to_weight_decay_factor_one():
    params = get_default_optimizer_params(_Toy(), base_lr=0.5, weight_decay=0.1)
    assert all(g["lr"] == 0.5 and g["weight_decay"] == 0.1 for g in params)


@pytest.mark.parametrize(
    "name, cls", [("Adam", torch.optim.Adam), ("AdamW", torch.optim.AdamW), ("SGD", torch.optim.SGD)]
)
def test_optimizer_types(name, cls):
    cfg = get_cfg()
    cfg.SOLVER.OPT = name
    optimizer, param_wrapper = build_optimizer(cfg, _Toy())
    assert type(optimizer) is cls and param_wrapper is None  # torch's own class, upstream's pair


def test_unknown_optimizer_and_scheduler_are_clear_errors():
    cfg = get_cfg()
    cfg.SOLVER.OPT = "Lamb"
    with pytest.raises(
        ConfigError, match="SOLVER.OPT 'Lamb' is not supported; use one of .*Adam, AdamW.*SGD"
    ):
        build_optimizer(cfg, _Toy())
    cfg.SOLVER.OPT = "SGD"
    cfg.SOLVER.SCHED = "StepLR"
    with pytest.raises(ConfigError, match="SOLVER.SCHED 'StepLR'"):
        build_lr_scheduler(cfg, build_optimizer(cfg, _Toy())[0], 10)


def test_warmup_factors():
    assert warmup_factor_at_iter("linear", 3, 6, 0.1) == pytest.approx(0.55)
    assert warmup_factor_at_iter("constant", 5, 6, 0.1) == 0.1
    assert warmup_factor_at_iter("exp", 3, 6, 0.01) == pytest.approx(0.1)
    assert warmup_factor_at_iter("exp", 6, 6, 0.01) == 1.0
    with pytest.raises(ValueError, match="WARMUP_METHOD 'cubic'"):
        warmup_factor_at_iter("cubic", 0, 6, 0.1)


class _LrLoop(TrainerBase):
    """Records the LR each iteration trains with; the LRScheduler hook steps the schedules."""

    def __init__(self, optimizer):
        super().__init__()
        self.optimizer = optimizer
        self.grad_scaler = None
        self.lrs = []

    def run_step(self):
        self.lrs.append(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()


def _run_schedule(iters_per_epoch, **solver):
    cfg = get_cfg()
    for k, v in solver.items():
        setattr(cfg.SOLVER, k, v)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=cfg.SOLVER.BASE_LR)
    sched = build_lr_scheduler(cfg, opt, iters_per_epoch)
    loop = _LrLoop(opt)
    loop.register_hooks([LRScheduler(opt, sched, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.DELAY_EPOCHS)])
    loop.train(0, cfg.SOLVER.MAX_EPOCH, iters_per_epoch)
    return loop.lrs


def test_linear_warmup_then_multistep_per_epoch():
    lrs = _run_schedule(
        4,
        BASE_LR=1.0,
        MAX_EPOCH=6,
        WARMUP_ITERS=6,
        WARMUP_FACTOR=0.1,
        WARMUP_METHOD="linear",
        SCHED="MultiStepLR",
        STEPS=[2, 4],
        GAMMA=0.1,
    )
    # warmup per iteration: 0.1 + 0.15 k; the epoch schedule is stepped from the end of epoch 1
    # (the first epoch ending after warmup), so its milestones 2 and 4 fall after epochs 2 and 4.
    expected = [0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.0] + [1.0] * 4 + [0.1] * 8 + [0.01] * 4
    assert lrs == pytest.approx(expected)


def test_cosine_with_delay_epochs():
    lrs = _run_schedule(
        4,
        BASE_LR=1.0,
        MAX_EPOCH=6,
        WARMUP_ITERS=0,
        SCHED="CosineAnnealingLR",
        DELAY_EPOCHS=2,
        ETA_MIN_LR=0.0,
    )
    # T_max = MAX_EPOCH - DELAY_EPOCHS = 4; annealing starts after epoch 2
    per_epoch = [1.0, 1.0, 1.0] + [0.5 * (1 + math.cos(math.pi * t / 4)) for t in (1, 2, 3)]
    assert lrs == pytest.approx([lr for lr in per_epoch for _ in range(4)])


def test_cosine_t_max_counts_warmup_epochs():
    cfg = get_cfg()
    cfg.SOLVER.SCHED = "CosineAnnealingLR"
    cfg.SOLVER.MAX_EPOCH, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.DELAY_EPOCHS = 60, 2000, 30
    opt = torch.optim.Adam([nn.Parameter(torch.zeros(1))], lr=3.5e-4)
    scheds = build_lr_scheduler(cfg, opt, 202)
    assert scheds["lr_sched"].T_max == 30 and "warmup_sched" in scheds
    cfg.SOLVER.DELAY_EPOCHS = 0
    assert build_lr_scheduler(cfg, opt, 202)["lr_sched"].T_max == 60 - math.ceil(2000 / 202)


def test_gradient_clipping_by_value_and_by_norm():
    cfg = get_cfg()
    assert build_gradient_clipper(cfg) is None
    cfg.SOLVER.CLIP_GRADIENTS.ENABLED = True
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_VALUE = 1.0

    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2))
    a.grad, b.grad = torch.tensor([3.0, 4.0]), torch.tensor([0.3, -0.4])
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = "norm"
    build_gradient_clipper(cfg)([a, b])
    assert a.grad.tolist() == pytest.approx([0.6, 0.8], rel=1e-5)  # each parameter on its own norm
    assert b.grad.tolist() == pytest.approx([0.3, -0.4])

    a.grad = torch.tensor([3.0, -0.5])
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = "value"
    build_gradient_clipper(cfg)([a])
    assert a.grad.tolist() == [1.0, -0.5]

    cfg.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = "both"
    with pytest.raises(ConfigError, match="CLIP_TYPE 'both'"):
        build_gradient_clipper(cfg)


def test_weight_decay_norm_default_is_upstreams():
    # upstream's fastreid/config/defaults.py: _C.SOLVER.WEIGHT_DECAY_NORM = 0.0005
    assert get_cfg().SOLVER.WEIGHT_DECAY_NORM == 0.0005


@pytest.mark.parametrize(
    "name",
    [
        "SGD",
        "Adam",
        "AdamW",
        "RMSprop",
        "RAdam",
        "NAdam",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "ASGD",
        "Rprop",
        "Adafactor",
    ],
)
def test_every_torch_optimizer_name_upstream_accepts(name):
    from fastreid.solver.build import SUPPORTED_OPTIMIZERS

    if name not in SUPPORTED_OPTIMIZERS:
        pytest.skip(f"torch {torch.__version__} has no {name}")
    cfg = get_cfg()
    cfg.SOLVER.OPT = name
    model = _Toy()
    optimizer, _ = build_optimizer(cfg, model)
    assert type(optimizer) is getattr(torch.optim, name)
    before = model.backbone[0].weight.detach().clone()
    model.backbone(torch.randn(2, 3, 5, 5)).square().sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.backbone[0].weight)


def test_unusable_and_unknown_optimizers_say_so():
    for name, match in (("LBFGS", "closure"), ("SparseAdam", "sparse"), ("Lion", "not supported")):
        cfg = get_cfg()
        cfg.SOLVER.OPT = name
        with pytest.raises(ConfigError, match=match):
            build_optimizer(cfg, _Toy())


def test_upstream_call_shapes_of_build_optimizer():
    import copy
    import pickle

    from fastreid.solver import optimizer_and_wrapper

    cfg = get_cfg()
    cfg.SOLVER.OPT = "SGD"
    optimizer, param_wrapper = build_optimizer(cfg, _Toy(), False)  # upstream: (optimizer, param_wrapper)
    assert isinstance(optimizer, torch.optim.SGD) and param_wrapper is None
    assert optimizer_and_wrapper((optimizer, param_wrapper)) == (optimizer, param_wrapper)
    assert optimizer_and_wrapper(optimizer) == (optimizer, None)
    with pytest.raises(TypeError, match="must return"):
        optimizer_and_wrapper("SGD")
    # a plain torch optimizer takes its state and back; it pickles and deep-copies
    plain = torch.optim.SGD(_Toy().parameters(), lr=0.1)
    assert len(pickle.loads(pickle.dumps(optimizer)).param_groups) == len(optimizer.param_groups)
    copy.deepcopy(optimizer).load_state_dict(optimizer.state_dict())
    assert plain.state_dict()["state"] == {}


def test_upstream_style_trainer_subclass_returning_a_tuple(tmp_path):
    """An upstream DefaultTrainer subclass overrides build_optimizer and returns a tuple."""
    from fastreid.engine.defaults import DefaultTrainer

    class UpstreamStyle(DefaultTrainer):
        @classmethod
        def build_optimizer(cls, cfg, model):
            return torch.optim.SGD(model.parameters(), lr=0.01), "param_wrapper"

    from fastreid.solver import optimizer_and_wrapper

    model = _Toy()
    assert isinstance(
        optimizer_and_wrapper(UpstreamStyle.build_optimizer(get_cfg(), model))[0], torch.optim.SGD
    )


def _adam_cfg(fused: str):
    cfg = get_cfg()
    cfg.SOLVER.OPT = "Adam"
    cfg.SOLVER.FUSED = fused
    return cfg


def _train_steps(optimizer, model, steps: int = 3) -> None:
    torch.manual_seed(1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).square().sum().backward()
        optimizer.step()


def test_fused_kernel_on_cpu_by_default_and_same_training_as_torchs_default():
    torch.manual_seed(0)
    fused_model, plain_model = nn.Linear(3, 2), nn.Linear(3, 2)
    plain_model.load_state_dict(fused_model.state_dict())
    fused, _ = build_optimizer(_adam_cfg("auto"), fused_model)
    plain, _ = build_optimizer(_adam_cfg("off"), plain_model)
    assert all(group["fused"] for group in fused.param_groups)
    assert not any(group.get("fused") for group in plain.param_groups)
    _train_steps(fused, fused_model)
    _train_steps(plain, plain_model)
    for a, b in zip(fused_model.parameters(), plain_model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_resuming_keeps_the_kernel_the_optimizer_was_built_with():
    """An optimizer state written without the fused kernel (torch's default, or upstream's
    checkpoints) must not switch a resumed run away from the kernel its config chose."""
    model = nn.Linear(3, 2)
    plain, _ = build_optimizer(_adam_cfg("off"), model)
    _train_steps(plain, model)
    fused, _ = build_optimizer(_adam_cfg("auto"), model)
    fused.load_state_dict(plain.state_dict())
    assert all(group["fused"] for group in fused.param_groups)
    assert fused.state_dict()["state"][0]["exp_avg"].abs().sum() > 0  # the state itself was loaded
    _train_steps(fused, model)  # and steps with it
    # what it writes names no kernel, as upstream's optimizers write it: a plain torch optimizer
    # (upstream's side) that loads it keeps its own default
    written = fused.state_dict()
    assert all(group["fused"] is None for group in written["param_groups"])
    upstream_side = torch.optim.Adam([{"params": [p]} for p in model.parameters()], lr=1e-3)
    upstream_side.load_state_dict(written)
    assert not any(group["fused"] for group in upstream_side.param_groups)
    assert all(group["fused"] for group in fused.param_groups)  # writing changed nothing in the optimizer


def test_fused_setting_is_validated_and_unavailable_kernels_fall_back():
    from fastreid.config.validate import validate_config

    cfg = _adam_cfg("yes")
    with pytest.raises(ConfigError, match="SOLVER.FUSED"):
        validate_config(cfg)
    cfg = _adam_cfg("on")
    cfg.SOLVER.OPT = "RMSprop"  # torch has no fused RMSprop: its default is used, with a warning
    optimizer, _ = build_optimizer(cfg, nn.Linear(3, 2))
    assert not any(group.get("fused") for group in optimizer.param_groups)


# --------------------------------------------------------------------------- upstream's solver API


def _clip_cfg(kind: str, value: float):
    cfg = get_cfg()
    cfg.SOLVER.CLIP_GRADIENTS.ENABLED = True
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = kind
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_VALUE = value
    return cfg


def test_gradient_clipping_happens_inside_the_optimizers_step():
    from fastreid.solver.build import GradientClipType, maybe_add_gradient_clipping

    assert GradientClipType("value") is GradientClipType.VALUE
    p = nn.Parameter(torch.zeros(3))
    opt_cls = maybe_add_gradient_clipping(_clip_cfg("value", 0.5), torch.optim.SGD)
    assert opt_cls is maybe_add_gradient_clipping(_clip_cfg("value", 0.5), torch.optim.SGD)  # one class
    opt = opt_cls([p], lr=1.0)
    p.grad = torch.tensor([2.0, -3.0, 0.1])
    opt.step()
    assert p.detach().tolist() == pytest.approx([-0.5, 0.5, -0.1])  # clipped to +-0.5, then stepped
    assert maybe_add_gradient_clipping(get_cfg(), torch.optim.SGD) is torch.optim.SGD  # disabled
    instance = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    assert (
        type(maybe_add_gradient_clipping(_clip_cfg("norm", 1.0), instance)).__name__ == "SGDWithGradientClip"
    )


def test_freeze_layer_optimizer_skips_frozen_groups_for_the_first_iterations():
    from fastreid.solver.build import get_default_optimizer_params, maybe_add_freeze_layer

    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    cfg = get_cfg()
    cfg.MODEL.FREEZE_LAYERS = ["0"]
    cfg.SOLVER.FREEZE_ITERS = 2
    groups = get_default_optimizer_params(model, base_lr=0.1, weight_decay=0.0, freeze_layers=["0"])
    assert {g["name"]: g["freeze_status"] for g in groups} == {
        "0.weight": "freeze", "0.bias": "freeze", "1.weight": "normal", "1.bias": "normal",
    }  # fmt: skip
    opt = maybe_add_freeze_layer(cfg, torch.optim.SGD)(groups, lr=0.1)
    before = model[0].weight.detach().clone()
    for step in range(3):
        opt.zero_grad()
        model(torch.ones(4, 2)).sum().backward()
        opt.step()
        frozen_unchanged = torch.equal(model[0].weight, before)
        assert frozen_unchanged == (step < 2), step


def test_default_optimizer_params_take_upstreams_overrides():
    model = nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2))
    groups = get_default_optimizer_params(
        model, base_lr=1.0, weight_decay=0.1, weight_decay_norm=0.0, overrides={"weight": {"lr": 0.5}}
    )
    by_name = {g["name"]: g for g in groups}
    assert by_name["0.weight"]["lr"] == 0.5 and by_name["1.weight"]["weight_decay"] == 0.0
    assert by_name["0.bias"]["lr"] == 1.0
    with pytest.raises(ValueError, match="conflict"):
        get_default_optimizer_params(model, 1.0, 0.1, bias_lr_factor=2.0, overrides={"bias": {"lr": 1}})


def test_contiguous_params_train_exactly_like_separate_ones():
    from fastreid.utils.params import ContiguousParams

    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1)).double()

    plain, flat = make(), make()
    groups = get_default_optimizer_params(flat, base_lr=0.1, weight_decay=1e-3)
    wrapper = ContiguousParams(groups)
    assert len(wrapper.contiguous()) == 1  # one set of hyper-parameters: one buffer
    opt_flat = torch.optim.SGD(wrapper.contiguous(), lr=0.1, momentum=0.9)
    opt_plain = torch.optim.SGD(
        get_default_optimizer_params(plain, base_lr=0.1, weight_decay=1e-3), lr=0.1, momentum=0.9
    )
    x = torch.randn(8, 4, dtype=torch.float64)
    for _ in range(5):
        for model, opt in ((plain, opt_plain), (flat, opt_flat)):
            opt.zero_grad(set_to_none=False)
            model(x).square().sum().backward()
            opt.step()
        wrapper.assert_buffer_is_valid()
    for a, b in zip(plain.parameters(), flat.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    flat[0].weight.data = flat[0].weight.data.clone()  # re-pointed: no longer in the buffer
    with pytest.raises(ValueError, match="no longer lives in the contiguous buffer"):
        wrapper.assert_buffer_is_valid()
