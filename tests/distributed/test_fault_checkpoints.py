"""Checkpoints on disk under faults: crafted files that would run code, writes that fail or are killed,
a directory swap interrupted between its renames, damaged shards. Every run is a real process."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.distributed.fault_script import Net
from tests.helpers import EarlyPython311Pickler, loader, quiet
from trainer import Trainer
from trainer.errors import MisconfigurationError

SCRIPT = Path(__file__).resolve().parent / "fault_script.py"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def run(out: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MASTER_PORT"}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """A real sharded checkpoint directory (FSDP, one process)."""
    out = tmp_path_factory.mktemp("sharded")
    done = run(out, "--strategy", "fsdp", "--max-steps", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "ckpt" / "last.ckpt" / ".metadata").is_file()
    return out / "ckpt" / "last.ckpt"


class _MakesDir:
    """Unpickling this creates a directory: a stand-in for any code a crafted file could run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def _crafted(sharded: Path, tmp_path: Path) -> tuple[Path, Path]:
    crafted = tmp_path / "crafted.ckpt"
    shutil.copytree(sharded, crafted)
    marker = tmp_path / "code-ran"
    (crafted / ".metadata").write_bytes(pickle.dumps(_MakesDir(str(marker))))
    return crafted, marker


def test_crafted_sharded_metadata_is_refused_by_fit(sharded, tmp_path):
    crafted, marker = _crafted(sharded, tmp_path)
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=1))
    with pytest.raises(MisconfigurationError, match=r"was refused: its \.metadata holds objects other than"):
        trainer.fit(Net(), loader(), ckpt_path=crafted)
    assert not marker.exists()


def test_crafted_sharded_metadata_is_refused_by_convert_checkpoint(sharded, tmp_path):
    crafted, marker = _crafted(sharded, tmp_path)
    done = subprocess.run([sys.executable, "-m", "trainer.checkpointing.convert", str(crafted), str(tmp_path / "o.ckpt")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "was refused" in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1
    assert not marker.exists() and not (tmp_path / "o.ckpt").exists()


def test_sharded_checkpoint_with_non_tensor_entries_is_refused(sharded, tmp_path):
    """DCP reads non-tensor entries with weights_only=False; a Relay checkpoint has none, so none is read."""
    import torch.distributed.checkpoint as dcp

    odd = tmp_path / "odd.ckpt"
    shutil.copytree(sharded, odd)
    for f in odd.iterdir():
        if f.name != "meta.pt":
            f.unlink()
    dcp.save({"state_dict/net.weight": torch.zeros(1, 4), "state_dict/extra": {"a": 1}}, checkpoint_id=str(odd),
             no_dist=True)
    with pytest.raises(MisconfigurationError, match="non-tensor entries"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Net(), loader(), ckpt_path=odd)


def test_a_real_sharded_checkpoint_still_loads_and_converts(sharded, tmp_path):
    from trainer.checkpointing.files import load_checkpoint
    from trainer.checkpointing.convert import convert_checkpoint

    convert_checkpoint(sharded, tmp_path / "full.ckpt")
    full = load_checkpoint(tmp_path / "full.ckpt")
    assert set(full["state_dict"]) == {"net.weight", "net.bias"}


def _repickled(sharded: Path, tmp_path: Path, name: str, metadata: object) -> Path:
    copy = tmp_path / name
    shutil.copytree(sharded, copy)
    with open(copy / ".metadata", "wb") as f:
        EarlyPython311Pickler(f).dump(metadata)
    return copy


def test_metadata_written_by_python_3_11_2_loads_and_getattr_reaches_nothing_else(sharded, tmp_path):
    """Early 3.11 releases pickle DCP's memory-format enum through ``getattr``: such a checkpoint loads (it failed
    on Debian 12's Python as "holds objects other than checkpoint metadata"); ``getattr`` on anything but a member
    of an allowed enum class is still refused, before it runs."""
    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

    from trainer.checkpointing.files import load_checkpoint
    from trainer.checkpointing.convert import convert_checkpoint

    metadata = pickle.loads((sharded / ".metadata").read_bytes())  # the test's own checkpoint: trusted
    early = _repickled(sharded, tmp_path, "early.ckpt", metadata)
    assert b"getattr" in (early / ".metadata").read_bytes()
    convert_checkpoint(early, tmp_path / "full.ckpt")
    assert set(load_checkpoint(tmp_path / "full.ckpt")["state_dict"]) == {"net.weight", "net.bias"}

    class _OtherAttribute:
        def __reduce__(self):
            return getattr, (_MEM_FORMAT_ENCODING, "mro")

    odd = _repickled(sharded, tmp_path, "odd.ckpt", [metadata, _OtherAttribute()])
    with pytest.raises(MisconfigurationError, match=r"was refused: .*getattr\(<enum '_MEM_FORMAT_ENCODING'>, 'mro'\)"):
        Trainer(**quiet(default_root_dir=tmp_path, max_steps=1)).fit(Net(), loader(), ckpt_path=odd)


def test_damaged_shard_file_is_reported_by_name(sharded, tmp_path):
    damaged = tmp_path / "damaged.ckpt"
    shutil.copytree(sharded, damaged)
    shard = damaged / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[:40])
    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=1))
    with pytest.raises(MisconfigurationError, match=r"damaged shard files: __0_0\.distcp \(40 bytes"):
        trainer.fit(Net(), loader(), ckpt_path=damaged)
    shard.unlink()
    with pytest.raises(MisconfigurationError, match=r"__0_0\.distcp \(missing\)"):
        trainer.fit(Net(), loader(), ckpt_path=damaged)


def test_the_strategy_holds_the_checkpoint_io_every_write_goes_through(tmp_path):
    from plugins.checkpoint_io import CheckpointIO

    class Recording(CheckpointIO):
        saved: list[str] = []

        def save(self, checkpoint, path):
            self.saved.append(os.path.basename(path))
            super().save(checkpoint, path)

    trainer = Trainer(**quiet(default_root_dir=tmp_path, max_steps=2, enable_checkpointing=None))
    trainer.strategy.checkpoint_io = Recording()
    trainer.fit(Net(), loader())
    assert Recording.saved == ["epoch=0-step=2.ckpt"]
    assert (Path(trainer.checkpoint_callback.dirpath) / "epoch=0-step=2.ckpt").is_file()


def test_checkpoint_key_names_live_in_trainer_only():
    """The plugins side handles bytes and layouts; which entries a checkpoint has is the Trainer's business."""
    import re

    # a key read or written (``c["loops"]``, ``{"state_dict": ...}``, ``c.get("loops")``, ``"loops" in c``), not a
    # method's name (``getattr(obj, "state_dict")``)
    keys = "optimizer_states|state_dict|loops"
    as_key = re.compile(rf'\[\s*"({keys})"\s*\]|"({keys})"\s*:|\.(get|pop|setdefault)\(\s*"({keys})"|"({keys})"\s+(not\s+)?in\b')
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "plugins").rglob("*.py") if as_key.search(p.read_text())]
    assert offenders == []
    assert as_key.search('checkpoint["loops"]') and as_key.search('{"state_dict": s}')
    assert not as_key.search('getattr(obj, "state_dict", None)')


# --- writes that fail ---------------------------------------------------------------------------------
def test_write_beyond_the_file_size_limit_is_one_line_naming_path_and_cause(tmp_path):
    done = run(tmp_path, "--fsize-limit", "2000")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "cannot write checkpoint" in last and str(tmp_path / "ckpt") in last and "(EFBIG)" in last, last
    assert "unexpected pos" not in done.stderr
    assert hidden(tmp_path / "ckpt") == []


def _tmpfs_available() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _tmpfs_available(), reason="needs user+mount namespaces (unshare -Urm) for a tiny tmpfs")
def test_disk_full_is_one_line_naming_path_and_enospc(tmp_path):
    disk = tmp_path / "disk"
    done = run(disk, "--tmpfs", "48k")  # the script mounts it in namespaces of its own: forked warm, not exec'd
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "cannot write checkpoint" in last and str(disk / "ckpt") in last and "(ENOSPC)" in last, last


def test_killed_write_leaves_no_temporary_after_the_next_start(tmp_path):
    killed = run(tmp_path, "--kill-in-fsync")
    assert killed.returncode == -signal.SIGKILL
    left = hidden(tmp_path / "ckpt")
    assert left and all(".relaytmp-" in n for n in left), left  # the killed write's temporary
    again = run(tmp_path, "--max-steps", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert hidden(tmp_path / "ckpt") == []


def test_failed_sharded_write_removes_its_temporary_directory(tmp_path):
    done = run(tmp_path, "--strategy", "fsdp", "--fsize-limit", "3000")
    assert done.returncode != 0
    assert "cannot write checkpoint" in done.stderr and "(EFBIG)" in done.stderr, done.stderr[-3000:]
    assert hidden(tmp_path / "ckpt") == []


@pytest.mark.parametrize("swap", ["exchange", "rename-aside"])
def test_crash_while_replacing_a_sharded_last_checkpoint_leaves_one_last_finds(tmp_path, swap):
    extra = ["--no-exchange"] if swap == "rename-aside" else []
    crashed = run(tmp_path, "--strategy", "fsdp", "--top-k", "0", "--kill-in-swap", *extra)
    if swap == "rename-aside":  # the process died between its two renames
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
        assert not (tmp_path / "ckpt" / "last.ckpt").exists()
    resumed = run(tmp_path, "--strategy", "fsdp", "--top-k", "0", "--resume", "--max-steps", "8", *extra)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Restoring states from the checkpoint path at" in resumed.stdout
    assert str(tmp_path / "ckpt" / "last.ckpt") in resumed.stdout
    assert hidden(tmp_path / "ckpt") == []
