"""TQDMProgressBar: Lightning's default bar, drawn with ``tqdm`` (one bar per stage, counted in batches).

Its state is what Lightning users read and override: ``train_progress_bar`` / ``val_progress_bar`` /
``test_progress_bar`` / ``predict_progress_bar`` are real ``tqdm`` objects (``.n``, ``.total``, ``.leave``,
``.postfix``) built by the ``init_*_tqdm()`` methods, a bar is redrawn every ``refresh_rate`` batches and at the
last one, and ``print`` goes through ``tqdm.write``. ``tqdm`` is needed only when such a bar is built; Relay's own
``ProgressBar`` needs nothing.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from trainer.callbacks.bar_metrics import bar_metrics, convert_inf
from trainer.callbacks.lightning_bar import LightningBar

if TYPE_CHECKING:
    from trainer.callbacks.progress import _BarMetrics
    from trainer.module import Module
    from trainer.trainer import Trainer
    from trainer.utilities.types import STEP_OUTPUT

try:
    from tqdm import tqdm as _tqdm
except ImportError:  # pragma: no cover - tqdm comes with most installs (and Lightning's)
    _tqdm = None

_PAD_SIZE = 5
TQDM_AVAILABLE = _tqdm is not None


def _require_tqdm() -> None:
    if _tqdm is None:
        raise ModuleNotFoundError(
            "TQDMProgressBar draws with the `tqdm` package, which is not installed: `pip install tqdm`"
            " (or use trainer.callbacks.ProgressBar, which needs nothing)."
        )


if _tqdm is not None:

    class Tqdm(_tqdm):
        """A ``tqdm`` whose float and string numbers are padded to five characters, so the bar does not flicker."""

        @staticmethod
        def format_num(n: float | str) -> str:
            text = n if isinstance(n, str) else _tqdm.format_num(n)
            if not isinstance(n, (float, str)) or "e" in text:
                return text
            if "." not in text and len(text) < _PAD_SIZE:
                try:
                    float(text)
                except ValueError:
                    return text
                text += "."
            return text + "0" * (_PAD_SIZE - len(text))

else:  # pragma: no cover
    Tqdm = None  # type: ignore[assignment,misc]


def _update_n(bar: _tqdm, value: int) -> None:
    """Set a bar's count and redraw it, unless the bar is disabled."""
    if not bar.disable:
        bar.n = value
        bar.refresh()


def _tqdm_class() -> type[Tqdm]:
    # looked up at call time, so a Tqdm replaced on this module (a subclass, a test double) is the one built
    return globals()["Tqdm"]


class TQDMProgressBar(LightningBar):
    """Up to four ``tqdm`` bars: sanity check, training (paused during validation), validation, test / predict.

    Args:
        refresh_rate: redraw every this many batches (and at the last); 0 turns the bar off. The ``TQDM_MINITERS``
            environment variable raises it; on Colab (``COLAB_GPU``) the default 1 becomes 20.
        process_position: offset of the bars in lines, to stack them under bars of your own.
        leave: keep each epoch's finished bar on screen (a new bar per epoch).
    """

    BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"

    def __init__(self, refresh_rate: int = 1, process_position: int = 0, leave: bool = False) -> None:
        _require_tqdm()
        super().__init__(refresh_rate, leave)
        self._refresh_rate = self._resolve_refresh_rate(refresh_rate)
        self._process_position = process_position
        self._train_progress_bar: _tqdm | None = None
        self._val_progress_bar: _tqdm | None = None
        self._test_progress_bar: _tqdm | None = None
        self._predict_progress_bar: _tqdm | None = None

    @staticmethod
    def _resolve_refresh_rate(refresh_rate: int) -> int:
        if os.getenv("COLAB_GPU") and refresh_rate == 1:
            return 20  # redrawing every batch crashes Colab's output cell
        if "TQDM_MINITERS" in os.environ:
            return max(int(os.environ["TQDM_MINITERS"]), refresh_rate)
        return refresh_rate

    def __getstate__(self) -> dict[str, object]:
        # tqdm objects hold a lock and a file: not picklable
        state = {k: (None if _tqdm is not None and isinstance(v, _tqdm) else v) for k, v in vars(self).items()}
        state["_trainer"] = None
        return state

    # --- the bars ---------------------------------------------------------------------------------------
    def _bar(self, name: str) -> _tqdm:
        bar = self.__dict__.get(f"_{name}")
        if bar is None:
            raise TypeError(f"The `{type(self).__name__}._{name}` reference has not been set yet.")
        return bar

    @property
    def train_progress_bar(self) -> _tqdm:
        return self._bar("train_progress_bar")

    @train_progress_bar.setter
    def train_progress_bar(self, bar: _tqdm) -> None:
        self._train_progress_bar = bar

    @property
    def val_progress_bar(self) -> _tqdm:
        return self._bar("val_progress_bar")

    @val_progress_bar.setter
    def val_progress_bar(self, bar: _tqdm) -> None:
        self._val_progress_bar = bar

    @property
    def test_progress_bar(self) -> _tqdm:
        return self._bar("test_progress_bar")

    @test_progress_bar.setter
    def test_progress_bar(self, bar: _tqdm) -> None:
        self._test_progress_bar = bar

    @property
    def predict_progress_bar(self) -> _tqdm:
        return self._bar("predict_progress_bar")

    @predict_progress_bar.setter
    def predict_progress_bar(self, bar: _tqdm) -> None:
        self._predict_progress_bar = bar

    @property
    def process_position(self) -> int:
        return self._process_position

    # --- building the bars (override to customise) ------------------------------------------------------
    def _new(self, desc: str, position: int, leave: bool, **extra: object) -> Tqdm:
        return _tqdm_class()(desc=desc, position=position, disable=self.is_disabled, leave=leave,
                             dynamic_ncols=True, file=sys.stdout, bar_format=self.BAR_FORMAT, **extra)

    def init_sanity_tqdm(self) -> Tqdm:
        return self._new(self.sanity_check_description, 2 * self.process_position, leave=False)

    def init_train_tqdm(self) -> Tqdm:
        return self._new(self.train_description, 2 * self.process_position, leave=True, smoothing=0)

    def init_predict_tqdm(self) -> Tqdm:
        return self._new(self.predict_description, 2 * self.process_position, leave=True, smoothing=0)

    def init_validation_tqdm(self) -> Tqdm:
        under_train = self.trainer.state.fn != "validate"  # fit: a second line under the training bar
        return self._new(self.validation_description, 2 * self.process_position + under_train, leave=not under_train)

    def init_test_tqdm(self) -> Tqdm:
        return self._new("Testing", 2 * self.process_position, leave=True)

    # --- what is shown ----------------------------------------------------------------------------------
    def get_metrics(self, trainer: Trainer, pl_module: Module | None = None) -> _BarMetrics:
        """The logger's version (``v_num``) and the metrics logged with ``prog_bar=True``."""
        return bar_metrics(trainer)

    def print(self, *args: Any, sep: str = " ", **kwargs: Any) -> None:
        """Print above the active bar (``tqdm.write``), so the bar is not broken."""
        for name in ("_train_progress_bar", "_val_progress_bar", "_test_progress_bar", "_predict_progress_bar"):
            bar = self.__dict__.get(name)
            if bar is not None and not bar.disable:
                bar.write(sep.join(map(str, args)), **kwargs)
                return

    def _should_update(self, current: int, total: int | float | None) -> bool:
        return self.is_enabled and (current % self.refresh_rate == 0 or current == total)

    def _restart(self, bar: _tqdm, total: int | float, description: str) -> None:
        bar.reset()
        bar.total = convert_inf(total)
        bar.initial = 0
        bar.set_description(description)

    # --- hooks ------------------------------------------------------------------------------------------
    def teardown(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        pass

    def on_sanity_check_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.val_progress_bar = self.init_sanity_tqdm()
        self.train_progress_bar = _tqdm_class()(disable=True)  # a stand-in until training starts

    def on_sanity_check_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.val_progress_bar.close()
        self.train_progress_bar.close()

    def on_train_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.train_progress_bar = self.init_train_tqdm()

    def on_train_epoch_start(self, trainer: Trainer, pl_module: Module) -> None:
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        self._restart(self.train_progress_bar, self.total_train_batches, f"Epoch {trainer.current_epoch}")

    def on_train_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int) -> None:
        n = batch_idx + 1
        bar = self._train_progress_bar
        if bar is not None and self._should_update(n, bar.total):
            _update_n(bar, n)
            bar.set_postfix(self.get_metrics(trainer, pl_module))

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if not self.train_progress_bar.disable:
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))
        if self._leave:
            self.train_progress_bar.close()

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.train_progress_bar.close()

    def on_validation_start(self, trainer: Trainer, pl_module: Module) -> None:
        if not trainer.sanity_checking:
            self.val_progress_bar = self.init_validation_tqdm()

    def on_validation_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if not self.has_dataloader_changed(dataloader_idx):
            return
        desc = self.sanity_check_description if trainer.sanity_checking else self.validation_description
        self._restart(self.val_progress_bar, self.total_val_batches_current_dataloader,
                      f"{desc} DataLoader {dataloader_idx}")

    def on_validation_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        n = batch_idx + 1
        bar = self._val_progress_bar
        if bar is not None and self._should_update(n, bar.total):
            _update_n(bar, n)

    def on_validation_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.val_progress_bar.close()
        self.reset_dataloader_idx_tracker()
        if self._train_progress_bar is not None and trainer.state.fn == "fit":
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))

    def on_test_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.test_progress_bar = self.init_test_tqdm()

    def on_test_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        if self.has_dataloader_changed(dataloader_idx):
            self._restart(self.test_progress_bar, self.total_test_batches_current_dataloader,
                          f"{self.test_description} DataLoader {dataloader_idx}")

    def on_test_batch_end(self, trainer: Trainer, pl_module: Module, outputs: STEP_OUTPUT, batch: Any, batch_idx: int,
                          dataloader_idx: int = 0) -> None:
        n = batch_idx + 1
        bar = self._test_progress_bar
        if bar is not None and self._should_update(n, bar.total):
            _update_n(bar, n)

    def on_test_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.test_progress_bar.close()
        self.reset_dataloader_idx_tracker()

    def on_predict_start(self, trainer: Trainer, pl_module: Module) -> None:
        self.predict_progress_bar = self.init_predict_tqdm()

    def on_predict_batch_start(self, trainer: Trainer, pl_module: Module, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        if self.has_dataloader_changed(dataloader_idx):
            self._restart(self.predict_progress_bar, self.total_predict_batches_current_dataloader,
                          f"{self.predict_description} DataLoader {dataloader_idx}")

    def on_predict_batch_end(self, trainer: Trainer, pl_module: Module, outputs: Any, batch: Any, batch_idx: int,
                             dataloader_idx: int = 0) -> None:
        n = batch_idx + 1
        bar = self._predict_progress_bar
        if bar is not None and self._should_update(n, bar.total):
            _update_n(bar, n)

    def on_predict_end(self, trainer: Trainer, pl_module: Module) -> None:
        self.predict_progress_bar.close()
        self.reset_dataloader_idx_tracker()
