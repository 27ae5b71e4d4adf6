"""Image reading, the background prefetch thread and DataLoaderX (the guarded loader)."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import random
import signal
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastreid.data.loader_errors import SampleLoadError, describe_sample, describe_samples
from fastreid.data.sample_seed import SeededBatchSampler, mix_seed, sample_index
from fastreid.data.thread_loader import ThreadLoaderIter
from fastreid.utils.errors import UserError

__all__ = [
    "ImageReadError",
    "read_image",
    "read_image_tensor",
    "apply_to_tensors",
    "BackgroundGenerator",
    "CudaPrefetcher",
    "DataLoaderX",
    "SampleLoadError",
    "WorkerInit",
]

logger = logging.getLogger(__name__)

# torchvision 0.29 marks its decoders deprecated in favour of torchcodec; they remain the fastest
# JPEG path available with torchvision alone, and PIL takes over where they are missing.
warnings.filterwarnings(
    "ignore", message="The image decoding and encoding capabilities of TorchVision", category=DeprecationWarning
)


class ImageReadError(UserError, OSError, ValueError):
    """An image file is missing, unreadable or corrupt. The message names the path."""


def _open_error(path: str, exc: BaseException) -> ImageReadError:
    if isinstance(exc, FileNotFoundError) or not os.path.exists(path):
        return ImageReadError(f"image file not found: {path!r} (check the dataset root / FASTREID_DATASETS)")
    return ImageReadError(f"cannot read image {path!r}: {type(exc).__name__}: {exc} (corrupt or not an image?)")


def _pil_rgb(path: str) -> Image.Image:
    """Open ``path`` with PIL, apply EXIF orientation and return a fully decoded RGB image."""
    try:
        with open(path, "rb") as f, Image.open(f) as image:
            image.load()
            # a broken EXIF block must not make a good image unreadable
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise _open_error(path, exc) from exc


def read_image(file_name: str, format: str | None = "RGB") -> Image.Image:  # noqa: A002 (upstream name)
    """Read an image as a PIL image, like upstream FastReID's ``read_image``.

    EXIF orientation is applied; grayscale, palette and RGBA images become RGB. ``format`` may be
    "RGB" (default), "BGR" (an RGB-mode image whose channels are in B, G, R order, as upstream),
    "L", or any PIL mode; ``None`` keeps the colour mode after orientation.
    """
    path = os.fspath(file_name)
    if format in ("RGB", "BGR"):
        image = _pil_rgb(path)
        if format == "BGR":
            image = Image.fromarray(np.ascontiguousarray(np.asarray(image)[:, :, ::-1]))
        return image
    try:
        with open(path, "rb") as f, Image.open(f) as image:
            image.load()
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert(format) if format is not None else image.copy()
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise _open_error(path, exc) from exc


def read_image_tensor(file_name: str) -> torch.Tensor:
    """Read an image as a ``torch.uint8`` tensor 3xHxW in RGB order (the fast path).

    JPEG, PNG, WEBP and GIF are decoded by torchvision (libjpeg-turbo for JPEG) with EXIF
    orientation applied; other formats (BMP, TIFF, ...) go through PIL.
    """
    from torchvision.io import ImageReadMode, decode_image

    path = os.fspath(file_name)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise _open_error(path, exc) from exc
    if not raw:
        raise ImageReadError(f"cannot read image {path!r}: the file is empty")
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    try:
        return decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except (RuntimeError, ValueError):
        pass  # an unsupported format, or a corrupt file for which PIL gives the error message
    image = _pil_rgb(path)
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
            return type(obj)(items)
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
    the source when it has a ``close()`` method.
    """

    def __init__(self, source: Iterable, max_prefetch: int = 2, name: str = "fastreid-background-loader"):
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
                    raise RuntimeError("BackgroundGenerator: the loader thread ended without a result") from None
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


# --------------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------------
class WorkerInit:
    """``worker_init_fn`` of DataLoaderX worker processes: one torch thread per worker, Python,
    numpy and torch seeded from the worker's seed, then the user's ``worker_init_fn``.

    torch gives worker ``i`` the seed ``base_seed + i`` where ``base_seed`` is drawn from the
    loader's generator, which DataLoaderX seeds from its ``seed``: seeds are per worker and
    reproducible.
    """

    def __init__(self, user_fn: Callable[[int], None] | None = None):
        self.user_fn = user_fn

    def __call__(self, worker_id: int) -> None:
        try:
            from fastreid.utils.env import limit_worker_threads
        except ImportError:
            torch.set_num_threads(1)
        else:
            limit_worker_threads(1)
        seed = torch.initial_seed()
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        if self.user_fn is not None:
            self.user_fn(worker_id)


class _RecordingBatchSampler:
    """Wraps the batch sampler; remembers the batches sent in the current iteration so that an
    error can name the samples of a failed batch."""

    def __init__(self, batch_sampler: Iterable, keep: int):
        self.batch_sampler = batch_sampler
        self.sent: collections.OrderedDict[int, list] = collections.OrderedDict()
        self._keep = keep

    def __iter__(self) -> Iterator[list]:
        sent: collections.OrderedDict[int, list] = collections.OrderedDict()
        self.sent = sent
        for k, batch in enumerate(self.batch_sampler):
            sent[k] = batch
            while len(sent) > self._keep:
                sent.popitem(last=False)
            yield batch

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __getattr__(self, name: str) -> Any:
        if name in ("batch_sampler", "sent", "_keep"):
            raise AttributeError(name)
        return getattr(self.batch_sampler, name)


# --------------------------------------------------------------------------------------------
# DataLoaderX
# --------------------------------------------------------------------------------------------
_SIGNAL_HINTS = {
    "SIGKILL": " (usually the system ran out of memory: lower DATALOADER.NUM_WORKERS or the batch size)",
    "SIGBUS": " (usually /dev/shm is too small: give docker --shm-size=2g, or use DATALOADER.NUM_THREADS)",
    "SIGSEGV": " (a crash in native code, e.g. an image library)",
}


class DataLoaderX(DataLoader):
    """``torch.utils.data.DataLoader`` with a target device, guarded against platform trouble.

    Extra arguments (keyword only):

    - ``device``: where batches go. Only when it is a CUDA device and CUDA is available are
      batches copied ahead on a side stream (from pinned memory, ``non_blocking``, with
      ``record_stream``); otherwise batches are returned as loaded: no stream, no copy.
    - ``background``: prefetch batches in a :class:`BackgroundGenerator` thread: True, False or
      "auto" (on with zero worker processes and zero threads feeding a CUDA model).
    - ``num_threads``: load samples with this many threads of the main process instead of worker
      processes (requires ``num_workers=0``), see ``fastreid.data.thread_loader``.
    - ``seed``, ``rank``, ``start_batch``: for a dataset with ``accepts_sample_keys = True`` the
      batch sampler is wrapped in :class:`SeededBatchSampler` (same batches whatever loads them);
      ``seed`` also seeds the loader's generator (shuffling, worker seeds). ``seed=None`` draws one
      from torch's global generator.

    Worker processes run :class:`WorkerInit` (one torch thread, seeded RNGs). An error in a worker,
    a worker that dies and a timeout end the iteration with :class:`SampleLoadError` naming the
    batch, the samples and their files. ``shutdown()`` stops background threads and persistent
    workers and may be called any number of times. Which settings to use on which platform is
    decided by ``fastreid.data.loader_policy``; this class does what it is told.
    """

    def __init__(
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
        **kwargs: Any,
    ):
        from fastreid.data.loader_policy import resolve_background, uses_cuda

        if num_threads < 0 or num_workers < 0:
            raise ValueError(f"DataLoaderX: num_workers ({num_workers}) and num_threads ({num_threads}) must be >= 0")
        if num_threads > 0 and num_workers > 0:
            raise ValueError(
                f"DataLoaderX: use worker processes (num_workers={num_workers}) or thread workers "
                f"(num_threads={num_threads}), not both"
            )
        keyed = bool(getattr(dataset, "accepts_sample_keys", False))
        auto_batching = not isinstance(dataset, IterableDataset) and (batch_sampler is not None or batch_size is not None)
        if num_threads > 0 and not auto_batching:
            raise ValueError(
                "DataLoaderX: thread workers need a map-style dataset loaded in batches "
                "(batch_size or batch_sampler); use num_threads=0 here"
            )
        user_generator = generator
        if seed is None and (keyed or generator is None):
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        if generator is None:
            generator = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6C6F61646572))
        if auto_batching:
            if batch_sampler is None:
                if sampler is None and shuffle:
                    # its own generator: torch draws worker seeds from `generator` a different number of
                    # times per mode, and the order of the samples must not depend on that
                    order = user_generator
                    if order is None:
                        order = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6F72646572))
                    sampler = RandomSampler(dataset, generator=order)
                elif sampler is None:
                    sampler = SequentialSampler(dataset)
                elif shuffle:
                    raise ValueError("DataLoaderX: sampler option is mutually exclusive with shuffle")
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
                batch_size, shuffle, sampler, drop_last = 1, None, None, False
            if keyed:
                batch_sampler = SeededBatchSampler(batch_sampler, seed, rank=rank, start_batch=start_batch)
            batch_sampler = _RecordingBatchSampler(batch_sampler, keep=256)

        with_processes = num_workers > 0
        super().__init__(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            collate_fn=collate_fn,
            pin_memory=bool(pin_memory) and num_threads == 0,
            drop_last=drop_last,
            timeout=timeout if with_processes else 0,
            worker_init_fn=WorkerInit(worker_init_fn) if with_processes else worker_init_fn,
            multiprocessing_context=multiprocessing_context if with_processes else None,
            generator=generator,
            prefetch_factor=prefetch_factor if with_processes else None,
            persistent_workers=bool(persistent_workers) and with_processes,
            **kwargs,
        )
        self.device = torch.device(device) if device is not None else None
        self.num_threads = num_threads
        self.seed = seed
        self.keyed = keyed and auto_batching
        self.background = resolve_background(background, num_workers, num_threads, self.device)
        self._thread_timeout = timeout
        self._thread_prefetch = (prefetch_factor or 2) * max(1, num_threads)
        self._pin_in_threads = bool(pin_memory) and num_threads > 0
        self._cuda_prefetch = uses_cuda(self.device)
        self._pipelines: weakref.WeakSet = weakref.WeakSet()

    # -- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator:
        if self.persistent_workers:
            self._close_pipelines()  # they share torch's persistent iterator with the new epoch
        if self.num_workers > 0:
            self._refuse_unguarded_spawn()
        pipeline: Iterator = self._batches()
        if self.background:
            pipeline = BackgroundGenerator(pipeline, max_prefetch=max(2, self.prefetch_factor or 2))
        if self._cuda_prefetch:
            pipeline = CudaPrefetcher(pipeline, self.device)
        self._pipelines.add(pipeline)
        return pipeline

    def _batches(self) -> Iterator:
        if self.num_threads > 0:
            base: Iterator = ThreadLoaderIter(
                self.dataset,
                self.batch_sampler,
                self.collate_fn,
                self.num_threads,
                max_batches_in_flight=self._thread_prefetch,
                timeout=self._thread_timeout,
                post_process=pin_batch if self._pin_in_threads else None,
            )
        else:
            base = super().__iter__()
        delivered = 0
        failed = False
        try:
            while True:
                try:
                    batch = next(base)
                except StopIteration:
                    return
                except SampleLoadError:
                    failed = True
                    raise
                except Exception as exc:
                    failed = True
                    raise self._explain(exc, base, delivered) from exc
                delivered += 1
                yield batch
        finally:
            if isinstance(base, ThreadLoaderIter):
                base.close()
            elif base is getattr(self, "_iterator", None):
                if failed:  # a persistent iterator after an error cannot be reset safely
                    self._drop_persistent_iterator()
            else:
                shutdown = getattr(base, "_shutdown_workers", None)
                if callable(shutdown):
                    shutdown()

    def _refuse_unguarded_spawn(self) -> None:
        from fastreid.data.loader_policy import find_unguarded_main_call, unguarded_main_message
        from fastreid.utils.platform import current_start_method

        context = self.multiprocessing_context
        method = context.get_start_method() if context is not None else current_start_method()
        if method in ("spawn", "forkserver"):
            where = find_unguarded_main_call()
            if where is not None:
                raise RuntimeError(unguarded_main_message(where, method, fallback=None))

    # -- errors ------------------------------------------------------------------------------
    def _sent_batches(self) -> dict[int, list]:
        sampler = self.batch_sampler
        return sampler.sent if isinstance(sampler, _RecordingBatchSampler) else {}

    def _explain(self, exc: Exception, base: Any, delivered: int) -> SampleLoadError:
        sent = self._sent_batches()
        original = f"{type(exc).__name__}: {exc}"
        dead = [(wid, w) for wid, w in enumerate(getattr(base, "_workers", None) or []) if not w.is_alive()]
        if dead:
            task_info = getattr(base, "_task_info", {}) or {}
            parts, indices, first_batch = [], [], None
            for wid, worker in dead:
                code = worker.exitcode
                if code is not None and code < 0:
                    name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
                    how = f"was killed by signal {name}{_SIGNAL_HINTS.get(name, '')}"
                else:
                    how = f"exited with code {code}"
                pending = sorted(k for k, info in task_info.items() if len(info) == 1 and info[0] == wid)
                if pending and pending[0] in sent:
                    k = pending[0]
                    first_batch = k if first_batch is None else min(first_batch, k)
                    indices.extend(sample_index(item) for item in sent[k])
                    where = f"while loading batch {k}: samples {describe_samples(self.dataset, sent[k])}"
                else:
                    where = "(no batch assigned to it)"
                parts.append(f"worker {wid} (pid {worker.pid}) {how} {where}")
            return SampleLoadError("DataLoader worker process died: " + "; ".join(parts), indices, first_batch)
        if "timed out" in str(exc):
            k = getattr(base, "_rcvd_idx", delivered)
            items = sent.get(k, [])
            worker = (getattr(base, "_task_info", {}) or {}).get(k, (None,))[0]
            return SampleLoadError(
                f"no batch from worker {worker} within DATALOADER.TIMEOUT={self.timeout:g} s while loading batch {k}"
                + (f": samples {describe_samples(self.dataset, items)}" if items else "")
                + " (a sample that hangs, or a stalled file system?)",
                [sample_index(item) for item in items],
                k,
            )
        items = sent.get(delivered, [])
        if not items:
            return SampleLoadError(f"loading batch {delivered} failed: {original}", [], delivered)
        culprit = self._find_failing_sample(items)
        if culprit is not None:
            item, error = culprit
            return SampleLoadError(
                f"loading sample {describe_sample(self.dataset, item)} (batch {delivered}) failed: "
                f"{type(error).__name__}: {error}",
                [sample_index(item)],
                delivered,
            )
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return SampleLoadError(
            f"loading batch {delivered} (samples {describe_samples(self.dataset, items)}) failed: "
            f"{type(exc).__name__}: {first_line}",
            [sample_index(item) for item in items],
            delivered,
        )

    def _find_failing_sample(self, items: list) -> tuple[Any, Exception] | None:
        """Load the samples of a failed batch again in this process to name the one that fails."""
        for item in items:
            try:
                self.dataset[item]
            except Exception as error:
                return item, error
        return None

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
