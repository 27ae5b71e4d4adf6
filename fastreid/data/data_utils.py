"""Reading images and loading batches (upstream FastReID's ``fastreid.data.data_utils``):
``read_image`` (a PIL image, as upstream's) and the fast ``read_image_tensor``; ``DataLoaderX``,
a ``torch.utils.data.DataLoader`` that carries out a loading decision; ``BackgroundGenerator``
(prefetching in a thread), the CUDA side-stream prefetcher and batch pinning.

Every decode path checks the image's width x height from its header before decoding, against a
pixel limit (default: PIL's ``Image.MAX_IMAGE_PIXELS``, about 89 million pixels; config key
``INPUT.MAX_IMAGE_PIXELS``, 0 = no limit). A small file claiming 20000x20000 pixels (a
"decompression bomb") is refused without allocating its pixels.

``DataLoaderX`` decides nothing: the decision (from the policy, ``fastreid.data.loading.rules``, or
for explicit arguments ``fastreid.data.loading.explicit``) says how many worker processes or
threads, which start method, whether to pin memory, run a background thread, check the
``__main__`` guard, apply the timeout in the main process and seed the global random generators
per sample.
"""

from __future__ import annotations

import contextlib
import io
import logging
import multiprocessing
import os
import queue
import struct
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO, Optional, cast

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

# imported here, not at the first read: importing torchvision takes seconds, and a first read that
# includes it could exceed DATALOADER.TIMEOUT in a loader thread
from torchvision.io import ImageReadMode, decode_image

from fastreid.data.loading.errors import RecordingBatchSampler, SampleLoadError, dead_workers, explain_failure
from fastreid.data.loading.explicit import explicit_decision
from fastreid.data.loading.main_guard import find_unguarded_main_call, unguarded_main_message
from fastreid.data.loading.request import LoaderDecision
from fastreid.data.loading.seeds import GlobalSeededDataset, SeededBatchSampler, mix_seed
from fastreid.data.loading.threads import ThreadLoaderIter
from fastreid.data.loading.workers import (
    WorkerInit,
    install_worker_death_guard,
    loader_next,
    pending_worker_death,
)
from fastreid.utils.errors import UserError
from fastreid.utils.threads import keep_thread_out_of_compute_pool

__all__ = [
    "DEFAULT_MAX_IMAGE_PIXELS",
    "ImageReadError",
    "ImageTooLargeError",
    "read_image",
    "read_image_tensor",
    "decode_image_bytes",
    "apply_to_tensors",
    "pin_batch",
    "BackgroundGenerator",
    "CudaPrefetcher",
    "DataLoaderX",
]

logger = logging.getLogger(__name__)

# torchvision 0.29 marks its decoders deprecated in favour of torchcodec; they remain the fastest
# JPEG path available with torchvision alone, and PIL takes over where they are missing.
warnings.filterwarnings(
    "ignore",
    message="The image decoding and encoding capabilities of TorchVision",
    category=DeprecationWarning,
)


#: PIL's own default limit (the value at import time, before any user change).
DEFAULT_MAX_IMAGE_PIXELS: int = int(Image.MAX_IMAGE_PIXELS or 89_478_485)


_READ_ERRORS = (OSError, UnidentifiedImageError, ValueError, SyntaxError, Image.DecompressionBombError)


class ImageReadError(UserError, OSError, ValueError):
    """An image file is missing, unreadable or corrupt. The message names the path."""


class ImageTooLargeError(ImageReadError):
    """An image's header claims more pixels than the limit allows (a decompression bomb?)."""


def _open_error(path: str, exc: BaseException, on_disk: bool = True) -> ImageReadError:
    """The error for ``path`` failing with ``exc``; ``on_disk`` False: ``path`` only names bytes
    already in memory (an upload), which cannot be "not found"."""
    if on_disk and (isinstance(exc, FileNotFoundError) or not os.path.exists(path)):
        return ImageReadError(f"image file not found: {path!r} (check the dataset root / FASTREID_DATASETS)")
    if isinstance(exc, Image.DecompressionBombError):
        return ImageTooLargeError(
            f"cannot read image {path!r}: {exc} (PIL's own limit, PIL.Image.MAX_IMAGE_PIXELS; raise it too)"
        )
    return ImageReadError(
        f"cannot read image {path!r}: {type(exc).__name__}: {exc} (corrupt or not an image?)"
    )


def _limit(max_pixels: int | None) -> int:
    if max_pixels is None:
        return DEFAULT_MAX_IMAGE_PIXELS
    if int(max_pixels) < 0:
        raise ValueError(
            f"INPUT.MAX_IMAGE_PIXELS: expected a pixel count >= 0 (0 = no limit), got {max_pixels}"
        )
    return int(max_pixels)


def _check_size(path: str, image: Image.Image, max_pixels: int) -> None:
    """Refuse ``image`` (opened lazily: only its header is read) when it is too large."""
    width, height = image.size
    if max_pixels > 0 and width * height > max_pixels:
        _refuse(path, width, height, max_pixels)


def _refuse(path: str, width: int, height: int, max_pixels: int) -> None:
    raise ImageTooLargeError(
        f"image {path!r} is {width}x{height} = {width * height:,} pixels, more than the limit of "
        f"{max_pixels:,} (a decompression bomb?); raise INPUT.MAX_IMAGE_PIXELS (0 = no limit) to read it"
    )


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the image size
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


_JPEG_NO_LENGTH = frozenset({0x01, *range(0xD0, 0xD9)})


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    """(width, height) from the first start-of-frame segment; None when the markers do not parse."""
    i, n = 2, len(raw)
    while i + 4 <= n:
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _JPEG_NO_LENGTH:
            i += 2
            continue
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            height, width = struct.unpack_from(">HH", raw, i + 5)
            return width, height
        i += 2 + struct.unpack_from(">H", raw, i + 2)[0]
    return None


def _fast_header(raw: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) of a PNG or JPEG read from its first bytes without PIL (whose JPEG
    header parsing costs about half a decode); None for other formats or unparsable headers."""
    if raw.startswith(_PNG_SIGNATURE) and raw[12:16] == b"IHDR" and len(raw) >= 24:
        width, height = struct.unpack_from(">II", raw, 16)
        return "PNG", width, height
    if raw.startswith(b"\xff\xd8"):
        size = _jpeg_size(raw)
        if size is not None:
            return "JPEG", *size
    return None


def _claimed_size(source: BinaryIO) -> tuple[int, int] | None:
    """The size in an image header, read by PIL's format plugins directly (``Image.open`` refuses
    to return images beyond twice PIL's limit, so their size is read here for the message)."""
    Image.init()
    source.seek(0)
    prefix = source.read(16)
    for name in Image.ID:
        factory, accept = Image.OPEN[name]
        if accept is not None and not accept(prefix):
            continue
        source.seek(0)
        try:
            return factory(source, "").size
        except Exception:  # not this format; PIL's own open tries the next plugin the same way
            continue
    return None


@contextlib.contextmanager
def _opened(source: BinaryIO, path: str, max_pixels: int):
    """PIL's lazy open (header only), size-checked. PIL's warning for images between its limit
    and twice its limit is silenced: the check above is the one that applies."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(source)
    except Image.DecompressionBombError:
        size = _claimed_size(source)
        if size is None or max_pixels <= 0 or size[0] * size[1] <= max_pixels:
            raise
        _refuse(path, *size, max_pixels)
    try:
        _check_size(path, image, max_pixels)
        yield image
    finally:
        image.close()


def _pil_decode(source: str | BinaryIO, path: str, mode: str | None, max_pixels: int) -> Image.Image:
    """Decode ``source`` (the file ``path``, or its bytes) with PIL after the size check; EXIF
    orientation applied; ``mode`` None keeps the colour mode."""
    try:
        with contextlib.ExitStack() as stack:
            f = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
            image = stack.enter_context(_opened(f, path, max_pixels))
            image.load()
            # a broken EXIF block must not make a good image unreadable
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert(mode) if mode is not None else image.copy()
    except ImageReadError:
        raise
    except _READ_ERRORS as exc:
        raise _open_error(path, exc, on_disk=isinstance(source, str)) from exc


def read_image(file_name: str, format: str | None = None, *, max_pixels: int | None = None) -> Image.Image:
    """Read an image as a PIL image, like upstream FastReID's ``read_image``.

    EXIF orientation is applied. ``format`` may be "RGB" (grayscale, palette and RGBA images become
    RGB), "BGR" (an RGB-mode image whose channels are in B, G, R order, as upstream), "L", or any
    PIL mode; ``None`` (upstream's default) keeps the file's colour mode. ``max_pixels``: the
    pixel limit (None: PIL's default; 0: no limit).
    """
    path = os.fspath(file_name)
    if format in ("RGB", "BGR"):
        image = _pil_decode(path, path, "RGB", _limit(max_pixels))
        if format == "BGR":
            image = Image.fromarray(np.ascontiguousarray(np.asarray(image)[:, :, ::-1]))
        return image
    return _pil_decode(path, path, format, _limit(max_pixels))


def read_image_tensor(file_name: str, *, max_pixels: int | None = None) -> torch.Tensor:
    """Read an image as a ``torch.uint8`` tensor 3xHxW in RGB order (the fast path).

    The size is checked from the header first (``max_pixels``: None is PIL's default, 0 no
    limit; PNG and JPEG headers are read here, other formats' by PIL). JPEG, PNG, WEBP and GIF are then decoded by torchvision (libjpeg-turbo for JPEG) with
    EXIF orientation applied; other formats (BMP, TIFF, ...) go through PIL.
    """
    path = os.fspath(file_name)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise _open_error(path, exc) from exc
    return decode_image_bytes(raw, path, max_pixels=max_pixels)


def decode_image_bytes(raw: bytes, name: str = "<bytes>", *, max_pixels: int | None = None) -> torch.Tensor:
    """:func:`read_image_tensor` on an image already in memory (an upload): the same size check
    before decoding, the same decoders, :class:`ImageReadError` / :class:`ImageTooLargeError`
    naming ``name``. Nothing is written anywhere."""
    path = name
    limit = _limit(max_pixels)
    if not raw:
        raise ImageReadError(f"cannot read image {path!r}: the file is empty")
    header = _fast_header(raw)
    if header is not None:
        _, width, height = header
        if limit > 0 and width * height > limit:
            _refuse(path, width, height, limit)
        fast = True
    else:
        try:
            with _opened(io.BytesIO(raw), path, limit) as image:
                fast = image.format in ("WEBP", "GIF")
        except ImageReadError:
            raise
        except _READ_ERRORS as exc:
            raise _open_error(path, exc, on_disk=False) from exc
    if fast:
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        try:
            return decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=True)
        except (RuntimeError, ValueError):
            pass  # a corrupt file, for which PIL gives the error message
    image = _pil_decode(io.BytesIO(raw), path, "RGB", limit)
    return torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1).contiguous()


# --------------------------------------------------------------------------------------------
# Nested batches
# --------------------------------------------------------------------------------------------
def apply_to_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Apply ``fn`` to every tensor inside nested dicts, lists and tuples (named tuples kept);
    other values pass through unchanged."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        items = {key: apply_to_tensors(value, fn) for key, value in obj.items()}
        try:
            return cast(Any, type(obj))(items)  # the mapping's own class, when it takes a dict
        except TypeError:
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(apply_to_tensors(value, fn) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(apply_to_tensors(value, fn) for value in obj)
    return obj


def pin_batch(batch: Any) -> Any:
    return apply_to_tensors(batch, lambda t: t.pin_memory())


# --------------------------------------------------------------------------------------------
# BackgroundGenerator
# --------------------------------------------------------------------------------------------
_ITEM, _END, _ERROR = 0, 1, 2


def _put(q: queue.Queue, entry: tuple, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(entry, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(source: Iterator, q: queue.Queue, stop: threading.Event) -> None:
    # A plain function (not a method): the thread must not keep the BackgroundGenerator alive,
    # so that dropping the generator (a `break`) lets garbage collection stop the thread.
    keep_thread_out_of_compute_pool()  # it loads while the model computes
    try:
        for item in source:
            if not _put(q, (_ITEM, item), stop):
                return
        _put(q, (_END, None), stop)
    except BaseException as exc:
        _put(q, (_ERROR, exc), stop)
    finally:
        close = getattr(source, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


class BackgroundGenerator(Iterator):
    """Prefetch items of an iterator in a daemon thread into a bounded queue.

    The thread never touches CUDA (it only runs the source iterator). An exception raised by the
    source is re-raised by ``next()`` in the consumer; :meth:`close` (also run when the generator
    is exhausted or garbage collected, e.g. after ``break``) stops and joins the thread, and closes
    the source when it has a ``close()`` method. ``local_rank`` is upstream's argument (its thread
    set the CUDA device; this one never needs to) and is accepted for its callers.
    """

    def __init__(
        self,
        generator: Iterable,
        local_rank: Optional[int] = None,
        max_prefetch: int = 10,
        name: str = "fastreid-background-loader",
    ):
        source = generator
        if max_prefetch < 1:
            raise ValueError(f"BackgroundGenerator: max_prefetch must be >= 1, got {max_prefetch}")
        self._queue: queue.Queue = queue.Queue(max_prefetch)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=_produce, args=(iter(source), self._queue, self._stop), name=name, daemon=True
        )
        self._thread.start()

    def __iter__(self) -> BackgroundGenerator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        while True:
            try:
                kind, value = self._queue.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.close()
                    raise RuntimeError(
                        "BackgroundGenerator: the loader thread ended without a result"
                    ) from None
        if kind == _ITEM:
            return value
        self.close()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread and wait for it (it finishes the item it is producing); idempotent."""
        self._done = True
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is None or thread is threading.current_thread():
            return
        while thread.is_alive():
            with contextlib.suppress(queue.Empty):  # free queued batches so that the producer is not blocked
                while True:
                    self._queue.get_nowait()
            thread.join(timeout=0.05)
            timeout -= 0.05
            if timeout <= 0:
                logger.warning("BackgroundGenerator: the loader thread did not stop; leaving it (daemon)")
                break
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()

    def __enter__(self) -> BackgroundGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


# --------------------------------------------------------------------------------------------
# CUDA side-stream prefetch
# --------------------------------------------------------------------------------------------
class CudaPrefetcher(Iterator):
    """Copy the next batch to ``device`` on a side stream while the current one is used.

    Tensors come from pinned memory and are copied with ``non_blocking=True``; before a batch is
    handed out, the consumer's stream waits for the copy stream and every tensor is marked with
    ``record_stream`` so that the caching allocator does not reuse its memory too early.
    """

    def __init__(self, source: Iterable, device: torch.device):
        self._source = iter(source)
        self._device = device
        self._stream = torch.cuda.Stream(device=device)
        self._next: Any = None
        self._has_next = False
        self._preload()

    def _preload(self) -> None:
        try:
            batch = next(self._source)
        except StopIteration:
            self._has_next = False
            self._next = None
            return
        with torch.cuda.stream(self._stream):
            self._next = apply_to_tensors(batch, lambda t: t.to(self._device, non_blocking=True))
        self._has_next = True

    def __iter__(self) -> CudaPrefetcher:
        return self

    def __next__(self) -> Any:
        if not self._has_next:
            raise StopIteration
        current = torch.cuda.current_stream(self._device)
        current.wait_stream(self._stream)
        batch = self._next

        def _record(t: torch.Tensor) -> torch.Tensor:
            if t.is_cuda:
                t.record_stream(current)
            return t

        apply_to_tensors(batch, _record)
        self._preload()
        return batch

    def close(self) -> None:
        self._has_next = False
        self._next = None
        close = getattr(self._source, "close", None)
        if callable(close):
            close()


class DataLoaderX(DataLoader):
    """``torch.utils.data.DataLoader`` with a target device, guarded against platform trouble.

    Extra arguments (keyword only):

    - ``device``: where batches go. Only when it is a CUDA device and CUDA is available are
      batches copied ahead on a side stream (from pinned memory, ``non_blocking``, with
      ``record_stream``); otherwise batches are returned as loaded: no stream, no copy.
    - ``background``: prefetch batches in a :class:`BackgroundGenerator` thread: True, False or
      "auto" (on with zero worker processes and zero threads feeding a CUDA model).
    - ``num_threads``: load samples with this many threads of the main process instead of worker
      processes (requires ``num_workers=0``), see ``fastreid.data.loading.threads``.
    - ``seed``, ``rank``, ``start_batch``: the batch sampler is wrapped in
      :class:`SeededBatchSampler` so that each sample has its own seed (same batches whatever
      loads them): a dataset with ``accepts_sample_keys = True`` receives it; for any other
      dataset, when ``seed`` is given, the global random generators are seeded from it before
      each sample (not with thread workers). ``seed`` also seeds the loader's generator
      (shuffling, worker seeds); ``seed=None`` draws one from torch's global generator.
    - ``decision``: a :class:`LoaderDecision` from the policy; it replaces ``num_workers``,
      ``num_threads``, ``pin_memory``, ``timeout``, ``multiprocessing_context``,
      ``prefetch_factor``, ``persistent_workers`` and ``background``.

    Upstream FastReID's call ``DataLoaderX(local_rank, dataset=..., ...)`` works: the rank names
    the CUDA device batches go to.

    Worker processes run :class:`WorkerInit`. An error in a worker, a worker that dies and a
    timeout (``timeout`` > 0, in every loading mode) end the iteration with
    :class:`SampleLoadError` naming the batch, the samples and their files. ``shutdown()`` stops
    background threads and persistent workers and may be called any number of times.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        if args and isinstance(args[0], int) and not isinstance(args[0], bool) and "dataset" in kwargs:
            local_rank, args = args[0], args[1:]  # upstream: DataLoaderX(local_rank, dataset=..., ...)
            kwargs.setdefault("device", f"cuda:{local_rank}")
            kwargs.setdefault("rank", 0)
        self._setup(*args, **kwargs)

    def _setup(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        device: str | torch.device | None = None,
        background: bool | str = "auto",
        num_threads: int = 0,
        seed: int | None = None,
        rank: int = 0,
        start_batch: int = 0,
        decision: LoaderDecision | None = None,
        **kwargs: Any,
    ) -> None:
        if decision is None:
            decision = explicit_decision(
                dataset=dataset,
                num_workers=num_workers,
                num_threads=num_threads,
                multiprocessing_context=multiprocessing_context,
                pin_memory=pin_memory,
                persistent_workers=persistent_workers,
                prefetch_factor=prefetch_factor,
                background=background,
                timeout=timeout,
                device=device,
                seeded=seed is not None,
            )
        keyed = bool(getattr(dataset, "accepts_sample_keys", False))
        auto_batching = not isinstance(dataset, IterableDataset) and (
            batch_sampler is not None or batch_size is not None
        )
        if decision.num_threads > 0 and not auto_batching:
            raise ValueError(
                "DataLoaderX: thread workers need a map-style dataset loaded in batches "
                "(batch_size or batch_sampler); use num_threads=0 here"
            )
        global_rngs = decision.seed_global_rngs and auto_batching and not keyed
        user_generator = generator
        if seed is None and (keyed or generator is None):
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        if generator is None:
            assert seed is not None  # drawn just above when no generator was given
            generator = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6C6F61646572))
        if auto_batching:
            if batch_sampler is None:
                batch_sampler = _batch_sampler(
                    dataset, batch_size, shuffle, sampler, drop_last, user_generator, seed, rank
                )
                batch_size, shuffle, sampler, drop_last = 1, None, None, False
            if keyed or global_rngs:
                assert seed is not None, "seeding the global RNGs needs a seed or no generator"
                batch_sampler = SeededBatchSampler(batch_sampler, seed, rank=rank, start_batch=start_batch)
            batch_sampler = RecordingBatchSampler(batch_sampler, keep=256)
        if global_rngs:
            dataset = GlobalSeededDataset(dataset)

        workers = decision.num_workers
        with_processes = workers > 0
        timed_main = decision.main_process_timeout and auto_batching
        super().__init__(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=workers,
            collate_fn=collate_fn,
            pin_memory=decision.pin_memory and decision.num_threads == 0 and not timed_main,
            drop_last=drop_last,
            timeout=decision.timeout if with_processes else 0,
            worker_init_fn=WorkerInit(worker_init_fn) if with_processes else worker_init_fn,
            multiprocessing_context=decision.mp_context if with_processes else None,
            generator=generator,
            prefetch_factor=decision.prefetch_factor if with_processes else None,
            persistent_workers=decision.persistent_workers and with_processes,
            **kwargs,
        )
        self.decision = decision
        self.device = torch.device(device) if device is not None else None
        self.num_threads = decision.num_threads
        self.seed = seed
        self.keyed = (keyed or global_rngs) and auto_batching
        self.background = decision.background
        self._timed_main = timed_main
        self._pipelines: weakref.WeakSet = weakref.WeakSet()

    # -- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator:  # type: ignore[override]  # our pipeline, not torch's iterator class
        if self.persistent_workers:
            self._close_pipelines()  # they share torch's persistent iterator with the new epoch
        if self.decision.main_guard:
            where = find_unguarded_main_call()
            if where is not None:
                context = self.multiprocessing_context
                method = (
                    context.get_start_method() if context is not None else multiprocessing.get_start_method()
                )
                raise RuntimeError(unguarded_main_message(where, method, fallback=None))
        pipeline: Iterator = self._batches()
        if self.background:
            pipeline = BackgroundGenerator(pipeline, max_prefetch=max(2, self.prefetch_factor or 2))
        if self.decision.cuda_prefetch:
            assert self.device is not None  # decided only for a CUDA device
            pipeline = CudaPrefetcher(pipeline, self.device)
        self._pipelines.add(pipeline)
        return pipeline

    def _base_iterator(self) -> Iterator:
        pin = pin_batch if self.decision.pin_memory else None
        if self.num_threads > 0 or self._timed_main:
            assert self.batch_sampler is not None  # both need batches (checked in __init__)
            return ThreadLoaderIter(
                self.dataset,
                self.batch_sampler,
                self.collate_fn,
                max(1, self.num_threads),
                max_batches_in_flight=self.decision.thread_prefetch,
                timeout=self.decision.timeout,
                post_process=pin,
                ahead=self.num_threads > 0,
            )
        if isinstance(self.worker_init_fn, WorkerInit):
            self.worker_init_fn.started_by_main_thread = threading.current_thread() is threading.main_thread()
        base = super().__iter__()
        if self.num_workers > 0:
            install_worker_death_guard()
        return base

    def _batches(self) -> Iterator:
        base = self._base_iterator()
        delivered = 0
        failed = timed_out = False
        try:
            while True:
                try:
                    death = pending_worker_death()
                    if death is not None and dead_workers(base):
                        raise death
                    with loader_next():
                        batch = next(base)
                except StopIteration:
                    return
                except SampleLoadError:
                    failed = True
                    raise
                except Exception as exc:
                    failed = True
                    error = explain_failure(
                        exc, self.dataset, base, self._sent_batches(), delivered, self.decision.timeout
                    )
                    timed_out = "DATALOADER.TIMEOUT" in str(error)
                    raise error from exc
                delivered += 1
                yield batch
        finally:
            if timed_out:  # a worker stuck in a read would hold torch's graceful shutdown for seconds
                _terminate_workers(base)
            if isinstance(base, ThreadLoaderIter):
                base.close()
            elif base is getattr(self, "_iterator", None):
                if failed:  # a persistent iterator after an error cannot be reset safely
                    self._drop_persistent_iterator()
            else:
                shutdown = getattr(base, "_shutdown_workers", None)
                if callable(shutdown):
                    shutdown()

    def _sent_batches(self) -> dict[int, list]:
        sampler = self.batch_sampler
        return sampler.sent if isinstance(sampler, RecordingBatchSampler) else {}

    # -- shutdown ----------------------------------------------------------------------------
    def _close_pipelines(self) -> None:
        for pipeline in list(self._pipelines):
            close = getattr(pipeline, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
        self._pipelines = weakref.WeakSet()

    def _drop_persistent_iterator(self) -> None:
        iterator = getattr(self, "_iterator", None)
        self._iterator = None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if callable(shutdown):
            with contextlib.suppress(Exception):
                shutdown()

    def shutdown(self) -> None:
        """Stop background threads, thread workers and persistent worker processes; idempotent.
        The loader can be iterated again afterwards (workers are started anew)."""
        self._close_pipelines()
        self._drop_persistent_iterator()


def _terminate_workers(base: Any) -> None:
    for worker in getattr(base, "_workers", None) or []:
        with contextlib.suppress(Exception):
            if worker.is_alive():
                worker.terminate()


def _batch_sampler(
    dataset: Any,
    batch_size: int | None,
    shuffle: bool | None,
    sampler: Any,
    drop_last: bool,
    user_generator: torch.Generator | None,
    seed: int | None,
    rank: int,
) -> BatchSampler:
    if sampler is None and shuffle:
        # its own generator: torch draws worker seeds from the loader's generator a different
        # number of times per mode, and the order of the samples must not depend on that
        order = user_generator
        if order is None:
            assert seed is not None  # the loader draws one when no generator was given
            order = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6F72646572))
        sampler = RandomSampler(dataset, generator=order)
    elif sampler is None:
        sampler = SequentialSampler(dataset)
    elif shuffle:
        raise ValueError("DataLoaderX: sampler option is mutually exclusive with shuffle")
    assert batch_size is not None  # automatic batching without a batch sampler means a batch size
    return BatchSampler(sampler, batch_size, drop_last)
