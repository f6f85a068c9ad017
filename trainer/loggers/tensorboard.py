"""TensorBoard logger: scalars, hparams and the model graph as event files in one version directory."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.apply_func import apply_to_collection
from lightning_utilities.core.rank_zero import rank_zero_only

from plugins.remote_paths import exists, isdir, listdir
from trainer.loggers.base import Logger
from trainer.loggers.utils import (
    DEFAULT_LOG_NAME,
    NoOpExperiment,
    VersionedDirLogger,
    add_prefix,
    flatten_dict,
    sanitize_hparams,
    save_hparams_yaml,
    to_number,
    to_plain,
)

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


def _wait_for_a_later_second(log_dir: str) -> None:
    """TensorBoard reads a directory's event files in name order, and a name is ``events.out.tfevents.<second>.<host>.
    <pid>.<counter>``: a second writer in the same process and second (a resume right after a fit) sorted before the
    first once the counter reached 10, and the resumed curve was drawn before the one it continues. Waiting for the
    next second (only then) keeps the names in writing order."""
    import re
    import time

    seconds = [int(m.group(1)) for m in map(re.compile(r"events\.out\.tfevents\.(\d+)\.").match, listdir(log_dir)) if m]
    latest = max(seconds, default=0)
    if latest >= int(time.time()):
        time.sleep(max(0.0, latest + 1 - time.time()))


class _TensorBoardWriter(VersionedDirLogger):
    """Writes to ``<save_dir>/<name>/version_<n>``; only rank 0 writes.

    ``writer_kwargs`` go to ``SummaryWriter`` (``flush_secs``, ``max_queue``, ...). The writer, and with
    it tensorboard, is imported only when something is first logged.
    """

    LOGGER_JOIN_CHAR = "-"  # Lightning's: joins a prefix and a metric's name

    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = DEFAULT_LOG_NAME,
        version: int | str | None = None,
        log_graph: bool = False,
        default_hp_metric: bool = True,
        prefix: str = "",
        sub_dir: str | os.PathLike[str] | None = None,
        **writer_kwargs: Any,
    ) -> None:
        super().__init__(save_dir, name, version, sub_dir)
        self._log_graph = log_graph
        self._default_hp_metric = default_hp_metric
        self._prefix = prefix
        self._kwargs = writer_kwargs
        self._experiment: SummaryWriter | None = None
        self.hparams: dict[str, Any] = {}

    @property
    def experiment(self) -> SummaryWriter:
        """The ``SummaryWriter``, for anything beyond scalars (images, histograms...)."""
        if self._experiment is None:
            if rank_zero_only.rank != 0:
                return NoOpExperiment()  # type: ignore[return-value]
            from torch.utils.tensorboard import SummaryWriter

            _wait_for_a_later_second(self.log_dir)
            self._experiment = SummaryWriter(log_dir=self.log_dir, **self._kwargs)
        return self._experiment

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """All plain scalars of one call go out as one event: a third of the cost of one ``add_scalar`` each."""
        from tensorboard.compat.proto.summary_pb2 import Summary
        from torch.utils.tensorboard.summary import scalar

        writer = self.experiment
        values = []
        for key, value in add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR).items():
            value = to_number(value)
            try:
                if isinstance(value, Mapping):  # overlaid curves, one run per key, as add_scalars draws them
                    writer.add_scalars(key, {k: to_number(v) for k, v in value.items()}, step)
                else:
                    values.extend(scalar(key, value).value)
            except Exception as err:
                raise ValueError(
                    f"Could not log {key!r}={value!r} to TensorBoard: log a number, a one-element tensor,"
                    " or a dict of those."
                ) from err
        if values:
            writer._get_file_writer().add_summary(Summary(value=values), step)

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any], metrics: Mapping[str, Any] | None = None,
                        step: int | None = None) -> None:
        """Write ``hparams.yaml`` and the hparams summaries that fill TensorBoard's HPARAMS view.

        Unlike ``SummaryWriter.add_hparams`` this writes into this run's directory, not a new
        timestamped one, so hparams and scalars show up as one run.
        """
        from torch.utils.tensorboard.summary import hparams

        plain = to_plain(params)
        self.hparams.update(plain)
        save_hparams_yaml(os.path.join(self.log_dir, self.NAME_HPARAMS_FILE), self.hparams)

        if metrics is None:
            metrics = {"hp_metric": -1} if self._default_hp_metric else {}
        if metrics:
            self.log_metrics(metrics, step or 0)
        metric_names = dict.fromkeys(add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR), 0.0)
        file_writer = self.experiment._get_file_writer()
        for summary in hparams(sanitize_hparams(flatten_dict(plain)), metric_names):
            file_writer.add_summary(summary)

    @rank_zero_only
    def log_graph(self, model: torch.nn.Module, input_array: Any = None) -> None:
        if not self._log_graph:
            return
        if input_array is None:
            input_array = getattr(model, "example_input_array", None)
        if input_array is None:
            warnings.warn(
                "TensorBoardLogger(log_graph=True) could not log the graph: pass `input_array` or set"
                " `example_input_array` on the model.",
                stacklevel=2,
            )
            return
        param = next(model.parameters(), None)
        if param is not None:
            input_array = apply_to_collection(input_array, torch.Tensor, lambda t: t.to(param.device))
        if isinstance(input_array, list):
            input_array = tuple(input_array)  # jit.trace wants a tensor or a tuple of them
        with warnings.catch_warnings():
            # add_graph traces with torch.jit, which torch marks deprecated; nothing a user can act on
            warnings.filterwarnings("ignore", message=r".*torch\.jit\.trace", category=DeprecationWarning)
            self.experiment.add_graph(model, input_array)

    @rank_zero_only
    def save(self) -> None:
        """Flush the events; a run whose log directory exists gets its ``hparams.yaml`` even when no hyperparameters
        were logged (``{}``), as Lightning writes it."""
        if self._experiment is not None:
            self._experiment.flush()
        path = os.path.join(self.log_dir, self.NAME_HPARAMS_FILE)
        if isdir(self.log_dir) and not exists(path):
            save_hparams_yaml(path, self.hparams)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._experiment is not None:
            self._experiment.flush()
            self._experiment.close()
        if status == "success":
            self.save()  # hparams.yaml, also for a run that logged none

    def __getstate__(self) -> dict[str, Any]:
        # the open writer cannot be pickled (spawned workers); each process makes its own on first use
        state = self.__dict__.copy()
        state["_experiment"] = None
        return state


class TensorBoardLogger(_TensorBoardWriter, Logger):
    __doc__ = _TensorBoardWriter.__doc__  # the Trainer's; Fabric's (trainer/fabric/loggers.py) shares the writer, not this class
