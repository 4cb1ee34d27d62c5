"""PNG plots of a report, under the run directory's ``plots/`` (matplotlib, the eval extra):

    score_by_turn.png   share of trials correct by each turn, per condition and arm
    metrics.png         P, A90 and U90-10 per condition and arm, with their intervals
    response_types.png  the share of each response type, per condition and arm
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.multiturn.grades import RESPONSE_TYPES


def write_plots(report: dict[str, Any], folder: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError as err:
        raise InputError("plots need matplotlib, which is not installed",
                         hint="pip install 'threadline[eval]'") from err
    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    folder.mkdir(parents=True, exist_ok=True)
    groups = [g for g in report["groups"] if g["kind"] == "all"]
    labels = [f"{g['condition']}/{g['arm']}" for g in groups]
    written = []

    figure, axes = pyplot.subplots(figsize=(7, 4))
    for label, group in zip(labels, groups, strict=True):
        curve = group["by_turn"]
        if curve:
            turns = [p["turn"] for p in curve]
            axes.plot(turns, [p["value"] for p in curve], marker="o", label=label)
            axes.fill_between(turns, [p["low"] for p in curve], [p["high"] for p in curve],
                              alpha=0.15)
    axes.set(xlabel="turn", ylabel="share of trials correct by this turn", ylim=(0, 1.02),
             title=f"score by turn ({report['model']['model']})")
    axes.legend(fontsize=8)
    written.append(_save(pyplot, figure, folder / "score_by_turn.png"))

    figure, axes = pyplot.subplots(figsize=(8, 4))
    width = 0.8 / 3
    for i, metric in enumerate(("P", "A90", "U90-10")):
        values = [g["metrics"].get(metric) or {"value": 0, "low": 0, "high": 0} for g in groups]
        xs = [n + (i - 1) * width for n in range(len(groups))]
        axes.bar(xs, [v["value"] for v in values], width, label=metric,
                 yerr=[[v["value"] - v["low"] for v in values],
                       [v["high"] - v["value"] for v in values]], capsize=3)
    axes.set_xticks(range(len(groups)), labels, rotation=20, fontsize=8)
    axes.set(ylim=(0, 1.05), title="aptitude and unreliability (95% bootstrap intervals)")
    axes.legend(fontsize=8)
    written.append(_save(pyplot, figure, folder / "metrics.png"))

    figure, axes = pyplot.subplots(figsize=(7, 4))
    bottom = [0.0] * len(groups)
    for kind in RESPONSE_TYPES:
        shares = [(g["response_types"].get(kind) or {"value": 0.0})["value"] for g in groups]
        axes.bar(range(len(groups)), shares, bottom=bottom, label=kind)
        bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
    axes.set_xticks(range(len(groups)), labels, rotation=20, fontsize=8)
    axes.set(ylim=(0, 1.05), title="response types")
    axes.legend(fontsize=8)
    written.append(_save(pyplot, figure, folder / "response_types.png"))
    return written


def _save(pyplot: Any, figure: Any, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100, metadata={"Software": None})  # same bytes every time
    pyplot.close(figure)
    return path
