"""The FastAPI application of ``fastreid-serve``. (No ``from __future__ import annotations``: FastAPI
reads the endpoints' annotations at run time, and ``Request`` is imported inside ``create_app``.)

Under load, work is bounded at each step, and the server answers every request itself:

- at most ``max_uploads + max_queue`` searches are in the server; one more is refused at once with
  503, ``Retry-After`` and the usual JSON ``{"detail": ...}`` (:mod:`.admission`);
- at most ``max_uploads`` of them hold an upload in memory (the others wait, in order, before their
  body is read); an upload that sends nothing for ``idle_timeout`` seconds, or takes longer than
  ``upload_timeout`` in all, is answered 408 and gives its place up;
- ``workers`` threads decode the uploads, in parallel; the decoded queries are searched in batches
  of up to ``max_batch`` (one model forward, one index search: :mod:`.batching`);
- ``GET /`` and ``GET /health`` take no place and no thread: they never wait behind uploads.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Callable, Optional, TypeVar

import torch

from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.threads import keep_thread_out_of_compute_pool

from .admission import Admission, OverloadedError
from .batching import BatchRunner
from .gallery import Gallery, GalleryUpdateError, check_image_name
from .page import render_page
from .uploads import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    UploadRejectedError,
    decode_upload,
    read_image_form,
    read_search_form,
)

__all__ = ["DEFAULT_K", "LOOPBACK_PEERS", "MAX_ADD", "MAX_K", "create_app", "parse_k"]

logger = logging.getLogger(__name__)

DEFAULT_K = 10
MAX_K = 100
#: Images one ``POST /gallery`` may add.
MAX_ADD = 16
#: Gallery changes in the server at once (they are applied one after the other).
MAX_UPDATES = 8
#: The client addresses gallery changes are taken from.
LOOPBACK_PEERS = ("127.0.0.1", "::1")
#: The page may run its own inline script and style, show its own images and upload previews
#: (``blob:``), and talk to this server only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)

F = TypeVar("F")


def parse_k(value: Optional[str], max_k: int = MAX_K) -> int:
    """The number of results asked for: ``DEFAULT_K`` when not given, else an integer in 1..``max_k``
    (422 otherwise)."""
    if value is None or value.strip() == "":
        return DEFAULT_K
    try:
        k = int(value.strip())
    except ValueError:
        raise UploadRejectedError(
            422, f"k must be a whole number between 1 and {max_k}, got {value!r}"
        ) from None
    if not 1 <= k <= max_k:
        raise UploadRejectedError(422, f"k must be between 1 and {max_k}, got {k}")
    return k


def _one_line_validation_message(errors: Sequence[Any]) -> str:
    parts = []
    for error in errors:
        where = " ".join(str(p) for p in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _host_name(header: str) -> str:
    """The host of a Host header, without its port (``[::1]:8000`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def create_app(
    gallery: Gallery,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: Optional[int] = DEFAULT_MAX_PIXELS,
    max_k: int = MAX_K,
    workers: int = 2,
    max_uploads: int = 16,
    max_queue: int = 128,
    upload_timeout: float = 60.0,
    idle_timeout: float = 10.0,
    max_batch: int = 16,
    max_wait: float = 0.005,
    allowed_hosts: Optional[Sequence[str]] = None,
    update_peers: Sequence[str] = LOOPBACK_PEERS,
) -> Any:
    """The search app over ``gallery``. ``allowed_hosts``: the only Host headers answered (the
    command passes the loopback names when it binds to loopback, so that a web page elsewhere
    cannot reach the server through a DNS name of its own); None answers any. ``update_peers``:
    the client addresses whose gallery changes are taken (when the gallery is editable).
    ``max_batch=1`` searches one query per forward."""
    require("fastapi", "fastreid-serve", "serve")
    # the serve extra (optional): imported once it is known to be there
    import anyio
    from fastapi import FastAPI, HTTPException, Request  # the 'serve' extra, as above
    from fastapi.exceptions import RequestValidationError  # the 'serve' extra
    from fastapi.responses import HTMLResponse, JSONResponse, Response  # the 'serve' extra
    from starlette.datastructures import Headers, MutableHeaders  # the 'serve' extra
    from starlette.exceptions import HTTPException as StarletteHTTPException  # the 'serve' extra
    from starlette.requests import ClientDisconnect  # the 'serve' extra

    for name, value in (("workers", workers), ("max_uploads", max_uploads), ("max_batch", max_batch)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if max_queue < 0 or idle_timeout <= 0 or upload_timeout <= 0 or max_wait < 0:
        raise ValueError("max_queue and max_wait must not be negative, the timeouts must be positive")

    def search_batch(items: list[tuple[torch.Tensor, int]]) -> list[list[dict]]:
        return gallery.search_batch(torch.cat([batch for batch, _ in items]), [k for _, k in items])

    batcher: BatchRunner[tuple[torch.Tensor, int], list[dict]] = BatchRunner(
        search_batch, max_batch=max_batch, max_wait=max_wait, name="fastreid-serve-batcher"
    )

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(batcher.close)

    app = FastAPI(title="fastreid search", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.batcher = batcher
    page = render_page(len(gallery), max_k, DEFAULT_K, max_bytes)
    decoders = anyio.CapacityLimiter(workers)
    upload_slots = anyio.Semaphore(max_uploads)
    searches = Admission(max_uploads + max_queue, "searches")
    thumbnails = Admission(max_uploads + max_queue, "thumbnail requests")
    updates = Admission(MAX_UPDATES, "gallery changes")
    app.state.admissions = {"search": searches, "thumbnail": thumbnails, "update": updates}
    hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
    peers = set(update_peers)

    security_headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "Referrer-Policy": "no-referrer",
    }

    def check_host_and_add_headers(app: Any) -> Any:
        """ASGI middleware (not Starlette's BaseHTTPMiddleware, which costs a task and two
        streams per request): the Host check, and the security headers on every answer."""

        async def middleware(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return

            async def add_headers(message: Any) -> None:
                if message["type"] == "http.response.start":
                    headers = MutableHeaders(scope=message)
                    for name, value in security_headers.items():
                        headers.setdefault(name, value)
                await send(message)

            if hosts is not None:
                host = _host_name(Headers(scope=scope).get("host", ""))
                if host not in hosts:
                    refused = JSONResponse(
                        {
                            "detail": f"This server answers only to {', '.join(sorted(hosts))}, not to {host!r}"
                        },
                        status_code=400,
                    )
                    await refused(scope, receive, add_headers)
                    return
            await app(scope, receive, add_headers)

        return middleware

    app.add_middleware(check_host_and_add_headers)

    @app.exception_handler(UploadRejectedError)
    async def rejected(_request: Any, exc: UploadRejectedError) -> JSONResponse:
        # an answer sent before the body was read in full ends the connection (nothing to drain)
        headers = {"Connection": "close"} if exc.status in (408, 413) else None
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)

    @app.exception_handler(OverloadedError)
    async def overloaded(_request: Any, exc: OverloadedError) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after), "Connection": "close"}  # the body is not read
        return JSONResponse({"detail": exc.message}, status_code=503, headers=headers)

    @app.exception_handler(GalleryUpdateError)
    async def update_refused(_request: Any, exc: GalleryUpdateError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Any, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _one_line_validation_message(exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Any, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    async def idle_limited(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``chunks``, refused (408) once one takes longer than ``idle_timeout`` to arrive."""
        iterator = chunks.__aiter__()
        while True:
            with anyio.move_on_after(idle_timeout) as waited:
                try:
                    chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    return
            if waited.cancelled_caught:
                raise UploadRejectedError(408, f"The upload sent nothing for {idle_timeout:g} s")
            yield chunk

    async def read_body(request: Any, reader: Callable[[Any, AsyncIterator[bytes]], Awaitable[F]]) -> F:
        """The body of ``request`` through ``reader``, within the upload's time limits."""
        try:
            with anyio.fail_after(upload_timeout):
                return await reader(request.headers, idle_limited(request.stream()))
        except TimeoutError:
            raise UploadRejectedError(408, f"The upload took longer than {upload_timeout:g} s") from None
        except ClientDisconnect:  # nobody to answer; not an error of the server's
            raise UploadRejectedError(400, "The client went away before its upload ended") from None

    def prepare(raw: bytes) -> torch.Tensor:
        """The upload decoded (with the pixel limit) and transformed as the model takes it, on this
        thread alone (its resize starts no OpenMP team competing with the model's forward)."""
        keep_thread_out_of_compute_pool()
        return gallery.preprocess(decode_upload(raw, max_pixels))

    def check_update_allowed(request: Any) -> None:
        """Gallery changes come from this machine, from no web page of another origin, to an
        editable gallery."""
        client = request.client.host if request.client else ""
        if client not in peers:
            raise GalleryUpdateError(
                403, f"Gallery changes are taken from this machine only, not from {client}"
            )
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        site = request.headers.get("sec-fetch-site", "")
        if site == "cross-site" or (origin and origin.split("://", 1)[-1].lower() != host.lower()):
            raise GalleryUpdateError(403, "Gallery changes are not taken from the pages of other sites")
        gallery.require_editable()

    async def change_gallery(change: Callable[[Any], F], arg: Any) -> F:
        """``change(arg)`` in a thread; a folder that cannot be written is a 500 naming why."""
        try:
            return await anyio.to_thread.run_sync(change, arg)
        except GalleryUpdateError:
            raise
        except (UserError, OSError) as e:  # a full disk, a folder made read-only meanwhile, ...
            logger.exception("Gallery: the change could not be saved")
            raise HTTPException(500, f"The gallery folder could not be updated: {_one_line(e)}") from None

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.get("/health")
    async def health() -> dict:
        return {
            "status": "ok",
            "gallery": len(gallery),
            "feature_dim": gallery.feature_dim,
            "max_k": max_k,
            "max_bytes": max_bytes,
        }

    @app.post("/search")
    async def search(request: Request) -> JSONResponse:
        query_k = request.query_params.get("k")
        if query_k is not None:
            parse_k(query_k, max_k)  # refused before the body is read
        with searches.admit():
            async with upload_slots:
                form = await read_body(request, lambda h, c: read_search_form(h, c, max_bytes))
                k = parse_k(form.fields.get("k", query_k), max_k)
                start = time.perf_counter()
                with batcher.announce() as ticket:
                    batch = await anyio.to_thread.run_sync(prepare, form.image, limiter=decoders)
                    del form  # the upload's bytes are not needed any more
                    future = ticket.submit((batch, k))
            results = await asyncio.wrap_future(future)
        # a JSONResponse as it is: FastAPI would walk the results with jsonable_encoder first
        return JSONResponse({"results": results, "took_ms": round((time.perf_counter() - start) * 1000, 1)})

    @app.get("/gallery/{i}")
    async def thumbnail(i: int, name: Optional[str] = None) -> Response:
        size = len(gallery)
        if not 0 <= i < size:
            raise HTTPException(404, f"No gallery image {i} (the gallery has {size})")
        if name is not None and gallery.name(i) != name:
            raise HTTPException(
                404, f"Gallery image {i} is not {name!r} any more (the gallery changed): search again"
            )
        with thumbnails.admit():
            try:
                jpeg = await anyio.to_thread.run_sync(gallery.thumbnail, i, limiter=decoders)
            except IndexError:  # the gallery shrank meanwhile
                raise HTTPException(404, f"No gallery image {i} (the gallery changed)") from None
            except OSError as e:  # the file went away or broke since start-up; its path stays in the log
                logger.warning(f"Gallery image {i}: {e}")
                raise HTTPException(404, f"Gallery image {i} ({gallery.name(i)}) cannot be read") from None
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    @app.post("/gallery")
    async def add_images(request: Request) -> dict:
        check_update_allowed(request)
        with updates.admit():
            async with upload_slots:
                form = await read_body(request, lambda h, c: read_image_form(h, c, max_bytes, MAX_ADD))
                names = [check_image_name(filename) for filename, _ in form.images]
                images = []
                for name, (_, data) in zip(names, form.images):
                    try:
                        batch = await anyio.to_thread.run_sync(prepare, data, limiter=decoders)
                    except UploadRejectedError as e:
                        raise UploadRejectedError(e.status, f"{name}: {e.message}") from None
                    images.append((name, data, batch))
                del form
            rows = await change_gallery(gallery.add, images)
        return {"added": [{"index": r, "name": n} for r, n in zip(rows, names)], "gallery": len(gallery)}

    @app.delete("/gallery/{name}")
    async def remove_image(name: str, request: Request) -> dict:
        check_update_allowed(request)
        with updates.admit():
            await change_gallery(gallery.remove, name)
        return {"removed": name, "gallery": len(gallery)}

    return app
