"""Convert a sharded checkpoint (a directory written by FSDP / model parallel / DeepSpeed) into one file.

    python -m trainer convert-checkpoint epoch=0-step=10.ckpt full.ckpt

The file holds the same training state (weights, optimizer state keyed by parameter name, counters,
callbacks, RNG), so any strategy resumes from it, and ``torch.load(..., weights_only=True)`` reads it.
It runs in one process and needs memory for one full copy of the model and optimizer state.
From a DeepSpeed checkpoint the file holds the merged fp32 weights and the counters, not ZeRO's optimizer
partitions: evaluate, predict or fine-tune from it with any strategy; resume a DeepSpeed run from its directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from plugins.checkpoint_io import atomic_save
from plugins.strategies.deepspeed_checkpoint import DeepSpeedState
from plugins.strategies.sharded_checkpoint import ShardedState, join_tensors, read_full
from trainer.checkpointing.files import load_checkpoint
from trainer.errors import MisconfigurationError


def convert_checkpoint(source: str | os.PathLike, target: str | os.PathLike) -> None:
    source, target = Path(source), Path(target)
    if source.is_file():
        raise MisconfigurationError(f"{str(source)!r} is already a single-file checkpoint; nothing to convert.")
    if target.resolve() == source.resolve() or target.is_dir():
        raise MisconfigurationError(f"The output {str(target)!r} must be a new file path, not the input or a directory.")
    checkpoint = load_checkpoint(source)
    if isinstance(checkpoint["state_dict"], DeepSpeedState):
        # ZeRO's optimizer partitions are flat buffers in DeepSpeed's layout: the file holds the merged fp32
        # weights and the counters (evaluate, predict, fine-tune anywhere); resuming stays on DeepSpeed's files
        checkpoint["state_dict"] = checkpoint["state_dict"].full_state_dict()
        checkpoint.pop("optimizer_states", None)
        atomic_save(checkpoint, target)
        return
    flat = read_full(source)
    for key, value in list(checkpoint.items()):
        if isinstance(value, ShardedState):
            checkpoint[key] = join_tensors(value.skeleton, flat)
        elif isinstance(value, list) and value and all(isinstance(v, ShardedState) for v in value):
            checkpoint[key] = [join_tensors(v.skeleton, flat) for v in value]
    atomic_save(checkpoint, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer convert-checkpoint", description=__doc__.splitlines()[0])
    parser.add_argument("source", help="sharded checkpoint directory (e.g. checkpoints/last.ckpt)")
    parser.add_argument("target", help="the single file to write")
    args = parser.parse_args(argv)
    try:
        convert_checkpoint(args.source, args.target)
    except (MisconfigurationError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
