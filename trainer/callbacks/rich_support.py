"""``rich`` is optional (``pip install 'relaytrain[rich]'``): imported only when a Rich callback starts."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


def require_rich(what: str) -> None:
    """A one-line error naming the extra to install, instead of a bare ImportError deep in a run."""
    if importlib.util.find_spec("rich") is None:
        raise ModuleNotFoundError(
            f"{what} needs the optional package 'rich', which is not installed: pip install 'relaytrain[rich]' "
            "(or pip install rich), or use the plain callback instead."
        )


@dataclass
class RichProgressBarTheme:
    """Styles (rich style strings) of the parts of a progress line."""

    description: str = ""
    progress_bar: str = "#6206E0"
    progress_bar_finished: str = "#6206E0"
    progress_bar_pulse: str = "#6206E0"
    batch_progress: str = ""
    time: str = "dim"
    processing_speed: str = "dim underline"
    metrics: str = "italic"
    metrics_text_delimiter: str = " "
    metrics_format: str = ".3f"
