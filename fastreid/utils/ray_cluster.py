"""Joining Ray (the 'tune' and 'serve-ray' extras): this machine's own cluster, or a running one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Optional

__all__ = ["init_ray"]

#: What Ray's workers need from this process's environment to import this package and find data.
_PASSED_ON = ("FASTREID_DATASETS", "PYTHONPATH")

#: Ray's config variable for its workers' ``nice`` value (Ray's default: 15).
WORKER_NICENESS = "RAY_worker_niceness"


@contextlib.contextmanager
def _environment(env_vars: Mapping[str, str]) -> Iterator[None]:
    """``env_vars`` set in this process's environment for the block, then put back as they were."""
    saved = {k: os.environ.get(k) for k in env_vars}
    os.environ.update(env_vars)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def init_ray(
    ray: ModuleType, address: Optional[str], cpus: int, env_vars: Optional[Mapping[str, str]] = None
) -> None:
    """``ray.init`` on the cluster at ``address`` (``ray://head:10001``, ``auto``), or on a new
    one on this machine with ``cpus`` CPUs (no dashboard); Ray's workers get this process's
    ``PYTHONPATH`` and ``FASTREID_DATASETS``, and ``env_vars``.

    A running cluster's workers get them as the job's runtime environment. A cluster started here
    needs none: its processes (the raylet, and the workers it starts) are started from this one and
    inherit its environment, ``env_vars`` set here while Ray starts included. Without a job runtime
    environment, actors that have none of their own (Ray Serve's controller, proxy and replicas) run
    in plain workers, the one Ray prestarts included, instead of each in a new worker started
    through Ray's runtime-environment setup (~1.5 CPU-s more each, the prestarted one left idle).

    A cluster started here runs its workers at this process's priority (``RAY_worker_niceness=0``
    unless the environment sets it): the workers are the trials and replicas, the work itself. At
    Ray's default of 15 they run only when nothing else on the machine wants the CPU; a search
    beside one other busy program took 454 s instead of 85 s on 2 cores, and Ctrl+C on a serve
    command could not stop its replicas within a minute."""
    if address:
        env = {k: os.environ[k] for k in _PASSED_ON if k in os.environ}
        env.update(env_vars or {})
        ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
        return
    with _environment({WORKER_NICENESS: os.environ.get(WORKER_NICENESS, "0"), **(env_vars or {})}):
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
