"""Trainer(compile=...) and Trainer(activation_checkpointing=...): per block, in the strategy's order, same numbers.

Compiling costs seconds on 2 CPU cores, so one test uses inductor (torch's default backend, on a 2-layer MLP) and the
others ``aot_eager`` (torch's tracing and autograd partitioning, without code generation). The composition with
FSDP and float8 is tested in tests/distributed/test_fsdp.py (scenario ``stack``).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers import quiet
from trainer import Module, Trainer
from trainer.errors import MisconfigurationError

ROOT = Path(__file__).resolve().parents[2]
AOT = {"backend": "aot_eager"}


def tiny_gpt(**kwargs):
    from trainer.examples.gpt_module import GPTModule

    torch.manual_seed(0)
    return GPTModule(block_size=8, n_layer=2, n_head=2, n_embd=16, warmup_steps=1, max_steps=4, **kwargs)


def tokens(n: int = 12) -> DataLoader:
    x = torch.randint(0, 11, (n, 8), generator=torch.Generator().manual_seed(1))
    return DataLoader(TensorDataset(x, x.roll(1, 1)), batch_size=4)


def peak_bytes(step) -> int:
    """The most CPU memory live at once during ``step()``, from the profiler's allocation events."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    sizes, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            sizes.append((event.start_time_ns, event.extra_fields.alloc_size))
        stack.extend(event.children)
    live = top = 0
    for _, size in sorted(sizes):
        live += size
        top = max(top, live)
    return top


# --- settings ------------------------------------------------------------------------------------------------------
def test_settings_parse_and_bad_values_are_clear_errors():
    from plugins.transforms.activation_checkpointing import save_matmuls

    t = Trainer(compile={"backend": "aot_eager", "fullgraph": True, "blocks": "Block"},
                activation_checkpointing={"mode": "selective", "policy": "matmul"}, **quiet())
    assert t.compile.options == {"backend": "aot_eager", "fullgraph": True} and t.compile.blocks == {"Block"}
    assert t.activation_checkpointing.mode == "selective" and t.activation_checkpointing.policy is save_matmuls
    assert Trainer(compile=False, activation_checkpointing=True, **quiet()).activation_checkpointing.mode == "full"
    for kwargs, words in [
        ({"compile": "yes"}, "Trainer(compile='yes'): compile='yes' is not valid; use compile=True"),
        ({"compile": {"backend": "aot_eager", "fullgrap": True}}, "unknown key(s) fullgrap"),
        ({"activation_checkpointing": "some"}, "mode 'some' is not one of full, selective, budget"),
        ({"activation_checkpointing": {"mode": "full", "policy": "matmul"}}, "applies to mode='selective' only"),
        ({"activation_checkpointing": {"mode": "selective", "policy": "nowhere.at_all:f"}}, "cannot be imported"),
        ({"activation_checkpointing": "budget"}, "pass compile=True too"),
    ]:
        with pytest.raises(MisconfigurationError, match=None) as err:
            Trainer(**kwargs, **quiet())
        assert words in str(err.value), (kwargs, str(err.value))


def test_hydra_keys_reach_the_trainer():
    from tests.trainer.test_cli_configs import compose
    from trainer.cli.build import build_trainer

    cfg = compose(["trainer.compile={backend:aot_eager,fullgraph:true}", "trainer.activation_checkpointing=selective",
                   "logger=none", "callbacks=none", "accelerator=cpu"])
    trainer = build_trainer(cfg)
    assert trainer.compile.options == {"backend": "aot_eager", "fullgraph": True}
    assert trainer.activation_checkpointing.mode == "selective"
    assert build_trainer(compose(["trainer.compile=true", "logger=none", "callbacks=none"])).compile.options == {}


# --- activation checkpointing --------------------------------------------------------------------------------------
def test_checkpointing_keeps_gradients_identical_and_lowers_peak_memory():
    """none / full / selective on the same GPT: bit-identical gradients; the peak CPU memory of forward + backward
    (profiler) falls from none to selective (matmul outputs kept) to full (only block inputs kept)."""
    from plugins.transforms.activation_checkpointing import parse_activation_checkpointing
    from plugins.transforms.blocks import ModelTransforms, apply_model_transforms
    from trainer.examples.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    base = GPT(GPTConfig(vocab_size=11, block_size=32, n_layer=2, n_head=2, n_embd=16))
    x = torch.randint(0, 11, (2, 32), generator=torch.Generator().manual_seed(0))
    peaks, grads = {}, {}
    for mode in (None, "full", "selective"):
        model = copy.deepcopy(base)
        apply_model_transforms(model, ModelTransforms(checkpointing=parse_activation_checkpointing(mode)))
        peaks[mode] = peak_bytes(lambda: model(x).pow(2).mean().backward())  # noqa: B023 (called at once)
        grads[mode] = [p.grad for p in model.parameters()]
        assert (type(model.blocks[0]) is not type(base.blocks[0])) == (mode is not None)
    for mode in ("full", "selective"):
        assert all(torch.equal(a, b) for a, b in zip(grads[None], grads[mode])), mode
    assert peaks[None] > peaks["selective"] > peaks["full"], peaks


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8)) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x


def test_memory_budget_mode_under_compile_matches_eager_gradients():
    """mode='budget': the compiled block's partitioner recomputes to fit the budget (0: all it can)."""
    from plugins.transforms.activation_checkpointing import parse_activation_checkpointing
    from plugins.transforms.blocks import ModelTransforms, apply_model_transforms
    from plugins.transforms.compile import parse_compile

    torch.manual_seed(0)
    eager = Stack()
    budget = copy.deepcopy(eager)
    apply_model_transforms(budget, ModelTransforms(
        checkpointing=parse_activation_checkpointing({"mode": "budget", "memory_budget": 0.0}),
        compile=parse_compile({"backend": "aot_eager_decomp_partition"})))
    x = torch.randn(4, 8)
    for model in (eager, budget):
        model(x).pow(2).mean().backward()
    for a, b in zip(eager.parameters(), budget.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6)


# --- compile -------------------------------------------------------------------------------------------------------
def test_compiled_checkpointed_blocks_train_like_eager_and_checkpoints_resume(tmp_path):
    """compile (aot_eager) + selective checkpointing per block of the bundled GPT: both blocks share one compiled
    graph, the weights after 2 steps are the eager run's, the checkpoint has the eager keys (no ``_orig_mod.``) and
    a compiled run resumes from it."""
    from torch._dynamo.utils import counters

    eager = tiny_gpt()
    Trainer(max_steps=2, accelerator="cpu", **quiet()).fit(eager, tokens())
    model = tiny_gpt()
    graphs = counters["stats"]["unique_graphs"]
    trainer = Trainer(max_steps=2, accelerator="cpu", compile=AOT, activation_checkpointing="selective",
                      **quiet(default_root_dir=tmp_path))
    trainer.fit(model, tokens())
    assert type(model.model.blocks[0]).__mro__[1].__name__ == "Block"
    assert counters["stats"]["unique_graphs"] - graphs == 1  # one graph for both blocks (training)
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    trainer.save_checkpoint(tmp_path / "c.ckpt")
    keys = set(torch.load(tmp_path / "c.ckpt", weights_only=True)["state_dict"])
    assert keys == set(eager.state_dict())
    resumed = tiny_gpt()  # the same settings objects: the compiled blocks are reused, nothing compiles again
    again = Trainer(max_steps=3, accelerator="cpu", compile=trainer.compile,
                    activation_checkpointing=trainer.activation_checkpointing, **quiet())
    again.fit(resumed, tokens(), ckpt_path=tmp_path / "c.ckpt")
    assert again.global_step == 3 and torch.isfinite(again.callback_metrics["train_loss"])
    assert counters["stats"]["unique_graphs"] - graphs == 1 and type(resumed.model.blocks[0]) is type(model.model.blocks[0])


class Logged(Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
        self.log("train_loss", loss, prog_bar=True)
        self.log("double", loss * 2, on_step=False, on_epoch=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def regression(n: int = 8) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)), batch_size=4)


def test_self_log_in_a_fullgraph_compiled_training_step():
    """``self.log`` is traced by dynamo without a graph break: a training_step compiled with fullgraph=True (which
    raises on any break) logs through the Trainer, and dynamo's explain of the step counts one graph, no break."""
    import torch._dynamo

    model = Logged()
    step = model.training_step
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    explained = []

    def training_step(batch, batch_idx):
        if not explained:  # inside the Trainer's step, where self.log records
            explained.append(torch._dynamo.explain(step)(batch, batch_idx))
        return compiled(batch, batch_idx)

    model.training_step = training_step
    trainer = Trainer(max_steps=2, accelerator="cpu", **quiet())
    trainer.fit(model, regression())
    assert explained[0].graph_break_count == 0 and explained[0].graph_count == 1
    assert set(trainer.callback_metrics) >= {"train_loss", "double"}


def test_inductor_compiles_the_whole_model_without_blocks():
    """compile=True (inductor, C++ on the CPU) on a model without blocks: its child is compiled whole, and one step
    gives the eager step's weights. In a process of its own: inductor leaves state in the process that compiles
    (its cache directory in ``os.environ``, compile workers) that later tests' warm-forked programs must not see."""
    import subprocess
    import sys

    code = """
import torch
from tests.helpers import quiet
from tests.trainer.test_model_transforms import Logged, regression
from trainer import Trainer

eager, compiled = Logged(), Logged()
compiled.load_state_dict(eager.state_dict())
Trainer(max_steps=1, accelerator="cpu", **quiet()).fit(eager, regression(4))
Trainer(max_steps=1, accelerator="cpu", compile=True, **quiet()).fit(compiled, regression(4))
assert type(compiled.net) is not torch.nn.Sequential and isinstance(compiled.net, torch.nn.Sequential)
for a, b in zip(eager.parameters(), compiled.parameters()):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
assert set(compiled.state_dict()) == set(eager.state_dict())
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]