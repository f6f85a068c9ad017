"""Where new tensors go while a model is built (``Trainer.init_module``): a device, a dtype, and optionally no
initialisation at all.

Building a large model on the CPU in fp32 and then moving and casting it costs time and twice the memory;
built under this context its parameters are made where and as they will be used. ``empty_init=True`` also
skips ``torch.nn.init`` (the weights are about to be loaded from a checkpoint), leaving uninitialised memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class SkipInitialisation(TorchFunctionMode):
    """Turns every ``torch.nn.init`` function into a no-op that hands back the tensor it was given."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


@contextlib.contextmanager
def tensor_init_context(
    device: torch.device | None, precision_context: contextlib.AbstractContextManager, empty_init: bool | None
) -> Iterator[None]:
    """New tensors on ``device`` (None: where torch would put them), in the dtype ``precision_context`` sets."""
    with contextlib.ExitStack() as stack:
        if empty_init:
            stack.enter_context(SkipInitialisation())
        if device is not None:
            stack.enter_context(device)
        stack.enter_context(precision_context)
        yield
