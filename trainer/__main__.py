"""``python -m trainer``: train with the Hydra config (by default the bundled GPT example on the CPU).

``python -m trainer plugins`` lists the plugins, ``python -m trainer init NAME`` creates a starter
project, ``python -m trainer convert-checkpoint DIR FILE`` turns a sharded checkpoint into one file,
``python -m trainer export-hf CKPT DIR`` writes a checkpoint's weights as Hugging Face safetensors,
``python -m trainer plan <overrides>`` prints the per-rank memory plan of a run and
``python -m trainer install-horovod`` builds Horovod for this torch. Each subcommand imports
only what it needs: ``install-horovod`` runs in CI right after torch is installed, before Relay's own
dependencies (lightning_utilities, hydra, fsspec) are there.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["install-horovod"]:
        # local import: standard library only, so it runs before Relay's dependencies are installed
        from trainer.cli.install_horovod import main as install_main

        return install_main(argv[1:])
    if argv[:1] == ["init"]:
        # local import: writes template files; no Hydra or strategy import needed
        from trainer.cli.init_project import main as init_main

        return init_main(argv[1:])
    if argv[:1] == ["convert-checkpoint"]:
        # local import: reads and writes checkpoints only; no Hydra or strategy import needed
        from trainer.checkpointing.convert import main as convert_main

        return convert_main(argv[1:])
    if argv[:1] == ["export-hf"]:
        # local import: safetensors and the checkpoint reader, no Hydra
        from trainer.cli.export_hf import main as export_main

        return export_main(argv[1:])
    if argv[:1] == ["plan"]:
        # local import: the memory plan composes the config, builds the model on fake tensors, and runs nothing
        from trainer.planning.cli import main as plan_main

        return plan_main(argv[1:])
    if argv == ["plugins"]:
        # local import: the registry, without Hydra
        from plugins.registry import describe

        describe()
        return 0
    # local import: Hydra and the whole training stack load only for a run
    from trainer.cli.app import main as hydra_main

    return hydra_main(argv)


if __name__ == "__main__":
    sys.exit(main())
