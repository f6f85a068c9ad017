"""precision="fp8-mixed" (torchao float8 / MX Linear layers).

On this CPU-only CI: the one clear error where no FP8 GPU is, and the layer conversion in emulation (torchao casts to
float8 and back, the matmuls run in high precision). The tests marked ``cuda`` need an FP8 GPU (compute capability
8.9+) and were not run where this was written: run them with ``python -m pytest -q -m cuda tests/plugins/test_float8.py``.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers import quiet
from tests.optional import need_mark
from trainer import Trainer


def gpt_module(**kwargs):
    from trainer.examples.gpt_module import GPTModule

    torch.manual_seed(0)
    return GPTModule(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, warmup_steps=1, max_steps=4,
                     **kwargs)


def tokens(n: int = 8, vocab: int = 32) -> DataLoader:
    x = torch.randint(0, vocab, (n, 16), generator=torch.Generator().manual_seed(1))
    return DataLoader(TensorDataset(x, x.roll(1, 1)), batch_size=4)


def test_fp8_without_an_fp8_gpu_is_one_clear_error():
    with pytest.raises(ValueError) as err:
        Trainer(accelerator="cpu", precision="fp8-mixed", **quiet())
    text = str(err.value)
    if "needs torchao" in text:  # a machine without the extra: that is what is missing
        assert "pip install 'relaytrain[fp8]'" in text and "bf16-mixed" in text
    else:
        assert "needs an NVIDIA GPU with FP8 tensor cores (compute capability 8.9 or newer" in text
        assert "this run is on 'cpu'; use precision='bf16-mixed' instead" in text
    with pytest.raises(ValueError, match=r"Float8Precision\(recipe='fp4'\) is not known"):
        from plugins.precision.float8 import Float8Precision

        Float8Precision(recipe="fp4")


@need_mark("torchao", "precision='fp8-mixed' converts layers with torchao")
def test_fp8_converts_the_linear_layers_and_trains_in_emulation_on_the_cpu(tmp_path):
    """Every Linear whose sizes are multiples of 16 becomes torchao's Float8Linear (the 32-token head too; a layer
    named in ``skip`` stays), the parameter names stay, and a step trains; the MX recipe wraps the weights."""
    from plugins.precision.float8 import Float8Precision

    model = gpt_module()
    keys = set(model.state_dict())
    trainer = Trainer(accelerator="cpu", max_steps=2, precision=Float8Precision(emulate=True, skip=["head"]),
                      **quiet(default_root_dir=tmp_path))
    trainer.fit(model, tokens())
    kinds = {name: type(m).__name__ for name, m in model.model.named_modules() if "Linear" in type(m).__name__}
    assert kinds.pop("head") == "Linear" and set(kinds.values()) == {"Float8Linear"} and len(kinds) == 12
    assert set(model.state_dict()) == keys and torch.isfinite(trainer.callback_metrics["train_loss"])
    trainer.save_checkpoint(tmp_path / "fp8.ckpt")
    assert set(torch.load(tmp_path / "fp8.ckpt", weights_only=True)["state_dict"]) == keys

    mx = Float8Precision(recipe="mxfp8_emulated_rceil", device_type="cpu")
    plain = gpt_module()
    mx.convert_module(plain.model)
    assert type(plain.model.blocks[0].feed_forward.w1.weight).__name__ == "MXFP8TrainingWeightWrapperTensor"


FP8_GPU = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.cuda
@pytest.mark.skipif(not FP8_GPU, reason="needs an NVIDIA GPU with compute capability 8.9+ (FP8)")
@pytest.mark.parametrize("strategy", ["auto", "fsdp"])
def test_fp8_trains_on_an_fp8_gpu_with_compile_and_fsdp_float8_all_gather(strategy):
    """On an FP8 GPU: float8 matmuls (not emulated), per-block compile, and under FSDP2 the float8 all-gather; the
    loss follows bf16's within float8's error."""
    losses = {}
    for precision in ("bf16-mixed", "fp8-mixed"):
        model = gpt_module()
        trainer = Trainer(accelerator="cuda", devices=1, strategy=strategy, precision=precision, max_steps=2,
                          compile=True, **quiet())
        trainer.fit(model, tokens())
        losses[precision] = float(trainer.callback_metrics["train_loss"])
    assert abs(losses["fp8-mixed"] - losses["bf16-mixed"]) < 0.1 * losses["bf16-mixed"], losses
