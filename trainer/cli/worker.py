"""``python -m trainer.cli.worker <run dir>/.hydra/resolved.yaml``: one worker process of a run.

A launcher starts this in every process it creates. It loads the config the parent composed and
resolved (no Hydra composition here, ever), works inside the run directory, builds the same objects
and runs fit/test. It writes nothing to ``.hydra/``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from plugins.launchers.elastic import record_failure
from trainer.cli.build import build_trainer, run_stages
from trainer.cli.console import console_to_log
from trainer.cli.engine_checkpoints import ReportCheckpoints
from trainer.cli.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m trainer.cli.worker <run dir>/.hydra/resolved.yaml", file=sys.stderr)
        return 2
    config_file = Path(argv[0]).resolve()
    if not config_file.is_file():
        print(f"error: no config file at {config_file}; start runs with python -m trainer.", file=sys.stderr)
        return 2
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config_file)
    run_dir = config_file.parent.parent  # the run directory holds .hydra/
    os.chdir(run_dir)
    with console_to_log(run_dir):  # the workers' output goes to the run's relay.log too
        try:
            run_stages(cfg, build_trainer(cfg))
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            record_failure(f"error: {err}")  # the launcher's line repeats it
            return 2
    return 0


def run_worker(
    config_file: str, resume_from: str | None = None, on_checkpoint: Callable[[str], None] | None = None,
) -> dict[str, object]:
    """One rank of a run that an engine started by calling a function (Ray Train, Spark's TorchDistributor).

    The same objects and stages as ``main``; errors propagate, so the engine sees the rank fail. Returns
    the final metrics and the newest checkpoint path (rank 0's are reported back to the engine).
    ``resume_from``: the checkpoint an engine restored after a failure: this run's newest, so it wins over the
    ``ckpt_path`` the run started from (a retry continues where the failed attempt got to, not where it began);
    ``on_checkpoint(path)``: called on every rank after each checkpoint is written, for the engine to track it.
    """
    from omegaconf import OmegaConf

    path = Path(config_file).resolve()
    cfg = OmegaConf.load(path)
    os.chdir(path.parent.parent)
    if resume_from is not None:
        cfg.ckpt_path = resume_from
    trainer = build_trainer(cfg)
    if on_checkpoint is not None:
        trainer.callbacks.insert(0, ReportCheckpoints(on_checkpoint))  # first: reports before others act
    metrics = run_stages(cfg, trainer)
    callback = trainer.checkpoint_callback
    newest = (callback.last_model_path or callback.best_model_path) if callback is not None else ""
    return {"rank": trainer.global_rank, "metrics": metrics, "checkpoint": os.path.abspath(newest) if newest else None}


if __name__ == "__main__":
    sys.exit(main())
