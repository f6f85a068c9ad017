"""Fast checks of the bundled example: the plain-torch GPT and sorting data, plus the Relay wrappers' pure parts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainer.examples.gpt import GPT, Attention, GPTConfig
from trainer.examples.sorting import IGNORE_INDEX, SortingDataModule, SortingDataset

TINY = GPTConfig(vocab_size=11, block_size=16, n_layer=2, n_head=4, n_embd=32)


def tiny_model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(TINY).eval()


def test_forward_shape_and_shorter_sequences():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (3, TINY.block_size))
    assert model(idx).shape == (3, TINY.block_size, TINY.vocab_size)
    assert model(idx[:, :5]).shape == (3, 5, TINY.vocab_size)


def test_too_long_sequence_is_rejected():
    with pytest.raises(ValueError, match="block_size"):
        tiny_model()(torch.zeros(1, TINY.block_size + 1, dtype=torch.long))


def test_config_rejects_heads_that_do_not_divide_width():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=30, n_head=4)


def test_block_structure_names_used_by_parallel_plans():
    model = tiny_model()
    names = {n for n, _ in model.named_modules()}
    for top in ("tok_emb", "pos_emb", "blocks", "norm", "head"):
        assert top in names
    assert isinstance(model.blocks, torch.nn.ModuleList) and len(model.blocks) == TINY.n_layer
    for sub in ("attn_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
                "ffn_norm", "feed_forward.w1", "feed_forward.w2"):
        assert f"blocks.0.{sub}" in names


def test_causal_later_tokens_do_not_change_earlier_logits():
    model = tiny_model()
    idx = torch.randint(0, TINY.vocab_size, (2, TINY.block_size))
    changed = idx.clone()
    k = 7
    changed[:, k] = (changed[:, k] + 1) % TINY.vocab_size
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :k], b[:, :k])
    assert not torch.allclose(a[:, k:], b[:, k:])


def test_attention_reads_head_count_from_local_weights():
    """A column/row split of the projections (what tensor parallel does) gives partial sums of the full output."""
    torch.manual_seed(0)
    full = Attention(TINY).eval()
    half = TINY.n_embd // 2  # two heads of four
    x = torch.randn(2, 6, TINY.n_embd)
    parts = []
    for rows in (slice(0, half), slice(half, None)):
        shard = Attention(TINY).eval()
        with torch.no_grad():
            for name in ("wq", "wk", "wv"):
                getattr(shard, name).weight = torch.nn.Parameter(getattr(full, name).weight[rows].clone())
            shard.wo.weight = torch.nn.Parameter(full.wo.weight[:, rows].clone())
            parts.append(shard(x))
    with torch.no_grad():
        torch.testing.assert_close(parts[0] + parts[1], full(x), rtol=1e-5, atol=1e-5)


def test_meta_device_build_then_init_weights():
    with torch.device("meta"):
        model = GPT(TINY)
    assert all(p.is_meta for p in model.parameters())
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    model.init_weights()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    # Same seed, same values as an eager build: init_weights is the only source of initial values.
    eager = tiny_model(seed=0)
    torch.manual_seed(0)
    eager.init_weights()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, msg=name)
    # Residual projections start smaller (GPT-2 scaling) and norms start as identity.
    assert model.blocks[0].attention.wo.weight.std() < model.blocks[0].attention.wq.weight.std()
    assert torch.equal(model.norm.weight, torch.ones(TINY.n_embd))
    idx = torch.randint(0, TINY.vocab_size, (2, 8))
    assert model.eval()(idx).shape == (2, 8, TINY.vocab_size)


def test_dataset_is_deterministic_from_seed():
    a, b = SortingDataset(32, seq_len=6, seed=3), SortingDataset(32, seq_len=6, seed=3)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    c = SortingDataset(32, seq_len=6, seed=4)
    assert not torch.equal(a.x, c.x)


def test_dataset_layout_and_ignore_index():
    L, digits = 5, 7
    ds = SortingDataset(50, seq_len=L, num_digits=digits, seed=0)
    assert len(ds) == 50 and ds.vocab_size == digits + 1 and ds.block_size == 2 * L
    x, y = ds[0]
    assert x.shape == y.shape == (2 * L,) and x.dtype == y.dtype == torch.long
    assert (ds.x[:, :L] < digits).all() and (ds.x[:, :L] >= 0).all()
    assert (ds.x[:, L] == ds.sep_token).all()
    assert (ds.y[:, :L] == IGNORE_INDEX).all()
    expected = ds.x[:, :L].sort(dim=1).values
    torch.testing.assert_close(ds.y[:, L:], expected)
    # The model input carries all sorted digits but the last (teacher forcing).
    torch.testing.assert_close(ds.x[:, L + 1:], expected[:, :-1])


def test_dataset_rejects_bad_sizes():
    with pytest.raises(ValueError):
        SortingDataset(0)
    with pytest.raises(ValueError):
        SortingDataset(4, num_digits=1)


def test_datamodule_splits_and_hparams():
    dm = SortingDataModule(seq_len=4, train_size=96, val_size=32, batch_size=16, seed=1)
    assert dm.hparams.batch_size == 16 and dm.hparams.seed == 1
    dm.setup("fit")
    assert len(dm.train_dataloader()) == 6 and len(dm.val_dataloader()) == 2
    assert not torch.equal(dm.train_set.x[:32], dm.val_set.x)
    dm.setup("test")
    x, y = next(iter(dm.test_dataloader()))
    assert x.shape == (16, dm.block_size) and dm.vocab_size == 11


def test_loss_accuracy_and_schedule_helpers():
    from trainer.examples.gpt_module import next_token_loss, token_accuracy, warmup_cosine

    y = torch.tensor([[IGNORE_INDEX, 2, 3], [IGNORE_INDEX, 1, 0]])
    perfect = F.one_hot(y.clamp(min=0), 4).float() * 10
    assert token_accuracy(perfect, y).item() == 1.0
    wrong_ignored = perfect.clone()
    wrong_ignored[:, 0] = F.one_hot(torch.tensor(3), 4).float() * 10
    assert token_accuracy(wrong_ignored, y).item() == 1.0  # ignored positions do not count
    half = perfect.clone()
    half[0, 1:] = F.one_hot(torch.tensor(0), 4).float() * 10
    assert token_accuracy(half, y).item() == 0.5
    assert next_token_loss(perfect, y).item() < 1e-3
    assert warmup_cosine(0, 10, 100) == pytest.approx(0.1)
    assert warmup_cosine(10, 10, 100) == pytest.approx(1.0)
    assert warmup_cosine(100, 10, 100) == pytest.approx(0.1)
    assert warmup_cosine(500, 10, 100) == pytest.approx(0.1)


def test_gpt_module_optimizer_groups_and_schedule():
    from trainer.examples.gpt_module import GPTModule

    module = GPTModule(n_layer=1, n_embd=32, lr=1e-3, warmup_steps=10, max_steps=100)
    assert module.hparams.lr == 1e-3 and module.example_input_array.dtype == torch.long
    assert module(module.example_input_array).shape == (*module.example_input_array.shape, 11)
    config = module.configure_optimizers()
    opt, sched = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert config["lr_scheduler"]["interval"] == "step"
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] > 0 and no_decay["weight_decay"] == 0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(module.parameters()))
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-4)  # first warmup step
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(2e-4)


def test_tiny_model_learns_the_task():
    """A few dozen steps must cut the loss well down: catches a broken mask, shift or init."""
    torch.manual_seed(0)
    ds = SortingDataset(256, seq_len=4, seed=0)
    model = GPT(GPTConfig(vocab_size=ds.vocab_size, block_size=ds.block_size, n_layer=1, n_head=2, n_embd=32))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(60):
        i = torch.randint(0, len(ds), (64,))
        logits = model(ds.x[i])
        loss = F.cross_entropy(logits.flatten(0, 1), ds.y[i].flatten(), ignore_index=IGNORE_INDEX)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
