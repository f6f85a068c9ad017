"""``num_nodes="auto"`` and the restart count, at the selection level (the 2-node runs are in tests/distributed)."""

from __future__ import annotations

import pytest

from plugins.environments.torchelastic import TorchElasticEnvironment
from plugins.selection import LaunchInfo, choose

ELASTIC = {"TORCHELASTIC_RUN_ID": "r", "RANK": "1", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": "1",
           "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_num_nodes_auto_takes_the_node_count_the_launcher_reports():
    launch = LaunchInfo(environment="torchelastic", external=True, world_size=2, processes_per_node=1, num_nodes=2)
    choice = choose("cpu", 1, "auto", "auto", launch=launch)
    assert choice.num_nodes == 2 and choice.world_size == 2 and choice.strategy == "ddp"
    assert choose("cpu", 1, "auto").num_nodes == 1  # no launcher: this machine


@pytest.mark.parametrize("bad", [0, "two", 1.5, True])
def test_a_bad_num_nodes_names_auto_among_the_valid_values(bad):
    from trainer import Trainer

    with pytest.raises(Exception, match="num_nodes") as caught:
        Trainer(num_nodes=bad)
    assert "auto" in str(caught.value)


def test_the_restart_count_is_the_agents():
    assert TorchElasticEnvironment(ELASTIC).restart_count() == 0
    assert TorchElasticEnvironment({**ELASTIC, "TORCHELASTIC_RESTART_COUNT": "2"}).restart_count() == 2
