"""LSFEnvironment at the parsing level: jsrun's variables and an LSF rank file, given as a plain mapping. We have no
LSF cluster; tests/compat/test_remaining_names_diff.py compares the same reading with Lightning's."""

from __future__ import annotations

import socket

import pytest

from plugins.environments import LSFEnvironment, MPIEnvironment, detect_environment


def jsrun_task(rankfile, rank: int, local_rank: int, size: int = 4) -> dict[str, str]:
    return {"LSB_JOBID": "98765", "LSB_DJOB_RANKFILE": str(rankfile), "JSM_NAMESPACE_RANK": str(rank),
            "JSM_NAMESPACE_LOCAL_RANK": str(local_rank), "JSM_NAMESPACE_SIZE": str(size)}


@pytest.fixture
def rankfile(tmp_path):
    path = tmp_path / "rankfile"
    path.write_text(f"batch1\nnode-a\nnode-a\n{socket.gethostname()}\n{socket.gethostname()}\n")
    return path


def test_ranks_hosts_and_port(rankfile):
    env = LSFEnvironment(jsrun_task(rankfile, rank=3, local_rank=1))
    assert [env.world_size(), env.global_rank(), env.local_rank(), env.node_rank(), env.num_nodes()] == [4, 3, 1, 1, 2]
    assert env.main_address == "node-a"  # the first compute host, not the launch node
    assert env.main_port == 10000 + 98765 % 1000
    assert LSFEnvironment({**jsrun_task(rankfile, 0, 0), "MASTER_PORT": "31000"}).main_port == 31000
    assert env.creates_processes_externally


def test_detected_before_mpi_when_spectrum_mpi_variables_are_also_set(rankfile):
    env = {**jsrun_task(rankfile, 1, 1), "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}
    assert isinstance(detect_environment(env), LSFEnvironment)
    partial = {k: v for k, v in env.items() if k != "LSB_DJOB_RANKFILE"}
    assert isinstance(detect_environment(partial), MPIEnvironment)


def test_errors_name_the_variable_and_the_file(tmp_path, rankfile):
    with pytest.raises(ValueError, match="JSM_NAMESPACE_RANK"):
        LSFEnvironment({k: v for k, v in jsrun_task(rankfile, 0, 0).items() if k != "JSM_NAMESPACE_RANK"}).global_rank()
    only_launch = tmp_path / "launch_only"
    only_launch.write_text("batch1\n")
    with pytest.raises(ValueError, match="lists no compute host"):
        LSFEnvironment(jsrun_task(only_launch, 0, 0)).main_address
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("batch1\nnode-x\n")
    with pytest.raises(ValueError, match="is not in the rank file"):
        LSFEnvironment(jsrun_task(elsewhere, 0, 0)).node_rank()
