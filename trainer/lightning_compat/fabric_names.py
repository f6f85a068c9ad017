"""Lightning Fabric's module paths (``lightning.fabric.*``, ``lightning_fabric.*``) -> the Relay modules serving them.

The same three tables as ``lightning.pytorch``'s in ``trainer/lightning_compat/__init__.py``: the first part of
a path (PACKAGES), deeper modules with another Relay path (MODULES), and deeper modules whose names the
package's namespace serves (SUBMODULES).
"""

from __future__ import annotations

ROOTS = ("lightning.fabric", "lightning_fabric")
ROOT_TARGET = "trainer.fabric"

PACKAGES = {
    "fabric": "trainer.fabric.fabric",
    "wrappers": "trainer.fabric.wrappers",
    "utilities": "trainer.fabric.utilities",
    "accelerators": "trainer.fabric.accelerators",
    "loggers": "trainer.fabric.loggers",
    "strategies": "trainer.strategies",
    "plugins": "trainer.fabric.plugins",
}
_ENVIRONMENTS = ("cluster_environment", "kubeflow", "lightning", "lsf", "mpi", "slurm", "torchelastic")
MODULES = {
    "utilities.rank_zero": "trainer.utilities.rank_zero",
    "utilities.warnings": "trainer.utilities.warnings",
    "utilities.exceptions": "trainer.utilities.exceptions",
    "utilities.enums": "trainer.utilities.enums",
    "utilities.types": "trainer.fabric.utilities.types",
    "plugins.environments": "trainer.plugins.environments",
    **{f"plugins.environments.{name}": "trainer.plugins.environments" for name in _ENVIRONMENTS},
}
SUBMODULES = {
    "loggers": {"logger", "tensorboard", "csv_logs"},
    "accelerators": {"accelerator", "cpu", "cuda", "mps", "xla", "registry"},
    "strategies": {"strategy", "ddp", "fsdp", "single_device", "parallel", "model_parallel", "deepspeed", "registry"},
    "plugins": {"precision", "precision.precision", "precision.half", "precision.double", "precision.amp"},
}
