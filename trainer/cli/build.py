"""The objects of one run, built from a composed config, and the stages it asks for.

The parent process (``trainer.cli.job``) and every worker (``trainer.cli.worker``) build them here, so both build
exactly the same objects from the same resolved config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trainer.cli.errors import ConfigError
from trainer.cli.schema import override_for
from trainer.errors import MisconfigurationError
from trainer.seed import seed_everything
from trainer.trainer import Trainer


def build_node(node: Mapping[str, object] | None, what: str) -> Any:
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


def build_trainer(cfg: Any) -> Trainer:
    logger = build_node(cfg.get("logger"), "logger")
    nodes = dict(cfg.get("callbacks") or {})
    if logger is None and nodes.get("lr_monitor"):  # logger=none with the default callbacks
        print("logger=none: callbacks.lr_monitor left out (it writes to a logger).")
        nodes.pop("lr_monitor")
    callbacks = [cb for name, node in nodes.items() if (cb := build_node(node, f"callbacks.{name}")) is not None]
    kwargs = {k: v for k, v in dict(cfg.trainer).items() if v is not None or k == "max_epochs"}
    kwargs["default_root_dir"] = kwargs.get("default_root_dir") or os.getcwd()
    try:
        return Trainer(
            accelerator=build_node(cfg.get("accelerator"), "accelerator") or "auto",
            strategy=build_node(cfg.get("strategy"), "strategy") or "auto",
            precision=build_node(cfg.get("precision"), "precision") or "32-true",
            plugins=build_node(cfg.get("environment"), "environment"),
            profiler=build_node(cfg.get("profiler"), "profiler"),
            logger=logger if logger is not None else False,
            callbacks=callbacks,
            **kwargs,
        )
    except (MisconfigurationError, ValueError, TypeError) as exc:
        raise ConfigError(f"{exc} (from the trainer, accelerator, strategy and precision configs){override_for(exc)}") from None


def run_stages(cfg: Any, trainer: Any) -> dict[str, float]:
    """Fit and/or test as the config asks, from ``cfg.ckpt_path`` if set; the final metrics (printed on rank 0)."""
    ckpt_path = cfg.get("ckpt_path")
    seed_everything(cfg.get("seed", 0))
    model = build_node(cfg.model, "model")
    data = build_node(cfg.data, "data")
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
