"""Data loading: the policy, the loader that carries it out, thread workers, per-sample seeds.

One job per module:

- ``request``: :class:`LoaderRequest` (what was asked) and :class:`LoaderDecision` (what to do).
- ``draft``: the decision being made, shared by the rules and the explicit path.
- ``rules``: the policy, one function per rule, composed by :func:`decide`.
- ``explicit``: the decision for a ``DataLoaderX`` built with explicit arguments.
- ``probe``: can worker processes load from this dataset (non-CPU state, pickling)?
- ``main_guard``: is the loader started from unguarded top-level code of a script?
- ``prefetch``: the background thread, the CUDA side-stream prefetcher, pinning.
- ``loader``: :class:`DataLoaderX`, which carries out a decision.
- ``threads``: thread workers (and the main process's timed loading).
- ``workers``: worker-process start-up and worker deaths.
- ``seeds``: per-sample seeds (same seed, same batches).
- ``errors``: :class:`SampleLoadError` and how failures are explained.
- ``factories``: :func:`build_dataloader`, :func:`create_dataloader`.
- ``report``: the decision table, :func:`print_dataloader_config`, the platform report.
"""

from fastreid.data.loading.errors import SampleLoadError
from fastreid.data.loading.factories import build_dataloader, create_dataloader
from fastreid.data.loading.loader import DataLoaderX
from fastreid.data.loading.prefetch import BackgroundGenerator, CudaPrefetcher, apply_to_tensors
from fastreid.data.loading.report import print_dataloader_config
from fastreid.data.loading.request import LoaderDecision, LoaderRequest
from fastreid.data.loading.rules import decide
from fastreid.data.loading.seeds import SampleKey, SeededBatchSampler, mix_seed
from fastreid.data.loading.threads import ThreadLoaderIter
from fastreid.data.loading.workers import WorkerInit
from fastreid.utils.env import enable_all_patches, setup_multiprocessing

__all__ = [
    "LoaderRequest",
    "LoaderDecision",
    "decide",
    "DataLoaderX",
    "BackgroundGenerator",
    "CudaPrefetcher",
    "apply_to_tensors",
    "ThreadLoaderIter",
    "WorkerInit",
    "SampleKey",
    "SeededBatchSampler",
    "mix_seed",
    "SampleLoadError",
    "build_dataloader",
    "create_dataloader",
    "print_dataloader_config",
    "setup_multiprocessing",
    "enable_all_patches",
]
