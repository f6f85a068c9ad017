"""Checkpoints as a user sees them: file names, top-level keys, callback ``state_key``s, top-k bookkeeping
(``kth_best_model_path`` with ``save_top_k=-1``), a missing ``ckpt_path``, and ``precision="16-mixed"`` on CPU."""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from types import SimpleNamespace

import torch

from tests.compat.lightning_diff.common import exception, loader, quiet


class Normalizer:
    """A project's own object, kept in its checkpoints by ``on_save_checkpoint`` (as pytorch-forecasting keeps its
    encoders and losses there)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale


def checks(fw: SimpleNamespace) -> dict:
    class Net(fw.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.seen_dtypes: list[str] = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            out = self.layer(x)
            self.seen_dtypes.append(str(out.dtype))
            loss = torch.nn.functional.mse_loss(out.float(), y)
            self.log("loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            # a score that is worse every epoch, so the top-k order is known: epoch 0 best
            self.log("score", torch.tensor(float(self.current_epoch)))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    def names(paths) -> list[str]:
        return sorted(os.path.basename(p) for p in paths)

    def top_k(save_top_k: int) -> dict:
        directory = f"topk{save_top_k}"
        ckpt = fw.ModelCheckpoint(dirpath=directory, monitor="score", mode="min", save_top_k=save_top_k)
        trainer = fw.Trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[ckpt], **quiet(enable_checkpointing=True))
        trainer.fit(Net(), loader(), loader())
        saved = torch.load(os.path.join(directory, sorted(os.listdir(directory))[-1]), weights_only=False)
        return {
            "files": sorted(os.listdir(directory)),
            "best_model_path": os.path.basename(ckpt.best_model_path),
            "kth_best_model_path": os.path.basename(ckpt.kth_best_model_path),
            "kth_value": None if ckpt.kth_value is None else float(ckpt.kth_value),
            "best_k_models": names(ckpt.best_k_models),
            "checkpoint_callback_keys": sorted(saved["callbacks"]),
            "checkpoint_top_level_keys": sorted(saved),
        }

    def score_types() -> dict:
        """An integer monitored value ("step") stays an integer: loggers put ``score.item()`` in metadata."""
        ckpt = fw.ModelCheckpoint(dirpath="by_step", monitor="step", mode="max", save_top_k=2)
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[ckpt], **quiet(enable_checkpointing=True))
        trainer.fit(Net(), loader(), loader())
        return {"best": [type(ckpt.best_model_score.item()).__name__, str(ckpt.best_model_score.dtype)],
                "top_k": sorted(type(v.item()).__name__ for v in ckpt.best_k_models.values()),
                "best_value": ckpt.best_model_score.item()}

    def subclass_hooks() -> dict:
        """A project's ``ModelCheckpoint`` overriding Lightning's ``_update_best_and_save`` and
        ``_remove_checkpoint`` (scvi-tools' ``SaveCheckpoint`` replaces each top-k file by a save of its own)."""
        calls: list = []

        class Replacing(fw.ModelCheckpoint):
            def _update_best_and_save(self, current, trainer, monitor_candidates):
                super()._update_best_and_save(current, trainer, monitor_candidates)
                calls.append(["update", os.path.basename(self.best_model_path), float(current)])
                os.remove(self.best_model_path)
                self.best_model_path = self.best_model_path.split(".ckpt")[0]

            def _remove_checkpoint(self, trainer, filepath):
                super()._remove_checkpoint(trainer, filepath)
                calls.append(["remove", os.path.basename(filepath)])

        ckpt = Replacing(dirpath="replaced", monitor="score", mode="max", save_top_k=1)
        trainer = fw.Trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[ckpt], **quiet(enable_checkpointing=True))
        trainer.fit(Net(), loader(), loader())
        return {"calls": calls, "best": os.path.basename(ckpt.best_model_path), "files": sorted(os.listdir("replaced"))}

    def state_keys() -> dict:
        configs = {
            "default": {},
            "monitor": {"monitor": "val_loss", "mode": "max"},
            "steps": {"every_n_train_steps": 5},
            "epochs": {"every_n_epochs": 2, "monitor": "x"},
            "top_k_and_last": {"save_top_k": 3, "save_last": True, "filename": "{epoch}", "monitor": "m"},
        }
        out = {name: fw.ModelCheckpoint(**kwargs).state_key for name, kwargs in configs.items()}
        out["early_stopping"] = fw.EarlyStopping(monitor="val_loss", mode="max").state_key
        out["early_stopping_default"] = fw.EarlyStopping(monitor="loss").state_key
        return out

    def missing_ckpt_path() -> dict:
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=1, **quiet())
        try:
            trainer.fit(Net(), loader(), ckpt_path="does/not/exist.ckpt")
        except Exception as err:
            return {**exception(err), "message_start": str(err).split(":")[0]}
        return {"raised": False}

    def fp16_mixed_on_cpu() -> dict:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = fw.Trainer(max_epochs=1, limit_train_batches=1, precision="16-mixed", **quiet())
            model = Net()
            trainer.fit(model, loader())
        relevant = [w for w in caught if "16" in str(w.message) and "cpu" in str(w.message).lower()]
        return {"precision": str(trainer.precision), "plugin_precision": str(trainer.precision_plugin.precision),
                "dtypes": model.seen_dtypes, "warned": bool(relevant)}

    def callback_surface() -> dict:
        """Arguments by position, what a bad one raises (the words code matches on), versioned and unversioned
        names, ``save_on_exception``, ``to_yaml`` and ``format_checkpoint_name(prefix=...)``."""
        positional = fw.ModelCheckpoint("pos", "{epoch}", "score", False, True, 2, True)
        out = {"positional": [positional.monitor, positional.save_last, positional.save_top_k,
                              positional.save_on_exception],
               "prefix": os.path.basename(positional.format_checkpoint_name({"epoch": 3}, prefix="run")),
               "errors": {}}
        for name, kwargs in {"top_k": {"save_top_k": -2}, "steps": {"every_n_train_steps": -1},
                             "epochs": {"every_n_epochs": -1}, "mode": {"mode": "sideways"},
                             "both": {"every_n_train_steps": 2, "every_n_epochs": 2}}.items():
            try:
                fw.ModelCheckpoint(**kwargs)
            except Exception as err:
                out["errors"][name] = {**exception(err), "message": str(err).split(".")[0]}

        class Failing(Net):
            def training_step(self, batch, batch_idx):
                if self.global_step == 3:
                    raise RuntimeError("Trouble!")
                return super().training_step(batch, batch_idx)

        for run in range(2):  # the second run finds the first one's files: versions, or overwrites
            for counter in (True, False):
                directory = f"exception-{counter}"
                ckpt = fw.ModelCheckpoint(dirpath=directory, save_on_exception=True, save_last=True, monitor="loss",
                                          enable_version_counter=counter)
                trainer = fw.Trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=0, callbacks=[ckpt],
                                     **quiet(enable_checkpointing=True))
                try:
                    trainer.fit(Failing(), loader())
                except RuntimeError as err:
                    out[f"raised-{counter}-{run}"] = str(err)
                out[f"files-{counter}-{run}"] = sorted(os.listdir(directory))
        ckpt.to_yaml("best.yaml")
        with open("best.yaml") as f:
            out["to_yaml"] = sorted(os.path.basename(line.split(":")[0]) for line in f)
        out["no_monitor"] = top_k_no_monitor()
        return out

    def top_k_no_monitor() -> dict:
        ckpt = fw.ModelCheckpoint(dirpath="latest", save_top_k=-1, save_last=True)
        trainer = fw.Trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                             callbacks=[ckpt], **quiet(enable_checkpointing=True))
        trainer.fit(Net(), loader(), loader())
        return {"files": sorted(os.listdir("latest")), "best_model_path": os.path.basename(ckpt.best_model_path),
                "best_k_models": dict(ckpt.best_k_models), "kth_best_model_path": ckpt.kth_best_model_path,
                "best_model_score": ckpt.best_model_score}

    def trusted_objects() -> dict:
        """A checkpoint holding the project's objects: refused by a default (data-only) load, read in full with
        ``weights_only=False`` by ``load_from_checkpoint`` and by ``fit(ckpt_path=...)``."""

        class WithObjects(Net):
            def on_save_checkpoint(self, checkpoint):
                checkpoint["normalizer"] = Normalizer(2.5)

            def on_load_checkpoint(self, checkpoint):
                self.loaded_scale = checkpoint["normalizer"].scale

        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, **quiet(enable_checkpointing=True))
        trainer.fit(WithObjects(), loader())
        path = trainer.checkpoint_callback.best_model_path
        out = {}
        try:
            WithObjects.load_from_checkpoint(path)
            out["default"] = "loaded"
        except Exception as err:
            out["default"] = "raised, names weights_only" if "weights_only" in str(err) else f"raised: {err}"
        out["trusted"] = WithObjects.load_from_checkpoint(path, weights_only=False).loaded_scale
        with open(path, "rb") as f:  # an open file, or bytes in memory (chemprop rewrites a checkpoint so)
            out["from_file"] = WithObjects.load_from_checkpoint(f, weights_only=False).loaded_scale
            f.seek(0)
            out["from_bytes"] = WithObjects.load_from_checkpoint(io.BytesIO(f.read()), weights_only=False).loaded_scale
        resumed = WithObjects()
        fw.Trainer(max_epochs=2, limit_train_batches=2, **quiet()).fit(resumed, loader(), ckpt_path=path,
                                                                        weights_only=False)
        out["resumed"] = [resumed.loaded_scale, resumed.current_epoch]
        return out

    def written_by_hand() -> dict:
        """A file in Lightning's checkpoint form that a project wrote itself (chemprop's model converter): no loop
        state, ``epoch`` and ``global_step`` None. ``load_from_checkpoint`` needs only the weights."""
        weights = {"layer.weight": torch.full((1, 4), 0.5), "layer.bias": torch.zeros(1)}
        path = os.path.join(tempfile.mkdtemp(), "converted.ckpt")
        torch.save({"epoch": None, "global_step": None, "pytorch-lightning_version": "2.6.6", "state_dict": weights,
                    "hyper_parameters": {}, "loops": None}, path)
        return float(Net.load_from_checkpoint(path).layer.weight.sum())

    def connector_restore() -> dict:
        """``trainer._checkpoint_connector``'s SLURM save names and ``restore`` after a fit (Lightning's test helpers'
        sequence): the next ``hpc_ckpt_N`` name, the highest one found, and the weights and step put back."""
        model = Net()
        trainer = fw.Trainer(max_epochs=1, limit_train_batches=2, **quiet())
        trainer.fit(model, loader())
        connector = trainer._checkpoint_connector
        folder = tempfile.mkdtemp()
        first = connector.hpc_save_path(folder)
        trainer.save_checkpoint(first)
        second = connector.hpc_save_path(folder)
        found = connector._CheckpointConnector__get_max_ckpt_path_from_folder(folder)
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            model.layer.weight.add_(1.0)
        connector.restore(first)
        return {"names": [os.path.relpath(p, folder) for p in (first, second, found)],
                "weights_back": all(torch.equal(saved[k], v) for k, v in model.state_dict().items()),
                "global_step": trainer.global_step}

    def resumed_checkpoint_kept() -> dict:
        """A fit resumed into the folder it resumed from: top-k never deletes the checkpoint it started from; one
        resumed into another folder deletes nothing in the first."""
        out = {}
        for same in (True, False):
            first, second = tempfile.mkdtemp(), tempfile.mkdtemp()
            model = Net()
            ckpt = fw.ModelCheckpoint(dirpath=first, monitor="step", mode="max", save_top_k=2, every_n_train_steps=2)
            fw.Trainer(max_steps=5, callbacks=[ckpt], **quiet(enable_checkpointing=True)).fit(model, loader(16))
            ckpt = fw.ModelCheckpoint(dirpath=first if same else second, monitor="step", mode="max", save_top_k=2,
                                      every_n_train_steps=2)
            fw.Trainer(max_steps=8, callbacks=[ckpt], **quiet(enable_checkpointing=True)).fit(
                model, loader(16), ckpt_path=os.path.join(first, "epoch=0-step=4.ckpt"))
            out["same" if same else "other"] = [sorted(os.listdir(first)), sorted(os.listdir(second))]
        return out

    return {"score_types": score_types, "written_by_hand": written_by_hand, "resumed_checkpoint_kept": resumed_checkpoint_kept, "connector_restore": connector_restore, "trusted_objects": trusted_objects, "top_k_all": lambda: top_k(-1), "top_k_two": lambda: top_k(2), "state_keys": state_keys,
            "missing_ckpt_path": missing_ckpt_path, "fp16_mixed_on_cpu": fp16_mixed_on_cpu,
            "callback_surface": callback_surface, "checkpoint_subclass_hooks": subclass_hooks}
