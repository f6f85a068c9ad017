"""Callbacks, imported on first use so that ``import trainer.callbacks`` costs almost nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.utilities.lazy import lazy_exports

if TYPE_CHECKING:
    from trainer.callbacks.base import Callback
    from trainer.callbacks.early_stopping import EarlyStopping
    from trainer.callbacks.lr_monitor import LearningRateMonitor
    from trainer.callbacks.model_checkpoint import ModelCheckpoint
    from trainer.callbacks.model_summary import ModelSummary
    from trainer.callbacks.gradient_accumulation import GradientAccumulationScheduler
    from trainer.callbacks.progress import ProgressBar
    from trainer.callbacks.rich_progress import RichProgressBar
    from trainer.callbacks.rich_summary import RichModelSummary
    from trainer.callbacks.device_stats import DeviceStatsMonitor
    from trainer.callbacks.throughput import ThroughputMonitor
    from trainer.callbacks.stochastic_weight_avg import StochasticWeightAveraging
    from trainer.callbacks.weight_averaging import EMAWeightAveraging, WeightAveraging
    from trainer.callbacks.finetuning import BackboneFinetuning, BaseFinetuning
    from trainer.callbacks.prediction_writer import BasePredictionWriter
    from trainer.callbacks.timer import Timer
    from trainer.callbacks.on_exception_checkpoint import OnExceptionCheckpoint
    from trainer.callbacks.pruning import ModelPruning
    from trainer.callbacks.spike import SpikeDetection
    from trainer.callbacks.lr_finder import LearningRateFinder
    from trainer.callbacks.batch_size_finder import BatchSizeFinder

_EXPORTS = {
    "Callback": "trainer.callbacks.base",
    "ModelCheckpoint": "trainer.callbacks.model_checkpoint",
    "EarlyStopping": "trainer.callbacks.early_stopping",
    "LearningRateMonitor": "trainer.callbacks.lr_monitor",
    "ProgressBar": "trainer.callbacks.progress",
    "ModelSummary": "trainer.callbacks.model_summary",
    "GradientAccumulationScheduler": "trainer.callbacks.gradient_accumulation",
    "RichProgressBar": "trainer.callbacks.rich_progress",
    "RichModelSummary": "trainer.callbacks.rich_summary",
    "LambdaCallback": "trainer.callbacks.lambda_function",
    "TQDMProgressBar": "trainer.callbacks.tqdm_progress",
    "Checkpoint": "trainer.callbacks.base",
    "ThroughputMonitor": "trainer.callbacks.throughput",
    "DeviceStatsMonitor": "trainer.callbacks.device_stats",
    "StochasticWeightAveraging": "trainer.callbacks.stochastic_weight_avg",
    "WeightAveraging": "trainer.callbacks.weight_averaging",
    "EMAWeightAveraging": "trainer.callbacks.weight_averaging",
    "BaseFinetuning": "trainer.callbacks.finetuning",
    "BackboneFinetuning": "trainer.callbacks.finetuning",
    "BasePredictionWriter": "trainer.callbacks.prediction_writer",
    "Timer": "trainer.callbacks.timer",
    "OnExceptionCheckpoint": "trainer.callbacks.on_exception_checkpoint",
    "ModelPruning": "trainer.callbacks.pruning",
    "SpikeDetection": "trainer.callbacks.spike",
    "LearningRateFinder": "trainer.callbacks.lr_finder",
    "BatchSizeFinder": "trainer.callbacks.batch_size_finder",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
