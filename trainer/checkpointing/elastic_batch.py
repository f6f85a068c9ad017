"""``Trainer(elastic_batch="keep_global")``: a resume at another world size keeps the checkpoint's global batch.

Torch elastic restarts the workers at whatever size the cluster has now; the per-device batch is fixed by the
loader, so the only knob that keeps ``world size x per-device batch x accumulation`` (the optimizer's view of the
data, and with it the LR schedule's meaning) is ``accumulate_grad_batches``. It is adapted once, when the training
loader of a resumed fit is built, before any batch runs; the step counter and schedulers continue from the
checkpoint's global step either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainer.loops.progress import LoopProgress

ACCUMULATION_KEY = "accumulate_grad_batches"  # recorded in the checkpoint's ``loops`` entry


def kept_accumulation(progress: LoopProgress, replicas: int, accumulated: int | None) -> tuple[int, str] | None:
    """The ``accumulate_grad_batches`` that keeps the global batch the checkpoint recorded, and the line that says
    so; None where there is nothing to keep (a fresh fit; an older checkpoint (``accumulated`` None); a loader
    without a batch size). Call before ``rescale_position`` reads the position."""
    if progress.resume_position is None or accumulated is None:
        return None
    _, old_replicas, old_batch = progress.resume_position
    batch = progress.train_batch_size
    if old_batch is None or batch is None:  # a loader without a batch size: nothing to count in
        return None
    global_batch, per_pass = old_replicas * old_batch * accumulated, replicas * batch
    if global_batch % per_pass:
        valid = sorted({global_batch // (n * batch) for n in range(1, global_batch + 1)
                        if global_batch % (n * batch) == 0})
        raise MisconfigurationError(
            f"Trainer(elastic_batch='keep_global'): the checkpoint's global batch {global_batch} ({old_replicas} "
            f"process(es) x batch {old_batch} x accumulate_grad_batches {accumulated}) is not a multiple of "
            f"{replicas} process(es) x batch {batch} = {per_pass} on this restart; it keeps the global batch only at "
            f"world sizes x batch {batch} that divide {global_batch} (accumulation {valid}). Restart at such a "
            f"world size, or pass Trainer(elastic_batch='per_device') to keep batch and accumulation per process."
        )
    accumulate = global_batch // per_pass
    return accumulate, (f"elastic_batch='keep_global': {replicas} process(es) x batch {batch} x accumulate_grad_batches "
                        f"{accumulate} = the checkpoint's global batch {global_batch} (was {old_replicas} x "
                        f"{old_batch} x {accumulated}).")
