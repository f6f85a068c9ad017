"""Lightning's ``fabric`` command (``lightning.fabric.cli``): ``fabric run script.py`` and ``fabric consolidate``.

``fabric run`` exports its options as the ``LT_*`` variables Fabric reads (``fabric_helpers._set_env_variables``)
and starts the script's processes with ``torchrun`` (torch.distributed.run), as Lightning does; Relay's Fabric in
each process picks the options up. The command needs ``click``, as Lightning's does.
"""

from __future__ import annotations

import os
from argparse import Namespace
from typing import Any

from lightning_utilities.core.imports import RequirementCache

from trainer.lightning_compat.impl.fabric_helpers import (
    _get_num_processes,
    _get_supported_strategies,
    _set_env_variables,
)

_CLICK_AVAILABLE = RequirementCache("click")
_SUPPORTED_ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "tpu", "auto")
_PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
               "32-true", "64-true", "64", "32", "16", "bf16")


def _torchrun_launch(args: Namespace, script_args: list[str]) -> None:
    """Start ``args.script`` in ``torchrun``'s processes on this machine."""
    import torch.distributed.run as torchrun

    # local import: the launch command alone needs it, not `fabric --help`
    from trainer.lightning_compat.impl.utilities import _suggested_max_num_threads

    processes = 1 if args.strategy == "dp" else _get_num_processes(args.accelerator, args.devices)
    torchrun_args = [f"--nproc_per_node={processes}", f"--nnodes={args.num_nodes}", f"--node_rank={args.node_rank}",
                     f"--master_addr={args.main_address}", f"--master_port={args.main_port}", args.script,
                     *script_args]
    os.environ.setdefault("OMP_NUM_THREADS", str(_suggested_max_num_threads()))  # no oversubscription warning
    torchrun.main(torchrun_args)


def main(args: Namespace, script_args: list[str] | None = None) -> None:
    """``fabric run`` without the command line: the options as a Namespace."""
    _set_env_variables(args)
    _torchrun_launch(args, script_args or [])


def _consolidate_checkpoint(checkpoint_folder: str, output_file: str | None) -> None:
    import torch

    # local import: the consolidate command alone needs the checkpoint readers
    from trainer.lightning_compat.impl.fabric_strategies import _load_distributed_checkpoint, _process_cli_args

    config = _process_cli_args(Namespace(checkpoint_folder=checkpoint_folder, output_file=output_file))
    torch.save(_load_distributed_checkpoint(config.checkpoint_folder), config.output_file)


if _CLICK_AVAILABLE:
    import click

    @click.group()
    def _main() -> None:
        pass

    @_main.command("run", context_settings={"ignore_unknown_options": True})
    @click.argument("script", type=click.Path(exists=True))
    @click.option("--accelerator", type=click.Choice(_SUPPORTED_ACCELERATORS), default=None,
                  help="The hardware accelerator to run on.")
    @click.option("--strategy", type=click.Choice(_get_supported_strategies()), default=None,
                  help="Strategy for how to run across multiple devices.")
    @click.option("--devices", type=str, default="1",
                  help="Number of devices to run on (``int``), which devices to run on (``list`` or ``str``), or "
                       "``'auto'``. The value applies per node.")
    @click.option("--num-nodes", "--num_nodes", type=int, default=1,
                  help="Number of machines (nodes) for distributed execution.")
    @click.option("--node-rank", "--node_rank", type=int, default=0,
                  help="The index of the machine (node) this command gets started on, in 0 ... num_nodes - 1.")
    @click.option("--main-address", "--main_address", type=str, default="127.0.0.1",
                  help="The hostname or IP address of the main machine (usually the one with node_rank = 0).")
    @click.option("--main-port", "--main_port", type=int, default=29400,
                  help="The main port to connect to the main machine.")
    @click.option("--precision", type=click.Choice(_PRECISIONS), default=None,
                  help="Double (``64-true``), full (``32-true``), half (``16-mixed``) or bfloat16 (``bf16-mixed``) "
                       "precision.")
    @click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
    def _run(**kwargs: Any) -> None:
        """Run a Lightning Fabric script.

        SCRIPT is the path to the Python script with the code to run. The script must contain a Fabric object.

        SCRIPT_ARGS are the remaining arguments that you can pass to the script itself and are expected to be parsed
        there.
        """
        script_args = list(kwargs.pop("script_args", []))
        main(args=Namespace(**kwargs), script_args=script_args)

    @_main.command("consolidate", context_settings={"ignore_unknown_options": True})
    @click.argument("checkpoint_folder", type=click.Path(exists=True))
    @click.option("--output_file", type=click.Path(exists=True), default=None,
                  help="Where the consolidated checkpoint goes (default: next to the folder, '.consolidated').")
    def _consolidate(checkpoint_folder: str, output_file: str | None) -> None:
        """Convert a distributed/sharded checkpoint into a single file that can be loaded with `torch.load()`."""
        _consolidate_checkpoint(checkpoint_folder, output_file)

else:  # pragma: no cover - click comes with most installs

    def _missing(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("The `fabric` command needs `click`: `pip install -U click`.")

    _main = _run = _consolidate = _missing
