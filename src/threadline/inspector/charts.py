"""Charts drawn as SVG on the server: no library, no script, readable without either.

Each chart is one ``<svg role="img">`` named by its ``<title>`` and described by its ``<desc>``
(what is plotted, over what, and the range), with labelled axes; every bar or point carries
its own ``<title>`` with the exact figure, which a browser shows on hover and a screen reader
reads. Two kinds:

- ``conversation_chart(samples)``: a conversation branch's turns, reuse (cached ÷ prompt
  tokens) and billed cost per turn, as bars; for the conversation page to embed.
- ``stats_charts(points)``: the per-turn-index curves across conversations that
  ``threadline stats`` prints (``threadline.stats``), median and 90th percentile per metric.

A branch of thousands of turns is drawn in at most ``MAX_BARS`` bars, each the mean of
consecutive turns, and its ``<desc>`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from threadline.cache.pricing import CacheProfile, profile
from threadline.stats import TurnPoint, TurnSample, turn_samples
from threadline.stores.base import MAIN, Store

MAX_BARS = 400
# what ``threadline stats`` bills under by default
DEFAULT_PROFILE, DEFAULT_INPUT_PRICE = "anthropic-5m", 3.0
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 84, 16, 34, 44  # margins: the title, the axis labels


@dataclass(frozen=True)
class Bar:
    label: str           # what the x axis says: a turn index, or a range of them
    value: float | None  # None: nothing recorded (drawn as a gap)
    tooltip: str


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    css: str  # the class that colours it (static/views.css)


def _fmt_percent(v: float) -> str:
    return f"{v:.0%}"


def _fmt_usd(v: float) -> str:
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


def _fmt_ms(v: float) -> str:
    return f"{v:,.0f} ms" if v >= 10 or v == 0 else f"{v:.2g} ms"


def _fmt_count(v: float) -> str:
    return f"{v:,.0f}"


METRIC_TITLES = {"ttft_ms": ("Time to first token", "ms", _fmt_ms),
                 "reuse_ratio": ("Reuse: cached ÷ prompt tokens", "reuse", _fmt_percent),
                 "prompt_tokens": ("Prompt tokens per turn", "tokens", _fmt_count),
                 "cost_usd": ("Cost per turn", "USD", _fmt_usd)}


def _scale_top(values: Sequence[float | None], fixed: float | None) -> float:
    if fixed is not None:
        return fixed
    high = max((v for v in values if v is not None), default=0.0)
    return high if high > 0 else 1.0


def _frame(chart_id: str, title: str, desc: str, x_label: str, y_label: str, top: float,
           fmt: Callable[[float], str], body: list[str], x_ticks: list[tuple[float, str]]
           ) -> Markup:
    """The svg element: title, description, axes with their labels and ticks, then ``body``."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out = [f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" aria-labelledby="{chart_id}-t {chart_id}-d" '
           f'id="{chart_id}" xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{chart_id}-t">{escape(title)}</title>',
           f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
           # the title, shown (the <title> above is what names it to assistive technology)
           f'<text class="chart-title" x="{LEFT}" y="18" aria-hidden="true">'
           f'{escape(title)}</text>',
           f'<g class="axis" aria-hidden="true">'
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>'
           f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>']
    for share in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - share)
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{escape(fmt(top * share))}</text>')
    for x, text in x_ticks:
        out.append(f'<text class="tick" x="{x:.1f}" y="{TOP + plot_h + 16}" '
                   f'text-anchor="middle">{escape(text)}</text>')
    out.append('</g>')
    out.append(f'<text class="axis-label x-label" x="{LEFT + plot_w / 2:.1f}" '
               f'y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text class="axis-label y-label" x="14" y="{TOP + plot_h / 2:.1f}" '
               f'text-anchor="middle" transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">'
               f'{escape(y_label)}</text>')
    out.extend(body)
    out.append('</svg>')
    return Markup("".join(out))


def _ticks(labels: Sequence[str], x_of: Callable[[int], float], most: int = 8
           ) -> list[tuple[float, str]]:
    """At most ``most`` x labels, evenly spread, the first and last always shown."""
    if not labels:
        return []
    step = max(1, -(-len(labels) // most))
    chosen = sorted(set(range(0, len(labels), step)) | {len(labels) - 1})
    return [(x_of(i), labels[i]) for i in chosen]


def bar_chart(chart_id: str, title: str, desc: str, bars: Sequence[Bar], *, x_label: str,
              y_label: str, fmt: Callable[[float], str], css: str,
              top: float | None = None) -> Markup:
    """Bars from zero; a bar with no value leaves a gap. ``chart_id`` must be unique on
    the page: the title and description are referenced by it."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    high = _scale_top([b.value for b in bars], top)
    slot = plot_w / max(len(bars), 1)
    width = max(slot * 0.8, 0.5)
    body = [f'<g class="bars {escape(css)}">']
    for i, bar in enumerate(bars):
        if bar.value is None:
            continue
        h = plot_h * min(max(bar.value, 0.0), high) / high
        body.append(f'<rect x="{LEFT + i * slot + (slot - width) / 2:.2f}" '
                    f'y="{TOP + plot_h - h:.2f}" width="{width:.2f}" height="{h:.2f}" '
                    f'data-label="{escape(bar.label)}" data-value="{bar.value!r}">'
                    f'<title>{escape(bar.tooltip)}</title></rect>')
    body.append('</g>')
    ticks = _ticks([b.label for b in bars], lambda i: LEFT + (i + 0.5) * slot)
    return _frame(chart_id, title, desc, x_label, y_label, high, fmt, body, ticks)


def line_chart(chart_id: str, title: str, desc: str, labels: Sequence[str],
               series: Sequence[Series], *, x_label: str, y_label: str,
               fmt: Callable[[float], str], top: float | None = None) -> Markup:
    """One polyline per series (broken where a value is missing), a marker per point, and
    a legend."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    high = _scale_top([v for s in series for v in s.values], top)
    step = plot_w / max(len(labels) - 1, 1)

    def x_of(i: int) -> float:
        return LEFT + (i * step if len(labels) > 1 else plot_w / 2)

    def y_of(v: float) -> float:
        return TOP + plot_h * (1 - min(max(v, 0.0), high) / high)

    body = []
    for s_index, s in enumerate(series):
        body.append(f'<g class="series {escape(s.css)}" data-series="{escape(s.name)}">')
        runs: list[list[str]] = [[]]
        for i, v in enumerate(s.values):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x_of(i):.2f},{y_of(v):.2f}")
        body.extend(f'<polyline fill="none" points="{" ".join(run)}"/>' for run in runs
                    if len(run) > 1)
        for i, v in enumerate(s.values):
            if v is not None:
                body.append(f'<circle cx="{x_of(i):.2f}" cy="{y_of(v):.2f}" r="3" '
                            f'data-label="{escape(labels[i])}" data-value="{v!r}">'
                            f'<title>{escape(f"{s.name} at turn {labels[i]}: {fmt(v)}")}'
                            f'</title></circle>')
        legend_x = WIDTH - RIGHT - 120 * (len(series) - s_index)
        body.append(f'<text class="legend" x="{legend_x + 14}" y="18">'
                    f'{escape(s.name)}</text><rect class="swatch" x="{legend_x}" '
                    f'y="9" width="10" height="10"/></g>')
    ticks = _ticks(labels, x_of)
    return _frame(chart_id, title, desc, x_label, y_label, high, fmt, body, ticks)


# -- a conversation's turns -------------------------------------------------------------------

def conversation_samples(store: Store, conversation_id: str, branch: str = MAIN, *,
                         pricing: CacheProfile | None = None,
                         input_price: float = DEFAULT_INPUT_PRICE) -> list[TurnSample]:
    """The turns of one conversation branch, as ``threadline stats`` counts and bills them
    (the caller has checked the conversation may be shown)."""
    found = turn_samples(store, profile=pricing or profile(DEFAULT_PROFILE),
                         input_price=input_price, conversations=[conversation_id])
    return sorted((s for s in found if s.branch == branch), key=lambda s: s.turn)


def _binned(samples: Sequence[TurnSample], most: int) -> list[list[TurnSample]]:
    """Consecutive turns in at most ``most`` groups of (nearly) equal size."""
    if len(samples) <= most:
        return [[s] for s in samples]
    size = -(-len(samples) // most)
    return [list(samples[i:i + size]) for i in range(0, len(samples), size)]


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def conversation_chart(samples: Sequence[TurnSample], *, max_bars: int = MAX_BARS,
                       id_prefix: str = "conversation") -> Markup:
    """Reuse and cost per turn of one conversation branch, as two bar charts in a figure.
    ``samples``: ``threadline.stats.turn_samples`` of one conversation, filtered to one
    branch (``conversation_samples``). ``id_prefix`` keeps its element ids unique on a page
    that embeds more than one."""
    ordered = sorted(samples, key=lambda s: s.turn)
    if not ordered:
        return Markup('<figure class="charts"><figcaption>No turn has made a model call yet: '
                      'nothing to chart.</figcaption></figure>')
    groups = _binned(ordered, max_bars)
    labels = [str(g[0].turn) if len(g) == 1 else f"{g[0].turn}-{g[-1].turn}" for g in groups]
    binned = "" if len(groups) == len(ordered) else \
        f" Each bar is the mean of {len(groups[0])} consecutive turns."
    span = f"turns {ordered[0].turn} to {ordered[-1].turn}"
    reuse = [_mean([s.reuse_ratio for s in g]) for g in groups]
    cost = [_mean([s.cost_usd for s in g]) for g in groups]
    branch = ordered[0].branch
    reuse_chart = bar_chart(
        f"{id_prefix}-reuse",
        f"Reuse per turn, branch {branch}",
        f"Share of each turn's prompt tokens the backend reported cached, {span}; "
        f"{_range(reuse, _fmt_percent)}.{binned}",
        [Bar(label, v, f"turn {label}: {'no tokens' if v is None else _fmt_percent(v)} "
                       "reused") for label, v in zip(labels, reuse, strict=True)],
        x_label="turn", y_label="reused", fmt=_fmt_percent, css="reuse", top=1.0)
    cost_chart = bar_chart(
        f"{id_prefix}-cost",
        f"Cost per turn, branch {branch}",
        f"Billed cost of each turn's model calls, {span}; {_range(cost, _fmt_usd)}.{binned}",
        [Bar(label, v, f"turn {label}: {_fmt_usd(v or 0.0)}")
         for label, v in zip(labels, cost, strict=True)],
        x_label="turn", y_label="USD", fmt=_fmt_usd, css="cost")
    return Markup('<figure class="charts">') + reuse_chart + cost_chart + Markup(
        f'<figcaption>Reuse and cost per turn, branch {escape(branch)}.</figcaption></figure>')


def _range(values: Sequence[float | None], fmt: Callable[[float], str]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "nothing recorded"
    return f"from {fmt(min(known))} to {fmt(max(known))}"


# -- the curves across conversations ----------------------------------------------------------

def stats_charts(points: Sequence[TurnPoint]) -> list[Markup]:
    """One line chart per metric of ``threadline stats``: median and 90th percentile by
    turn index (or bucket of indexes)."""
    labels = [p.label for p in points]
    out = []
    for metric, (title, unit, fmt) in METRIC_TITLES.items():
        medians = [p.metrics[metric].median for p in points]
        p90s = [p.metrics[metric].p90 for p in points]
        counts = sum(p.metrics[metric].count for p in points)
        desc = (f"{title} by turn index, across conversations: the median and 90th "
                f"percentile of {counts} turns at indexes {labels[0]} to {labels[-1]}; "
                f"median {_range(medians, fmt)}." if points else
                f"{title}: no turns recorded yet.")
        out.append(line_chart(f"stats-{metric}", title, desc, labels,
                              [Series("median", medians, "median"),
                               Series("90th percentile", p90s, "p90")],
                              x_label="turn index", y_label=unit, fmt=fmt,
                              top=1.0 if metric == "reuse_ratio" else None))
    return out
