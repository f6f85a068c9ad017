"""Lightning names Relay serves last (tied weights, registries, plugins, helpers), observed the same way on Lightning 2.6.6 and on Relay.

``python remaining_names_program.py lightning|relay`` imports everything from Lightning's own paths; for ``relay``
the zero-edit mode (``trainer.lightning_compat.install()``) serves them, so the paths are checked too. It emits one
JSON dict (tests/compat/lightning_diff/harness.py); tests/compat/test_remaining_names_diff.py compares the two.
This machine has no CUDA: ``find_usable_cuda_devices`` is observed at that level (0, -1 and 2 devices asked for).
"""

from __future__ import annotations

import copy
import faulthandler
import os
import random
import socket
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

faulthandler.dump_traceback_later(240, exit=True)  # a hang shows where it is
from tests.compat.lightning_diff.harness import emit, zero_edit_or_lightning  # noqa: E402

zero_edit_or_lightning(sys.argv[1])

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


QUIET = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
             accelerator="cpu", devices=1)
out: dict = {}


def check(name):
    def run(fn):
        try:
            out[name] = fn()
        except Exception as err:  # noqa: BLE001 - the observation is the failure itself
            out[name] = {"exception": f"{type(err).__name__}: {err}", "tb": traceback.format_exc()[-1500:]}
        return fn
    return run


def error(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001
        return [type(err).__name__, str(err)]
    return None


@check("parameter_tying")
def _():
    from lightning.pytorch.utilities import find_shared_parameters, set_shared_parameters

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight
            self.body[1].weight = self.body[0].weight

    model = Tied()
    groups = find_shared_parameters(model)
    copied = copy.deepcopy(model)
    copied.head.weight = torch.nn.Parameter(copied.head.weight.detach().clone())  # untied, as a move can do
    untied = find_shared_parameters(copied)
    retied = set_shared_parameters(copied, groups)
    return {"groups": groups, "untied": untied, "same_object": retied is copied,
            "retied": copied.head.weight is copied.embed.weight, "after": find_shared_parameters(copied),
            "none": find_shared_parameters(torch.nn.Linear(2, 2))}


@check("lightning_enum")
def _():
    from lightning.pytorch.trainer.states import LightningEnum, TrainerFn
    from lightning.pytorch.utilities import LightningEnum as FromUtilities

    class Colour(LightningEnum):
        RED = "red"

    return {"same": LightningEnum is FromUtilities, "eq": [Colour.RED == "red", Colour.RED == "RED"],
            "from_str": Colour.from_str("RED").value, "trainer_fn": isinstance(TrainerFn.FITTING, str)}


@check("usable_cuda")
def _():
    from lightning.fabric.accelerators import find_usable_cuda_devices as fabric_fn
    from lightning.pytorch.accelerators import find_usable_cuda_devices

    return {"same": fabric_fn is find_usable_cuda_devices, "zero": find_usable_cuda_devices(0),
            "all": error(lambda: find_usable_cuda_devices(-1)), "two": error(lambda: find_usable_cuda_devices(2)),
            "default": error(find_usable_cuda_devices)}


@check("registries")
def _():
    from lightning.fabric.accelerators import ACCELERATOR_REGISTRY
    from lightning.fabric.strategies import STRATEGY_REGISTRY

    class Board:  # any callable registers; Lightning's registry does not require an Accelerator subclass
        def __init__(self, speed=1, wide=False):
            self.speed, self.wide = speed, wide

    seen = {"cpu_in": "cpu" in ACCELERATOR_REGISTRY, "cpu": type(ACCELERATOR_REGISTRY.get("cpu")).__name__,
            "ddp_in": "ddp" in STRATEGY_REGISTRY, "ddp": type(STRATEGY_REGISTRY.get("ddp")).__name__,
            "strategies_type": type(STRATEGY_REGISTRY.available_strategies()).__name__,
            "accelerators_type": type(ACCELERATOR_REGISTRY.available_accelerators()).__name__}
    ACCELERATOR_REGISTRY.register("board-x", Board, description="a board", speed=3)
    board = ACCELERATOR_REGISTRY.get("board-x")
    record = ACCELERATOR_REGISTRY["board-x"]
    seen.update(listed="board-x" in ACCELERATOR_REGISTRY.available_accelerators(), built=[board.speed, board.wide],
                record=[record["description"], record["init_params"], record["accelerator"] is Board,
                        record["accelerator_name"]],
                duplicate=error(lambda: ACCELERATOR_REGISTRY.register("board-x", Board))[0])
    ACCELERATOR_REGISTRY.register("board-x", Board, override=True, wide=True)
    seen["overridden"] = [ACCELERATOR_REGISTRY.get("board-x").speed, ACCELERATOR_REGISTRY.get("board-x").wide]
    ACCELERATOR_REGISTRY.remove("board-x")
    seen["removed"] = "board-x" in ACCELERATOR_REGISTRY
    seen["missing"] = error(lambda: ACCELERATOR_REGISTRY.get("board-x"))[0]
    seen["default"] = ACCELERATOR_REGISTRY.get("board-x", "fallback")

    @STRATEGY_REGISTRY.register("ddp-custom-x", description="decorated", find_unused_parameters=True)
    class Custom:
        def __init__(self, find_unused_parameters=False):
            self.find_unused_parameters = find_unused_parameters

    seen["decorated"] = [Custom.__name__, STRATEGY_REGISTRY.get("ddp-custom-x").find_unused_parameters,
                         "ddp-custom-x" in STRATEGY_REGISTRY.available_strategies()]
    STRATEGY_REGISTRY.remove("ddp-custom-x")
    return seen


@check("lsf")
def _():
    from lightning.fabric.plugins.environments import LSFEnvironment as FabricLSF
    from lightning.pytorch.plugins.environments import LSFEnvironment

    rankfile = Path("rankfile.txt")  # the launch node first, then one line per task slot
    host = socket.gethostname()
    rankfile.write_text(f"launch-node\n{host}\n{host}\nother-node\nother-node\n")
    saved = dict(os.environ)
    os.environ.update(LSB_JOBID="123456", LSB_DJOB_RANKFILE=str(rankfile.resolve()), JSM_NAMESPACE_LOCAL_RANK="1",
                      JSM_NAMESPACE_SIZE="4", JSM_NAMESPACE_RANK="1")
    os.environ.pop("MASTER_PORT", None)
    try:
        env = LSFEnvironment()
        seen = {"same": FabricLSF is LSFEnvironment, "detect": LSFEnvironment.detect(),
                "ranks": [env.world_size(), env.global_rank(), env.local_rank(), env.node_rank()],
                "main": [env.main_address, env.main_port], "external": env.creates_processes_externally}
        os.environ["MASTER_PORT"] = "23456"
        seen["port_given"] = LSFEnvironment().main_port
        del os.environ["JSM_NAMESPACE_SIZE"]
        seen["detect_without_size"] = LSFEnvironment.detect()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return seen


@check("worker_init")
def _():
    from lightning.fabric.utilities.data import pl_worker_init_function as from_data
    from lightning.fabric.utilities.seed import pl_worker_init_function

    draws = []
    for worker_id, rank in [(0, 0), (1, 0), (1, 3)]:
        torch.manual_seed(1000 + worker_id)  # what torch does in worker i: base seed + i
        pl_worker_init_function(worker_id, rank=rank)
        draws.append([round(torch.rand(1).item(), 6), round(random.random(), 6), round(float(np.random.rand()), 6)])
    return {"same": from_data is pl_worker_init_function, "draws": draws}


class NoisyData(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor([float(np.random.rand())])


class WorkerModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen = []

    def training_step(self, batch, batch_idx):
        self.seen.append(batch.flatten().tolist())
        return self.layer(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


@check("worker_seeding_in_fit")
def _():
    pl.seed_everything(7, workers=True)
    model = WorkerModel()
    trainer = pl.Trainer(max_epochs=1, **QUIET)
    trainer.fit(model, DataLoader(NoisyData(), batch_size=2, num_workers=2))
    fn = trainer.train_dataloader.worker_init_fn
    first, second = model.seen  # worker 0 and worker 1 each made one batch
    return {"wrapped": getattr(getattr(fn, "func", None), "__name__", None), "rank": fn.keywords.get("rank"),
            "workers_differ": first != second}


@check("layer_sync")
def _():
    from lightning.pytorch.plugins import LayerSync, TorchSyncBatchNorm

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4),
                                torch.nn.Sequential(torch.nn.BatchNorm1d(4, affine=False)))
    model[1].running_mean.fill_(0.5)
    plugin = TorchSyncBatchNorm()
    synced = plugin.apply(model)
    kinds = [type(m).__name__ for m in synced.modules()]
    weight = synced[1].weight
    back = plugin.revert(synced)
    x = torch.randn(2, 3, 5, 5)
    back.eval()
    return {"is_layer_sync": isinstance(plugin, LayerSync), "applied": kinds,
            "reverted_is_bn": [isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and
                               not isinstance(m, torch.nn.SyncBatchNorm) for m in back.modules()],
            "weight_kept": back[1].weight is weight, "stats_kept": back[1].running_mean.tolist(),
            "affine": [back[1].affine, back[2][0].affine], "runs": list(back[:2](x).shape)}


class BNModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@check("layer_sync_plugin_one_process")
def _():
    from lightning.pytorch.plugins import TorchSyncBatchNorm

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    model = BNModel()
    trainer = pl.Trainer(max_steps=2, plugins=[TorchSyncBatchNorm()], **QUIET)
    trainer.fit(model, data)
    return {"bn": type(model.net[1]).__name__, "steps": trainer.global_step}


@check("lstm_demo")
def _():
    from lightning.pytorch.demos import LightningLSTM, SequenceSampler, SimpleLSTM

    batches = list(SequenceSampler(list(range(11)), batch_size=3))
    torch.manual_seed(0)
    small = SimpleLSTM(vocab_size=20, ninp=6, nhid=5, nlayers=2, dropout=0.0)
    hidden = small.init_hidden(3)
    logp, (h, c) = small(torch.randint(0, 20, (3, 7)), hidden)
    words = " ".join(f"w{(i * 7) % 23}" for i in range(2400))
    Path("data").mkdir(exist_ok=True)
    Path("data/wikitext-2.txt").write_text("\n".join(words[i:i + 80] for i in range(0, len(words), 80)) + "\n")
    pl.seed_everything(3)
    from lightning.pytorch.demos import WikiText2

    vocab = len(WikiText2().dictionary)
    class Recorded(LightningLSTM):
        def __init__(self, vocab_size):
            super().__init__(vocab_size=vocab_size)
            self.losses = []

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.losses.append(round(loss.item(), 4))
            return loss

    model = Recorded(vocab_size=vocab)
    model.model.drop.p = model.model.rnn.dropout = 0.0  # losses comparable without the same random dropout masks
    trainer = pl.Trainer(max_steps=2, **QUIET)
    trainer.fit(model)
    return {"batches": batches, "len": len(SequenceSampler(list(range(11)), batch_size=3)),
            "shapes": [list(logp.shape), list(h.shape), list(c.shape)],
            "params": sum(p.numel() for p in small.parameters()),
            "logp_sums_to_one": bool(torch.allclose(logp.exp().sum(1), torch.ones(21), atol=1e-5)),
            "vocab": vocab, "steps": trainer.global_step,
            "losses": model.losses, "logged": round(float(trainer.callback_metrics["train_loss"]), 4),
            "hidden_kept": model.hidden is not None and list(model.hidden[0].shape)}


class OnnxModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(6, 3)
        self.example_input_array = torch.randn(2, 6)

    def forward(self, x):
        return torch.relu(self.l1(x))


@check("onnx")
def _():
    import onnx

    torch.manual_seed(0)
    model = OnnxModel()
    model.train()
    model.to_onnx("model.onnx", dynamo=False)
    loaded = onnx.load("model.onnx")
    onnx.checker.check_model(loaded)
    given = torch.randn(5, 6)
    model.to_onnx("given.onnx", given, dynamo=False, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    seen = {"training_after": model.training, "inputs": [i.name for i in onnx.load("given.onnx").graph.input],
            "ops": sorted({n.op_type for n in loaded.graph.node})}
    import onnxruntime

    session = onnxruntime.InferenceSession("given.onnx")
    probe = torch.randn(4, 6)
    (ours,) = session.run(None, {"x": probe.numpy()})
    with torch.no_grad():
        seen["same_outputs"] = bool(np.allclose(ours, model(probe).numpy(), atol=1e-5))
    bare = OnnxModel()
    bare.example_input_array = None
    seen["no_input"] = error(lambda: bare.to_onnx("x.onnx"))[0]
    return seen


class EvalModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.during = []

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        loop = self.trainer.validate_loop
        self.during.append([loop.batch_progress.current.completed, loop.batch_progress.current.started,
                            loop.num_dataloaders, loop.max_batches])
        self.log("v", self.layer(batch[0]).sum())

    def test_step(self, batch, batch_idx):
        self.log("t", self.layer(batch[0]).sum())


@check("evaluation_loops")
def _():
    data = DataLoader(TensorDataset(torch.randn(10, 2)), batch_size=2)
    model = EvalModel()
    trainer = pl.Trainer(limit_val_batches=3, **QUIET)
    val, test = trainer.validate_loop, trainer.test_loop
    before = [val.batch_progress.total.completed, val.verbose, val.inference_mode]
    trainer.validate(model, data, verbose=False)
    first = [val.batch_progress.total.completed, val.batch_progress.current.completed]
    trainer.validate(model, [data, data])
    trainer.test(model, data, verbose=False)

    def counts(loop):
        p = loop.batch_progress
        return [[p.total.ready, p.total.started, p.total.processed, p.total.completed],
                [p.current.ready, p.current.started, p.current.processed, p.current.completed]]

    return {"before": before, "first": first, "val": counts(val), "test": counts(test),
            "max_batches": [val.max_batches, test.max_batches],
            "verbose": [val.verbose, test.verbose], "skip": [val.skip, test.skip], "during": model.during,
            "trainer_is_loop_trainer": val.trainer is trainer}


@check("shared_filesystem_one_process")
def _():
    from lightning.fabric.utilities import is_shared_filesystem as fabric_fn
    from lightning.pytorch.utilities import is_shared_filesystem

    trainer = pl.Trainer(**QUIET)
    return {"same": fabric_fn is is_shared_filesystem, "cwd": is_shared_filesystem(trainer.strategy),
            "remote": is_shared_filesystem(trainer.strategy, "s3://bucket/x")}


class HookNames(pl.Callback):
    def __init__(self):
        self.names = []

    def __getattribute__(self, name):
        if name.startswith("on_") and name.endswith(("_start", "_end")):
            object.__getattribute__(self, "names").append(name)
        return object.__getattribute__(self, name)


@check("empty_train_loader")
def _():
    """Found while building the LSTM demo: fit with no training batches stops at once (Relay used to loop forever
    under max_steps)."""
    seen = {}
    for limit in ({"max_steps": 2}, {"max_epochs": 2}):
        hooks = HookNames()
        trainer = pl.Trainer(callbacks=[hooks], **limit, **QUIET)
        trainer.fit(WorkerModel(), DataLoader(TensorDataset(torch.zeros(0, 1)), batch_size=2))
        seen[str(limit)] = [trainer.global_step, trainer.current_epoch,
                            [n for n in hooks.names if "train" in n or "fit" in n]]
    return seen


emit(out)
