"""Layout presets fill in the data-parallel degree, checked where the CLI builds the Trainer.

``python -m trainer strategy=pipeline trainer.devices=4 strategy.pp=2`` plans pp=2 x dp_replicate=2 instead of
refusing; a layout whose every degree is given and does not fit stays one clear line. Only the selection is
checked here (no processes start); tests/test_pipeline.py runs the 2-process pipeline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.strategies.mesh import MeshLayout

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def build(overrides: list[str]):
    """The Trainer ``python -m trainer <overrides>`` builds (the same composition and the same builder)."""
    from hydra import compose, initialize_config_dir

    from trainer.cli.job import build_trainer
    from trainer.cli.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("config", overrides=["accelerator=cpu", "logger=none", *overrides])
    return build_trainer(cfg)


@pytest.mark.filterwarnings("ignore:Trainer\\(accelerator='cpu', devices=4\\) starts 4 processes")
@pytest.mark.parametrize(("overrides", "want"), [
    (["strategy=pipeline", "trainer.devices=4", "strategy.pp=2"], MeshLayout(pp=2, dp_replicate=2, dp_shard=1)),
    (["strategy=pipeline", "trainer.devices=2"], MeshLayout(pp=2, dp_replicate=1, dp_shard=1)),
    (["strategy=pipeline", "trainer.devices=4", "strategy.dp_shard=2"], MeshLayout(pp=2, dp_replicate=1, dp_shard=2)),
    (["strategy=pipeline", "trainer.devices=4", "strategy.pp=2", "strategy.dp_shard=-1"],
     MeshLayout(pp=2, dp_replicate=1, dp_shard=2)),
    (["strategy=fsdp", "trainer.devices=4", "strategy.dp_shard=2"], MeshLayout(dp_replicate=2, dp_shard=2)),
    (["strategy=fsdp", "trainer.devices=4", "strategy.tp=2"], MeshLayout(dp_replicate=1, dp_shard=2, tp=2)),
    (["strategy=ddp", "trainer.devices=4"], MeshLayout(dp_replicate=4, dp_shard=1)),
])
def test_the_data_parallel_degree_fills_in(overrides, want):
    strategy = build(overrides).strategy
    assert strategy.layout == want
    rank, size = want.data_parallel(0)
    assert strategy.distributed_sampler_kwargs == {"num_replicas": size, "rank": rank}


@pytest.mark.filterwarnings("ignore:Trainer\\(accelerator='cpu', devices=4\\) starts 4 processes")
@pytest.mark.parametrize(("overrides", "match"), [
    (["strategy=pipeline", "trainer.devices=4", "strategy.pp=2", "strategy.dp_replicate=1", "strategy.dp_shard=1"],
     r"strategy layout pp=2 x dp_replicate=1 x dp_shard=1 x tp=1 does not fit 4 processes"),
    (["strategy=pipeline", "trainer.devices=4", "strategy.pp=3"],
     r"pp=3 x dp_replicate=-1 x dp_shard=1 x tp=1 does not fit 4 processes \(the other degrees multiply to 3"),
    (["strategy=ddp", "trainer.devices=4", "strategy.dp_replicate=2"],
     r"dp_replicate=2 x dp_shard=1 x tp=1 does not fit 4 processes"),
])
def test_an_explicit_layout_that_does_not_fit_is_one_line(overrides, match):
    from trainer.cli.job import ConfigError

    with pytest.raises(ConfigError, match=match) as info:
        build(overrides)
    assert "\n" not in str(info.value)


def test_fill_in_rule_at_the_layout_level():
    preset = MeshLayout(dp_replicate=1, dp_shard=1, tp=1, pp=-1)
    dims = ("pp", "dp_replicate", "dp_shard", "tp")
    assert MeshLayout.request(preset, {}, dims) == preset  # the preset's own -1 fills in
    assert MeshLayout.request(preset, {"pp": 2}, dims).resolve(8) == MeshLayout(pp=2, dp_replicate=4, dp_shard=1)
    # dp_replicate given: dp_shard is the data-parallel degree left to fill in
    assert MeshLayout.request(preset, {"pp": 2, "dp_replicate": 2}, dims).resolve(8) == MeshLayout(
        pp=2, dp_replicate=2, dp_shard=2)
    # a strategy that applies only dp_replicate: nothing else may fill in
    ddp = MeshLayout(dp_replicate=-1, dp_shard=1)
    assert MeshLayout.request(ddp, {"dp_replicate": 2}, ("dp_replicate",)) == MeshLayout(dp_replicate=2, dp_shard=1)
