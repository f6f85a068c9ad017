"""``python -m trainer``: train with the Hydra config (by default the bundled GPT example on the CPU).

``python -m trainer plugins`` lists the plugins, ``python -m trainer init NAME`` creates a starter
project and ``python -m trainer install-horovod`` builds Horovod for this torch; like ``import trainer``,
they run without importing Hydra.
"""

from __future__ import annotations

import sys

from plugins.registry import describe
from trainer.cli.app import main as hydra_main
from trainer.cli.init_project import main as init_main
from trainer.cli.install_horovod import main as install_main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["plugins"]:
        describe()
        return 0
    if argv[:1] == ["install-horovod"]:
        return install_main(argv[1:])
    if argv[:1] == ["init"]:
        return init_main(argv[1:])
    return hydra_main(argv)


if __name__ == "__main__":
    sys.exit(main())
