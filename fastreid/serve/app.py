"""The FastAPI application of ``fastreid-serve``. (No ``from __future__ import annotations``: FastAPI
reads the endpoints' annotations at run time, and ``UploadFile`` is imported inside ``create_app``.)"""

import time
from typing import Any

from fastreid.utils.extras import require

from .gallery import Gallery
from .page import PAGE
from .uploads import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS, BoundedUpload, UploadRejectedError, decode_upload

__all__ = ["MAX_K", "create_app"]

MAX_K = 100
_CHUNK = 64 * 1024
_FORM_OVERHEAD = 64 * 1024  # multipart boundaries, headers and the k field


def create_app(
    gallery: Gallery, *, max_bytes: int = DEFAULT_MAX_BYTES, max_pixels: int = DEFAULT_MAX_PIXELS
) -> Any:
    require("fastapi", "fastreid-serve", "serve")
    require("multipart", "fastreid-serve's uploads (python-multipart)", "serve")
    from fastapi import FastAPI, File, Form, HTTPException, UploadFile
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    app = FastAPI(title="fastreid search", docs_url=None, redoc_url=None)
    page = PAGE.replace("__SIZE__", str(len(gallery))).replace("__MAX_K__", str(MAX_K))

    @app.middleware("http")
    async def refuse_large_bodies(request: Any, call_next: Any) -> Any:
        # a declared body beyond the limit is refused before it is read (and before Starlette
        # spools it to a temporary file); undeclared ones are cut by BoundedUpload
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_bytes + _FORM_OVERHEAD):
            return JSONResponse(
                {"detail": f"The request is larger than the limit of {max_bytes // 1024} KiB"},
                status_code=413,
            )
        return await call_next(request)

    @app.exception_handler(UploadRejectedError)
    async def rejected(_request: Any, exc: UploadRejectedError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "gallery": len(gallery), "max_k": MAX_K, "max_bytes": max_bytes}

    @app.post("/search")
    async def search(image: UploadFile = File(...), k: int = Form(10)) -> dict:  # noqa: B008 (FastAPI's form)
        if not 1 <= k <= MAX_K:
            raise HTTPException(422, f"k must be between 1 and {MAX_K}, got {k}")

        upload = BoundedUpload(max_bytes)
        while chunk := await image.read(_CHUNK):
            upload.add(chunk)  # refused as soon as it passes the limit
        raw = upload.value()
        start = time.perf_counter()
        tensor = await run_in_threadpool(decode_upload, raw, max_pixels)
        results = await run_in_threadpool(gallery.search, tensor, k)
        return {"results": results, "took_ms": round((time.perf_counter() - start) * 1000, 1)}

    @app.get("/gallery/{i}")
    async def thumbnail(i: int) -> Response:
        if not 0 <= i < len(gallery):
            raise HTTPException(404, f"No gallery image {i} (the gallery has {len(gallery)})")
        try:
            jpeg = await run_in_threadpool(gallery.thumbnail, i)
        except OSError as e:
            raise HTTPException(404, f"Gallery image {i} cannot be read: {e}") from None
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    return app
