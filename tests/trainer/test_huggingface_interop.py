"""Hugging Face weights in and out, on a small GPT-2 built here from a config (nothing downloaded): a sharded
``safetensors`` checkpoint with its index loads into a Relay module by a key map, and a Relay checkpoint (a file, a
sharded directory) exports to shards that ``transformers``' ``from_pretrained`` loads with the same weights."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers import quiet
from trainer import Module, Trainer
from trainer.interop.huggingface import INDEX_FILE, export_hf_weights, load_hf_weights

pytest.importorskip("safetensors")
transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def tiny_config():
    return transformers.GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=2, n_head=2)


class CausalLM(Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.model = transformers.GPT2LMHeadModel(config)

    def training_step(self, batch, batch_idx):
        return self.model(input_ids=batch[0], labels=batch[0]).loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


def tokens(n: int = 8) -> torch.utils.data.DataLoader:
    ids = torch.randint(0, 32, (n, 8), generator=torch.Generator().manual_seed(0))
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(ids), batch_size=4)


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_sharded_hf_checkpoint_in_train_and_export_out(tmp_path):
    config = tiny_config()
    torch.manual_seed(0)
    original = transformers.GPT2LMHeadModel(config)
    original.save_pretrained(tmp_path / "hf", max_shard_size="20KB")
    assert (tmp_path / "hf" / INDEX_FILE).is_file()  # sharded, with its index
    torch.manual_seed(1)
    module = CausalLM(config)
    load_hf_weights(module, tmp_path / "hf", key_map={r"^": "model."})
    same(module.model.state_dict(), original.state_dict())

    trainer = Trainer(**quiet(accelerator="cpu", max_steps=2))
    trainer.fit(module, tokens())
    trainer.save_checkpoint(tmp_path / "relay.ckpt")
    out = export_hf_weights(tmp_path / "relay.ckpt", tmp_path / "out", key_map={r"^model\.": ""},
                            max_shard_size="20KB", config=config)
    index = json.loads((out / INDEX_FILE).read_text())
    assert len(set(index["weight_map"].values())) > 1
    loaded = transformers.GPT2LMHeadModel.from_pretrained(out)
    trained = module.model.state_dict()
    assert not torch.equal(trained["transformer.h.0.mlp.c_fc.weight"], original.state_dict()["transformer.h.0.mlp.c_fc.weight"])
    same(loaded.state_dict(), trained)
    ids = tokens().dataset.tensors[0]
    torch.testing.assert_close(loaded.eval()(ids).logits, module.model.eval()(ids).logits)


def test_export_from_a_sharded_relay_directory(tmp_path):
    from plugins.strategies.sharded_checkpoint import save_sharded
    from plugins.strategies.single_device import SingleDeviceStrategy
    from trainer.checkpointing.files import LAYOUT_KEYS

    config = tiny_config()
    module = CausalLM(config)
    checkpoint = {"state_dict": module.state_dict(), "loops": {}, "epoch": 0, "global_step": 0}
    save_sharded(checkpoint, tmp_path / "sharded.ckpt", SingleDeviceStrategy(torch.device("cpu")), LAYOUT_KEYS)
    assert (tmp_path / "sharded.ckpt").is_dir()
    from trainer.__main__ import main

    (tmp_path / "cfg").mkdir()
    config.save_pretrained(tmp_path / "cfg")
    assert main(["export-hf", str(tmp_path / "sharded.ckpt"), str(tmp_path / "out"), "--map", r"^model\.=",
                 "--config", str(tmp_path / "cfg")]) == 0
    same(transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "out").state_dict(), module.model.state_dict())


def test_a_key_map_that_does_not_fit_is_one_error(tmp_path):
    config = tiny_config()
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")
    with pytest.raises(KeyError, match="key_map"):
        load_hf_weights(CausalLM(config), tmp_path / "hf")  # no "model." prefix added
    result = load_hf_weights(CausalLM(config), tmp_path / "hf", key_map={r"^lm_head": None, r"^": "model."},
                             strict=False)
    assert result.missing == [] and result.unexpected == []
