"""Atomic writes of checkpoint files and directories (no Trainer knowledge: strategies use these).

A file goes to a temporary name in the same directory, is fsynced, then renamed. A directory (a sharded
checkpoint) is written under a temporary name and renamed into place the same way; replacing an existing
directory renames the old one aside first, so a crash leaves either the old or the new one complete.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to a temporary file, fsync, rename: a crash leaves the old file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def replace_dir(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Move the finished directory ``tmp`` to ``target``, replacing whatever is there."""
    tmp, target = Path(tmp), Path(target)
    for child in tmp.iterdir():
        if child.is_file():
            with open(child, "rb") as f:
                os.fsync(f.fileno())
    fsync_dir(tmp)
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.is_dir() and not target.is_symlink():
        os.replace(target, old)
    elif target.exists() or target.is_symlink():
        os.remove(target)
    os.replace(tmp, target)
    fsync_dir(target.parent)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def remove_path(path: str | os.PathLike) -> None:
    """Delete a checkpoint, file or directory; a missing one is fine."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def link_path(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``target`` becomes the same checkpoint as ``source``: hard links renamed into place, else a copy."""
    source, target = Path(source), Path(target)
    tmp = target.with_name(f".{target.name}.tmp-link-{os.getpid()}")
    remove_path(tmp)
    try:
        if source.is_dir():
            def link_or_copy(src: str, dst: str) -> None:
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy2(src, dst)

            shutil.copytree(source, tmp, copy_function=link_or_copy)
            replace_dir(tmp, target)
            return
        try:
            os.link(source, tmp)
        except OSError:  # no hard links on this filesystem
            shutil.copyfile(source, tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        remove_path(tmp)
