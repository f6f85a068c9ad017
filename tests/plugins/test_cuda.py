"""Training on a real NVIDIA GPU: devices, precision, the gradient scaler in checkpoints, exact resume.

Every test here carries ``@pytest.mark.cuda`` and is skipped without a GPU (CI has none); run them with
``python -m pytest -q -m cuda`` on a machine with one.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from plugins.accelerators.cuda import CUDAAccelerator
from tests.helpers import Regression, loader, quiet
from trainer import Trainer, seed_everything

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not CUDAAccelerator.is_available(), reason="needs an NVIDIA GPU")]


class Probe(Regression):
    """Records where the batch and the weights are, and the dtype the forward pass runs in."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self(x.to(self.layer.weight.dtype))
        self.seen = (x.device, self.layer.weight.device, out.dtype, self.layer.weight.dtype)
        loss = torch.nn.functional.mse_loss(out.float(), y.float())  # y comes in the precision's dtype too
        self.log("train_loss", loss, prog_bar=True)
        return loss


@pytest.mark.parametrize("accelerator", ["cuda", "gpu", "auto"])
def test_fit_runs_on_the_gpu_and_learns(accelerator):
    seed_everything(0)
    model = Probe(lr=0.02)
    data = loader(n=256, batch_size=16, shuffle=True)
    before = Trainer(**quiet(accelerator=accelerator, devices=1)).validate(model, data, verbose=False)[0]["val_loss"]
    trainer = Trainer(**quiet(accelerator=accelerator, devices=1, max_epochs=5, num_sanity_val_steps=0))
    trainer.fit(model, data, data)
    assert trainer.accelerator.name == "cuda" and trainer.strategy.root_device == torch.device("cuda", 0)
    assert model.seen[:2] == (torch.device("cuda", 0), torch.device("cuda", 0))
    assert model.device == torch.device("cpu")  # the call's end moved it back, as Lightning's does
    assert float(trainer.callback_metrics["val_loss"]) < 0.1 * before


def test_after_fit_the_module_and_its_optimizer_state_are_on_the_cpu_and_the_next_call_moves_them_back():
    """As Lightning: a module a user holds after ``fit`` runs on CPU tensors; ``test`` runs on the GPU again, and its
    ``setup`` hook sees the GPU as the module's device."""

    class Where(Probe):
        def configure_optimizers(self):  # kept across fits: the second one must bring its state back to the GPU
            if not hasattr(self, "kept"):
                self.kept = torch.optim.Adam(self.parameters(), lr=0.01)
            return self.kept

        def on_train_end(self):
            self.state_devices = {v.device.type for s in self.kept.state.values() for v in s.values()
                                  if isinstance(v, torch.Tensor) and v.dim() > 0}

        def setup(self, stage):
            self.setup_device = self.device

        def test_step(self, batch, batch_idx):
            self.test_weight_device = self.layer.weight.device
            return super().test_step(batch, batch_idx)

    model = Where()
    trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_steps=2))
    trainer.fit(model, loader(n=32))
    assert model.device == model.layer.weight.device == torch.device("cpu")
    states = [v for s in trainer.optimizers[0].state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    assert states and all(v.device.type == "cpu" for v in states)
    assert model(torch.randn(3, 4)).shape == (3, 1)  # a CPU batch, no device error
    trainer.test(model, loader(n=16), verbose=False)
    assert model.setup_device == model.test_weight_device == torch.device("cuda", 0)
    assert model.device == torch.device("cpu")
    again = Trainer(**quiet(accelerator="cuda", devices=1, max_steps=2))
    again.fit(model, loader(n=32))  # the kept optimizer's state back on the GPU with the module
    assert model.state_devices == {"cuda"} and again.global_step == 2


@pytest.mark.parametrize(
    ("precision", "out_dtype", "weight_dtype"),
    [
        ("32-true", torch.float32, torch.float32),
        ("16-mixed", torch.float16, torch.float32),
        ("bf16-mixed", torch.bfloat16, torch.float32),
        ("bf16-true", torch.bfloat16, torch.bfloat16),
        ("16-true", torch.float16, torch.float16),
        ("64-true", torch.float64, torch.float64),
    ],
)
def test_precision_on_the_gpu(precision, out_dtype, weight_dtype):
    model = Probe()
    trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_epochs=1, precision=precision))
    trainer.fit(model, loader())
    assert model.seen[2:] == (out_dtype, weight_dtype)
    assert (getattr(trainer.precision_plugin, "scaler", None) is not None) == (precision == "16-mixed")
    assert torch.isfinite(model.layer.weight).all()


def test_gradient_scaler_state_goes_into_the_checkpoint_and_comes_back(tmp_path):
    model = Probe()
    trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_epochs=1, precision="16-mixed"))
    trainer.fit(model, loader())
    scaler = trainer.precision_plugin.scaler
    scaler.update(1234.0)  # a scale the fresh scaler would not have
    path = tmp_path / "fp16.ckpt"
    trainer.save_checkpoint(path)
    assert torch.load(path, weights_only=True)["precision"]["scaler"]["scale"] == 1234.0

    resumed = Trainer(**quiet(accelerator="cuda", devices=1, max_epochs=2, precision="16-mixed"))
    seen: list[float] = []

    class Watch(Probe):
        def on_train_start(self):
            seen.append(resumed.precision_plugin.scaler.get_scale())

    resumed.fit(Watch(), loader(), ckpt_path=path)
    assert seen == [1234.0]


def test_resume_on_the_gpu_is_bit_identical(tmp_path):
    def run(epochs: int, ckpt_path=None) -> Trainer:
        seed_everything(0)
        trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_epochs=epochs, deterministic=True,
                                  precision="16-mixed"))
        trainer.fit(Probe(), loader(n=72, shuffle=True), ckpt_path=ckpt_path)
        return trainer

    straight = run(4)
    half = run(2)
    path = tmp_path / "half.ckpt"
    half.save_checkpoint(path)
    assert "cuda" in torch.load(path, weights_only=True)["rng"]  # the CUDA RNG state is saved too
    resumed = run(4, ckpt_path=path)
    a, b = _weights(straight), _weights(resumed)
    assert a.keys() == b.keys()
    for name in a:  # on the CPU once the fit ended (as Lightning)
        assert a[name].device.type == "cpu" and torch.equal(a[name], b[name]), name


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.lightning_module.state_dict().items()}


def test_bundled_example_trains_with_bf16_mixed_on_the_gpu(tmp_path):
    from trainer.examples.run import train_sorting

    metrics = train_sorting(tmp_path, max_epochs=2, precision="bf16-mixed", accelerator="cuda", devices=1,
                            enable_progress_bar=False)
    assert metrics["val_acc"] >= 0.6, metrics


def test_a_nonfinite_loss_on_the_gpu_stops_training_and_the_last_checkpoint_stays_finite(tmp_path):
    """On CUDA the loss is read without waiting for the device (trainer/loops/nonfinite.py): the error comes a step or a
    few later and names the step whose loss was not finite; no checkpoint of non-finite weights is written."""
    from tests.distributed.fault_script import Net
    from trainer.callbacks import ModelCheckpoint
    from trainer.loops.nonfinite import NonFiniteLossError

    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=2)
    trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_steps=8, callbacks=[ckpt],
                              enable_checkpointing=None, default_root_dir=tmp_path))
    with warnings.catch_warnings(), pytest.raises(NonFiniteLossError,
                                                  match=r"non-finite loss \(nan\) at global step 3 \(epoch 0, batch 3"):
        warnings.simplefilter("ignore")  # "Not saving ...": the step after the NaN may reach a checkpoint first
        trainer.fit(Net(nan_at_step=3), loader())
    last = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 2 and all(torch.isfinite(v).all() for v in last["state_dict"].values())


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_a_training_step_on_the_gpu_never_waits_for_the_device(precision):
    """No ``.item()`` or other synchronisation between a batch's start and its end (the non-finite check included):
    the CPU queues the next step while the GPU runs this one, as in a raw loop (benchmarks/gpu.py)."""
    entered: list[int] = []

    class NoSync(Probe):
        def on_train_batch_start(self, batch, batch_idx):
            torch.cuda.set_sync_debug_mode("error")
            entered.append(batch_idx)

        def on_train_batch_end(self, outputs, batch, batch_idx):
            torch.cuda.set_sync_debug_mode("default")

        def training_step(self, batch, batch_idx):  # Probe's, without its logging
            x, y = batch
            return torch.nn.functional.mse_loss(self(x.to(self.layer.weight.dtype)).float(), y.float())

    trainer = Trainer(**quiet(accelerator="cuda", devices=1, max_epochs=1, precision=precision,
                              enable_checkpointing=False, logger=False))
    try:
        trainer.fit(NoSync(), loader())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert entered == list(range(8))
