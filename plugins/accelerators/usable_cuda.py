"""Which CUDA devices can this process use right now? (Lightning's ``find_usable_cuda_devices``.)

On a shared machine whose GPUs are in exclusive mode, a device another job holds fails on first use; probing each
visible device with a tiny tensor finds the free ones before the run picks ``devices=[...]``.
"""

from __future__ import annotations

import torch


def _visible_cuda_devices() -> list[int]:
    """Indices of the devices this process sees (after ``CUDA_VISIBLE_DEVICES``); none without a CUDA build/driver."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


def find_usable_cuda_devices(num_devices: int = -1) -> list[int]:
    """The first ``num_devices`` visible CUDA devices that accept a tensor (all usable ones for -1).

    0 asks for none (``[]``, even without CUDA). Asking for more than are visible, or than are free, is an error that
    says how many there are. Two processes probing at the same moment can both pick one free device.
    """
    if num_devices == 0:
        return []
    visible = _visible_cuda_devices()
    if not visible:
        raise ValueError(f"You requested to find {num_devices} devices but there are no visible CUDA devices on this "
                         "machine.")
    if num_devices > len(visible):
        raise ValueError(f"You requested to find {num_devices} devices but this machine only has {len(visible)} GPUs.")
    usable: list[int] = []
    busy: list[int] = []
    for index in visible:
        try:
            torch.tensor(0, device=torch.device("cuda", index))
        except RuntimeError:
            busy.append(index)
            continue
        usable.append(index)
        if len(usable) == num_devices:
            break
    if num_devices != -1 and len(usable) != num_devices:
        raise RuntimeError(f"You requested to find {num_devices} devices but only {len(usable)} are currently "
                           f"available. The devices {busy} are occupied by other processes and can't be used at the "
                           "moment.")
    return usable


__all__ = ["find_usable_cuda_devices"]
