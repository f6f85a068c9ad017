"""One run from a composed config, for the Hydra entry: build the objects, then fit and/or test (or hand over to a
launcher). The objects come from ``trainer.cli.build``, which the workers a launcher started use too
(``trainer.cli.worker``), so both build exactly the same objects from the same resolved config.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from plugins.launchers.base import FunctionLauncher, RankFailedError
from plugins.strategies.base import Strategy
from trainer.cli.build import build_node, build_trainer, run_stages
from trainer.cli.check import require_nodes
from trainer.cli.errors import ConfigError
from trainer.cli.worker import run_worker

if TYPE_CHECKING:
    from omegaconf import DictConfig

RESOLVED_CONFIG = "resolved.yaml"  # in <run dir>/.hydra/, next to Hydra's own config.yaml
WORKER_MODULE = "trainer.cli.worker"


def worker_command(config_file: Path) -> list[str]:
    return [sys.executable, "-m", WORKER_MODULE, str(config_file)]


def run_job(cfg: DictConfig, config_file: Path | None) -> int:
    """Build and run in this process, or let a launcher start the workers: the ``launcher`` config (Ray,
    Spark) when one is chosen, else the strategy's own when it needs several processes.

    ``config_file`` is the resolved config the workers load (they never compose again).
    """
    require_nodes(cfg)
    engine = build_node(cfg.get("launcher"), "launcher")
    trainer = build_trainer(cfg) if engine is None else None  # an engine's driver may have no GPU: not built here
    launcher = getattr(trainer.strategy, "launcher", None) if trainer is not None else None
    if hasattr(launcher, "launch_function"):  # ddp_spawn starts its workers inside fit()
        launcher = None
    if engine is None and launcher is None:
        run_stages(cfg, trainer)
        return 0
    if config_file is None:
        raise ConfigError("This run starts worker processes, which need the run's resolved config file.")
    # the workers import what this process could (a user's project on sys.path, not installed)
    path = os.pathsep.join([*(p for p in sys.path if p), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if engine is None:
        check_model_before_launch(cfg, trainer.strategy)
        return int(launcher.launch(worker_command(config_file), env={"PYTHONPATH": path}) or 0)
    return run_with_engine(engine, cfg, config_file, {"PYTHONPATH": path})


def check_model_before_launch(cfg: DictConfig, strategy: Strategy) -> None:
    """A strategy that checks the Module's layout (pipeline stages) sees it here, built on the meta device (no
    memory, no weights), so a layout that cannot work is one line before any worker starts."""
    if type(strategy).check_module is Strategy.check_module:
        return
    import torch

    try:
        with torch.device("meta"):
            model = build_node(cfg.model, "model")
    except Exception:  # noqa: BLE001 (a model that cannot be built on meta: the workers build it for real)
        return
    if model is None:
        return
    try:
        strategy.check_module(model)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def engine_processes(cfg: DictConfig) -> tuple[int, bool]:
    """How many workers an engine starts (``trainer.devices x trainer.num_nodes``) and whether each gets a GPU,
    read from the config: the driver (a Ray head, a Spark driver) need not have the workers' hardware."""
    accelerator = str((cfg.get("accelerator") or {}).get("_target_", ""))
    args = (cfg.get("accelerator") or {}).get("_args_") or []
    auto = accelerator == "builtins.str" and list(args) in (["auto"], ["gpu"])
    use_gpu = any(kind in accelerator.lower() for kind in ("cuda", "rocm")) or (auto and _local_gpus() > 0)
    devices, nodes = cfg.trainer.get("devices", "auto"), int(cfg.trainer.get("num_nodes", 1) or 1)
    if devices == "auto" or devices == -1:
        count = max(1, _local_gpus()) if use_gpu else 1
    elif isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        count = devices
    elif isinstance(devices, str) and devices.replace(",", "").replace(" ", "").isdigit():
        count = len([d for d in devices.split(",") if d.strip()]) if "," in devices else int(devices)
    elif not isinstance(devices, str) and hasattr(devices, "__len__") and len(devices) > 0:  # a list of indices
        count = len(devices)
    else:
        raise ConfigError(f"trainer.devices={devices!r} cannot size the engine's workers; pass a number, "
                          "e.g. launcher=ray trainer.devices=2")
    return count * nodes, use_gpu


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run_with_engine(engine: object, cfg: DictConfig, config_file: Path, env: dict[str, str]) -> int:
    """Hand the worker entry to an engine (Ray Train, Spark) for ``devices x num_nodes`` processes."""
    if not isinstance(engine, FunctionLauncher):
        raise ConfigError(f"launcher._target_ must name a FunctionLauncher (e.g. launcher=ray or launcher=spark), "
                          f"got {type(engine).__name__}.")
    processes, use_gpu = engine_processes(cfg)
    try:
        result = engine.run(run_worker, (str(config_file),), processes=processes, use_gpu=use_gpu, env=env)
    except RankFailedError as err:
        print(err, file=sys.stderr, flush=True)
        return 1
    except ValueError as err:  # the engine's own setup (not installed, a bad launcher.* value): one line
        raise ConfigError(f"{err} (from the launcher config)") from None
    checkpoint = result.get("checkpoint") if isinstance(result, dict) else None
    if checkpoint:
        print(f"{engine.name}: rank 0 reported its checkpoint: {checkpoint}")
    return 0
