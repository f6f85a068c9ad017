"""``python -m trainer.lightning_compat script.py [args]`` (or ``-m package.module [args]``): run Lightning code on Relay.

The script runs exactly as ``python script.py`` would (``__name__ == "__main__"``, ``sys.argv``, its folder
first on ``sys.path``), with Lightning's import names served by Relay, in this process and in every
process it starts.
"""

from __future__ import annotations

import os
import runpy
import sys

from trainer.lightning_compat import NotProvidedError, install

USAGE = ("usage: python -m trainer.lightning_compat script.py [args...]\n"
         "       python -m trainer.lightning_compat -m package.module [args...]\n"
         "Runs an unmodified Lightning program on Relay (imports of lightning, lightning.pytorch and "
         "pytorch_lightning are served by Relay; see docs/lightning_api.md).")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    install()
    try:
        _run(argv)
    except (NotProvidedError, ImportError) as err:  # one line, at the user's line, instead of a trace
        # `from lightning.x import Name` turns the alias's error into Python's own ImportError: show ours
        ours = err if isinstance(err, NotProvidedError) else err.__context__
        if not isinstance(ours, NotProvidedError):
            raise
        print(f"{_user_frame(err)}{ours}", file=sys.stderr)
        raise SystemExit(1) from None


def _user_frame(err: BaseException) -> str:
    """``path:line: `` of the innermost frame outside Python's import machinery and Relay."""
    import traceback

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not f.filename.startswith("<frozen") and not f.filename.startswith(here)
              and os.path.basename(f.filename) != "runpy.py"]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""


def _run(argv: list[str]) -> None:
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        sys.argv = [argv[1], *argv[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.isfile(script):
        print(f"trainer.lightning_compat: no such script: {script}", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
