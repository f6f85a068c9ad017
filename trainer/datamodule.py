"""``DataModule``: where data comes from. Sharding is the strategy's job, not the DataModule's."""

from __future__ import annotations

import os
from functools import partial
from typing import IO, TYPE_CHECKING, Any

from trainer.data.transfer_hooks import DataHooks
from trainer.errors import LoaderNotImplementedError
from trainer.model.hparams import HyperparametersMixin

if TYPE_CHECKING:
    from collections.abc import Iterable

    from torch.utils.data import DataLoader, Dataset
    from typing_extensions import Self

    from trainer.fabric.utilities.types import _MAP_LOCATION_TYPE
    from trainer.trainer import Trainer
    from trainer.utilities.types import EVAL_DATALOADERS, TRAIN_DATALOADERS


class DataModule(DataHooks, HyperparametersMixin):
    """Override ``setup`` and the ``*_dataloader`` methods you need."""

    name: str | None = None
    # the checkpoint keys this class's hyperparameters are saved under (Lightning's names and values)
    CHECKPOINT_HYPER_PARAMS_KEY = "datamodule_hyper_parameters"
    CHECKPOINT_HYPER_PARAMS_NAME = "datamodule_hparams_name"
    CHECKPOINT_HYPER_PARAMS_TYPE = "datamodule_hparams_type"

    def __init__(self) -> None:
        self.trainer: Trainer | None = None

    @classmethod
    def from_datasets(
        cls, train_dataset: Dataset | Iterable[Dataset] | None = None,
        val_dataset: Dataset | Iterable[Dataset] | None = None, test_dataset: Dataset | Iterable[Dataset] | None = None,
        predict_dataset: Dataset | Iterable[Dataset] | None = None, batch_size: int = 1, num_workers: int = 0, **datamodule_kwargs: Any,
    ) -> DataModule:
        """A DataModule serving these datasets (each may be a collection of datasets: one loader per dataset).

        The training loaders shuffle (map-style datasets only). ``batch_size`` and ``num_workers`` also go to
        ``__init__`` where it accepts them, as does every other keyword.
        """
        import inspect

        params = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        extra = {k: v for k, v in {"batch_size": batch_size, "num_workers": num_workers}.items()
                 if takes_any or k in params}
        datamodule = cls(**datamodule_kwargs, **extra)
        datasets = {"train": train_dataset, "val": val_dataset, "test": test_dataset, "predict": predict_dataset}
        for stage, dataset in datasets.items():
            if dataset is not None:  # assigned on the instance: the Trainer sees it as overridden
                setattr(datamodule, f"{stage}_dataloader",
                        partial(_loaders_for, dataset, batch_size, num_workers, stage == "train"))
        return datamodule

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: str | os.PathLike | IO[bytes], map_location: _MAP_LOCATION_TYPE = None,
        hparams_file: str | os.PathLike | None = None, weights_only: bool | None = None, **kwargs: Any,
    ) -> Self:
        """A new DataModule built from the hyperparameters a fit with it saved (``kwargs`` override them), with its
        ``state_dict`` restored. The file is read as data, in full with ``weights_only=False`` (a file you trust)."""
        # local import: `from trainer import DataModule` stays light (saving loads the checkpoint readers)
        from trainer.model.saving import load_from_checkpoint

        return load_from_checkpoint(cls, checkpoint_path, map_location, hparams_file, None,
                                    weights_only=weights_only, **kwargs)

    def prepare_data(self) -> None:
        """Download or write data; runs once per node (local rank 0), before ``setup``."""

    def setup(self, stage: str) -> None:
        """Build datasets for ``stage`` in ``"fit"``, ``"validate"``, ``"test"``, ``"predict"``; runs on every rank."""

    def teardown(self, stage: str) -> None: ...

    def train_dataloader(self) -> TRAIN_DATALOADERS:
        raise _missing(self, "train_dataloader", "Trainer.fit needs it.")

    def val_dataloader(self) -> EVAL_DATALOADERS:
        raise _missing(self, "val_dataloader", "")

    def test_dataloader(self) -> EVAL_DATALOADERS:
        raise _missing(self, "test_dataloader", "Trainer.test needs it.")

    def predict_dataloader(self) -> EVAL_DATALOADERS:
        raise _missing(self, "predict_dataloader", "Trainer.predict needs it.")

    def state_dict(self) -> dict[str, Any]:
        """Plain data saved in checkpoints (e.g. a curriculum position)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...

    def on_exception(self, exception: BaseException) -> None:
        """Called when a Trainer run with this DataModule fails, after the callbacks' ``on_exception``."""

    def __str__(self) -> str:
        """Each loader method's dataset size, one line each (Lightning's text): ``{Train dataloader: size=64}``,
        ``None`` where the method fails (not set up yet), ``1. size=.. ; 2. size=..`` for several loaders."""
        lines = []
        for title, method in (("Train dataloader", "train_dataloader"), ("Validation dataloader", "val_dataloader"),
                              ("Test dataloader", "test_dataloader"), ("Predict dataloader", "predict_dataloader")):
            try:
                sizes = _dataset_sizes(getattr(self, method)())
            except Exception:  # a method that cannot build its loader yet reads None
                sizes = None
            if isinstance(sizes, list):
                text = " ; ".join(f"{i}. size={size}" for i, size in enumerate(sizes, start=1))
            else:
                text = "None" if sizes is None else f"size={sizes}"
            lines.append(f"{{{title}: {text}}}")
        return os.linesep.join(lines)


def _dataset_sizes(loaders: Any) -> str | list:
    """A loader's dataset length (``NA`` without one), or a list of them for a collection of loaders."""
    from collections.abc import Mapping, Sized

    from torch.utils.data import DataLoader

    if isinstance(loaders, DataLoader):
        return str(len(loaders.dataset)) if isinstance(loaders.dataset, Sized) else "NA"
    if isinstance(loaders, Mapping):
        loaders = list(loaders.values())
    return [_dataset_sizes(loader) for loader in loaders]


def _loaders_for(datasets: Dataset | Iterable[Dataset], batch_size: int, num_workers: int, shuffle: bool,
                 ) -> DataLoader | Iterable[DataLoader]:
    """One DataLoader per dataset in ``datasets`` (same collection shape); iterable datasets never shuffle."""
    import torch
    from lightning_utilities.core.apply_func import apply_to_collection
    from torch.utils.data import DataLoader, Dataset, IterableDataset

    def make(dataset: Dataset) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle and not isinstance(dataset, IterableDataset),
                          num_workers=num_workers, pin_memory=torch.cuda.is_available())

    return apply_to_collection(datasets, Dataset, make)


def _missing(datamodule: DataModule, method: str, why: str) -> Exception:
    ending = f"; {why}" if why else "."
    return LoaderNotImplementedError(f"{type(datamodule).__name__}.{method} is not implemented{ending}")
