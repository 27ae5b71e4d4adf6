"""Joining Ray (the 'tune' and 'serve-ray' extras): this machine's own cluster, or a running one."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import ModuleType
from typing import Optional

__all__ = ["init_ray"]

#: What Ray's workers need from this process's environment to import this package and find data.
_PASSED_ON = ("FASTREID_DATASETS", "PYTHONPATH")


def init_ray(
    ray: ModuleType, address: Optional[str], cpus: int, env_vars: Optional[Mapping[str, str]] = None
) -> None:
    """``ray.init`` on the cluster at ``address`` (``ray://head:10001``, ``auto``), or on a new
    one on this machine with ``cpus`` CPUs (no dashboard); Ray's workers get this process's
    ``PYTHONPATH`` and ``FASTREID_DATASETS``, and ``env_vars``."""
    env = {k: os.environ[k] for k in _PASSED_ON if k in os.environ}
    env.update(env_vars or {})
    if address:
        ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
    else:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
