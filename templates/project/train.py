"""Train __project__ with Relay: ``python train.py [overrides]`` (``--help`` lists them)."""

from __future__ import annotations

import sys
from pathlib import Path

from trainer.cli.app import main

if __name__ == "__main__":
    sys.exit(main(config_dir=Path(__file__).parent / "configs", config_name="train"))
