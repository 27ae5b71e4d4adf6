"""DefaultPredictor and FeatureExtractor give the evaluation's features, whatever the input type."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.engine import DefaultPredictor
from fastreid.inference import FeatureExtractor, NoImagesError, list_image_files
from fastreid.utils.errors import CheckpointError


class _Capture:
    """An evaluator that keeps the features and paths it is given."""

    def reset(self):
        self.feats, self.paths = [], []

    def process(self, inputs, outputs):
        self.feats.append(outputs.float().cpu())
        self.paths.extend(inputs["img_paths"])

    def evaluate(self):
        return {}


@pytest.mark.parametrize("flip", [False, True])
def test_extractor_equals_inference_on_dataset(synthetic_market_root, tiny_model_files, monkeypatch, flip):
    from fastreid.config import get_cfg
    from fastreid.data.build import build_reid_test_loader
    from fastreid.evaluation import inference_on_dataset
    from fastreid.modeling import build_model
    from fastreid.modeling.compile import optimize_for_inference
    from fastreid.utils.checkpoint import Checkpointer
    from fastreid.utils.precision import precision_of_cfg

    monkeypatch.setenv("FASTREID_DATASETS", synthetic_market_root)
    config_file, weights = tiny_model_files
    cfg = get_cfg()
    cfg.merge_from_file(config_file)
    model = build_model(cfg, log_summary=False)
    Checkpointer(model).load(weights)
    loader, _ = build_reid_test_loader(cfg, dataset_name="Market1501")
    capture = _Capture()
    # as DefaultTrainer.test runs it: the precision decision, the folded inference copy
    precision = precision_of_cfg(cfg)
    runner = optimize_for_inference(model.eval(), precision)
    inference_on_dataset(runner, loader, capture, flip_test=flip, precision=precision)
    expected = torch.cat(capture.feats)

    extractor = FeatureExtractor(
        config_file=config_file,
        weights=weights,
        device="cpu",
        opts=["TEST.FLIP.ENABLED", flip, "TEST.IMS_PER_BATCH", 7],
    )
    got = extractor(capture.paths)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # the predictor alone, on the evaluation's own batches
    predictor = DefaultPredictor(extractor.cfg)
    batch = next(iter(build_reid_test_loader(cfg, dataset_name="Market1501")[0]))
    if not flip:
        torch.testing.assert_close(
            predictor(batch["images"]), expected[: len(batch["images"])], atol=1e-5, rtol=1e-5
        )


def _picture(seed: int, h: int = 90, w: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_every_input_type_gives_the_same_features(tmp_path, tiny_model_files):
    config_file, weights = tiny_model_files
    extractor = FeatureExtractor(config_file=config_file, weights=weights, device="cpu", batch_size=2)
    arrays = [_picture(i) for i in range(3)]
    paths = []
    for i, arr in enumerate(arrays):
        paths.append(str(tmp_path / f"img{i}.png"))  # lossless: the same pixels come back
        Image.fromarray(arr).save(paths[-1])
    reference = extractor(paths)
    assert reference.shape == (3, 512)
    tensors = [torch.from_numpy(a).permute(2, 0, 1).contiguous() for a in arrays]
    variants = {
        "PIL": [Image.fromarray(a) for a in arrays],
        "numpy": arrays,
        "numpy BGR": ([a[:, :, ::-1] for a in arrays], True),
        "uint8 tensor": tensors,
        "float tensor": [t.float() for t in tensors],
        "stacked tensor": torch.stack(tensors),
        "stacked array": np.stack(arrays),
        "mixed": [paths[0], Image.fromarray(arrays[1]), arrays[2]],
        "pathlib": [tmp_path / "img0.png", tmp_path / "img1.png", tmp_path / "img2.png"],
    }
    for name, value in variants.items():
        inputs, bgr = value if isinstance(value, tuple) else (value, False)
        torch.testing.assert_close(extractor(inputs, bgr=bgr), reference, atol=1e-5, rtol=1e-5, msg=name)
    one = extractor(arrays[1])
    torch.testing.assert_close(one, reference[1:2], atol=1e-5, rtol=1e-5)
    normed = extractor(paths, normalize=True)
    torch.testing.assert_close(normed.norm(dim=1), torch.ones(3))


def test_bgr_flag_matters(tiny_model_files):
    config_file, weights = tiny_model_files
    extractor = FeatureExtractor(config_file=config_file, weights=weights, device="cpu")
    rgb = _picture(7)
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    torch.testing.assert_close(extractor(bgr, bgr=True), extractor(rgb))
    assert not torch.allclose(extractor(bgr), extractor(rgb), atol=1e-4)


def test_test_transform_accepts_numpy_and_pil(tiny_model_files):
    from fastreid.config import get_cfg
    from fastreid.data.transforms import build_transforms

    cfg = get_cfg()
    cfg.merge_from_file(tiny_model_files[0])
    transform = build_transforms(cfg, is_train=False)
    arr = _picture(3)
    out_np = transform(arr)
    out_pil = transform(Image.fromarray(arr))
    assert out_np.dtype == torch.uint8 and tuple(out_np.shape) == (3, 64, 32)
    assert torch.equal(out_np, out_pil)
    assert tuple(transform(arr[:, :, 0]).shape) == (3, 64, 32)  # grey


def test_predictor_is_upstream_shaped(tiny_model_files):
    from fastreid.config import get_cfg

    config_file, weights = tiny_model_files
    cfg = get_cfg()
    cfg.merge_from_file(config_file)
    cfg.MODEL.WEIGHTS = weights
    cfg.MODEL.HEADS.NUM_CLASSES = 0  # a model-zoo config: the classifier size comes from the weights
    predictor = DefaultPredictor(cfg)
    assert not predictor.model.training
    assert predictor.cfg.MODEL.BACKBONE.PRETRAIN is False
    out = predictor(torch.randint(0, 256, (2, 3, 64, 32), dtype=torch.uint8))
    assert out.shape == (2, 512) and out.dtype == torch.float32 and out.device.type == "cpu"
    state = torch.load(weights, weights_only=True)["model"]
    torch.testing.assert_close(predictor.model.state_dict()["heads.weight"], state["heads.weight"])


def test_missing_weights_file_is_a_user_error(tmp_path, tiny_model_files):
    with pytest.raises(CheckpointError, match="no such file"):
        FeatureExtractor(config_file=tiny_model_files[0], weights=str(tmp_path / "nope.pth"), device="cpu")


def test_list_image_files(tmp_path):
    (tmp_path / "b").mkdir()
    for name in ("b/2.jpg", "a.png", "c.txt.jpg", "notes.md"):
        (tmp_path / name).write_bytes(b"x")
    folder = list_image_files(str(tmp_path))
    assert [os.path.relpath(p, tmp_path) for p in folder] == [
        "a.png",
        "c.txt.jpg",
        os.path.join("b", "2.jpg"),
    ]
    assert list_image_files(str(tmp_path / "*.png")) == [str(tmp_path / "a.png")]
    listing = tmp_path / "list.txt"
    listing.write_text("# images\nb/2.jpg\n\na.png\n")
    assert list_image_files(str(listing)) == [str(tmp_path / "b/2.jpg"), str(tmp_path / "a.png")]
    with pytest.raises(NoImagesError):
        list_image_files(str(tmp_path / "missing"))
    with pytest.raises(NoImagesError):
        list_image_files(str(tmp_path / "*.bmp"))


def test_features_of_loader_is_the_evaluation_pass(synthetic_market_root, tiny_model_files, monkeypatch):
    """tools/demo.py and tools/visualize_result.py draw pictures from these features."""
    from fastreid.config import get_cfg
    from fastreid.data.build import build_reid_test_loader
    from fastreid.evaluation import inference_on_dataset
    from fastreid.inference.extractor import features_of_loader
    from fastreid.modeling import build_model
    from fastreid.utils.checkpoint import Checkpointer

    monkeypatch.setenv("FASTREID_DATASETS", synthetic_market_root)
    cfg = get_cfg()
    cfg.merge_from_file(tiny_model_files[0])
    model = build_model(cfg, log_summary=False)
    Checkpointer(model).load(tiny_model_files[1])
    model.train()
    feats, pids, camids, paths = features_of_loader(
        model, build_reid_test_loader(cfg, "Market1501")[0], flip=True
    )
    assert model.training  # the caller's mode comes back
    capture = _Capture()
    inference_on_dataset(model, build_reid_test_loader(cfg, "Market1501")[0], capture, flip_test=True)
    torch.testing.assert_close(feats, torch.cat(capture.feats))
    assert paths == capture.paths and len(pids) == len(camids) == len(paths)


def test_upstream_demo_entry_points(tmp_path, tiny_model_files, monkeypatch):
    """demo/demo.py writes one L2-normalised 1 x D .npy per image (upstream's output);
    demo/predictor.py's FeatureExtractionDemo takes OpenCV (BGR) images."""
    import importlib
    import sys

    from fastreid.config import get_cfg

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.syspath_prepend(os.path.join(repo, "demo"))
    demo, predictor = importlib.import_module("demo"), importlib.import_module("predictor")
    monkeypatch.delitem(sys.modules, "demo")
    monkeypatch.delitem(sys.modules, "predictor")
    config_file, weights = tiny_model_files
    rgb = _picture(11)
    Image.fromarray(rgb).save(tmp_path / "person_1.png")
    args = demo.get_parser().parse_args(
        [
            "--config-file",
            config_file,
            "--input",
            str(tmp_path / "*.png"),
            "--output",
            str(tmp_path / "out"),
            "--opts",
            "MODEL.WEIGHTS",
            weights,
        ]
    )
    assert demo.main(args) == 0
    saved = np.load(tmp_path / "out" / "person_1.npy")
    extractor = FeatureExtractor(config_file=config_file, weights=weights, device="cpu")
    expected = extractor(rgb, normalize=True).numpy()
    assert saved.shape == (1, 512)
    np.testing.assert_allclose(saved, expected, atol=1e-5)

    cfg = get_cfg()
    cfg.merge_from_file(config_file)
    cfg.MODEL.WEIGHTS = weights
    feat = predictor.FeatureExtractionDemo(cfg).run_on_image(np.ascontiguousarray(rgb[:, :, ::-1]))
    torch.testing.assert_close(feat, extractor(rgb))


def test_config_overrides_after_the_inputs(tmp_path):
    from fastreid.cli.entry import split_config_overrides

    assert split_config_overrides(
        ["crops/", "x/*.jpg", "MODEL.WEIGHTS", "m.pth", "TEST.IMS_PER_BATCH", "8"], ["A.B", "1"]
    ) == (["crops/", "x/*.jpg"], ["MODEL.WEIGHTS", "m.pth", "TEST.IMS_PER_BATCH", "8", "A.B", "1"])
    assert split_config_overrides(["crops/"], []) == (["crops/"], [])
    with pytest.raises(NoImagesError):
        list_image_files([])
