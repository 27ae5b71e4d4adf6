"""The search app as N replicas behind Ray Serve's HTTP proxy (the 'serve-ray' extra), on this
machine's own Ray cluster or on a running one: each replica builds the same app (model, gallery,
batching, limits) in a process of its own, and the proxy spreads the requests over them. Clients
see the same API and the same answers as from one process."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any, Optional

from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.ray_cluster import init_ray
from fastreid.utils.threads import available_cpus

__all__ = ["APP_NAME", "ReplicaError", "ReplicaServer"]

logger = logging.getLogger(__name__)

#: The name of the application (and of its deployment) on the Ray cluster.
APP_NAME = "fastreid-serve"
#: How long the replicas may take to build their app (load the model, index the gallery).
START_TIMEOUT = 600.0


class ReplicaError(UserError):
    """The replicas cannot run as asked (too few CPUs on the cluster, an app that fails to build)."""


class ReplicaServer:
    """``with ReplicaServer(build, replicas=2, host=..., port=...) as url:`` serves ``build()``'s
    app from ``replicas`` Ray Serve replicas (``build`` runs in each; it must pickle) at ``url``
    until the block ends. ``address``: a running Ray cluster (``ray://head:10001``), else one is
    started on this machine and stopped at the end. ``max_ongoing``: requests a replica takes at
    once; above the app's own limits, so that the app (not Ray's router) decides what waits and
    what is refused."""

    def __init__(
        self,
        build: Callable[[], Any],
        *,
        replicas: int,
        host: str,
        port: int,
        address: Optional[str] = None,
        replica_cpus: float = 1.0,
        max_ongoing: int = 256,
    ) -> None:
        if replicas < 1:
            raise ReplicaError(f"--replicas must be at least 1, got {replicas}")
        if replica_cpus <= 0:
            raise ReplicaError(f"--replica-cpus must be positive, got {replica_cpus:g}")
        self.build = build
        self.replicas = replicas
        self.host = host
        self.port = port
        self.address = address
        self.replica_cpus = replica_cpus
        self.max_ongoing = max_ongoing
        self._ray: Optional[ModuleType] = None
        self._serve: Optional[ModuleType] = None

    def __enter__(self) -> str:
        ray = require("ray", "fastreid-serve --replicas", "serve-ray")
        serve = require("ray.serve", "fastreid-serve --replicas", "serve-ray")
        self._ray, self._serve = ray, serve
        init_ray(ray, self.address, available_cpus())
        try:
            self._start(ray, serve)
        except BaseException:
            self._stop()
            raise
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def _start(self, ray: ModuleType, serve: ModuleType) -> None:
        cpus = float(ray.cluster_resources().get("CPU", 0))
        needed = self.replicas * self.replica_cpus
        if needed > cpus:
            raise ReplicaError(
                f"--replicas {self.replicas} with --replica-cpus {self.replica_cpus:g} need {needed:g} CPUs, "
                f"the Ray cluster has {cpus:g}: ask for fewer replicas or CPUs each"
            )
        serve.start(http_options={"host": self.host, "port": self.port})
        build = self.build

        def build_app() -> Any:  # Ray Serve takes a plain function as a builder (not a partial)
            return build()

        deployment = serve.deployment(
            serve.ingress(build_app)(),
            name=APP_NAME,
            num_replicas=self.replicas,
            max_ongoing_requests=self.max_ongoing,
            ray_actor_options={"num_cpus": self.replica_cpus},
        )
        logger.info(f"Starting {self.replicas} replicas of the search app on Ray Serve")
        try:
            serve.run(deployment.bind(), name=APP_NAME, route_prefix="/", blocking=False)
        except RuntimeError as e:  # the replicas' constructor failed (the model, the gallery, ...)
            first = next((line for line in str(e).splitlines() if "Error" in line), str(e).strip())
            raise ReplicaError(f"The replicas could not build the search app: {first.strip()}") from e
        deadline = time.monotonic() + START_TIMEOUT
        while self.status() != "RUNNING":
            if time.monotonic() > deadline:
                raise ReplicaError(
                    f"The replicas were not running after {START_TIMEOUT:g} s ({self.status()})"
                )
            time.sleep(0.5)

    def status(self) -> str:
        """The application's status on the cluster (``RUNNING``, ``DEPLOYING``, ``DEPLOY_FAILED``...)."""
        assert self._serve is not None
        app = self._serve.status().applications.get(APP_NAME)
        return str(getattr(app.status, "value", app.status)) if app is not None else "NOT_STARTED"

    def _stop(self) -> None:
        serve, ray = self._serve, self._ray
        if serve is None or ray is None:
            return
        try:
            if self.address:  # a cluster of others: take only this application off it
                serve.delete(APP_NAME)
            else:
                serve.shutdown()
        finally:
            ray.shutdown()

    def __exit__(
        self,
        kind: Optional[type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self._stop()
