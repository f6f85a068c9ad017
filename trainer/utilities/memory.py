"""Out-of-memory helpers under Lightning's names (``lightning.pytorch.utilities.memory``); the tuner's own."""

from __future__ import annotations

from trainer.tuner.memory import free_memory, is_oom_error


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1 and isinstance(exception.args[0], str)
            and "CUDA" in exception.args[0] and "out of memory" in exception.args[0])


def is_out_of_cpu_memory(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1 and isinstance(exception.args[0], str)
            and "DefaultCPUAllocator: can't allocate memory" in exception.args[0])


def garbage_collection_cuda() -> None:
    """Collect garbage and give cached CUDA blocks back (after an out-of-memory error)."""
    free_memory(after_failure=True)


__all__ = ["garbage_collection_cuda", "is_cuda_out_of_memory", "is_oom_error", "is_out_of_cpu_memory"]
