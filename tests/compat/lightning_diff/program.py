"""One program, run once on each framework: ``python program.py lightning|relay [check ...]``.

Every check is a function of the framework's names (see ``frameworks.py``) returning what a user observes;
the program prints them all as one JSON object. An exception inside a check is recorded, not fatal.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.compat.lightning_diff import (  # noqa: E402
    checks_checkpoint,
    checks_data,
    checks_hooks,
    checks_logging,
    checks_members,
    checks_module_members,
    checks_optim,
    checks_strategy_members,
)
from tests.compat.lightning_diff.common import exception  # noqa: E402
from tests.compat.lightning_diff.frameworks import load  # noqa: E402
from tests.compat.lightning_diff.harness import emit  # noqa: E402

MODULES = [checks_checkpoint, checks_data, checks_hooks, checks_logging, checks_members, checks_module_members,
           checks_optim, checks_strategy_members]


def main(framework: str, names: list[str]) -> None:
    warnings.filterwarnings("ignore")
    fw = load(framework)
    checks: dict = {"rank_zero_at_import": lambda: fw.rank_at_import}
    for module in MODULES:
        checks.update(module.checks(fw))
    result = {}
    for name in names or list(checks):
        try:
            result[name] = checks[name]()
        except Exception as err:  # an exception is an observation too
            result[name] = exception(err)
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
