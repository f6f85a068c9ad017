"""Paths that may be fsspec URLs (``s3://bucket/run``, ``gs://...``, ``memory://...``) or local paths.

A URL is passed to fsspec as is (never through ``pathlib``, which would turn ``s3://b`` into a local folder
``s3:/b``); ``file://`` URLs are plain local paths. fsspec is imported only when a URL is used, and a store
whose package is missing (s3fs for ``s3://``, gcsfs for ``gs://``) is one line naming the extra to install.
"""

from __future__ import annotations

import os
import re
from typing import Any

_SCHEME = re.compile(r"^(?P<protocol>[A-Za-z][A-Za-z0-9+.\-]*)://")
_EXTRAS = {"s3": "relaytrain[s3]", "s3a": "relaytrain[s3]", "gs": "relaytrain[gcs]", "gcs": "relaytrain[gcs]"}


def protocol_of(path: Any) -> str | None:
    """The URL scheme of ``path`` (``"s3"``), or None for a local path (``file://`` counts as local)."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    match = _SCHEME.match(os.fspath(path)) if isinstance(os.fspath(path), str) else None
    if match is None or match["protocol"] in ("file", "local"):
        return None
    return match["protocol"]


def is_url(path: Any) -> bool:
    """Whether ``path`` names an object in an fsspec store rather than a local file."""
    return protocol_of(path) is not None


def local_path(path: str | os.PathLike) -> str:
    """A local path, with a ``file://`` prefix removed."""
    text = os.fspath(path)
    for prefix in ("file://", "local://"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def url_fs(url: str | os.PathLike) -> tuple[Any, str]:
    """``(filesystem, path inside it)`` for an fsspec URL; a missing store package is a one-line error."""
    import fsspec

    url = os.fspath(url)
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as err:
        protocol = protocol_of(url)
        extra = _EXTRAS.get(protocol or "", "")
        hint = f" install it with `pip install {extra}`" if extra else " install the fsspec package for it"
        raise ImportError(f"cannot open {url!r}: {err};{hint}.") from None


def join(root: str | os.PathLike, *names: str) -> str:
    """``root/name`` for URLs and local paths alike (a URL keeps its ``//``)."""
    root = os.fspath(root)
    if is_url(root):
        return "/".join([root.rstrip("/"), *(n.strip("/") for n in names)])
    return os.path.join(root, *names)


def exists(path: str | os.PathLike) -> bool:
    if is_url(path):
        fs, inner = url_fs(path)
        return bool(fs.exists(inner))
    return os.path.exists(local_path(path))


def isdir(path: str | os.PathLike) -> bool:
    if is_url(path):
        fs, inner = url_fs(path)
        return bool(fs.isdir(inner))
    return os.path.isdir(local_path(path))


def isfile(path: str | os.PathLike) -> bool:
    if is_url(path):
        fs, inner = url_fs(path)
        return bool(fs.isfile(inner))
    return os.path.isfile(local_path(path))


def listdir(path: str | os.PathLike) -> list[str]:
    """The names (not paths) directly in ``path``; empty when it does not exist."""
    if is_url(path):
        fs, inner = url_fs(path)
        try:
            return [entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(inner, detail=False)]
        except FileNotFoundError:
            return []
    try:
        return os.listdir(local_path(path))
    except OSError:
        return []


def modified_ns(path: str | os.PathLike) -> int:
    """Last modification time in nanoseconds (a store without one reads 0)."""
    if is_url(path):
        fs, inner = url_fs(path)
        try:
            return int(fs.modified(inner).timestamp() * 1e9)
        except (NotImplementedError, FileNotFoundError, AttributeError, TypeError):
            return 0
    return os.stat(local_path(path)).st_mtime_ns


def makedirs(path: str | os.PathLike) -> None:
    """Create a directory and its parents (a no-op on object stores without real directories)."""
    if is_url(path):
        fs, inner = url_fs(path)
        fs.makedirs(inner, exist_ok=True)
        return
    os.makedirs(local_path(path), exist_ok=True)


def open_file(path: str | os.PathLike, mode: str = "r", **kwargs: Any) -> Any:
    """``open`` for local paths, ``fsspec.open`` for URLs (text modes, ``newline=`` and appending included)."""
    if is_url(path):
        import fsspec

        return fsspec.open(os.fspath(path), mode, **kwargs).open()
    return open(local_path(path), mode, **kwargs)


def replace(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``os.replace`` locally; on a store, a move (a copy then a delete: the new object appears whole)."""
    if is_url(target):
        fs, inner_source = url_fs(source)
        _, inner_target = url_fs(target)
        fs.mv(inner_source, inner_target)
        return
    os.replace(local_path(source), local_path(target))
