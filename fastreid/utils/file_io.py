"""Upstream FastReID's ``fastreid.utils.file_io``: ``PathManager`` for local paths and URLs, on
iopath's ``PathManager`` (the maintained library detectron2 and fvcore use).

Upstream's ``PathManager`` is a class of static methods; this one is too, each forwarding to one
iopath manager (``PathManager.handler_manager``), which has iopath's native and HTTP handlers
registered. ``PathManager.register_handler`` adds others (S3, Manifold ...).
"""

from __future__ import annotations

from typing import IO, Any, Optional, Union

from iopath.common.file_io import HTTPURLHandler, NativePathHandler, PathHandler, get_cache_dir
from iopath.common.file_io import PathManager as _IopathPathManager

__all__ = ["NativePathHandler", "PathHandler", "PathManager", "get_cache_dir"]

_manager = _IopathPathManager()
_manager.register_handler(HTTPURLHandler())


class PathManager:
    """Static file operations on any registered kind of path (upstream's interface)."""

    handler_manager = _manager

    @staticmethod
    def open(path: str, mode: str = "r", buffering: int = -1, **kwargs: Any) -> Union[IO[str], IO[bytes]]:
        return _manager.open(path, mode, buffering=buffering, **kwargs)

    @staticmethod
    def copy(src_path: str, dst_path: str, overwrite: bool = False, **kwargs: Any) -> bool:
        return _manager.copy(src_path, dst_path, overwrite, **kwargs)

    @staticmethod
    def get_local_path(path: str, **kwargs: Any) -> str:
        return _manager.get_local_path(path, **kwargs)

    @staticmethod
    def exists(path: str, **kwargs: Any) -> bool:
        return _manager.exists(path, **kwargs)

    @staticmethod
    def isfile(path: str, **kwargs: Any) -> bool:
        return _manager.isfile(path, **kwargs)

    @staticmethod
    def isdir(path: str, **kwargs: Any) -> bool:
        return _manager.isdir(path, **kwargs)

    @staticmethod
    def ls(path: str, **kwargs: Any) -> list[str]:
        return _manager.ls(path, **kwargs)

    @staticmethod
    def mkdirs(path: str, **kwargs: Any) -> None:
        _manager.mkdirs(path, **kwargs)

    @staticmethod
    def rm(path: str, **kwargs: Any) -> None:
        _manager.rm(path, **kwargs)

    @staticmethod
    def register_handler(handler: PathHandler, allow_override: bool = False) -> None:
        _manager.register_handler(handler, allow_override=allow_override)

    @staticmethod
    def set_strict_kwargs_checking(enable: bool) -> None:
        _manager.set_strict_kwargs_checking(enable)

    @staticmethod
    def cache_dir(cache_dir: Optional[str] = None) -> str:
        return get_cache_dir(cache_dir)
