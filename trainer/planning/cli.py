"""``python -m trainer plan <overrides> [--memory 80GB] [--devices N] [--max-tp 8]``: the memory plan of a run.

The config is composed as for a run (the same overrides), the Trainer is built (no process starts), the model is
built on the meta device and one batch is read from the data; then the per-rank memory of the configured layout is
printed, and whether it fits ``--memory`` (default: the accelerator's device memory). With ``--devices N`` (and
``--memory``), every layout of N devices is estimated and the ones that fit are listed, least memory first.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch

from trainer.cli.build import build_node, build_trainer
from trainer.cli.check import compose_checked
from trainer.cli.errors import ConfigError
from trainer.cli.schema import register_configs
from trainer.planning.estimate import fitting_layouts, format_bytes
from trainer.planning.trainer_plan import estimate_for_trainer, first_batch

if TYPE_CHECKING:
    from trainer.planning.estimate import MemoryEstimate
from trainer.cli.resources import configs_dir
from trainer.seed import seed_everything

PLAN_FLAGS = ("--memory", "--devices", "--max-tp")


def split_argv(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """The plan's own flags (``--memory 80GB`` or ``--memory=80GB``) and the Hydra overrides."""
    flags: dict[str, str] = {}
    overrides: list[str] = []
    items = iter(argv)
    for item in items:
        name, eq, value = item.partition("=")
        if name in PLAN_FLAGS:
            flags[name[2:]] = value if eq else next(items, "")
        elif item in ("-h", "--help"):
            flags["help"] = "1"
        else:
            overrides.append(item)
    return flags, overrides


def _quiet_overrides(overrides: list[str]) -> list[str]:
    """No logger and no callbacks unless asked: a plan writes nothing."""
    given = {o.lstrip("+~").partition("=")[0] for o in overrides}
    return [*(f"{group}=none" for group in ("logger", "callbacks") if group not in given), *overrides]


def table(estimates: list[MemoryEstimate], limit: int = 20) -> str:
    lines = [f"{'layout':<34} {'params':>10} {'grads':>10} {'optim':>10} {'activ.':>10} {'buffers':>10} "
             f"{'peak/rank':>11}  fits"]
    for e in estimates[:limit]:
        lines.append(f"{e.layout.describe():<34} {format_bytes(e.parameters):>10} {format_bytes(e.gradients):>10} "
                     f"{format_bytes(e.optimizer_state):>10} {format_bytes(e.activations):>10} "
                     f"{format_bytes(e.strategy_buffers):>10} {format_bytes(e.peak):>11}  "
                     f"{'yes' if e.fits else 'no'}")
    if len(estimates) > limit:
        lines.append(f"... and {len(estimates) - limit} more")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    flags, overrides = split_argv(argv)
    if "help" in flags:
        print(__doc__)
        return 0
    try:
        register_configs()
        cfg = compose_checked(str(configs_dir()), "config", _quiet_overrides(overrides))
        trainer = build_trainer(cfg)
        seed_everything(cfg.get("seed", 0))
        with torch.device("meta"):
            model = build_node(cfg.model, "model")
        data = build_node(cfg.data, "data")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    memory = flags.get("memory") or None
    try:
        if "devices" in flags:
            if memory is None:
                print("error: plan --devices N needs --memory (e.g. --memory 80GB): the memory of one device.",
                      file=sys.stderr)
                return 2
            batch = first_batch(model, None, data)
            found = fitting_layouts(model, batch, int(flags["devices"]), memory, max_tp=int(flags.get("max-tp", 8)))
            fit = [e for e in found if e.fits]
            print(f"{len(fit)} of {len(found)} layouts of {flags['devices']} device(s) fit in {memory} per device "
                  "(least memory first):")
            print(table(fit or found))
            return 0 if fit else 1
        estimate = trainer.estimate(model, datamodule=data, device_memory=memory)  # with its activation checkpointing
    except (ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(estimate)
    return 0 if estimate.fits is not False else 1
