"""Context parallel: the ``cp`` ranks of a group read the same batch, each keeps a slice of every sequence, and
attention runs as ring attention over the group (torch's ``context_parallel``, which swaps
``scaled_dot_product_attention`` for its ring version while the step runs).

What is sharded: every tensor of the batch with two or more dimensions, along dimension 1 (``(batch, sequence,
...)``), in place, in torch's load-balanced order (each rank a head and a tail chunk, so causal attention costs
the same everywhere); the sequence length must be a multiple of ``2 * cp``. A model that numbers positions itself
(``torch.arange(T)``) would number its slice from 0: it must take the positions from the batch instead (the bundled
GPT reads them from a third batch element). The loss of each rank is the mean over its tokens; FSDP shards and
averages over ``dp_shard x cp``, so the gradients are those of the whole sequence.

Measured with torch 2.13.0 on CPU (gloo, 2 processes): ring attention does not run there. The CPU SDPA kernel has no
sharding rule (``NotImplementedError: Operator aten._scaled_dot_product_flash_attention_for_cpu.default does not have
a sharding strategy registered``), the math kernel mixes DTensors and tensors (``aten.add.Tensor got mixed
torch.Tensor and DTensor``), and the efficient-attention kernel does not exist on CPU. So ``cp > 1`` is refused on
CPU with that reason, and the tests that train with it are marked ``cuda`` (two GPUs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

CPU_REASON = ("torch's ring attention (torch.distributed.tensor.experimental.context_parallel) has no CPU kernel: "
              "aten._scaled_dot_product_flash_attention_for_cpu has no sharding rule")


def check_context_parallel(cp: int, device_type: str) -> None:
    """Before any process starts: context parallel needs GPUs."""
    if cp > 1 and device_type != "cuda":
        raise ValueError(f"strategy.cp={cp} (context parallel) needs NVIDIA GPUs: {CPU_REASON}. Use cp=1 on "
                         f"{device_type!r}, or accelerator='cuda'.")


def sequence_tensors(batch: Any) -> list[torch.Tensor]:
    """The batch's tensors that have a sequence dimension (dim 1): token ids, targets, positions, masks."""
    found: list[torch.Tensor] = []

    def visit(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if value.dim() >= 2:
                found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)

    visit(batch)
    return found


@contextlib.contextmanager
def context_parallel_step(cp_mesh: Any, batch: Any) -> Iterator[None]:
    """Shard the batch's sequences over ``cp_mesh`` in place and run the step (forward and backward) under ring
    attention; the batch tensors stay sharded afterwards (they are not read again)."""
    from torch.distributed.tensor.experimental import context_parallel
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tensors = sequence_tensors(batch)
    cp = cp_mesh.size()
    for t in tensors:
        if t.size(1) % (2 * cp):
            raise ValueError(f"strategy.cp={cp}: a batch tensor of shape {tuple(t.shape)} has a sequence length "
                             f"({t.size(1)}) that is not a multiple of 2 x cp = {2 * cp} (each rank takes a head "
                             "and a tail chunk); pad the sequences or change cp.")
    # ring attention implements the flash and efficient kernels: keep SDPA on those
    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    with sdpa_kernel(backends), context_parallel(cp_mesh, buffers=tensors, buffer_seq_dims=[1] * len(tensors),
                                                 no_restore_buffers=set(tensors)):
        yield
