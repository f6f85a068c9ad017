"""A fit that saves asynchronously every step with slow writes (each write call of a checkpoint file sleeps),
so the parent test can SIGKILL it in the middle of a background write, or let it run out.

``python async_kill_script.py DIR MAX_STEPS [--exit-early]``: ``--exit-early`` makes the script end right after
its first save is queued, without any teardown, to show the interpreter waits for the write in flight.
"""

from __future__ import annotations

import sys
import time

import torch

import plugins.checkpoint_io as checkpoint_io
from tests.helpers import Regression, loader
from trainer import Trainer
from trainer.callbacks import ModelCheckpoint

_write = checkpoint_io._RecordingFile.write


def slow_write(self, data):  # the disk is slow for the ballast: about 1.3 s per checkpoint file (16 records of 1 MB)
    if len(data) >= 1 << 20:  # not the ~110 small writes of a file, which took it to 6 s
        time.sleep(0.08)
    return _write(self, data)


class Big(Regression):
    def __init__(self) -> None:
        super().__init__()
        for i in range(16):  # 16 buffers of 1 MB: one record (one slow write) each
            self.register_buffer(f"ballast{i}", torch.full((256 * 1024,), float(i)))


def main() -> None:
    directory, max_steps = sys.argv[1], int(sys.argv[2])
    checkpoint_io._RecordingFile.write = slow_write
    if "--exit-early" in sys.argv:
        from plugins.async_checkpoint_io import AsyncCheckpointIO

        io = AsyncCheckpointIO()
        io.save_checkpoint({"state_dict": Big().state_dict(), "loops": {}, "global_step": 1}, f"{directory}/x.ckpt")
        print("queued", flush=True)
        return  # no teardown: the interpreter must wait for the write
    cb = ModelCheckpoint(dirpath=directory, every_n_train_steps=1, save_top_k=1, save_last=True, async_save=True)
    trainer = Trainer(max_steps=max_steps, callbacks=[cb], logger=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(Big(), loader(n=512), ckpt_path="last")
    print(f"done {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
