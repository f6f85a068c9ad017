"""The filesystem for a path or URL (``lightning.fabric.utilities.cloud_io``): local paths, ``s3://``, ``gs://``,
``memory://`` and any other fsspec protocol."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lightning_utilities.core.imports import module_available

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem


def get_filesystem(path: str | os.PathLike, **kwargs: Any) -> AbstractFileSystem:
    """The fsspec filesystem that serves ``path`` (``kwargs`` go to its constructor, e.g. credentials)."""
    import fsspec
    from fsspec.core import url_to_fs

    fs, _ = url_to_fs(str(path), **kwargs)
    return fs if isinstance(fs, fsspec.AbstractFileSystem) else fsspec.filesystem("file")


__all__ = ["get_filesystem", "module_available"]
