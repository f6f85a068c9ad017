"""One run from a composed config: build the objects, then fit and/or test (or hand over to a launcher).

Used by the Hydra entry (parent process) and by ``trainer.cli.worker`` (processes a launcher started),
so both build exactly the same objects from the same resolved config.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer.cli.check import require_nodes
from trainer.cli.errors import ConfigError

RESOLVED_CONFIG = "resolved.yaml"  # in <run dir>/.hydra/, next to Hydra's own config.yaml
WORKER_MODULE = "trainer.cli.worker"


def _build(node: Any, what: str) -> Any:
    """Instantiate one ``_target_`` node; a failure names the node and its class, in one line."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    if node is None or (isinstance(node, Mapping) and not node):
        return None
    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as exc:
        target = node.get("_target_", "?") if isinstance(node, Mapping) else "?"
        cause = exc.__cause__ or exc
        detail = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        raise ConfigError(f"Could not build {what} ({target}): {type(cause).__name__}: {detail}. "
                          f"Check the {what}.* values (python -m trainer --cfg job shows them).") from None


def build_trainer(cfg: Any) -> Any:
    from trainer.errors import MisconfigurationError
    from trainer.trainer import Trainer

    logger = _build(cfg.get("logger"), "logger")
    nodes = dict(cfg.get("callbacks") or {})
    if logger is None and nodes.get("lr_monitor"):  # logger=none with the default callbacks
        print("logger=none: callbacks.lr_monitor left out (it writes to a logger).")
        nodes.pop("lr_monitor")
    callbacks = [cb for name, node in nodes.items() if (cb := _build(node, f"callbacks.{name}")) is not None]
    kwargs = {k: v for k, v in dict(cfg.trainer).items() if v is not None or k == "max_epochs"}
    kwargs["default_root_dir"] = kwargs.get("default_root_dir") or os.getcwd()
    try:
        return Trainer(
            accelerator=_build(cfg.get("accelerator"), "accelerator") or "auto",
            strategy=_build(cfg.get("strategy"), "strategy") or "auto",
            precision=_build(cfg.get("precision"), "precision") or "32-true",
            plugins=_build(cfg.get("environment"), "environment"),
            profiler=_build(cfg.get("profiler"), "profiler"),
            logger=logger if logger is not None else False,
            callbacks=callbacks,
            **kwargs,
        )
    except (MisconfigurationError, ValueError, TypeError) as exc:
        raise ConfigError(f"{exc} (from the trainer, accelerator, strategy and precision configs)") from None


def run_stages(cfg: Any, trainer: Any) -> dict[str, float]:
    """Fit and/or test as the config asks, from ``cfg.ckpt_path`` if set; the final metrics (printed on rank 0)."""
    from trainer.errors import MisconfigurationError
    from trainer.seed import seed_everything

    ckpt_path = cfg.get("ckpt_path")
    seed_everything(cfg.get("seed", 0))
    model = _build(cfg.model, "model")
    data = _build(cfg.data, "data")
    try:
        if cfg.get("run_fit", True):
            trainer.fit(model, datamodule=data, ckpt_path=ckpt_path)
        if cfg.get("run_test", False):
            trainer.test(model, datamodule=data, ckpt_path=None if cfg.get("run_fit", True) else ckpt_path)
    except MisconfigurationError as exc:  # a setting that cannot work, found once the run started
        raise ConfigError(str(exc)) from None
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if trainer.is_global_zero:
        shown = "  ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items()) if k.startswith(("val_", "test_")))
        print(f"{shown}\nrun directory: {os.getcwd()}")
    return metrics


def worker_command(config_file: Path) -> list[str]:
    return [sys.executable, "-m", WORKER_MODULE, str(config_file)]


def run_job(cfg: Any, config_file: Path | None) -> int:
    """Build and run in this process, or, if the strategy has a launcher, let it start the workers.

    ``config_file`` is the resolved config the workers load (they never compose again).
    """
    require_nodes(cfg)
    trainer = build_trainer(cfg)
    launcher = getattr(trainer.strategy, "launcher", None)
    if launcher is not None:
        if config_file is None:
            raise ConfigError("This strategy starts worker processes, which need the run's resolved config file.")
        # the workers import what this process could (a user's project on sys.path, not installed)
        path = os.pathsep.join([*(p for p in sys.path if p), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return int(launcher.launch(worker_command(config_file), env={"PYTHONPATH": path}) or 0)
    run_stages(cfg, trainer)
    return 0
