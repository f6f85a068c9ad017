"""Every ```python block in the README runs as written, each as its own script in a fresh directory.

A block that cannot run here (it needs GPUs or several nodes, or it is a fragment) carries an HTML
comment on the line before it: ``<!-- not-runnable: why -->``. Keep that set small; the test lists it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARK = re.compile(r"<!--\s*not-runnable:\s*(.+?)\s*-->\s*$")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line number, code, why it is not runnable or None)`` for each python block."""
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = [ln for ln in text[: match.start()].splitlines() if ln.strip()]
        mark = MARK.search(before[-1]) if before else None
        blocks.append((line, match.group(1), mark.group(1) if mark else None))
    return blocks


BLOCKS = python_blocks((ROOT / "README.md").read_text())


def test_the_readme_has_runnable_python_blocks():
    runnable = [b for b in BLOCKS if b[2] is None]
    skipped = [b for b in BLOCKS if b[2] is not None]
    assert runnable, "no python block found: did the fence style change?"
    assert len(skipped) <= max(2, len(BLOCKS) // 4), f"too many blocks marked not-runnable: {skipped}"


def test_imports_of_blocks_that_do_not_run_work():
    """A block marked not-runnable still names real classes: its import lines run."""
    for line, code, why in BLOCKS:
        if why is None:
            continue
        imports = "\n".join(ln for ln in code.splitlines() if ln.startswith(("import ", "from ")))
        done = subprocess.run([sys.executable, "-c", imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"README.md line {line}: {done.stderr[-2000:]}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("line", "code"), [(line, code) for line, code, why in BLOCKS if why is None],
                         ids=[f"README.md:{line}" for line, _, why in BLOCKS if why is None])
def test_readme_block_runs(line, code, tmp_path):
    script = tmp_path / f"readme_line_{line}.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True,
                          timeout=540, env=env)
    assert done.returncode == 0, f"README.md line {line} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_no_merge_conflict_markers():
    text = (ROOT / "README.md").read_text()
    assert not re.search(r"^(<{7} |={7}$|>{7} )", text, re.M), "README.md holds merge conflict markers"


def test_plugins_table_lists_every_name_the_registry_accepts():
    """The README's "| kind | names |" table against ``python -m trainer plugins``'s source."""
    from plugins.registry import default_registry, selection_names

    rows = dict(re.findall(r"^\| (accelerator|strategy|precision|environment) \| (.+) \|$",
                           (ROOT / "README.md").read_text(), re.M))
    extra = selection_names()
    for kind in ("accelerator", "strategy", "precision", "environment"):
        listed = set(re.findall(r"`([^`]+)`", rows[kind]))
        want = set(default_registry().names(kind)) | set(extra.get(kind, {}))
        assert listed == want, f"README plugins table, {kind}: missing {sorted(want - listed)}, extra {sorted(listed - want)}"
