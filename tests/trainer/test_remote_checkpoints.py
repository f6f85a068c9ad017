"""Checkpoints and logs on object storage (fsspec URLs): ``memory://`` and an S3 server (moto) the test starts
on a free loopback port. A fit writes its checkpoints and TensorBoard/CSV logs under the URL (never into a
local folder named ``s3:`` or ``memory:``), ``ckpt_path="last"`` resumes from there bit-identically to an
uninterrupted run, synchronously and with ``async_save=True``."""

from __future__ import annotations

import os
import socket

import fsspec
import pytest
import torch

from tests.helpers import Regression, loader
from trainer import Trainer, seed_everything
from trainer.callbacks import ModelCheckpoint
from trainer.loggers import CSVLogger, TensorBoardLogger


@pytest.fixture(scope="module")
def s3_bucket():
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "S3_ENDPOINT": f"http://127.0.0.1:{port}"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    fsspec.filesystem("s3").clear_instance_cache()
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("bucket")
    try:
        yield "s3://bucket"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        fsspec.filesystem("s3").clear_instance_cache()


def fit(root: str, steps: int, async_save: bool, ckpt_path: str | None = None, loggers: bool = False):
    seed_everything(0)
    cb = ModelCheckpoint(dirpath=f"{root}/ckpt", every_n_train_steps=2, save_top_k=2, save_last=True,
                         async_save=async_save)
    logger = [TensorBoardLogger(save_dir=f"{root}/tb"), CSVLogger(save_dir=f"{root}/csv")] if loggers else False
    trainer = Trainer(max_steps=steps, callbacks=[cb], logger=logger, default_root_dir=root, log_every_n_steps=1,
                      enable_progress_bar=False, enable_model_summary=False)
    model = Regression()
    trainer.fit(model, loader(shuffle=True), loader(16), ckpt_path=ckpt_path)
    return trainer, model, cb


def listing(url: str) -> list[str]:
    fs, inner = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(inner, detail=False))


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("store", ["memory", "s3"])
def test_fit_and_resume_on_object_storage(store, async_save, request, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a URL mistaken for a local path would land
    base = request.getfixturevalue("s3_bucket") if store == "s3" else "memory://bucket"
    root = f"{base}/run-{async_save}"
    _, reference, _ = fit(f"{base}/ref-{async_save}", 12, async_save)

    trainer, _, cb = fit(root, 8, async_save, loggers=True)
    assert listing(f"{root}/ckpt") == ["epoch=0-step=6.ckpt", "epoch=0-step=8.ckpt", "last.ckpt"]
    assert cb.last_model_path == f"{root}/ckpt/last.ckpt"
    assert os.listdir(tmp_path) == []  # nothing local: no 'memory:' or 's3:' folder
    tensorboard = listing(f"{root}/tb/relay_logs/version_0")
    assert "hparams.yaml" in tensorboard and any(name.startswith("events.out.tfevents") for name in tensorboard)
    assert listing(f"{root}/csv/relay_logs/version_0") == ["hparams.yaml", "metrics.csv"]
    with fsspec.open(f"{root}/csv/relay_logs/version_0/metrics.csv", "r") as f:
        rows = f.read().splitlines()
    assert "train_loss" in rows[0] and len(rows) >= 9  # a header and a row per step

    resumed, model, _ = fit(root, 12, async_save, ckpt_path="last")
    assert resumed.global_step == 12
    for (name, a), b in zip(model.state_dict().items(), reference.state_dict().values()):
        assert torch.equal(a, b), name  # bit-identical to the uninterrupted run
    assert listing(f"{root}/ckpt") == ["epoch=1-step=10.ckpt", "epoch=1-step=12.ckpt", "last.ckpt"]


def test_memory_url_is_not_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cb = ModelCheckpoint(dirpath="memory://plain/run")
    assert cb.dirpath == "memory://plain/run"
    trainer = Trainer(max_steps=2, callbacks=[cb], logger=False, enable_progress_bar=False,
                      enable_model_summary=False)
    trainer.fit(Regression(), loader())
    assert os.listdir(tmp_path) == []
    assert listing("memory://plain/run") == ["epoch=0-step=2.ckpt"]
    from trainer.checkpointing.files import load_checkpoint

    assert load_checkpoint(cb.best_model_path)["global_step"] == 2
