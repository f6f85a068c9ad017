"""Context parallel (``strategy.cp``): the layout on the mesh, the CPU refusal, and (two GPUs) training.

Ring attention does not run on the CPU in torch 2.13 (plugins/strategies/context_parallel.py says what failed), so
the training test is marked ``cuda``, needs two GPUs, and was not run where it was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from plugins.strategies.mesh import MeshLayout
from tests.helpers import quiet
from trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


def test_context_parallel_ranks_share_the_batch_and_sit_beside_tensor_parallel():
    layout = MeshLayout(dp_shard=-1, cp=2, tp=2).resolve(8)
    assert (layout.dp_shard, layout.cp, layout.tp) == (2, 2, 2)
    assert layout.coordinates(6) == {"pp": 0, "dp_replicate": 0, "dp_shard": 1, "cp": 1, "tp": 0}
    # the 4 ranks of one cp x tp group read the same batch
    assert [layout.data_parallel(r) for r in range(8)] == [(0, 2)] * 4 + [(1, 2)] * 4
    assert layout.mesh_dims() == ("dp_shard", "cp", "tp")


def test_context_parallel_on_the_cpu_is_one_clear_error_and_pipelines_refuse_it():
    from plugins.strategies.fsdp import FSDPStrategy
    from plugins.strategies.pipeline import PipelineStrategy

    with pytest.raises(ValueError) as err:
        Trainer(accelerator="cpu", devices=2, strategy=FSDPStrategy(cp=2), **quiet())
    assert "strategy.cp=2 (context parallel) needs NVIDIA GPUs" in str(err.value)
    assert "_scaled_dot_product_flash_attention_for_cpu has no sharding rule" in str(err.value)
    with pytest.raises(ValueError, match=r"PipelineStrategy\(cp=2\): this strategy applies only pp"):
        PipelineStrategy(cp=2)


def test_batch_positions_give_the_default_positions_result():
    from trainer.examples.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16))
    x = torch.randint(0, 11, (2, 8))
    assert torch.equal(model(x), model(x, torch.arange(8).expand(2, 8)))


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="context parallel needs 2 NVIDIA GPUs")
@pytest.mark.timeout(600)
def test_context_parallel_on_two_gpus_matches_one_gpu(tmp_path):
    script = ROOT / "tests" / "distributed" / "context_parallel_script.py"
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    for name, devices, cp in (("one", "1", "1"), ("cp", "2", "2")):
        done = subprocess.run([sys.executable, str(script), str(tmp_path / name), devices, cp], check=False,
                              capture_output=True, text=True, timeout=500, env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-4000:]
    one, cp = (json.loads((tmp_path / n / "losses.json").read_text()) for n in ("one", "cp"))
    assert one.keys() == cp.keys() and len(one) == 3
    for step in one:
        assert cp[step] == pytest.approx(one[step], rel=2e-2), (step, one, cp)  # bf16 ring attention
