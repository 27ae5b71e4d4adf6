"""The loader policy's former import path, kept for users' code; the policy is now
:mod:`fastreid.data.loading` (``rules`` decides, ``factories`` builds, ``report`` prints)."""

from fastreid.data.loading.draft import resolve_background, uses_cuda
from fastreid.data.loading.factories import build_dataloader, create_dataloader
from fastreid.data.loading.main_guard import find_unguarded_main_call, unguarded_main_message
from fastreid.data.loading.probe import find_non_cpu_state, find_unpicklable, find_worker_state_problems
from fastreid.data.loading.report import log_decision, print_dataloader_config
from fastreid.data.loading.request import LoaderDecision, LoaderRequest
from fastreid.data.loading.rules import decide
from fastreid.utils.platform import get_recommended_num_workers, is_windows

#: The former name of :func:`fastreid.data.loading.rules.decide`.
decide_loader_settings = decide

__all__ = [
    "LoaderRequest",
    "LoaderDecision",
    "decide",
    "decide_loader_settings",
    "build_dataloader",
    "create_dataloader",
    "print_dataloader_config",
    "log_decision",
    "get_recommended_num_workers",
    "is_windows",
    "find_non_cpu_state",
    "find_unpicklable",
    "find_worker_state_problems",
    "find_unguarded_main_call",
    "unguarded_main_message",
    "resolve_background",
    "uses_cuda",
]
