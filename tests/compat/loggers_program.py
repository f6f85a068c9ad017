"""Loggers as a user sees them, on either framework: ``python loggers_program.py lightning|relay CHECK[@ARG] ...``.

Checks: ``layout`` (TensorBoard/CSV directories for every name/version/sub_dir/default_root_dir combination),
``csv_experiment``, ``mlflow URI`` (what the store holds, read back with ``MlflowClient``; ``file`` for a file store
under the working directory), ``wandb`` (an offline run, read back with wandb's own reader of the ``.wandb`` log),
``comet`` (an offline experiment's archived messages).
Paths are reported relative to the working directory and run/experiment ids as placeholders. Several checks run in
one process (one import of the framework and the trackers, the suite's dearest part), each in a directory of its
own, and each one's result is emitted under its spec.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tests.compat.lightning_diff.common import exception, loader  # noqa: E402
from tests.compat.lightning_diff.frameworks import load  # noqa: E402
from tests.compat.lightning_diff.harness import emit  # noqa: E402


def loggers_of(framework: str):
    if framework == "lightning":
        import lightning.pytorch.loggers as loggers
    else:
        import trainer.loggers as loggers
    return loggers


def module_class(fw):
    class Regressor(fw.Module):
        def __init__(self, lr: float = 0.1, width: int = 4, opt: dict | None = None) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    return Regressor


def quiet_trainer(fw, **kwargs):
    base = dict(accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
                log_every_n_steps=1)
    return fw.Trainer(**{**base, **kwargs})


def rel(path, cwd: str, ids: dict[str, str] | None = None) -> str | None:
    if path is None:
        return None
    text = os.path.relpath(os.path.realpath(str(path)), os.path.realpath(cwd))
    ids = ids or {}
    return os.path.join(*[ids.get(part, part) for part in text.split(os.sep)])


def files_under(root: str) -> list[str]:
    """Every file under ``root``, TensorBoard event files named by kind (their names hold host and time)."""
    found = []
    for path in Path(root).rglob("*"):
        if path.is_file():
            name = "EVENTS" if path.name.startswith("events.out.tfevents.") else path.name
            found.append(str(path.parent.relative_to(root) / name))
    return sorted(found)


# --- TensorBoard / CSV layout ------------------------------------------------------------------------------------
LAYOUT_NAMES = [None, "", "exp"]
LAYOUT_VERSIONS = [None, 3, "v"]


def layout(fw, framework: str) -> dict:
    loggers = loggers_of(framework)
    model_cls = module_class(fw)
    cases = {}
    combos = [("tb", n, v, s, r) for n, v, s, r in itertools.product(LAYOUT_NAMES, LAYOUT_VERSIONS, [None, "sub"],
                                                                      [None, "root"])]
    combos += [("csv", n, v, None, r) for n, v, r in itertools.product(LAYOUT_NAMES, LAYOUT_VERSIONS, [None, "root"])]
    combos += [("default", None, None, None, r) for r in (None, "root")]
    for kind, name, version, sub_dir, root in combos:
        label = f"{kind} name={name!r} version={version!r} sub_dir={sub_dir!r} default_root_dir={root!r}"
        cwd = os.path.abspath(f"case{len(cases)}")
        os.makedirs(cwd)
        os.chdir(cwd)
        try:
            if kind == "tb":
                kwargs = {"sub_dir": sub_dir} if sub_dir else {}
                logger = loggers.TensorBoardLogger("logs", name=name, version=version, **kwargs)
            elif kind == "csv":
                logger = loggers.CSVLogger("logs", name=name, version=version)
            else:
                logger = True
            extra = {"default_root_dir": root} if root else {}
            trainer = quiet_trainer(fw, max_steps=2, limit_val_batches=1, logger=logger, **extra)
            trainer.fit(model_cls(), loader(), loader())
            logger = trainer.logger
            cases[label] = {
                "files": files_under(cwd),
                "log_dir": rel(logger.log_dir, cwd), "root_dir": rel(logger.root_dir, cwd),
                "save_dir": rel(logger.save_dir, cwd), "name": logger.name, "version": logger.version,
                "sub_dir": getattr(logger, "sub_dir", None), "trainer.log_dir": rel(trainer.log_dir, cwd),
                "checkpoint_dir": rel(trainer.checkpoint_callback.dirpath, cwd),
            }
        except Exception as err:
            cases[label] = exception(err)
        finally:
            os.chdir("..")
    return cases


def csv_experiment(fw, framework: str) -> dict:
    loggers = loggers_of(framework)
    logger = loggers.CSVLogger("logs", name="exp", version=1)
    experiment = logger.experiment
    seen = {"type": type(experiment).__name__, "same_object": experiment is logger.experiment,
            "methods": sorted(m for m in ("log_metrics", "log_hparams", "save") if callable(getattr(experiment, m))),
            "log_dir": rel(experiment.log_dir, "."), "metrics_file_path": rel(experiment.metrics_file_path, "."),
            "metrics_before": list(experiment.metrics)}
    experiment.log_metrics({"a": 1.0, "b": torch.tensor(2.0)}, step=0)
    experiment.log_metrics({"a": 3.0})  # step defaults to the rows buffered
    seen["buffered"] = [dict(row) for row in experiment.metrics]
    experiment.log_hparams({"lr": 0.5})
    experiment.save()
    seen["metrics_after_save"] = list(experiment.metrics)
    import csv

    with open(experiment.metrics_file_path, newline="") as f:
        seen["csv_rows"] = [dict(sorted(row.items())) for row in csv.DictReader(f)]
    seen["hparams_yaml"] = Path(experiment.log_dir, "hparams.yaml").read_text()
    seen["files"] = files_under("logs")
    return seen


# --- MLflow ---------------------------------------------------------------------------------------------------------
def mlflow_run(client, run_id: str) -> dict:
    run = client.get_run(run_id)
    metrics = {key: [(m.step, round(m.value, 4)) for m in sorted(client.get_metric_history(run_id, key),
                                                                   key=lambda m: (m.step, m.timestamp))]
               for key in sorted(run.data.metrics)}
    return {"status": run.info.status, "run_name": run.info.run_name, "params": dict(sorted(run.data.params.items())),
            "tags": dict(sorted(run.data.tags.items())), "metrics": metrics}


def artifacts(client, run_id: str, path: str | None = None) -> dict:
    """Every artifact path; for checkpoint folders the content of ``aliases.txt`` and ``metadata.yaml``."""
    import yaml

    found = {}
    for item in client.list_artifacts(run_id, path):
        if item.is_dir:
            found.update(artifacts(client, run_id, item.path))
        elif item.path.endswith((".txt", ".yaml")):
            local = client.download_artifacts(run_id, item.path, dst_path=os.path.abspath("downloads"))
            text = Path(local).read_text()
            if item.path.endswith(".yaml"):
                meta = yaml.safe_load(text)
                meta["score"] = None if meta.get("score") is None else round(meta["score"], 4)
                found[item.path] = meta
            else:
                found[item.path] = text
        else:
            found[item.path] = "file"
    return found


def mlflow(fw, framework: str, uri: str) -> dict:
    from mlflow import MlflowClient

    loggers = loggers_of(framework)
    model_cls = module_class(fw)
    cwd = os.getcwd()
    is_file = uri == "file"
    tracking_uri = f"file:{cwd}/mlruns" if is_file else uri
    experiment_name = "exp" if is_file else f"exp-{framework}"  # one server serves both frameworks
    fw.seed_everything(0)
    logger = loggers.MLFlowLogger(
        experiment_name=experiment_name, run_name="run-a", tracking_uri=tracking_uri,
        tags={"team": "relay", "mlflow.runName": "replaced"}, log_model=True,
        artifact_location=f"{cwd}/artifacts" if is_file else None)
    checkpoint = fw.ModelCheckpoint(monitor="val_loss", save_top_k=2, save_last=True)
    trainer = quiet_trainer(fw, max_epochs=3, logger=logger, callbacks=[checkpoint])
    trainer.fit(model_cls(lr=0.05, opt={"name": "sgd", "betas": (0.9, 0.99)}), loader(), loader())
    run_id, experiment_id = logger.run_id, logger.experiment_id
    ids = {run_id: "RUN_ID", experiment_id: "EXPERIMENT_ID"}
    seen = {"name_is_experiment_id": logger.name == experiment_id, "version_is_run_id": logger.version == run_id,
            "save_dir": rel(logger.save_dir, cwd), "trainer.log_dir": rel(trainer.log_dir, cwd, ids),
            "checkpoint_dir": rel(checkpoint.dirpath, cwd, ids)}

    # the same run continued: metrics with a prefix, every checkpoint logged as it is saved
    resumed = loggers.MLFlowLogger(tracking_uri=tracking_uri, run_id=run_id, prefix="more", log_model="all")
    every = fw.ModelCheckpoint(dirpath="every", save_top_k=-1)
    fw.seed_everything(1)
    trainer = quiet_trainer(fw, max_epochs=2, logger=resumed, callbacks=[every], limit_val_batches=0)
    trainer.fit(model_cls(lr=0.05, opt={"name": "sgd", "betas": (0.9, 0.99)}), loader())  # MLflow params are final
    seen["resumed_same_experiment"] = resumed.experiment_id == experiment_id

    client = MlflowClient(tracking_uri)
    seen["run"] = mlflow_run(client, run_id)
    seen["artifacts"] = artifacts(client, run_id)
    artifact_uri = client.get_run(run_id).info.artifact_uri
    seen["artifact_location_used"] = artifact_uri.removeprefix("file://").startswith(f"{cwd}/artifacts") if is_file else None
    seen["experiment_name"] = client.get_experiment(experiment_id).name.replace(framework, "FRAMEWORK")
    return seen


# --- W&B (offline) ------------------------------------------------------------------------------------------------
def wandb_records(run_dir: str) -> list[dict]:
    """The records of an offline run's ``.wandb`` log, as wandb's own inspector prints them."""
    log_file = glob.glob(os.path.join(run_dir, "run-*.wandb"))[0]
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", log_file], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def observable(value):
    """History values without noise: floats rounded, media by their type, artifact ids masked."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str) and value.startswith("wandb-client-artifact://"):
        return "ARTIFACT"  # a random client id
    if isinstance(value, dict):
        return {"_type": value["_type"]} if "_type" in value else {k: observable(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [observable(v) for v in value]
    return value


def wandb_run(fw, framework: str) -> dict:
    import wandb

    loggers = loggers_of(framework)
    model_cls = module_class(fw)
    cwd = os.getcwd()
    fw.seed_everything(0)
    logger = loggers.WandbLogger(project="proj", name="run-a", save_dir=cwd, version="run1", log_model="all")
    model = model_cls(lr=0.05, opt={"name": "sgd", "betas": (0.9, 0.99)})
    logger.watch(model, log="all", log_freq=2)
    checkpoint = fw.ModelCheckpoint(monitor="val_loss", save_top_k=1)
    trainer = quiet_trainer(fw, max_epochs=2, logger=logger, callbacks=[checkpoint])
    trainer.fit(model, loader(), loader())
    logger.log_hyperparams({"act": torch.nn.ReLU, "fn": torch.relu, "factory": lambda: 3, "t": torch.tensor(2.5),
                            "nested": {"path": Path("a/b")}, "ok": [1, {"x": None}]})
    logger.log_table("table", columns=["a", "b"], data=[[1, "x"], [2, "y"]], step=100)
    logger.log_text("text", columns=["t"], data=[["hello"]])
    logger.log_image("images", [torch.zeros(3, 4, 4), torch.ones(3, 4, 4)], caption=["zero", "one"], step=101)
    errors = {}
    for name, call in {"not_a_list": lambda: logger.log_image("x", torch.zeros(3, 4, 4)),
                       "short_kwargs": lambda: logger.log_image("x", [torch.zeros(3, 4, 4)], caption=[])}.items():
        try:
            call()
        except Exception as err:
            errors[name] = exception(err)
    seen = {"name": logger.name, "version": logger.version, "save_dir": rel(logger.save_dir, cwd),
            "trainer.log_dir": rel(trainer.log_dir, cwd), "checkpoint_dir": rel(checkpoint.dirpath, cwd),
            "experiment_is_run": type(logger.experiment).__name__, "errors": errors,
            "run_name": logger.experiment.name, "project": logger.experiment.project}
    run_dir = os.path.dirname(logger.experiment.dir)
    wandb.finish()
    try:
        loggers.WandbLogger(offline=True, log_model=True)
        seen["offline_log_model"] = "accepted"
    except Exception as err:
        seen["offline_log_model"] = exception(err)

    history, config, artifacts_logged, metrics_defined = [], {}, [], []
    for record in wandb_records(run_dir):
        kind = record["type"]
        if kind == "history":
            item = record["history"]["item"]
            history.append({k: observable(v) for k, v in sorted(item.items())
                            if not k.startswith("_") and not k.startswith(("gradients/", "parameters/"))})
            watched = sorted(k for k in item if k.startswith(("gradients/", "parameters/")))
            if watched:
                history[-1]["watched"] = watched
        elif kind == "config":
            config.update({k: v for k, v in record["config"]["update"].items() if k != "_wandb"})
        elif kind == "artifact":
            art = record["artifact"]
            meta = json.loads(art.get("metadata") or "{}")
            if "score" in meta:
                meta["score"] = None if meta["score"] is None else round(meta["score"], 4)
            artifacts_logged.append({"name": art["name"].replace("run1", "RUN"), "type": art["type"],
                                     "aliases": sorted(art.get("aliases", [])), "metadata": meta,
                                     "files": [c["path"] for c in art["manifest"]["contents"]]})
        elif kind == "metric":
            metrics_defined.append(record["metric"])
    seen.update(history=history, config=config, artifacts=artifacts_logged, metrics_defined=metrics_defined,
                run_dir=os.path.basename(run_dir).split("-")[0] + "-run-*-" + os.path.basename(run_dir).split("-")[-1])
    return seen


# --- Comet (offline: COMET_START_ONLINE=0) -----------------------------------------------------------------------
COMET_SYSTEM = ("sys.", "process duration")  # machine statistics Comet samples on its own


def comet_run(fw, framework: str) -> dict:
    """What an offline Comet experiment archived (``messages.json`` in the zip ``comet upload`` would send)."""
    import zipfile

    loggers = loggers_of(framework)
    model_cls = module_class(fw)
    fw.seed_everything(0)
    logger = loggers.CometLogger(project="proj", name="run-a", prefix="train")
    trainer = quiet_trainer(fw, max_epochs=2, logger=logger)
    trainer.fit(model_cls(lr=0.05, opt={"name": "sgd"}), loader(), loader())
    seen = {"name": logger.name, "version_is_key": logger.version == logger.experiment.get_key(),
            "save_dir": rel(logger.save_dir, "."), "trainer.log_dir": rel(trainer.log_dir, "."),
            "checkpoint_dir": rel(trainer.checkpoint_callback.dirpath, ".", {logger.version: "KEY"}),
            "experiment": type(logger.experiment).__name__}
    logger.experiment.end()
    (archive,) = glob.glob(os.path.join(logger.save_dir, "*.zip"))
    params, metrics, others = {}, [], {}
    with zipfile.ZipFile(archive) as zf:
        for line in zf.read("messages.json").decode().splitlines():
            message = json.loads(line)
            payload = message.get("payload", {})
            if message.get("type") == "parameter_msg" and payload["param"]["source"] == "manual":
                params[payload["param"]["paramName"]] = payload["param"]["paramValue"]
            elif message.get("type") == "metric_msg" and not payload["metric"]["metricName"].startswith(COMET_SYSTEM):
                m = payload["metric"]
                metrics.append((m["metricName"], m["step"], m["epoch"], round(float(m["metricValue"]), 4)))
            elif message.get("type") == "log_other_msg":
                others[payload["key"]] = payload["val"]
    seen.update(params=params, metrics=metrics, others=others)
    return seen


def main(framework: str, *specs: str) -> None:
    warnings.filterwarnings("ignore")
    fw = load(framework)
    checks = {"layout": layout, "csv_experiment": csv_experiment, "mlflow": mlflow, "wandb": wandb_run,
              "comet": comet_run}
    results = {}
    for number, spec in enumerate(specs):
        check, _, arg = spec.partition("@")
        home = os.path.abspath(f"check{number}")
        os.makedirs(home)
        os.chdir(home)
        try:
            results[spec] = checks[check](fw, framework, *([arg] if arg else []))
        except Exception as err:  # an exception is an observation too
            results[spec] = exception(err)
        finally:
            os.chdir("..")
    emit(results)


if __name__ == "__main__":
    main(*sys.argv[1:])
