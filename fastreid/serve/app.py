"""The FastAPI application of ``fastreid-serve``. (No ``from __future__ import annotations``: FastAPI
reads the endpoints' annotations at run time, and ``Request`` is imported inside ``create_app``.)

Work is bounded: at most ``max_uploads`` search requests hold an upload in memory at once (the
others wait before their body is read), at most ``workers`` threads decode and search (the model
itself runs one forward at a time, under the gallery's lock), and an upload must arrive within
``upload_timeout`` seconds."""

import logging
import time
from collections.abc import Sequence
from typing import Any, Optional

from fastreid.utils.extras import require

from .gallery import Gallery
from .page import render_page
from .uploads import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    UploadRejectedError,
    decode_upload,
    read_search_form,
)

__all__ = ["DEFAULT_K", "MAX_K", "create_app", "parse_k"]

logger = logging.getLogger(__name__)

DEFAULT_K = 10
MAX_K = 100
#: The page may run its own inline script and style, show its own images and upload previews
#: (``blob:``), and talk to this server only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


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


def create_app(
    gallery: Gallery,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: Optional[int] = DEFAULT_MAX_PIXELS,
    max_k: int = MAX_K,
    workers: int = 2,
    max_uploads: int = 16,
    upload_timeout: float = 60.0,
    allowed_hosts: Optional[Sequence[str]] = None,
) -> Any:
    """The search app over ``gallery``. ``allowed_hosts``: the only Host headers answered (the
    command passes the loopback names when it binds to loopback, so that a web page elsewhere
    cannot reach the server through a DNS name of its own); None answers any."""
    require("fastapi", "fastreid-serve", "serve")
    # the serve extra (optional): imported once it is known to be there
    import anyio
    from fastapi import FastAPI, HTTPException, Request  # the 'serve' extra, as above
    from fastapi.exceptions import RequestValidationError  # the 'serve' extra
    from fastapi.responses import HTMLResponse, JSONResponse, Response  # the 'serve' extra
    from starlette.exceptions import HTTPException as StarletteHTTPException  # the 'serve' extra
    from starlette.requests import ClientDisconnect  # the 'serve' extra

    app = FastAPI(title="fastreid search", docs_url=None, redoc_url=None, openapi_url=None)
    page = render_page(len(gallery), max_k, DEFAULT_K, max_bytes)
    limiter = anyio.CapacityLimiter(workers)
    uploads = anyio.Semaphore(max_uploads)
    hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    @app.middleware("http")
    async def check_host_and_add_headers(request: Any, call_next: Any) -> Any:
        if hosts is not None:
            host = _host_name(request.headers.get("host", ""))
            if host not in hosts:
                return JSONResponse(
                    {"detail": f"This server answers only to {', '.join(sorted(hosts))}, not to {host!r}"},
                    status_code=400,
                )
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    @app.exception_handler(UploadRejectedError)
    async def rejected(_request: Any, exc: UploadRejectedError) -> JSONResponse:
        # an answer sent before the body was read in full ends the connection (nothing to drain)
        headers = {"Connection": "close"} if exc.status in (408, 413) else None
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Any, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _one_line_validation_message(exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Any, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

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
    async def search(request: Request) -> dict:
        query_k = request.query_params.get("k")
        if query_k is not None:
            parse_k(query_k, max_k)  # refused before the body is read
        async with uploads:
            try:
                with anyio.fail_after(upload_timeout):
                    form = await read_search_form(request.headers, request.stream(), max_bytes)
            except TimeoutError:
                raise UploadRejectedError(408, f"The upload took longer than {upload_timeout:g} s") from None
            except ClientDisconnect:  # nobody to answer; not an error of the server's
                raise UploadRejectedError(400, "The client went away before its upload ended") from None
            k = parse_k(form.fields.get("k", query_k), max_k)
            start = time.perf_counter()
            tensor = await anyio.to_thread.run_sync(decode_upload, form.image, max_pixels, limiter=limiter)
            del form  # the upload's bytes are not needed any more
            results = await anyio.to_thread.run_sync(gallery.search, tensor, k, limiter=limiter)
        return {"results": results, "took_ms": round((time.perf_counter() - start) * 1000, 1)}

    @app.get("/gallery/{i}")
    async def thumbnail(i: int) -> Response:
        if not 0 <= i < len(gallery):
            raise HTTPException(404, f"No gallery image {i} (the gallery has {len(gallery)})")
        try:
            jpeg = await anyio.to_thread.run_sync(gallery.thumbnail, i, limiter=limiter)
        except OSError as e:  # the file went away or broke since start-up; its path stays in the log
            logger.warning(f"Gallery image {i}: {e}")
            raise HTTPException(404, f"Gallery image {i} ({gallery.name(i)}) cannot be read") from None
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    return app
