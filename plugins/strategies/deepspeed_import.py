"""DeepSpeed's import and start-up on Relay's terms: quiet, without MLflow or torch's compiler, without building C++
ops training never calls.

DeepSpeed builds a C++ op (``deepspeed_shm_comm``) with the machine's compiler the first time it starts
its communication layer (about a minute, once): ``TORCH_EXTENSIONS_DIR`` defaults to Relay's cache, one
folder per Python environment, so the build is kept between runs and environments never rebuild each
other's. Machines without a compiler install a prebuilt op instead:
``DS_BUILD_SHM_COMM=1 pip install --no-build-isolation deepspeed``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import logging
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from plugins.strategies.deepspeed_checkpoint import mlflow_on_first_use

EXTENSIONS_CACHE = Path("~/.cache/relay/torch_extensions")


@contextlib.contextmanager
def quiet(level: int) -> Iterator[None]:
    """DeepSpeed's start-up chatter (distutils warnings from its op builder, "built successfully" prints)
    is hidden unless its logging level asks for INFO or DEBUG; errors still raise."""
    if level <= logging.INFO:
        yield
        return
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", UserWarning)
        yield


@contextlib.contextmanager
def without_shared_memory_inference_op(deepspeed: Any) -> Iterator[None]:
    """DeepSpeed's CPU backend builds its shared-memory all-reduce op (C++, compiled on first use) when it starts,
    for ``inference_all_reduce``, which training never calls. Building it first probes every op with the compiler,
    then compiles for 1-3 min on 2 cores while every other rank waits on the build folder's lock (measured: a Ray
    ZeRO-3 test spent ~100 s there). While Relay starts DeepSpeed's backend, that op's builder is "not available",
    which DeepSpeed handles by using torch.distributed's all-reduce."""
    accelerator = deepspeed.accelerator.get_accelerator()
    own, create = vars(accelerator).get("create_op_builder"), accelerator.create_op_builder
    accelerator.create_op_builder = lambda name: None if name == "ShareMemCommBuilder" else create(name)
    try:
        yield
    finally:
        if own is None:
            del accelerator.create_op_builder  # the class's method again
        else:
            accelerator.create_op_builder = own


def extensions_cache() -> Path:
    """Where DeepSpeed's C++ ops are built: one folder per Python environment and torch version.

    Torch keys a built op by its name only, so two environments sharing a folder (two virtualenvs of one
    user, whose compile flags name different paths) would rebuild it on every start, each for the other.
    """
    import hashlib
    import sys

    tag = hashlib.sha1(f"{sys.prefix}|{torch.__version__}".encode()).hexdigest()[:10]
    return EXTENSIONS_CACHE.expanduser() / f"py{sys.version_info[0]}{sys.version_info[1]}-{tag}"


def import_deepspeed() -> Any:
    try:
        with mlflow_on_first_use():
            import deepspeed
    except ImportError:
        raise ValueError(
            "strategy=deepspeed needs DeepSpeed, which is not installed: pip install 'relaytrain[deepspeed]' "
            "(on a machine without a C++ compiler: DS_BUILD_SHM_COMM=1 pip install --no-build-isolation deepspeed)."
        ) from None
    _import_muon_compiled_at_first_call(deepspeed)
    return deepspeed


def _import_muon_compiled_at_first_call(deepspeed: Any) -> None:
    """DeepSpeed imports its Muon optimizer to compare every optimizer's class with it (``deepspeed.initialize``, each
    ZeRO gradient reduction), and that import wraps its kernels in ``torch.compile``, which imports torch's inductor:
    ~1.8 CPU-seconds per rank of every run, with or without Muon. Imported here with each kernel compiled at its first
    call instead: what ``torch.compile`` does anyway, less the import of a compiler no other optimizer uses."""
    muon = "deepspeed.runtime.zero.muon.original_muon"
    compiler = getattr(getattr(deepspeed, "runtime", None), "compiler", None)
    if muon in sys.modules or not callable(getattr(compiler, "compile", None)):
        return
    eager = compiler.compile
    compiler.compile = _compile_at_first_call
    try:
        importlib.import_module(muon)
    except ImportError:
        pass  # a DeepSpeed without Muon
    finally:
        compiler.compile = eager


def _compile_at_first_call(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``torch.compile(**options)`` as a decorator whose ``torch.compile`` call waits for the function's first call."""
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        compiled: list[Callable[..., Any]] = []

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not compiled:
                compiled.append(torch.compile(function, **options))
            return compiled[0](*args, **kwargs)
        return call
    return decorate


