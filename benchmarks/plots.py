"""Charts of the benchmarks' figures, for the documentation's Performance page.

``python benchmarks/plots.py docs/img`` draws every chart from the figures the page's tables give
(``benchmarks/figures.json``: date, machine and command of each); ``overhead.py --plot FILE`` and
``pipeline.py --plot FILE`` draw theirs from a new measurement with the same functions. Needs matplotlib
(the ``plot`` extra). The SVGs are written without a date and with a fixed hash salt, so drawing the same figures
again gives the same file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

FIGURES = Path(__file__).with_name("figures.json")
RELAY, OTHER, RAW = "#3f51b5", "#ff9800", "#9e9e9e"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.hashsalt": "relay", "svg.fonttype": "none", "font.size": 9})
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path, caption: str) -> None:
    if caption:  # where the figures come from, above the chart
        fig.suptitle(caption, fontsize=7, color="#555555", x=0.01, y=1.0, ha="left", va="bottom")
    fig.savefig(path, format=Path(path).suffix.lstrip(".") or "svg", metadata={"Date": None}, bbox_inches="tight")
    _pyplot().close(fig)


def overhead_chart(rows: list[dict[str, Any]], path: str | Path, caption: str = "") -> None:
    """Per-step time over a raw PyTorch loop, Relay against Lightning, per case and mode (log scale)."""
    plt = _pyplot()
    labels = [f"({r['case']}) {r['mode']}" for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    y = range(len(rows))
    ax.barh([i + 0.2 for i in y], [r["relay"] for r in rows], height=0.4, color=RELAY, label="Relay")
    if any(r.get("lightning") for r in rows):
        ax.barh([i - 0.2 for i in y], [r.get("lightning") or 0 for r in rows], height=0.4, color=OTHER,
                label="Lightning")
    for i, r in enumerate(rows):
        ax.text(r["relay"] * 1.03, i + 0.2, f"{r['relay']:.2f}x", va="center", fontsize=7)
        if r.get("lightning"):
            ax.text(r["lightning"] * 1.03, i - 0.2, f"{r['lightning']:.2f}x", va="center", fontsize=7)
    ax.axvline(1.0, color=RAW, linestyle="--", linewidth=1, label="raw PyTorch loop")
    ax.set_xscale("log")
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time per training step / raw loop (log scale)")
    ax.legend(loc="lower right", fontsize=7)
    _save(fig, path, caption)


def pipeline_chart(rows: list[dict[str, Any]], path: str | Path, caption: str = "") -> None:
    """Each schedule's bubble (measured and in theory) and the activations each rank saved."""
    plt = _pyplot()
    names = [r["schedule"] for r in rows]
    x = range(len(rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
    left.bar([i - 0.2 for i in x], [r["bubble"] for r in rows], width=0.4, color=RELAY, label="measured")
    left.bar([i + 0.2 for i in x], [r["theory"] for r in rows], width=0.4, color=RAW, label="theory")
    left.set_xticks(list(x), names, rotation=30, ha="right")
    left.set_ylabel("bubble (idle share of a step)")
    left.legend(fontsize=7)
    ranks = len(rows[0]["activations_mb"])
    width = 0.8 / ranks
    for rank in range(ranks):
        right.bar([i - 0.4 + width * (rank + 0.5) for i in x], [r["activations_mb"][rank] for r in rows],
                  width=width, color=[RELAY, OTHER, RAW][rank % 3], label=f"rank {rank}")
    right.set_xticks(list(x), names, rotation=30, ha="right")
    right.set_ylabel("saved activations, MB")
    right.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path, caption)


def fsdp_memory_chart(rows: list[dict[str, Any]], path: str | Path, caption: str = "") -> None:
    """Model state and peak RSS per rank for DDP and FSDP at each number of ranks."""
    plt = _pyplot()
    labels = [f"{r['strategy']}, {r['ranks']} ranks" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.bar([i - 0.27 for i in x], [r["state_mb"] for r in rows], width=0.27, color=RELAY, label="model state")
    ax.bar(list(x), [r["rss_mb"] for r in rows], width=0.27, color=RAW, label="peak RSS")
    ax.bar([i + 0.27 for i in x], [r["rss_mmap_mb"] for r in rows], width=0.27, color=OTHER,
           label="peak RSS, MALLOC_MMAP_THRESHOLD_=131072")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("MB per rank")
    ax.legend(fontsize=7)
    _save(fig, path, caption)


def checkpoint_chart(rows: list[dict[str, Any]], path: str | Path, caption: str = "") -> None:
    """The saving step's stall over a bare torch.save, for each writer and save interval."""
    plt = _pyplot()
    writers = [("sync", "Relay sync (fsync)", RAW), ("async", "Relay async", RELAY),
               ("lightning", "Lightning AsyncCheckpointIO", OTHER)]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(7, 3))
    for k, (key, label, color) in enumerate(writers):
        values = [r[key] for r in rows]
        ax.bar([i + (k - 1) * 0.27 for i in x], values, width=0.27, color=color, label=label)
        for i, v in enumerate(values):
            ax.text(i + (k - 1) * 0.27, v + 0.05, f"{v:.2f}x", ha="center", fontsize=7)
    ax.axhline(1.0, color="#555555", linestyle="--", linewidth=1, label="bare torch.save")
    ax.set_xticks(list(x), [r["label"] for r in rows])
    ax.set_ylabel("stall / bare torch.save")
    ax.legend(fontsize=7)
    _save(fig, path, caption)


CHARTS = {"overhead": overhead_chart, "pipeline": pipeline_chart, "fsdp_memory": fsdp_memory_chart,
          "checkpoint": checkpoint_chart}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", help="where to write <chart>.svg")
    parser.add_argument("--figures", default=str(FIGURES), help="the recorded figures (default: %(default)s)")
    args = parser.parse_args(argv)
    figures = json.loads(Path(args.figures).read_text())
    Path(args.outdir).mkdir(parents=True, exist_ok=True)
    for name, chart in CHARTS.items():
        entry = figures[name]
        caption = f"{entry['date']}, {entry['machine']}: {entry['command']}"
        chart(entry["rows"], Path(args.outdir) / f"{name}.svg", caption)
        print(f"wrote {Path(args.outdir) / f'{name}.svg'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
