"""``python -m trainer``: the main job (the bundled GPT example on CPU, with TensorBoard logs)."""

from __future__ import annotations

import sys

USAGE = """usage: python -m trainer [plugins]

Without arguments: trains the bundled GPT example (sorting digit sequences, data generated on the
fly) on the CPU, writing TensorBoard logs and checkpoints under ./relay_logs/version_<n>.

  plugins   list every registered plugin (accelerators, strategies, precision, environments),
            including third-party ones from installed entry points
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv == ["plugins"]:
        from plugins.registry import describe

        describe()
        return 0
    if argv:
        print(f"python -m trainer: unexpected arguments {argv}.\n\n{USAGE}", file=sys.stderr)
        return 2
    from trainer.examples.run import train_sorting

    train_sorting(".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
