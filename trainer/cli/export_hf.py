"""``python -m trainer export-hf CKPT OUT_DIR``: a Relay checkpoint's weights as Hugging Face ``safetensors`` shards.

    python -m trainer export-hf runs/last.ckpt hf-model --map '^model\\.=' --config hf-base/config.json

``CKPT`` is a ``.ckpt`` file or a sharded checkpoint directory. ``--map PATTERN=REPLACEMENT`` renames keys (regular
expressions, tried in order, the first match applied; ``PATTERN`` alone drops the keys it matches). ``--config``
copies a ``config.json`` (a file, or a directory holding one) so ``from_pretrained(OUT_DIR)`` works.
"""

from __future__ import annotations

import argparse
import sys

import torch

from trainer.errors import MisconfigurationError
from trainer.interop.huggingface import export_hf_weights, parse_key_map


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer export-hf", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a Relay checkpoint: a .ckpt file or a sharded directory")
    parser.add_argument("out", help="the directory to write model*.safetensors (and the index) into")
    parser.add_argument("--map", action="append", default=[], metavar="PATTERN=REPLACEMENT",
                        help="rename keys (repeatable), e.g. '^model\\.=' strips a 'model.' prefix")
    parser.add_argument("--config", default=None, help="a config.json (or a directory holding one) to copy")
    parser.add_argument("--max-shard-size", default="5GB", help="largest shard file (default 5GB)")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                        help="cast floating-point weights")
    args = parser.parse_args(argv)
    try:
        out = export_hf_weights(args.checkpoint, args.out, parse_key_map(args.map), args.max_shard_size, args.config,
                                getattr(torch, args.dtype) if args.dtype else None)
    except (MisconfigurationError, ValueError, FileNotFoundError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    print(f"wrote {out}: {', '.join(files)}")
    return 0
