"""Data loading policy: who loads samples (worker processes, threads, the main process), how they
start, and same seed, same batches. The loader that carries a decision out is
:class:`fastreid.data.data_utils.DataLoaderX` (upstream's module).

One job per module:

- ``request``: :class:`LoaderRequest` (what was asked) and :class:`LoaderDecision` (what to do).
- ``draft``: the decision being made, shared by the rules and the explicit path.
- ``rules``: the policy, one function per rule, composed by :func:`decide`.
- ``explicit``: the decision for a ``DataLoaderX`` built with explicit arguments.
- ``probe``: can worker processes load from this dataset (non-CPU state, pickling)?
- ``main_guard``: is the loader started from unguarded top-level code of a script?
- ``threads``: thread workers (and the main process's timed loading).
- ``workers``: worker-process start-up and worker deaths.
- ``seeds``: per-sample seeds (same seed, same batches).
- ``errors``: :class:`SampleLoadError` and how failures are explained.
- ``factories``: :func:`build_dataloader`, :func:`create_dataloader`.
- ``report``: the decision table, :func:`print_dataloader_config`, the platform report.
"""
