"""A plan before launch: per-rank memory of a layout, found by running the model once on fake tensors.

``estimate_memory`` (and ``Trainer.estimate``) runs one training step of the Module on fake tensors with the real
batch shape, on the chosen layout (tensor parallel applied for real under a fake process group, FSDP's and DDP's
shares and buffers added), and says whether it fits the device's memory; ``fitting_layouts`` lists the layouts of a
number of devices that fit. ``python -m trainer plan <overrides>`` prints both. Nothing here allocates real memory
for the model's parameters or activations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.planning.estimate import MemoryEstimate, estimate_memory, fitting_layouts
    from trainer.planning.layout import Layout

__all__ = ["Layout", "MemoryEstimate", "estimate_memory", "fitting_layouts"]


def __getattr__(name: str) -> object:  # lazy: the fake-tensor machinery loads only when a plan is asked for
    if name in ("MemoryEstimate", "estimate_memory", "fitting_layouts"):
        # local import: the fake-tensor machinery loads only when a plan is asked for
        from trainer.planning import estimate

        return getattr(estimate, name)
    if name == "Layout":
        # local import: as above, the package stays empty until used
        from trainer.planning.layout import Layout

        return Layout
    raise AttributeError(name)
