"""State dicts of upstream FastReID's R50 configs: exact key names and shapes, loading of an
upstream-style model_final.pth, and the same weights giving the same features and losses.

The expected keys are written out here from upstream's architecture (resnet.py, IBN, Non_local,
EmbeddingHead), independently of fastreid's code.
"""

import pytest
import torch
from test_modeling_upstream_parity import build_model_on_meta
from upstream_reference import on_meta_device

from fastreid.config import get_cfg
from fastreid.modeling import build_model
from fastreid.utils.checkpoint_report import load_state_dict_with_report

NUM_CLASSES = 751
BN = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def _bagtricks(cfg):
    cfg.MODEL.HEADS.WITH_BNNECK = True
    cfg.MODEL.HEADS.POOL_LAYER = "GlobalAvgPool"
    cfg.MODEL.HEADS.NECK_FEAT = "before"
    cfg.MODEL.HEADS.CLS_LAYER = "Linear"
    cfg.MODEL.LOSSES.NAME = ("CrossEntropyLoss", "TripletLoss")
    cfg.MODEL.LOSSES.CE.EPSILON = 0.1
    cfg.MODEL.LOSSES.TRI.MARGIN = 0.3
    cfg.MODEL.LOSSES.TRI.HARD_MINING = True


def _bagtricks_ibn(cfg):
    _bagtricks(cfg)
    cfg.MODEL.BACKBONE.WITH_IBN = True


def _agw(cfg):
    _bagtricks(cfg)
    cfg.MODEL.BACKBONE.WITH_NL = True
    cfg.MODEL.HEADS.POOL_LAYER = "GeneralizedMeanPooling"
    cfg.MODEL.LOSSES.TRI.MARGIN = 0.0
    cfg.MODEL.LOSSES.TRI.HARD_MINING = False


def _sbs(cfg):
    _bagtricks(cfg)
    cfg.MODEL.BACKBONE.WITH_NL = True
    cfg.MODEL.HEADS.NECK_FEAT = "after"
    cfg.MODEL.HEADS.POOL_LAYER = "GeneralizedMeanPoolingP"
    cfg.MODEL.HEADS.CLS_LAYER = "CircleSoftmax"
    cfg.MODEL.HEADS.SCALE = 64
    cfg.MODEL.HEADS.MARGIN = 0.35
    cfg.MODEL.LOSSES.TRI.MARGIN = 0.0


CONFIGS = {
    "bagtricks_R50": (_bagtricks, {"ibn": False, "nl": False, "gem_p": False}),
    "bagtricks_R50-ibn": (_bagtricks_ibn, {"ibn": True, "nl": False, "gem_p": False}),
    "AGW_R50": (_agw, {"ibn": False, "nl": True, "gem_p": False}),
    "sbs_R50": (_sbs, {"ibn": False, "nl": True, "gem_p": True}),
}


def make_cfg(name, size=(256, 128)):
    cfg = get_cfg()
    CONFIGS[name][0](cfg)
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.HEADS.NUM_CLASSES = NUM_CLASSES
    cfg.INPUT.SIZE_TEST = list(size)
    return cfg


def upstream_keys(ibn: bool, nl: bool, gem_p: bool) -> dict:
    """Upstream FastReID's Baseline R50 state dict: key -> shape."""
    keys = {}

    def bn(prefix, c):
        for leaf in BN:
            keys[f"{prefix}.{leaf}"] = () if leaf == "num_batches_tracked" else (c,)

    keys["backbone.conv1.weight"] = (64, 3, 7, 7)
    bn("backbone.bn1", 64)
    inplanes = 64
    for layer, (planes, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3)), start=1):
        for b in range(blocks):
            p = f"backbone.layer{layer}.{b}"
            keys[f"{p}.conv1.weight"] = (planes, inplanes, 1, 1)
            if ibn and layer < 4:
                half = planes // 2  # IBN-a: int(planes / 2) channels of InstanceNorm
                keys[f"{p}.bn1.IN.weight"] = (half,)
                keys[f"{p}.bn1.IN.bias"] = (half,)
                bn(f"{p}.bn1.BN", planes - half)
            else:
                bn(f"{p}.bn1", planes)
            keys[f"{p}.conv2.weight"] = (planes, planes, 3, 3)
            bn(f"{p}.bn2", planes)
            keys[f"{p}.conv3.weight"] = (planes * 4, planes, 1, 1)
            bn(f"{p}.bn3", planes * 4)
            if b == 0:
                keys[f"{p}.downsample.0.weight"] = (planes * 4, inplanes, 1, 1)
                bn(f"{p}.downsample.1", planes * 4)
            inplanes = planes * 4
    if nl:
        # upstream's released layers/non_local.py: inter_channels = reduc_ratio // reduc_ratio = 1
        inner = 1
        for stage, count, c in ((2, 2, 512), (3, 3, 1024)):
            for i in range(count):
                p = f"backbone.NL_{stage}.{i}"
                for conv in ("g", "theta", "phi"):
                    keys[f"{p}.{conv}.weight"] = (inner, c, 1, 1)
                    keys[f"{p}.{conv}.bias"] = (inner,)
                keys[f"{p}.W.0.weight"] = (c, inner, 1, 1)
                keys[f"{p}.W.0.bias"] = (c,)
                bn(f"{p}.W.1", c)
    if gem_p:
        keys["heads.pool_layer.p"] = (1,)
    bn("heads.bottleneck.0", 2048)
    keys["heads.weight"] = (NUM_CLASSES, 2048)
    return keys


@pytest.fixture(scope="module")
def models():
    """The four configs' models on the meta device: their keys, shapes and flags, no values."""
    return {name: build_model_on_meta(make_cfg(name)) for name in CONFIGS}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_state_dict_matches_upstream(models, name):
    expected = upstream_keys(**CONFIGS[name][1])
    got = {k: tuple(v.shape) for k, v in models[name].state_dict().items()}
    assert sorted(set(got) - set(expected)) == []
    assert sorted(set(expected) - set(got)) == []
    wrong = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert wrong == {}
    assert "pixel_mean" not in got and "pixel_std" not in got


def test_key_facts_spelled_out(models):
    sd = models["bagtricks_R50-ibn"].state_dict()
    assert sd["backbone.layer1.0.bn1.IN.weight"].shape == (32,)
    assert sd["backbone.layer1.0.bn1.BN.running_mean"].shape == (32,)
    assert "backbone.layer4.0.bn1.weight" in sd  # no IBN in layer4
    assert sd["heads.weight"].shape == (NUM_CLASSES, 2048)
    sbs = models["sbs_R50"].state_dict()
    assert {k.split(".")[1] + "." + k.split(".")[2] for k in sbs if ".NL_" in k} == {
        "NL_2.0",
        "NL_2.1",
        "NL_3.0",
        "NL_3.1",
        "NL_3.2",
    }
    assert not models["sbs_R50"].heads.bottleneck[0].bias.requires_grad  # BNNeck bias frozen


def test_nl_inter_channels_half_is_the_papers_opt_in():
    cfg = make_cfg("AGW_R50", size=(64, 32))
    cfg.MODEL.BACKBONE.NL_INTER_CHANNELS = "half"
    sd = build_model_on_meta(cfg).state_dict()  # shapes only
    assert sd["backbone.NL_2.0.g.weight"].shape == (256, 512, 1, 1)
    assert sd["backbone.NL_3.2.W.0.weight"].shape == (1024, 512, 1, 1)
    cfg.MODEL.BACKBONE.NL_INTER_CHANNELS = "quarter"
    from fastreid.config import ConfigError

    # on the meta device: no R50 initialised before the error (without the error, moving the
    # meta model to the CPU would raise NotImplementedError, not ConfigError: the test fails)
    with on_meta_device(), pytest.raises(ConfigError, match="NL_INTER_CHANNELS"):
        build_model(cfg, log_summary=False)


def _randomised_upstream_checkpoint(name, seed):
    """A stand-in for an upstream model_final.pth: a plain dict of tensors with upstream's names."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for key, shape in upstream_keys(**CONFIGS[name][1]).items():
        if key.endswith("num_batches_tracked"):
            state[key] = torch.tensor(100)
        elif key.endswith("running_var"):
            state[key] = torch.rand(shape, generator=g) + 0.5
        elif key.endswith("pool_layer.p"):
            state[key] = torch.tensor([3.5])
        else:
            state[key] = torch.randn(shape, generator=g) * 0.05
    return {"model": state, "iteration": 1000}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bagtricks_R50-ibn", "sbs_R50"])
def test_upstream_checkpoint_loads_and_gives_same_features_and_losses(tmp_path, name, fr_log):
    path = tmp_path / "model_final.pth"
    torch.save(_randomised_upstream_checkpoint(name, seed=1), path)
    ckpt = torch.load(path, map_location="cpu", weights_only=True)

    torch.manual_seed(0)
    model_a = build_model(make_cfg(name), log_summary=False)
    report = load_state_dict_with_report(model_a, ckpt["model"])
    assert report.ok, (report.missing_keys, report.unexpected_keys, report.mismatched_keys)
    assert "Loaded all" in fr_log.text

    torch.manual_seed(123)  # a differently initialised twin
    model_b = build_model(make_cfg(name), log_summary=False)
    assert load_state_dict_with_report(model_b, ckpt["model"]).ok

    images = torch.randint(0, 256, (4, 3, 32, 16), dtype=torch.uint8)
    batch = {"images": images, "targets": torch.tensor([0, 0, 1, 1])}
    model_a.eval()
    model_b.eval()
    with torch.no_grad():
        torch.testing.assert_close(model_a(batch), model_b(batch), rtol=0, atol=0)
    model_a.train()
    model_b.train()
    losses_a, losses_b = model_a(batch), model_b(batch)
    assert set(losses_a) == {"loss_cls", "loss_triplet"}
    for k in losses_a:
        torch.testing.assert_close(losses_a[k], losses_b[k], rtol=0, atol=0)
    assert torch.equal(images, batch["images"])  # the input batch is not modified in place


def test_fastreid_checkpoint_as_backbone_pretrain(tmp_path):
    path = tmp_path / "model_final.pth"
    torch.save(_randomised_upstream_checkpoint("sbs_R50", seed=2), path)
    cfg = make_cfg("sbs_R50")
    cfg.MODEL.BACKBONE.PRETRAIN = True
    cfg.MODEL.BACKBONE.PRETRAIN_PATH = str(path)
    model = build_model(cfg, log_summary=False)
    expected = torch.load(path, weights_only=True)["model"]["backbone.layer3.5.conv2.weight"]
    assert torch.equal(model.backbone.layer3[5].conv2.weight, expected)


@pytest.mark.slow
def test_torchvision_and_ibn_checkpoint_files_load_cleanly(tmp_path, fr_log):
    import torchvision

    tv_path = tmp_path / "resnet50.pth"
    tv_state = torchvision.models.resnet50(weights=None).state_dict()  # keys incl. fc.*
    torch.save(tv_state, tv_path)
    cfg = make_cfg("bagtricks_R50")
    cfg.MODEL.BACKBONE.PRETRAIN = True
    cfg.MODEL.BACKBONE.PRETRAIN_PATH = str(tv_path)
    model = build_model(cfg, log_summary=False)
    assert "Loaded all" in fr_log.text and "missing" not in fr_log.text
    assert torch.equal(
        model.backbone.layer2[0].downsample[0].weight, tv_state["layer2.0.downsample.0.weight"]
    )

    # IBN-Net's release format: {"state_dict": {"module.<key>": ...}} with a classifier
    torch.manual_seed(5)
    ibn_backbone = build_model(make_cfg("bagtricks_R50-ibn"), log_summary=False).backbone
    ibn_state = {"module." + k: v for k, v in ibn_backbone.state_dict().items()}
    ibn_state["module.fc.weight"] = torch.zeros(1000, 2048)
    ibn_path = tmp_path / "resnet50_ibn_a.pth"
    torch.save({"state_dict": ibn_state, "epoch": 100}, ibn_path)
    cfg = make_cfg("bagtricks_R50-ibn")
    cfg.MODEL.BACKBONE.PRETRAIN = True
    cfg.MODEL.BACKBONE.PRETRAIN_PATH = str(ibn_path)
    fr_log.clear()
    model = build_model(cfg, log_summary=False)
    assert "Loaded all" in fr_log.text
    assert torch.equal(model.backbone.layer1[0].bn1.IN.weight, ibn_backbone.layer1[0].bn1.IN.weight)


def test_feature_map_size_follows_upstream_stem():
    # upstream's MaxPool2d(3, 2, ceil_mode=True) and LAST_STRIDE 1: 256x128 -> 16x8 (same stem in
    # every depth); a height of 33 gives 2 rows where torchvision's padded max pooling gives 3
    from fastreid.modeling import build_backbone

    cfg = make_cfg("bagtricks_R50")
    cfg.MODEL.BACKBONE.DEPTH = "18x"
    backbone = build_backbone(cfg).eval()
    with torch.no_grad():
        assert backbone(torch.zeros(1, 3, 256, 128)).shape == (1, 512, 16, 8)
        assert backbone(torch.zeros(1, 3, 33, 128)).shape == (1, 512, 2, 8)


def test_same_computation_as_torchvision_resnet_with_upstream_stem():
    """Upstream's R50 is torchvision's (stride on the 3x3 conv) with a ceil-mode max pool and
    LAST_STRIDE 1: with the same weights both give the same feature map."""
    import torchvision
    from torch import nn

    from fastreid.modeling import build_backbone

    torch.manual_seed(7)
    tv = torchvision.models.resnet50(weights=None).eval()
    tv.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)
    tv.layer4[0].conv2.stride = (1, 1)
    tv.layer4[0].downsample[0].stride = (1, 1)
    for m in tv.modules():  # non-trivial BN statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)

    ours = build_backbone(make_cfg("bagtricks_R50")).eval()
    state = {k: v for k, v in tv.state_dict().items() if not k.startswith("fc.")}
    assert load_state_dict_with_report(ours, state).ok

    x = torch.randn(2, 3, 64, 32)
    with torch.no_grad():
        ref = tv.layer4(tv.layer3(tv.layer2(tv.layer1(tv.maxpool(tv.relu(tv.bn1(tv.conv1(x))))))))
        torch.testing.assert_close(ours(x), ref, rtol=0, atol=0)
