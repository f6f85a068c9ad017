"""One layer under both front ends: the Trainer and Fabric reach the plugins through the same functions
(``trainer/distributed/launch.py`` to start and join processes, ``trainer/distributed/strategy.py`` to set a module and
its optimizers up (an engine such as DeepSpeed's is built there), move batches and run backward,
``trainer/checkpointing/strategy_state.py`` to save or load state), and nothing else in ``trainer/`` calls those
strategy methods itself.

The first tests read the source (like tests/trainer/test_import_graph.py), so they hold for code paths no test
runs; the last ones check that what the shared calls do is what both front ends observe.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import trainer
from tests.helpers import Regression, loader, quiet
from trainer import Trainer
from trainer.distributed import strategy
from trainer.errors import CheckpointNotFoundError
from trainer.fabric import Fabric

ROOT = Path(trainer.__file__).parent

# (file under trainer/, function or Class.method) -> the layer's functions it must call
TRAINER_SITES = {
    ("stage/run.py", "run_stage"): {"start_processes"},
    ("stage/spawned.py", "run_stage_in_workers"): {"start_processes"},
    ("stage/begin.py", "begin_stage"): {"join_processes"},
    ("stage/model_setup.py", "set_up_model"): {"setup_module", "setup_optimizers"},
    ("data/batches.py", "BatchMover.__call__"): {"move_to_device"},
    ("loops/training_step.py", "TrainingStep._bind_fast_paths"): {"backward_function"},
    ("module.py", "Module.backward"): {"backward"},
    ("trainer.py", "Trainer.save_checkpoint"): {"save_state"},
    ("checkpointing/contents.py", "collect_checkpoint"): {"module_state", "optimizer_state"},
    ("checkpointing/files.py", "load_checkpoint"): {"read_state"},
    ("checkpointing/resume.py", "Resume.restore_weights"): {"load_module_state"},
    ("checkpointing/resume.py", "Resume.restore_training"): {"load_optimizer_state"},
}
FABRIC_SITES = {
    ("fabric/fabric.py", "Fabric.launch"): {"start_processes", "join_processes"},
    ("fabric/fabric.py", "Fabric.setup"): {"setup_module", "setup_optimizers"},
    ("fabric/fabric.py", "Fabric.setup_module"): {"setup_module"},
    ("fabric/fabric.py", "Fabric.setup_optimizers"): {"setup_optimizers"},
    ("fabric/wrappers.py", "FabricDataLoader.__iter__"): {"move_to_device"},
    ("fabric/fabric.py", "Fabric.backward"): {"backward"},
    ("fabric/checkpoint.py", "save"): {"save_state", "module_state", "optimizer_state"},
    ("fabric/checkpoint.py", "load"): {"read_state", "load_module_state", "load_optimizer_state"},
}
# the strategy (and launcher) methods only the layer's modules may call: anything else goes through them
LAYER_MODULES = ("trainer.distributed.launch", "trainer.distributed.strategy", "trainer.checkpointing.strategy_state")
LAYER_ONLY = {"setup_environment", "setup_module", "setup_optimizers", "batch_to_device", "backward", "launch_function",
              "save_checkpoint", "module_state_dict", "optimizer_state_dict", "load_module_state_dict",
              "load_optimizer_state_dict"}


def layer_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names a file binds to the layer's functions (``from trainer.distributed.strategy import x``) and to its
    modules (``from trainer.distributed import strategy as calls``), at any depth (lazy imports count)."""
    functions, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in LAYER_MODULES:
            functions |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules |= {a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in LAYER_MODULES}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name in LAYER_MODULES and a.asname}
    return functions, modules


def definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level functions by name and methods as ``Class.method``."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            found.update({f"{node.name}.{n.name}": n for n in node.body
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    return found


def layer_calls(source: str, where: str) -> set[str]:
    """The layer's functions that ``where`` (a function or ``Class.method`` of ``source``) calls."""
    tree = ast.parse(source)
    functions, modules = layer_names(tree)
    body = definitions(tree)[where]
    called = set()
    for node in ast.walk(body):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in functions:
            called.add(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
            called.add(func.attr)
    return called


def direct_strategy_calls(source: str) -> list[str]:
    """Calls of a ``LAYER_ONLY`` method on a strategy or launcher object (``trainer.strategy.backward(...)``,
    ``self._strategy.setup_module(...)``, ``launcher.launch_function(...)``), and of ``launch_workers_and_exit``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "launch_workers_and_exit":
            found.append(f"line {node.lineno}: launch_workers_and_exit(...)")
        elif isinstance(func, ast.Attribute) and func.attr in LAYER_ONLY:
            receiver = ast.unparse(func.value)
            if "strategy" in receiver.lower() or "launcher" in receiver.lower():
                found.append(f"line {node.lineno}: {receiver}.{func.attr}(...)")
    return found


@pytest.mark.parametrize("sites", [TRAINER_SITES, FABRIC_SITES], ids=["trainer", "fabric"])
def test_each_front_end_calls_the_shared_layer_where_it_does_the_same_thing(sites):
    missing = []
    for (path, where), needed in sites.items():
        called = layer_calls((ROOT / path).read_text(), where)
        missing += [f"trainer/{path} {where} does not call the layer's {n}" for n in sorted(needed - called)]
    assert not missing, "\n".join(missing)


def test_both_front_ends_reach_every_shared_step():
    """The Trainer and Fabric share each step (backward: the Trainer binds what ``backward`` runs, once)."""
    trainer_steps = set().union(*TRAINER_SITES.values()) - {"backward_function"}
    fabric_steps = set().union(*FABRIC_SITES.values())
    assert fabric_steps <= trainer_steps
    shared = definitions(ast.parse((ROOT / "distributed/strategy.py").read_text()))["backward"]
    assert "backward_function" in {n.func.id for n in ast.walk(shared) if isinstance(n, ast.Call)
                                   and isinstance(n.func, ast.Name)}


def test_nothing_else_in_trainer_calls_the_strategy_methods_the_layer_wraps():
    layer = {ROOT.joinpath(*m.split(".")[1:]).with_suffix(".py") for m in LAYER_MODULES}
    assert all(p.is_file() for p in layer)
    files = [p for p in sorted(ROOT.rglob("*.py")) if p not in layer
             and not {"configs", "templates"} & set(p.relative_to(ROOT).parts)]
    assert len(files) > 50
    offenders = [f"{p.relative_to(ROOT.parent)} {hit}" for p in files for hit in direct_strategy_calls(p.read_text())]
    assert not offenders, "call the layer (trainer/distributed/strategy.py...) instead:\n" + "\n".join(offenders)


def test_the_checks_find_a_private_copy():
    source = (
        "from trainer.distributed.strategy import backward\n"
        "from trainer.distributed import strategy as calls\n"
        "class Loop:\n"
        "    def shared(self, loss):\n        backward(self.strategy, loss)\n        calls.move_to_device(s, b)\n"
        "    def private(self, trainer, loss, batch):\n"
        "        trainer.strategy.backward(loss)\n        return self._strategy.batch_to_device(batch)\n"
    )
    assert layer_calls(source, "Loop.shared") == {"backward", "move_to_device"}
    assert layer_calls(source, "Loop.private") == set()
    assert direct_strategy_calls(source) == ["line 8: trainer.strategy.backward(...)",
                                             "line 9: self._strategy.batch_to_device(...)"]


# --- what the shared calls do, seen from both front ends ----------------------------------------------------


def test_a_trainer_checkpoint_reads_the_same_through_fabric_load(tmp_path):
    """``Trainer.save_checkpoint`` and ``Fabric.load`` meet in ``save_state``/``read_state``: Fabric restores the
    Trainer's weights into its own set-up module and hands back the rest of the checkpoint as data."""
    torch.manual_seed(0)
    model = Regression()
    fit = Trainer(max_steps=3, accelerator="cpu", devices=1, **quiet())
    fit.fit(model, loader(n=16, batch_size=4))
    path = tmp_path / "trained.ckpt"
    fit.save_checkpoint(path)

    fabric = Fabric(accelerator="cpu", devices=1)
    other = Regression()
    optimizer = other.configure_optimizers()
    other, optimizer = fabric.setup(other, optimizer)
    rest = fabric.load(path, {"state_dict": other, "optimizer_states": None}, strict=True)
    for mine, theirs in zip(other.parameters(), model.parameters()):
        assert torch.equal(mine, theirs)
    assert rest["global_step"] == 3 and "loops" in rest
    assert rest.keys() | {"state_dict", "optimizer_states"} == set(torch.load(path, weights_only=True))


def test_a_directory_that_is_no_checkpoint_is_the_same_error_for_both(tmp_path):
    folder = tmp_path / "not_a_checkpoint"
    folder.mkdir()
    with pytest.raises(CheckpointNotFoundError, match=r"ckpt_path=.*is a directory but not a sharded Relay"):
        Trainer(max_steps=1, accelerator="cpu", devices=1, **quiet()).fit(Regression(), loader(n=8, batch_size=4),
                                                                        ckpt_path=folder)
    with pytest.raises(FileNotFoundError, match=r"path=.*is a directory but not a sharded Relay"):
        Fabric(accelerator="cpu", devices=1).load(folder)


@pytest.mark.parametrize(("precision", "plain"), [("32-true", True), ("64-true", True), ("bf16-mixed", False)])
def test_the_trainer_binds_the_backward_fabric_runs(precision, plain):
    """The Trainer's step calls what the layer's ``backward`` would run (``Tensor.backward`` itself when no
    plugin changes backward: no layer per step; the precision's loss scaling otherwise)."""
    seen = {}

    class Probe(Regression):
        def on_train_start(self) -> None:
            seen["bound"] = self.trainer.fit_loop.step.backward

    trainer = Trainer(max_steps=1, accelerator="cpu", devices=1, precision=precision, **quiet())
    trainer.fit(Probe(), loader(n=8, batch_size=4))
    expected = strategy.backward_function(trainer.strategy)
    assert seen["bound"] == expected
    assert (expected is torch.Tensor.backward) == plain
