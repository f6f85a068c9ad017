"""``python -m trainer``: compose the config (checked first, so mistakes are one line), then run it.

Hydra runs the job (``@hydra.main``): it makes the run directory, writes ``.hydra/``, changes into it,
and expands ``-m`` sweeps into one job per combination. Each job resolves its config once, saves it as
``.hydra/resolved.yaml`` and builds the Trainer from it; worker processes load that file, never Hydra.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.cli.check import compose_checked
from trainer.cli.console import console_to_log
from trainer.cli.errors import ConfigError
from trainer.cli.help import help_text
from trainer.cli.job import RESOLVED_CONFIG, run_job
from trainer.cli.overrides import canonical_precision, resume_in_place
from trainer.cli.runs import launcher_overrides, new_invocation, register_resolvers, resolve_ckpt_path
from trainer.cli.schema import register_configs
from trainer.stage.input_checks import _unwritable
from trainer.cli.resources import configs_dir

if TYPE_CHECKING:
    from omegaconf import DictConfig

# Hydra flags after which no job runs, so nothing needs checking first.
_INFO_FLAGS = ("help", "hydra_help", "info", "shell_completion")


def _resolved_config(cfg: DictConfig) -> Any:
    """The job's config with every interpolation resolved and ``ckpt_path=last`` made a concrete file."""
    from hydra.utils import get_original_cwd
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(cfg, resolve=True)
    output_root = Path(get_original_cwd()) / str(data.get("output_root") or ".")
    data["ckpt_path"] = resolve_ckpt_path(data.get("ckpt_path"), output_root)
    return OmegaConf.create(data)


def _run_composed(cfg: DictConfig) -> int:
    """The Hydra task: inside the run directory, on the composed config."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    output_subdir = HydraConfig.get().output_subdir  # None on ranks other than 0 (see runs.launcher_overrides)
    logging_here = output_subdir is not None  # one relay.log per run directory, from rank 0
    with console_to_log(os.getcwd()) if logging_here else contextlib.nullcontext():
        print(f"run directory: {os.getcwd()}", flush=True)
        resolved = _resolved_config(cfg)
        config_file = None
        if output_subdir is not None:
            config_file = Path(os.getcwd(), output_subdir, RESOLVED_CONFIG)
            config_file.parent.mkdir(parents=True, exist_ok=True)
            config_file.write_text(OmegaConf.to_yaml(resolved))
        return run_job(resolved, config_file)


def run_hydra(argv: Sequence[str], config_dir: str, config_name: str = "config") -> int:
    """Check the overrides, then let Hydra run (or sweep) the job; the exit code."""
    import hydra
    from hydra._internal.utils import get_args_parser

    register_resolvers()
    new_invocation()

    argv = canonical_precision(argv)
    args = get_args_parser().parse_args(list(argv))
    config_name = args.config_name or config_name
    if args.help and not args.config_dir and not args.config_path:
        print(help_text(config_dir, config_name, args.overrides))
        return 0
    extra = launcher_overrides(args.overrides)
    if not any(getattr(args, flag, False) for flag in _INFO_FLAGS) and not args.config_dir and not args.config_path:
        cfg = compose_checked(config_dir, config_name, [*args.overrides, *extra], multirun=args.multirun)
        _check_output_root(cfg)
        if not args.multirun and not args.cfg:
            extra += resume_in_place(cfg, [*args.overrides, *extra])

    codes: list[int] = []

    def task(cfg: DictConfig) -> None:
        try:
            codes.append(_run_composed(cfg))
        except ConfigError as err:  # found while building the objects: one line, and the sweep goes on
            print(f"error: {err}", file=sys.stderr)
            codes.append(2)

    task.__module__ = "relay"  # Hydra names the job (and its log file) after the task's module
    main = hydra.main(config_path=config_dir, config_name=config_name, version_base="1.3")(task)
    saved = sys.argv
    sys.argv = [saved[0] if saved else "trainer", *argv, *extra]
    try:
        main()
    finally:
        sys.argv = saved
    return max(codes, default=0)


def _check_output_root(cfg: DictConfig | None) -> None:
    """An output_root that cannot be written: one line now, not Hydra's traceback while it makes the run dir."""
    root = cfg.get("output_root") if cfg is not None else None
    problem = _unwritable(os.path.abspath(str(root))) if root else None
    if problem is not None:
        raise ConfigError(f"output_root={root} cannot be written: {problem}. Set output_root=<a writable directory>.")


def main(argv: Sequence[str] | None = None, config_dir: str | os.PathLike | None = None,
         config_name: str = "config") -> int:
    """Entry point for ``python -m trainer`` and a project's own script (``config_dir``: its configs,
    which extend ours through the search path ``pkg://trainer.configs``; ``config_name``: its primary config)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    register_configs()
    try:
        return run_hydra(argv, str(Path(config_dir or configs_dir()).resolve()), config_name)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
