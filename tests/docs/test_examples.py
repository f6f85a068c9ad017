"""Every example in the documentation (README.md and docs/**/*.md) runs as written.

- A ```` ```python ```` block runs as its own script in a fresh directory (``python block.py``; the tests fork it from a
  warm interpreter, tests/forked_programs.py, so a block costs its own work, not torch's import).
- A block that cannot run here (it needs GPUs or several nodes, or lists alternatives rather than one program) says
  so in its fence: ```` ```python {.no-run title="Not run by the tests: why"} ````; the title is shown above the code
  on the site. Its import lines still run, so it names real classes. Keep that set small: the test counts it.
- A ```` ```bash {.run} ```` block holds ``python -m trainer ...`` commands cheap enough for a CPU: each line runs, in
  this process, through the CLI's ``main`` in a fresh directory, and must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(python|bash)[ \t]*(\{[^}\n]*\})?[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
TITLE = re.compile(r'title="([^"]+)"')


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(language: str) -> list[tuple[str, str, set[str], str | None]]:
    """``(where, code, classes, title)`` of each fenced block of ``language``; ``where`` is ``path:line``."""
    found = []
    for path in documents():
        text = path.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) != language:
                continue
            attributes = match.group(2) or ""
            classes = set(re.findall(r"\.([\w-]+)", attributes))
            title = TITLE.search(attributes)
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((where, match.group(3), classes, title.group(1) if title else None))
    return found


PYTHON = blocks("python")
RUNNABLE = [(where, code) for where, code, classes, _ in PYTHON if "no-run" not in classes]
NOT_RUN = [(where, code, title) for where, code, classes, title in PYTHON if "no-run" in classes]
COMMANDS = [(f"{where}: {line.strip()}", line.split("  #", 1)[0].strip())
            for where, code, classes, _ in blocks("bash") if "run" in classes
            for line in code.splitlines() if line.strip()]


def test_the_examples_are_found_and_few_are_not_run():
    print(f"documentation examples: {len(RUNNABLE)} python blocks run, {len(NOT_RUN)} not run, "
          f"{len(COMMANDS)} CLI commands run")
    assert len(RUNNABLE) >= 8, "python blocks not found: did the fence style change?"
    assert len(NOT_RUN) <= max(3, len(PYTHON) // 4), f"too many blocks marked not to run: {[w for w, _, _ in NOT_RUN]}"
    assert COMMANDS, "no ```bash {.run} block found"


def test_a_block_that_is_not_run_says_why_and_its_imports_work():
    lines = []
    for where, code, title in NOT_RUN:
        assert title and title.startswith("Not run by the tests:"), \
            f"{where}: say why in title=\"Not run by the tests: ...\""
        lines += [line for line in code.splitlines() if line.startswith(("import ", "from "))]
    done = subprocess.run([sys.executable, "-c", "\n".join(sorted(set(lines)))], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("where", "code"), RUNNABLE, ids=[where for where, _ in RUNNABLE])
def test_python_example_runs(where, code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=540,
                          env=env)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_cli_example_runs(where, command, tmp_path, monkeypatch):
    from trainer.__main__ import main

    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "trainer"], f"{where}: only `python -m trainer ...` lines run here"
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv[3:])
    except SystemExit as exit:  # --help ends the way a command line does
        code = exit.code
    assert code in (0, None), where


def test_no_merge_conflict_markers():
    for path in documents():
        assert not re.search(r"^(<{7} |={7}$|>{7} )", path.read_text(), re.M), f"{path} holds merge conflict markers"


def test_the_readme_keeps_the_commands_ci_runs():
    """.ci/run reads the test command between these markers; the main command is the project's main job."""
    text = (ROOT / "README.md").read_text()
    for name in ("main-command", "test-command"):
        block = text.split(f"<!-- {name} -->", 1)[1].split(f"<!-- /{name} -->", 1)[0]
        assert [line for line in block.splitlines() if line.strip() and not line.startswith("```")], name
