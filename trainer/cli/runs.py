"""Run directories: finding the newest earlier run's checkpoint, and sharing one directory across ranks.

Under an external launcher (torchrun, srun, mpirun, a PyTorchJob) every rank runs ``python -m trainer``
itself; all of them must use the same run directory, and only rank 0 writes ``.hydra/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from plugins.environments.detect import detect_environment
from trainer.checkpointing.files import newest_checkpoint
from trainer.cli.errors import ConfigError

_RESERVED: dict[str, str] = {}  # base path -> the directory this invocation reserved for it


def new_invocation() -> None:
    """A new ``python -m trainer`` call (tests make several in one process) reserves new directories."""
    _RESERVED.clear()


def unique_dir(base: str) -> str:
    """``base``, or ``base-2``, ``base-3``...: the first that did not exist, created now so that no other run
    (started in the same second, in this process or another) can take it. The same answer for the rest of
    this invocation. Hydra calls it through ``${relay_unique:...}`` in ``hydra.run.dir``."""
    if base in _RESERVED:
        return _RESERVED[base]
    path = Path(base)
    n = 1
    while True:
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            candidate.mkdir()
        except FileExistsError:
            n += 1
            continue
        except OSError as err:
            raise ConfigError(f"cannot create the run directory {candidate}: {err.strerror or err}; set "
                              "output_root=<a writable directory>.") from None
        _RESERVED[base] = str(candidate)
        return str(candidate)


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("relay_unique", unique_dir, replace=True)


def resolve_ckpt_path(ckpt_path: str | None, output_root: Path) -> str | None:
    """``"last"``: the newest checkpoint of any earlier run under ``output_root``; a path must exist."""
    if ckpt_path is None:
        return None
    if str(ckpt_path) != "last":
        path = Path(ckpt_path).expanduser()
        if not path.exists():  # a file, or a directory (sharded / DeepSpeed checkpoint): the loader checks it
            raise ConfigError(f"ckpt_path={ckpt_path} does not exist. Pass a checkpoint path, or ckpt_path=last "
                              f"for the newest checkpoint under {output_root}.")
        return str(path.resolve())
    found = newest_checkpoint([output_root], recursive=True)
    if found is None:
        print(f"ckpt_path=last: no checkpoint under {output_root} yet; starting from scratch.")
        return None
    print(f"ckpt_path=last: resuming from {found}")
    return str(found)


def shared_run_id(env: Mapping[str, str]) -> str | None:
    """An id every rank of an externally launched job sees alike (None: not launched externally)."""
    if env.get("TORCHELASTIC_RUN_ID"):
        return f"torchrun-{env['TORCHELASTIC_RUN_ID']}"
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
    if env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR") and env.get("HOROVOD_GLOO_RENDEZVOUS_PORT"):  # horovodrun --gloo
        return f"horovodrun-{env['HOROVOD_GLOO_RENDEZVOUS_ADDR']}-{env['HOROVOD_GLOO_RENDEZVOUS_PORT']}"
    for name in ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"):  # mpirun (and horovodrun over MPI)
        if env.get(name):
            return "mpi-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env[name])
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"job-{env['MASTER_ADDR']}-{env['MASTER_PORT']}"
    return None


def launcher_overrides(overrides: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Extra Hydra overrides for a rank started by an external launcher: one shared run directory
    (unless the command sets ``hydra.run.dir``) and no ``.hydra/`` or log file from ranks other than 0."""
    env = os.environ if env is None else env
    cluster = detect_environment(env)
    if not cluster.creates_processes_externally:
        return []
    extra = []
    given = {o.partition("=")[0].lstrip("+") for o in overrides}
    run_id = shared_run_id(env)
    if run_id and "hydra.run.dir" not in given:
        extra.append(f"hydra.run.dir=${{output_root}}/{run_id}")
    if run_id and "hydra.sweep.dir" not in given:
        extra.append(f"hydra.sweep.dir=${{output_root}}/multirun/{run_id}")
    if cluster.global_rank() != 0:
        extra += ["hydra.output_subdir=null", "hydra/job_logging=stdout", "hydra/hydra_logging=none"]
    return extra
