"""One layout for every multi-process strategy: degrees filled in, checked, and presets per registry name.

Selection-level tests (no processes start): the layouts the real runs use are exercised by test_ddp.py,
test_fsdp.py and test_pipeline.py.
"""

from __future__ import annotations

import pytest

from plugins.strategies.mesh import MeshLayout
from trainer import Trainer

pytestmark = pytest.mark.timeout(60)


def test_minus_one_fills_in_and_the_product_is_checked():
    assert MeshLayout(pp=2, dp_shard=-1).resolve(8) == MeshLayout(pp=2, dp_shard=4)
    assert MeshLayout(dp_replicate=2, dp_shard=2, tp=2, pp=1).resolve(8).size == 8
    with pytest.raises(ValueError, match=r"pp=3 x dp_replicate=1 x dp_shard=-1 x tp=1 does not fit 4 processes.*"
                                         r"multiply to 3, which does not divide 4"):
        MeshLayout(pp=3).resolve(4)
    with pytest.raises(ValueError, match=r"dp_shard=3 x tp=1 does not fit 4 processes.*product is 4"):
        MeshLayout(dp_shard=3).resolve(4)
    with pytest.raises(ValueError, match=r"strategy.pp=0 is not a degree.*strategy.pp=2"):
        MeshLayout(pp=0)
    with pytest.raises(ValueError, match="at most one degree can be -1"):
        MeshLayout(pp=-1, dp_shard=-1)


def test_ranks_are_row_major_and_the_sampler_sees_data_parallel_replicas():
    layout = MeshLayout(dp_replicate=1, dp_shard=2, tp=2, pp=2)
    assert layout.coordinates(0) == {"pp": 0, "dp_replicate": 0, "dp_shard": 0, "cp": 0, "tp": 0}
    assert layout.coordinates(5) == {"pp": 1, "dp_replicate": 0, "dp_shard": 0, "cp": 0, "tp": 1}
    assert layout.coordinates(6) == {"pp": 1, "dp_replicate": 0, "dp_shard": 1, "cp": 0, "tp": 0}
    # tensor-parallel peers and pipeline stages read the same data; dp replicas read different data
    assert [layout.data_parallel(r) for r in range(8)] == [(0, 2), (0, 2), (1, 2), (1, 2)] * 2
    assert layout.mesh_dims() == ("pp", "dp_shard", "tp")
    assert MeshLayout(dp_replicate=4, dp_shard=1).mesh_dims() == ("dp_replicate", "dp_shard")


@pytest.mark.parametrize(("name", "devices", "extra", "want"), [
    ("ddp", 4, {}, MeshLayout(dp_replicate=4, dp_shard=1)),
    ("fsdp", 4, {}, MeshLayout(dp_shard=4)),
    ("fsdp_hybrid", 4, {"shard_size": 2}, MeshLayout(dp_replicate=2, dp_shard=2)),
    ("model_parallel", 4, {"tensor_parallel_size": 2}, MeshLayout(dp_shard=2, tp=2)),
    ("fsdp", 4, {"tp": 2}, MeshLayout(dp_shard=2, tp=2)),
    ("pipeline", 2, {}, MeshLayout(dp_shard=1, pp=2)),
    ("pipeline", 4, {"dp_shard": 2}, MeshLayout(dp_shard=2, pp=2)),
    ("pipeline", 8, {"pp": 2, "dp_replicate": 2, "dp_shard": -1, "tp": 1}, MeshLayout(dp_replicate=2, dp_shard=2, pp=2)),
])
def test_registry_names_are_presets_of_one_layout(name, devices, extra, want):
    from plugins.registry import default_registry

    strategy = default_registry().create("strategy", name, **extra)
    trainer = Trainer(strategy=strategy, accelerator="cpu", devices=devices, logger=False)
    assert trainer.strategy.layout == want
    rank, size = want.data_parallel(0)
    assert trainer.strategy.distributed_sampler_kwargs == {"num_replicas": size, "rank": rank}


def test_a_degree_a_strategy_cannot_apply_is_a_clear_error():
    from plugins.strategies.ddp import DDPStrategy

    with pytest.raises(ValueError, match=r"DDPStrategy\(pp=2\): this strategy applies only dp_replicate.*"
                                         r"strategy=pipeline strategy.pp=2"):
        DDPStrategy(pp=2)
    with pytest.raises(ValueError, match=r"dp_shard=3 x tp=1 does not fit 4 processes"):
        Trainer(strategy=default_fsdp(dp_shard=3), accelerator="cpu", devices=4, logger=False)


def default_fsdp(**kwargs):
    from plugins.strategies.fsdp import FSDPStrategy

    return FSDPStrategy(**kwargs)
