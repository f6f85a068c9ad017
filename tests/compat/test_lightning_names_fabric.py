"""The ``lightning.fabric`` names Relay implements (``trainer/lightning_compat/impl/fabric_*.py``), each compared with
the installed Lightning's on the same calls (results, or exception type names and messages), and the engine
internals Relay serves by name only: they import and raise an error naming themselves when used."""

from __future__ import annotations

import importlib
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, TensorDataset

from tests.optional import need_mark
from trainer.lightning_compat import install, installed, uninstall
from trainer.lightning_compat.alias import LightningAlias

pytestmark = [need_mark("lightning", "compared with the installed Lightning"), pytest.mark.timeout(120)]

I = "trainer.lightning_compat.impl"


def lightning(module: str):
    """A module of the installed Lightning (never the zero-edit mode's alias)."""
    if installed():
        uninstall()
    found = importlib.import_module(module)
    assert not isinstance(found, LightningAlias)
    return found


def relay(module: str):
    return importlib.import_module(f"{I}.{module}")


def outcome(fn, *args, **kwargs):
    """What a call gives: ("ok", result) or (exception type name, message)."""
    try:
        return "ok", fn(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - SystemExit included: the consolidation checks exit
        return type(err).__name__, str(err)


def same(name: str, lightning_module: str, relay_module: str, calls: list[tuple]) -> None:
    ours, theirs = getattr(relay(relay_module), name), getattr(lightning(lightning_module), name)
    for args in calls:
        assert outcome(ours, *args) == outcome(theirs, *args), (name, args)


# --- helpers ----------------------------------------------------------------------------------------------------------
def test_device_and_seed_helpers_answer_as_lightning():
    same("_parse_cpu_cores", "lightning.fabric.accelerators.cpu", "fabric_helpers",
         [(3,), ("4",), (" 2 ",), (0,), (-1,), ("a",), (1.5,), (True,)])
    same("_parse_gpu_ids", "lightning.fabric.utilities.device_parser", "fabric_helpers",
         [(None,), (0,), ("0",), ("[]",), ([],), (1.5,), ([True],), ((0, "1"),)])
    gpus = [(-1, True), ("-1", True), ([0], True), ("0,1", True, True), (2, False, True)]
    ours = relay("fabric_helpers")._parse_gpu_ids
    theirs = lightning("lightning.fabric.utilities.device_parser")._parse_gpu_ids
    for args in gpus:  # on a machine without GPUs: the same errors (Relay's MisconfigurationException by name)
        assert outcome(ours, *args) == outcome(theirs, *args), args
    same("_normalize_parse_gpu_string_input", "lightning.fabric.utilities.device_parser", "fabric_helpers",
         [("-1",), ("1, 3",), ("2",), (4,)])
    same("_determine_root_gpu_device", "lightning.fabric.utilities.device_parser", "fabric_helpers",
         [(None,), ([2, 3],), ("1",), ([],)])
    same("_generate_seed_sequence", "lightning.fabric.utilities.seed", "fabric_helpers",
         [(0, 0, 0, 4), (42, 3, 1, 2), (2**31 - 1, 7, 5, 3)])
    same("_is_path_in_lightning", "lightning.fabric.utilities.warnings", "fabric_helpers",
         [(Path("/x/lightning/y.py"),), (Path("/x/relay/y.py"),)])
    same("_parse_tpu_devices_str", "lightning.fabric.accelerators.xla", "fabric_helpers", [("8",), ("1,",), ("a",)])
    same("_check_tpu_devices_valid", "lightning.fabric.accelerators.xla", "fabric_helpers", [(1,), (0,), ([0],), (8,)])
    same("_convert_precision_to_unified_args", "lightning.fabric.connector", "fabric_helpers",
         [(None,), (32,), ("16",), ("bf16-true",), (64,), ("8",)])
    same("_get_num_processes", "lightning.fabric.cli", "fabric_helpers",
         [("cpu", "3"), ("cpu", "auto"), ("tpu", "1"), ("cuda", "0")])
    same("_is_srun_used", "lightning.fabric.plugins.environments.slurm", "fabric_helpers", [()])
    theirs = lightning("lightning.fabric.utilities.apply_func")._TransferableDataType
    ours = relay("fabric_helpers")._TransferableDataType
    for value in (torch.zeros(1), {}, torch.nn.Linear(1, 1), 3):
        assert isinstance(value, ours) == isinstance(value, theirs)


def test_accelerators_list_parallel_devices_and_check_their_device_as_lightning():
    from plugins.accelerators.cpu import CPUAccelerator
    from plugins.accelerators.cuda import CUDAAccelerator

    theirs = lightning("lightning.fabric.accelerators")
    for args in ((1,), ("3",), (0,), ("a",)):
        assert outcome(CPUAccelerator.get_parallel_devices, *args) == \
            outcome(theirs.CPUAccelerator.get_parallel_devices, *args), args
    assert CUDAAccelerator.get_parallel_devices([3, 1]) == theirs.CUDAAccelerator.get_parallel_devices([3, 1])
    assert outcome(CPUAccelerator().setup_device, torch.device("cuda")) == \
        outcome(theirs.CPUAccelerator().setup_device, torch.device("cuda"))
    assert outcome(CUDAAccelerator().setup_device, torch.device("cpu")) == \
        outcome(theirs.CUDAAccelerator().setup_device, torch.device("cpu"))


def test_monotonic_window_and_precision_dtype():
    from trainer.fabric.utilities.throughput import _MonotonicWindow as window_cls

    theirs_cls = lightning("lightning.fabric.utilities.throughput")._MonotonicWindow
    for cls in (window_cls, theirs_cls):
        w = cls(maxlen=2)
        for x in (1, 2, 3):
            w.append(x)
        assert (list(w), w.last) == ([2, 3], 3)
        assert outcome(w.append, 3)[0] == "ValueError" and outcome(w.__setitem__, 0, 1)[0] == "NotImplementedError"
    assert outcome(window_cls(1).append, 1) == ("ok", None)
    to_dtype = relay("fabric_helpers")._plugin_to_compute_dtype
    from plugins.precision.half import DoublePrecision, HalfPrecision, MixedPrecision

    assert [to_dtype(p) for p in (MixedPrecision("bf16-mixed"), HalfPrecision("16-true"), DoublePrecision())] == \
        [torch.bfloat16, torch.float16, torch.float64]
    fabric_plugins = lightning("lightning.fabric.plugins")
    theirs = lightning("lightning.fabric.utilities.throughput")._plugin_to_compute_dtype
    assert [theirs(fabric_plugins.MixedPrecision("bf16-mixed", "cpu")), theirs(fabric_plugins.HalfPrecision("16-true")),
            theirs(fabric_plugins.DoublePrecision())] == [torch.bfloat16, torch.float16, torch.float64]
    assert outcome(to_dtype, object())[0] == outcome(theirs, object())[0] == "RuntimeError"


def test_seed_and_loader_length_utilities_check_as_lightning(monkeypatch):
    import warnings

    ours, theirs = relay("fabric_utilities"), lightning("lightning.fabric.utilities.seed")
    for name in ("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "RELAY_GLOBAL_SEED", "RELAY_SEED_WORKERS"):
        monkeypatch.delenv(name, raising=False)
    for module in (ours, theirs):  # never seeded: reset_seed does nothing
        module.reset_seed()
        assert "PL_GLOBAL_SEED" not in __import__("os").environ
    for args in ((10e9,), (-1,), (7.0,)):
        assert outcome(ours.seed_everything, *args, verbose=False) == \
            outcome(theirs.seed_everything, *args, verbose=False), args
    monkeypatch.setenv("PL_GLOBAL_SEED", "abc")
    assert outcome(ours.seed_everything) == outcome(theirs.seed_everything)
    for module in (ours, theirs):
        monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
        with pytest.warns(UserWarning, match="No seed found, seed set to 0"):
            module.seed_everything()
        module.seed_everything(123, workers=True, verbose=False)
        first = torch.rand(1)
        module.reset_seed()
        assert torch.equal(torch.rand(1), first) and __import__("os").environ["PL_SEED_WORKERS"] == "1"
    data = lightning("lightning.fabric.utilities.data")
    for module in (ours, data):
        with pytest.warns(UserWarning, match="returned 0 length"):
            assert module.has_len(DataLoader(TensorDataset(torch.zeros(0))))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert module.has_len(DataLoader(TensorDataset(torch.zeros(2))))
    assert outcome(ours.suggested_max_num_workers, 0) == outcome(data.suggested_max_num_workers, 0)
    assert ours.suggested_max_num_workers(1) == data.suggested_max_num_workers(1)


# --- data-loader re-instantiation -------------------------------------------------------------------------------------
class _Loader(DataLoader):
    def __init__(self, data, marker, *args, **kwargs):
        self.marker = marker
        super().__init__(data, *args, **kwargs)


class _NoAttributes(DataLoader):
    def __init__(self, data, hidden, **kwargs):
        super().__init__(data, **kwargs)


def _rebuilt(module: str):
    data_module = relay(module) if module.startswith("fabric") else lightning(module)
    data = TensorDataset(torch.arange(10.0))
    with data_module._replace_dunder_methods(DataLoader, "dataset"):
        loader = _Loader(data, "m", batch_size=3, shuffle=True)
    loader.extra = 5  # set after construction: replayed on the copy
    new = data_module._update_dataloader(loader, SequentialSampler(data))
    plain = data_module._update_dataloader(DataLoader(data, batch_size=2, drop_last=True), SequentialSampler(data))
    custom = DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data), 4, False))
    with_batch_sampler = data_module._update_dataloader(custom, SequentialSampler(data))
    return [(type(x).__name__, x.batch_size, type(x.sampler).__name__, x.drop_last,
             getattr(x, "marker", None), getattr(x, "extra", None), [b[0].tolist() for b in x])
            for x in (new, plain, with_batch_sampler)] + [
        outcome(data_module._update_dataloader, _NoAttributes(data, 1), SequentialSampler(data)),
        outcome(data_module._update_dataloader, "not a loader", None),
        data_module._replace_value_in_saved_args("sampler", 9, (1, 2), {}, {"sampler": None}, ("a", "sampler")),
        data_module._replace_value_in_saved_args("x", 9, (1,), {}, {}, ("a",)),
    ]


def test_dataloaders_are_rebuilt_with_another_sampler_as_lightning_does():
    assert _rebuilt("fabric_data") == _rebuilt("lightning.fabric.utilities.data")
    tag = relay("fabric_data")._WrapAttrTag
    assert tag.SET == "set" and tag("del") is tag.DEL


# --- distributed helpers (one process) and the sampler wrapper ------------------------------------------------------
def test_distributed_sampler_wrapper_and_single_process_helpers():
    ours, theirs = relay("fabric_distributed"), lightning("lightning.fabric.utilities.distributed")
    sampler = list(range(7))[::-1]
    for rank in (0, 1):
        args = (sampler,)
        kwargs = {"num_replicas": 2, "rank": rank, "shuffle": False}
        assert list(ours.DistributedSamplerWrapper(*args, **kwargs)) == \
            list(theirs.DistributedSamplerWrapper(*args, **kwargs))
    assert outcome(ours.DistributedSamplerWrapper, iter(sampler), num_replicas=2, rank=0) == \
        outcome(theirs.DistributedSamplerWrapper, iter(sampler), num_replicas=2, rank=0)
    with ours._InfiniteBarrier() as barrier:  # no process group: nothing to wait for
        barrier()
    assert barrier.group is None
    t = torch.ones(2)
    assert ours._sync_ddp_if_available(t) is t and ours._all_gather_ddp_if_available(t) is t
    collectives = lightning("lightning.fabric.plugins.collectives")
    mine, real = relay("fabric_distributed").SingleDeviceCollective(), collectives.SingleDeviceCollective()
    x = torch.ones(1)
    for c in (mine, real):
        assert (c.rank, c.world_size, c.all_reduce(x) is x, c.all_gather([], x), c.scatter(x, [x * 2])) == \
            (0, 1, True, [x], x * 2)
        c.create_group()
        assert outcome(c.create_group)[0] == "RuntimeError"
        c.teardown()
    convert = relay("fabric_distributed").TorchCollective._convert_to_native_op
    their_convert = collectives.TorchCollective._convert_to_native_op
    for op in ("sum", "max", torch.distributed.ReduceOp.MIN, "nope", 3):
        assert outcome(convert, op) == outcome(their_convert, op), op


def _in_two_processes():
    """Run in each launched process: Relay's and Lightning's helpers on the same gloo group."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ours = importlib.import_module(f"{I}.fabric_distributed")
    theirs = importlib.import_module("lightning.fabric.utilities.distributed")
    out = []
    for module in (ours, theirs):
        gathered = module._gather_all_tensors(torch.ones(rank + 1, 2 - rank))
        reduced = [module._sync_ddp(torch.tensor(rank + 1, dtype=dtype), reduce_op=op).item()
                   for dtype in (torch.float, torch.long) for op in ("sum", "max", "avg")]
        out.append(([tuple(g.shape) for g in gathered], reduced))
    collective = ours.TorchCollective()
    out.append(collective.all_reduce(torch.tensor(rank + 1.0), op="max").item())
    dist.destroy_process_group()
    return out


@pytest.mark.timeout(60)
def test_multiprocessing_launcher_runs_distributed_helpers_like_lightning_in_two_processes(monkeypatch):
    import types

    for name in ("MASTER_ADDR", "MASTER_PORT"):  # the launcher sets them, as Lightning's: not for later tests
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)

    from plugins.accelerators.cpu import CPUAccelerator
    from plugins.environments.local import LocalEnvironment

    launcher_cls = relay("fabric_launchers")._MultiProcessingLauncher
    strategy = types.SimpleNamespace(num_processes=2, cluster_environment=LocalEnvironment(),
                                     accelerator=CPUAccelerator())
    assert outcome(launcher_cls, strategy, "nope")[0] == "ValueError"
    lightning("lightning.fabric.utilities.distributed")  # imported before forking
    ours, theirs, maximum = launcher_cls(strategy, start_method="fork").launch(_in_two_processes)
    assert ours == theirs == ([(1, 2), (2, 1)], [3.0, 2.0, 1.5, 3, 2, 1]) and maximum == 2.0


# --- precision and module state --------------------------------------------------------------------------------------
def test_dtype_and_class_replacement_contexts_and_device_dtype_mixin():
    ours, theirs = relay("fabric_precision"), lightning("lightning.fabric.plugins.precision.utils")
    mixin_module = lightning("lightning.fabric.utilities.device_dtype_mixin")
    for module, mixin in ((ours, ours._DeviceDtypeModuleMixin), (theirs, mixin_module._DeviceDtypeModuleMixin)):
        with module._DtypeContextManager(torch.float64):
            assert torch.get_default_dtype() == torch.float64
        assert torch.get_default_dtype() == torch.float32
        with module._ClassReplacementContextManager({"torch.nn.Linear": torch.nn.Identity}):
            assert torch.nn.Linear is torch.nn.Identity
        assert torch.nn.Linear is not torch.nn.Identity
        assert module._convert_fp_tensor(torch.ones(1, dtype=torch.int64), torch.half).dtype == torch.int64

        class Net(mixin):
            def __init__(self):
                super().__init__()
                self.inner = type("Inner", (mixin,), {})()
                self.layer = torch.nn.Linear(1, 1)

        net = Net()
        seen = [(net.dtype, net.device, net.inner.dtype)]
        net.double()
        seen.append((net.dtype, net.inner.dtype, net.layer.weight.dtype))
        net.to(torch.float16)
        net.type(torch.float32)
        seen.append((net.dtype, net.inner.dtype, outcome(setattr, net, "dtype", torch.half)[0]))
        if module is ours:
            mine = seen
        else:
            assert mine == seen


def test_fsdp_precision_mixed_precision_config_as_lightning():
    import warnings

    from trainer.lightning_compat.impl.precision_objects import FSDPPrecision

    theirs_cls = lightning("lightning.fabric.plugins.precision.fsdp").FSDPPrecision

    def config(cls, precision):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = outcome(lambda: cls(precision).mixed_precision_config)
        if result[0] == "ok":
            result = ("ok", (result[1].param_dtype, result[1].reduce_dtype, result[1].buffer_dtype))
        return result, [str(w.message) for w in caught if "FSDP" in str(w.message)]

    for precision in ("16-true", "bf16-true", "16-mixed", "bf16-mixed", "32-true"):
        assert config(FSDPPrecision, precision) == config(theirs_cls, precision), precision


def test_global_state_snapshot_restores_flags_and_random_state():
    snapshot_cls = relay("fabric_precision")._GlobalStateSnapshot
    assert [f for f in snapshot_cls.__dataclass_fields__] == \
        [f for f in lightning("lightning.fabric.strategies.launchers.multiprocessing")._GlobalStateSnapshot
         .__dataclass_fields__]
    torch.manual_seed(3)
    snapshot = snapshot_cls.capture()
    first = torch.rand(2)
    torch.backends.cudnn.benchmark = not snapshot.cudnn_benchmark
    snapshot.restore()
    assert torch.equal(torch.rand(2), first) and torch.backends.cudnn.benchmark == snapshot.cudnn_benchmark


# --- strategy helpers ------------------------------------------------------------------------------------------------
def test_strategy_helpers_answer_as_lightning(tmp_path):
    same("_validate_keys_for_strict_loading", "lightning.fabric.strategies.strategy", "fabric_strategies",
         [(["a", "b"], ["a"], True), (["a", "b"], ["a"], False), (["a"], ["a"], True)])
    for module, name in ((relay("fabric_strategies"), "ours"), (lightning("lightning.fabric.strategies.strategy"), "")):
        target: dict = {}
        module._apply_filter("model", {"model": lambda k, v: k.startswith("w")}, {"w": 1, "b": 2}, target)
        module._apply_filter("step", {}, 3, target)
        assert target == {"model": {"w": 1}, "step": 3}, name
    controls = [("_DDPBackwardSyncControl", "lightning.fabric.strategies.ddp"),
                ("_FSDPBackwardSyncControl", "lightning.fabric.strategies.fsdp")]
    for name, module in controls:
        ours, theirs = getattr(relay("fabric_strategies"), name)(), getattr(lightning(module), name)()
        net = torch.nn.Linear(1, 1)
        assert outcome(ours.no_backward_sync, net, True) == outcome(theirs.no_backward_sync, net, True)
        assert type(ours.no_backward_sync(net, False)).__name__ == "nullcontext"
    (tmp_path / "sharded").mkdir()
    (tmp_path / "sharded" / "meta.pt").touch()
    (tmp_path / "file.ckpt").touch()
    same("_is_sharded_checkpoint", "lightning.fabric.strategies.fsdp", "fabric_strategies",
         [(tmp_path / "sharded",), (tmp_path / "file.ckpt",), (tmp_path,)])
    folder = str(tmp_path / "sharded")
    same("_process_cli_args", "lightning.fabric.utilities.consolidate_checkpoint", "fabric_strategies",
         [(Namespace(checkpoint_folder=folder, output_file=None),),
          (Namespace(checkpoint_folder=str(tmp_path / "missing"), output_file=None),),
          (Namespace(checkpoint_folder=str(tmp_path / "file.ckpt"), output_file=None),),
          (Namespace(checkpoint_folder=str(tmp_path), output_file=None),),
          (Namespace(checkpoint_folder=folder, output_file=str(tmp_path / "file.ckpt")),)])
    same("_validate_checkpoint_directory", "lightning.fabric.strategies.deepspeed", "fabric_strategy_options",
         [(tmp_path,), (tmp_path / "file.ckpt",)])
    same("_validate_device_index_selection", "lightning.fabric.strategies.deepspeed", "fabric_strategy_options",
         [([torch.device("cuda", 0), torch.device("cuda", 1)],), ([torch.device("cuda", 1)],)])
    same("_init_sharding_strategy", "lightning.fabric.strategies.fsdp", "fabric_strategy_options",
         [("full_shard", {}), ("HYBRID_SHARD", {}), ("no_shard", {"process_group": 1, "device_mesh": 2})])
    same("_activation_checkpointing_kwargs", "lightning.fabric.strategies.fsdp", "fabric_strategy_options",
         [(None, None), (torch.nn.Linear, {torch.nn.Linear})])
    for module in (relay("fabric_strategy_options"), lightning("lightning.fabric.strategies.deepspeed")):
        config: dict = {}
        module._format_precision_config(config, "16-mixed", 0, 1000, 1, 16, 2)
        module._format_precision_config(config, "bf16-true", 0, 1000, 1, 16, 2)
        assert config == {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16,
                                   "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
                          "bf16": {"enabled": True}}


def test_a_sharded_checkpoint_is_read_whole_as_lightning_reads_it(tmp_path):
    import torch.distributed.checkpoint as dcp

    state = {"model": {"weight": torch.arange(6.0).reshape(2, 3)}, "optimizer": {"step": torch.tensor(4)}}
    dcp.save(state, checkpoint_id=tmp_path / "ckpt", no_dist=True)
    torch.save({"epoch": 2}, tmp_path / "ckpt" / "meta.pt")
    ours = relay("fabric_strategies")._load_distributed_checkpoint(tmp_path / "ckpt")
    theirs = lightning("lightning.fabric.utilities.load")._load_distributed_checkpoint(tmp_path / "ckpt")
    assert ours.keys() == theirs.keys() == {"model", "optimizer", "epoch"} and ours["epoch"] == 2
    assert torch.equal(ours["model"]["weight"], theirs["model"]["weight"])
    net, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    relay("fabric_strategies")._load_raw_module_state(net.state_dict(), other)
    assert torch.equal(net.weight, other.weight)
    assert outcome(relay("fabric_strategies")._load_raw_module_state, {}, other)[0] == "RuntimeError"


def test_importing_lightning_fabric_sets_what_lightnings_import_sets(monkeypatch):
    import warnings

    from trainer.utilities.warnings import PossibleUserWarning

    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    monkeypatch.setenv("POSSIBLE_USER_WARNINGS", "off")
    install(children=False)
    try:
        with warnings.catch_warnings():  # the filter Lightning's import adds stays inside this block
            import lightning.fabric

            importlib.reload(lightning.fabric)  # Lightning's package code runs again, as on a first import
            assert __import__("os").environ["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
            with warnings.catch_warnings(record=True) as caught:
                warnings.warn("quiet", PossibleUserWarning)
            assert caught == []
    finally:
        uninstall()


# --- refused engine internals ---------------------------------------------------------------------------------------
REFUSED = {
    "lightning.fabric.connector": ("_Connector", ()),
    "lightning.fabric.strategies.launchers.subprocess_script": ("_SubprocessScriptLauncher", (None, 1, 1)),
    "lightning.fabric.strategies.model_parallel": ("_save_checkpoint", (None, {}, True, 0)),
    "lightning.fabric.utilities.load": ("_LazyLoadingUnpickler", (None, None)),
    "lightning.fabric._graveyard.tpu": ("_patch_classes", ()),
}


def test_engine_internals_import_and_raise_naming_themselves():
    install(children=False)
    try:
        from lightning.fabric.connector import _Connector  # noqa: F401 - importing is what works
        from lightning.fabric.strategies.launchers.subprocess_script import _ChildProcessObserver  # noqa: F401

        from trainer.lightning_compat.impl.fabric_refused import LightningEngineInternalError

        for module, (name, args) in REFUSED.items():
            obj = getattr(importlib.import_module(module), name)
            with pytest.raises(LightningEngineInternalError, match=f"{module}:{name} is a piece of Lightning's engine"):
                obj(*args)
        # the XLA-FSDP pieces raise what Lightning raises without torch_xla
        from lightning.fabric.strategies.xla_fsdp import _XLAFSDPBackwardSyncControl

        with pytest.raises(ModuleNotFoundError, match="torch_xla"):
            _XLAFSDPBackwardSyncControl().no_backward_sync(torch.nn.Linear(1, 1), True)
    finally:
        uninstall()
        for name in [n for n in sys.modules if n.startswith(("lightning.", "lightning_fabric"))]:
            if isinstance(sys.modules[name], LightningAlias):
                del sys.modules[name]
