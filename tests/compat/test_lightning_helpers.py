"""Lightning's small helpers as Relay implements them (trainer/lightning_compat/impl/), used the way projects use
them; the values are Lightning 2.6.6's for the same calls."""

from __future__ import annotations

import argparse

import pytest
import torch


def test_lazy_load_reads_tensors_on_use_and_loads_into_a_model(tmp_path):
    from trainer.lightning_compat.impl.loading import (
        _lazy_load,
        _materialize_tensors,
        _move_state_into,
        _NotYetLoadedTensor,
    )

    model = torch.nn.Linear(3, 2)
    torch.save({"model": model.state_dict(), "step": 7}, tmp_path / "c.pt")
    state = _lazy_load(tmp_path / "c.pt")
    weight = state["model"]["weight"]
    assert isinstance(weight, _NotYetLoadedTensor) and weight.shape == (2, 3) and weight.dtype == torch.float32
    other = torch.nn.Linear(3, 2)
    other.load_state_dict(state["model"])  # torch ops read the data
    assert torch.equal(other.weight, model.weight) and state["step"] == 7
    full = _materialize_tensors(state["model"])
    assert type(full["bias"]) is torch.Tensor and torch.equal(full["bias"], model.bias)
    destination = {"model": torch.nn.Linear(3, 2), "step": 0}
    _move_state_into({"model": full, "step": 7}, destination)
    assert torch.equal(destination["model"].bias, model.bias) and destination["step"] == 7
    with pytest.raises(FileNotFoundError):
        _lazy_load(tmp_path / "missing.pt")


def test_meta_tensors_are_materialised_and_empty_init_skips_initialisers():
    from trainer.lightning_compat.impl.meta_init import (
        _EmptyInit,
        _has_meta_device_parameters_or_buffers,
        _materialize_meta_tensors,
    )

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    assert _has_meta_device_parameters_or_buffers(model)
    _materialize_meta_tensors(model, torch.device("cpu"))
    assert not _has_meta_device_parameters_or_buffers(model) and torch.equal(model[1].running_var, torch.ones(2))
    t = torch.full((3,), 5.0)
    with _EmptyInit(enabled=True):
        torch.nn.init.normal_(t)
    assert torch.equal(t, torch.full((3,), 5.0))


def test_combined_loader_mode_iterators():
    from trainer.lightning_compat.impl.combined import _SUPPORTED_MODES, _MaxSize, _MaxSizeCycle, _MinSize, _Sequential

    assert [b for b in _MinSize([range(2), range(3)])] == [([0, 0], 0, 0), ([1, 1], 1, 0)]
    assert [b for b in _MaxSizeCycle([range(2), range(3)])] == [([0, 0], 0, 0), ([1, 1], 1, 0), ([0, 2], 2, 0)]
    assert [b for b in _MaxSize([range(1), range(2)])] == [([0, 0], 0, 0), ([None, 1], 1, 0)]
    assert [b for b in _Sequential([range(2), range(1)])] == [(0, 0, 0), (1, 1, 0), (0, 0, 1)]
    assert [b for b in _Sequential([range(3), range(2)], limits=[1, 1])] == [(0, 0, 0), (0, 0, 1)]
    assert len(_MinSize([range(2), range(3)])) == 2 and len(_Sequential([range(2), range(3)])) == 5
    assert _SUPPORTED_MODES["max_size_cycle"]["iterator"] is _MaxSizeCycle
    with pytest.raises(ValueError, match="Mismatch in number of limits"):
        _MinSize([range(2)], limits=[1, 2])


def test_dummy_logger_merge_dicts_and_rank_zero_experiment():
    from trainer.lightning_compat.impl.logging_helpers import (
        DummyLogger,
        _DummyExperiment,
        merge_dicts,
        rank_zero_experiment,
    )

    logger = DummyLogger()
    logger.log_metrics({"a": 1.0}, step=0)
    logger.anything_at_all(1, x=2)
    assert logger[0] is logger and isinstance(logger.experiment, _DummyExperiment) and logger.name == ""
    merged = merge_dicts([{"a": 1, "b": 2, "c": {"d": 1}}, {"a": 3, "c": {"d": 3}}], {"a": max})
    assert merged == {"a": 3, "b": 2, "c": {"d": 2}}

    class Exp:
        @property
        @rank_zero_experiment
        def experiment(self):
            return "real"

    assert Exp().experiment == "real"  # rank 0 here


def test_hparams_files_round_trip(tmp_path):
    from trainer.lightning_compat.impl.saving import (
        convert,
        load_hparams_from_tags_csv,
        load_hparams_from_yaml,
        save_hparams_to_tags_csv,
        save_hparams_to_yaml,
        update_hparams,
    )

    save_hparams_to_yaml(tmp_path / "h.yaml", argparse.Namespace(lr=0.1, layers=[1, 2]))
    assert dict(load_hparams_from_yaml(tmp_path / "h.yaml")) == {"lr": 0.1, "layers": [1, 2]}
    assert type(load_hparams_from_yaml(tmp_path / "h.yaml", use_omegaconf=False)) is dict
    with pytest.warns(RuntimeWarning, match="Missing Tags"):
        assert load_hparams_from_yaml(tmp_path / "nope.yaml") == {}
    save_hparams_to_tags_csv(tmp_path / "tags.csv", {"lr": 0.1, "name": "x", "on": True})
    assert load_hparams_from_tags_csv(tmp_path / "tags.csv") == {"lr": 0.1, "name": "x", "on": True}
    assert convert("3") == 3 and convert("abc") == "abc"
    hparams = {"a": {"b": 1, "c": 2}}
    update_hparams(hparams, {"a": {"b": 5}, "d": 1})
    assert hparams == {"a": {"b": 5, "c": 2}, "d": 1}


def test_model_summary_object():
    from trainer.lightning_compat.impl.model_summary import ModelSummary, get_human_readable_count, summarize

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Sequential(torch.nn.Linear(3, 2)))
    summary = ModelSummary(model, 1)  # max_depth positional, as Lightning's
    assert summary.layer_names == ["0", "1"] and summary.param_nums == [15, 8]
    assert summary.total_parameters == 23 == summary.trainable_parameters and "Total params" in str(summary)
    assert summarize(model, max_depth=-1).layer_names == ["0", "1", "1.0"]
    assert get_human_readable_count(123) == "123  " and get_human_readable_count(1234) == "1.2 K"  # as Lightning pads
    with pytest.raises(ValueError, match="max_depth"):
        ModelSummary(model, max_depth=-2)


def test_runif_reasons_on_this_machine():
    from trainer.lightning_compat.impl.runif import _fabric_runif_reasons, _trainer_runif_reasons

    reasons, marks = _fabric_runif_reasons(min_cuda_gpus=torch.cuda.device_count() + 1, tpu=True, standalone=True)
    assert reasons[0] == f"GPUs>={torch.cuda.device_count() + 1}" and "TPU" in reasons
    assert marks == {"min_cuda_gpus": True, "tpu": True, "standalone": True}
    assert _trainer_runif_reasons(min_torch="1.0") == ([], {})
    assert "torch<1.0, " in _trainer_runif_reasons(max_torch="1.0")[0][0]


def test_precision_objects_by_name_and_trainer_weights_only():
    import inspect

    from trainer import Trainer
    from plugins.checkpoint_io import loads_trusted, trusted_loads
    from trainer.lightning_compat.impl.precision_objects import FSDPPrecision

    precision = FSDPPrecision("bf16-true")
    assert precision.precision == "bf16-true" and precision.convert_module(torch.nn.Linear(1, 1)).weight.dtype \
        == torch.bfloat16
    with pytest.raises(ValueError, match="does not use a scaler"):
        FSDPPrecision("bf16-mixed", scaler=object())
    assert list(inspect.signature(Trainer.fit).parameters)[-1] == "weights_only"
    with trusted_loads(None):
        assert not loads_trusted()
    with trusted_loads(False):
        assert loads_trusted()
    assert not loads_trusted()
    with pytest.raises(TypeError, match="weights_only='no'"), trusted_loads("no"):  # type: ignore[arg-type]
        pass


def test_logger_and_state_utilities():
    from trainer.lightning_compat.impl.utilities import (
        _add_prefix,
        _collect_rng_states,
        _convert_params,
        _flatten_dict,
        _optimizer_to_device,
        _sanitize_callable_params,
        _sanitize_params,
        _set_rng_states,
    )

    assert _convert_params(None) == {} and _convert_params(argparse.Namespace(a=1)) == {"a": 1}
    assert _flatten_dict({"a": {"b": 1}, "dl": [{"x": 1}], "l": [1]}) == {"a/b": 1, "dl/0/x": 1, "l": [1]}
    assert _sanitize_callable_params({"f": lambda: 3, "c": torch.nn.ReLU, "g": str.upper}) == {
        "f": 3, "c": "ReLU", "g": "upper"}
    assert _sanitize_params({"l": [1], "x": 0.5}) == {"l": "[1]", "x": 0.5}
    assert _add_prefix({"a": 1}, "train", "-") == {"train-a": 1}
    states = _collect_rng_states()
    first = torch.rand(2)
    _set_rng_states(states)
    assert torch.equal(torch.rand(2), first)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    _optimizer_to_device(optimizer, "cpu")
    assert optimizer.state[model.weight]["exp_avg"].device.type == "cpu"


def test_process_and_wrapper_helpers():
    from trainer.fabric.wrappers import FabricModule, FabricOptimizer
    from trainer.lightning_compat.impl.utilities import (
        _distributed_is_initialized,
        _get_default_process_group_backend_for_device,
        _suggested_max_num_threads,
        _unwrap_objects,
    )

    assert not _distributed_is_initialized()
    assert _get_default_process_group_backend_for_device(torch.device("cpu")) == "gloo"
    assert _suggested_max_num_threads(1) >= 1
    with pytest.raises(ValueError, match="num_processes"):
        _suggested_max_num_threads(0)
    from trainer.fabric import Fabric

    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(range(4))
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric_model, fabric_optimizer = fabric.setup(model, optimizer)
    wrapped = {"model": fabric_model, "opt": fabric_optimizer, "data": fabric.setup_dataloaders(loader), "n": 1}
    assert isinstance(fabric_model, FabricModule) and isinstance(fabric_optimizer, FabricOptimizer)
    assert _unwrap_objects(wrapped) == {"model": model, "opt": optimizer, "data": loader, "n": 1}


def test_batch_size_and_sampler_helpers():
    from torch.utils.data import DataLoader, DistributedSampler

    from trainer.lightning_compat.impl.misc import _is_dataloader_shuffled, _set_sampler_epoch, extract_batch_size
    from trainer.utilities.exceptions import MisconfigurationException

    assert extract_batch_size({"text": "abc", "x": torch.zeros(4, 2)}) == 4  # a string is not a batch dimension
    assert extract_batch_size([torch.tensor(1.0)]) == 1
    with pytest.warns(UserWarning, match="ambiguous"):
        assert extract_batch_size([torch.zeros(3), torch.zeros(5)]) == 3
    with pytest.raises(MisconfigurationException, match="could not infer the batch_size"):
        extract_batch_size(["a", None])
    assert _is_dataloader_shuffled(DataLoader(range(4), shuffle=True))
    assert not _is_dataloader_shuffled(DataLoader(range(4)))
    sampler = DistributedSampler(range(4), num_replicas=2, rank=0)
    _set_sampler_epoch(DataLoader(range(4), sampler=sampler), 3)
    assert sampler.epoch == 3


def test_module_path_and_tied_parameter_helpers():
    from trainer.lightning_compat.impl.utilities import _find_shared_parameters, _get_module_by_path, \
        _set_module_by_path

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.Linear(2, 2)))
    model[1][0].weight = model[0].weight
    assert _find_shared_parameters(model) == [["0.weight", "1.0.weight"]]
    assert _get_module_by_path(model, "1.0") is model[1][0]
    relu = torch.nn.ReLU()
    _set_module_by_path(model, "1.0", relu)
    assert model[1][0] is relu
