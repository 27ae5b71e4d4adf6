"""read_image / read_image_tensor, BackgroundGenerator, DataLoaderX basics (CPU)."""

from __future__ import annotations

import collections
import gc
import itertools
import threading
import time

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import BatchSampler, Sampler, SequentialSampler

from fastreid.data.data_utils import (
    BackgroundGenerator,
    DataLoaderX,
    ImageReadError,
    apply_to_tensors,
    decode_image_bytes,
    read_image,
    read_image_tensor,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:The image decoding and encoding capabilities:DeprecationWarning"
)


def _pixels(h: int = 24, w: int = 10) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    a = _pixels()
    paths = {}
    exif_image = Image.fromarray(a)
    exif = exif_image.getexif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to display
    paths["exif_jpg"] = root / "exif.jpg"
    exif_image.save(paths["exif_jpg"], exif=exif.tobytes(), quality=95)
    paths["jpg"] = root / "plain.jpg"
    Image.fromarray(a).save(paths["jpg"], quality=95)
    paths["gray_png"] = root / "gray.png"
    Image.fromarray(a[:, :, 0]).save(paths["gray_png"])
    paths["rgba_png"] = root / "rgba.png"
    Image.fromarray(np.dstack([a, np.full(a.shape[:2], 7, np.uint8)])).save(paths["rgba_png"])
    paths["bmp"] = root / "plain.bmp"
    Image.fromarray(a).save(paths["bmp"])
    paths["not_image"] = root / "text.jpg"
    paths["not_image"].write_bytes(b"this is not an image" * 10)
    paths["truncated"] = root / "truncated.jpg"
    data = paths["jpg"].read_bytes()
    paths["truncated"].write_bytes(data[: len(data) // 2])
    paths["empty"] = root / "empty.jpg"
    paths["empty"].write_bytes(b"")
    return {k: str(v) for k, v in paths.items()}, a


@pytest.mark.parametrize("name", ["exif_jpg", "jpg", "gray_png", "rgba_png", "bmp"])
def test_tensor_and_pil_paths_agree(images, name):
    paths, _ = images
    tensor = read_image_tensor(paths[name])
    pil = read_image(paths[name], "RGB")
    assert tensor.dtype == torch.uint8 and tensor.shape[0] == 3
    assert pil.mode == "RGB"
    assert tensor.shape[1:] == (pil.size[1], pil.size[0])
    assert np.array_equal(tensor.permute(1, 2, 0).numpy(), np.asarray(pil))


def test_read_image_keeps_the_colour_mode_by_default_as_upstream(images):
    paths, _ = images
    assert read_image(paths["gray_png"]).mode == "L" and read_image(paths["rgba_png"]).mode == "RGBA"
    assert read_image(paths["jpg"], "BGR").mode == "RGB"


def test_exif_orientation_applied(images):
    paths, a = images
    assert read_image_tensor(paths["exif_jpg"]).shape == (3, a.shape[1], a.shape[0])
    assert read_image(paths["exif_jpg"]).size == (a.shape[0], a.shape[1])  # PIL size is (w, h)


def test_lossless_formats_keep_pixels(images):
    paths, a = images
    assert np.array_equal(read_image_tensor(paths["bmp"]).permute(1, 2, 0).numpy(), a)
    gray = read_image_tensor(paths["gray_png"])
    assert torch.equal(gray[0], gray[1]) and torch.equal(gray[0], torch.from_numpy(a[:, :, 0]))
    assert np.array_equal(read_image_tensor(paths["rgba_png"]).permute(1, 2, 0).numpy(), a)


def test_bgr_and_other_formats(images):
    paths, a = images
    bgr = np.asarray(read_image(paths["bmp"], "BGR"))
    assert np.array_equal(bgr, a[:, :, ::-1])
    assert read_image(paths["bmp"], "L").mode == "L"


@pytest.mark.parametrize("name", ["not_image", "truncated", "empty", "missing"])
@pytest.mark.parametrize("reader", [read_image, read_image_tensor])
def test_bad_files_name_the_path(images, name, reader, tmp_path):
    paths, _ = images
    path = paths.get(name, str(tmp_path / "missing.jpg"))
    with pytest.raises(ImageReadError) as info:
        reader(path)
    assert path in str(info.value)
    assert isinstance(info.value, OSError) and isinstance(info.value, ValueError)
    if name == "missing":
        assert "not found" in str(info.value)


@pytest.mark.parametrize("name", ["exif_jpg", "gray_png", "bmp"])
def test_decode_image_bytes_is_read_image_tensor_in_memory(images, name):
    paths, _ = images
    with open(paths[name], "rb") as f:
        raw = f.read()
    assert torch.equal(decode_image_bytes(raw, "the upload"), read_image_tensor(paths[name]))


@pytest.mark.parametrize("name", ["not_image", "truncated"])
def test_bad_bytes_are_unreadable_not_missing(images, name):
    # the name of bytes in memory is no file: their error must not say "not found"
    paths, _ = images
    with open(paths[name], "rb") as f:
        raw = f.read()
    with pytest.raises(ImageReadError) as info:
        decode_image_bytes(raw, "the upload")
    assert "'the upload'" in str(info.value) and "not found" not in str(info.value)


# ---------------------------------------------------------------------------------------------
def _threads(prefix: str, before: frozenset = frozenset()) -> list[threading.Thread]:
    return [
        t for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive() and t not in before
    ]


def _wait_no_threads(
    prefix: str, seconds: float = 5.0, before: frozenset = frozenset()
) -> list[threading.Thread]:
    """The threads named ``prefix...`` still alive after ``seconds``, those in ``before`` left out
    (alive before the test: another test's session server in this worker is not this loader's)."""
    deadline = time.monotonic() + seconds
    while _threads(prefix, before) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    return _threads(prefix, before)


def test_background_generator_order_and_end():
    with BackgroundGenerator(range(50), max_prefetch=3) as bg:
        assert list(bg) == list(range(50))
    assert not _wait_no_threads("fastreid-background-loader")


def test_background_generator_reraises_producer_error():
    def source():
        yield 1
        raise KeyError("boom in producer")

    bg = BackgroundGenerator(source())
    assert next(bg) == 1
    with pytest.raises(KeyError, match="boom in producer"):
        next(bg)
    with pytest.raises(StopIteration):
        next(bg)
    bg.close()
    bg.close()  # idempotent


def test_background_generator_break_and_gc_leave_no_thread():
    closed = []

    def endless():
        try:
            yield from itertools.count()
        finally:
            closed.append(True)

    for i in BackgroundGenerator(endless(), max_prefetch=2):
        if i == 3:
            break
    assert not _wait_no_threads("fastreid-background-loader")
    assert closed == [True]  # the source was closed too


def test_background_generator_never_touches_cuda(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("CUDA touched")

    monkeypatch.setattr(torch.cuda, "set_device", forbidden)
    monkeypatch.setattr(torch.cuda, "current_device", forbidden)
    assert list(BackgroundGenerator(iter(range(5)))) == list(range(5))


def test_apply_to_tensors_nested():
    Pair = collections.namedtuple("Pair", "a b")
    batch = {
        "x": torch.ones(2),
        "y": [torch.zeros(1), ("s", torch.ones(1))],
        "p": Pair(torch.ones(1), 3),
        "n": 5,
    }
    out = apply_to_tensors(batch, lambda t: t + 1)
    assert torch.equal(out["x"], torch.full((2,), 2.0))
    assert torch.equal(out["y"][0], torch.ones(1)) and out["y"][1][0] == "s"
    assert isinstance(out["p"], Pair) and out["p"].b == 3 and out["n"] == 5


# ---------------------------------------------------------------------------------------------
class _Squares:
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i):
        return torch.tensor([i * i])


class _InfiniteBatches(Sampler):
    def __init__(self, n: int, batch_size: int):
        self.n, self.batch_size = n, batch_size

    def __iter__(self):
        for start in itertools.count(0, self.batch_size):
            yield [(start + j) % self.n for j in range(self.batch_size)]


def test_cpu_batches_are_not_copied():
    made = []

    def collate(samples):
        batch = {"x": torch.cat(samples)}
        made.append(batch["x"])
        return batch

    loader = DataLoaderX(_Squares(), batch_size=4, collate_fn=collate, device="cpu", background=False)
    batches = list(loader)
    assert len(batches) == len(loader) == 3
    assert all(b["x"] is m for b, m in zip(batches, made))
    assert torch.equal(torch.cat([b["x"] for b in batches]), torch.arange(10) ** 2)


def test_reiterable_len_and_idempotent_shutdown():
    loader = DataLoaderX(_Squares(), batch_size=3, drop_last=True, background=True, seed=1)
    assert len(loader) == 3
    first = [b.tolist() for b in loader]
    second = [b.tolist() for b in loader]
    assert first == second and len(first) == 3
    loader.shutdown()
    loader.shutdown()
    assert [b.tolist() for b in loader] == first
    assert not _wait_no_threads("fastreid-background-loader")


@pytest.mark.parametrize("mode", [{"background": True}, {"num_threads": 2}, {"background": False}])
def test_infinite_sampler_and_break_leave_no_thread(mode):
    before = frozenset(threading.enumerate())
    loader = DataLoaderX(_Squares(), batch_sampler=_InfiniteBatches(10, 4), **mode)
    with pytest.raises(TypeError):
        len(loader)
    taken = [b.flatten().tolist() for b in itertools.islice(loader, 7)]
    assert taken[3] == [((12 + j) % 10) ** 2 for j in range(4)]
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert not _wait_no_threads("fastreid-", before=before)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_prefetch_moves_nested_batches():
    loader = DataLoaderX(
        _Squares(),
        batch_size=4,
        collate_fn=lambda s: {"x": torch.cat(s), "meta": ["a"]},
        pin_memory=True,
        device="cuda",
    )
    batches = list(loader)
    assert all(b["x"].is_cuda and b["meta"] == ["a"] for b in batches)
    assert torch.equal(torch.cat([b["x"].cpu() for b in batches]), torch.arange(10) ** 2)


def test_batch_sampler_with_plain_indices_gets_ints():
    seen = []

    class Recording(_Squares):
        def __getitem__(self, i):
            seen.append(i)
            return super().__getitem__(i)

    list(DataLoaderX(Recording(), batch_sampler=BatchSampler(SequentialSampler(range(10)), 5, False)))
    assert seen == list(range(10)) and all(type(i) is int for i in seen)
