"""Inline SVG charts for the HTML report: scatter, horizontal bars, grouped bars."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

# Tableau 10 plus two, so the paper's 12 agents get 12 colours.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b",
)  # fmt: skip


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi] (1, 2, 5 × 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def _num(x: float) -> str:
    return f"{x:.1f}"


def _tick_label(v: float) -> str:
    return f"{v:g}"


@dataclass
class Point:
    """One agent in the score vs output-tokens scatter, with its 95% CI when known."""

    label: str
    x: float
    y: float
    y_lo: float | None = None
    y_hi: float | None = None


LABEL_GAP = 13.0
"""Least vertical distance between two point labels (px), about one line of 11 px text."""
CHAR_W = 6.2
"""Width of one character of an 11 px label (px), to keep labels inside the chart."""


def spread_labels(ys: Sequence[float], lo: float, hi: float, gap: float = LABEL_GAP) -> list[float]:
    """Label baselines near `ys`, at least `gap` apart, inside [lo, hi], in the input order."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed: list[float] = []
    for i in order:  # top to bottom on screen: push each below the previous one
        placed.append(max(ys[i], placed[-1] + gap) if placed else max(ys[i], lo))
    overflow = (placed[-1] - hi) if placed else 0.0
    if overflow > 0:  # shift the stack up, never above lo
        placed = [max(lo + k * gap, p - overflow) if lo + k * gap <= hi else p - overflow for k, p in enumerate(placed)]
    out = [0.0] * len(ys)
    for i, y in zip(order, placed, strict=True):
        out[i] = y
    return out


def scatter(points: Sequence[Point], *, x_title: str, y_title: str, chart_id: str, width: int = 600, height: int = 360) -> str:
    """Labelled points with optional 95% CI bars (the paper's Figure 1b); labels never overlap or leave the chart."""
    left, right, top, bottom = 60, 20, 16, 48
    xs = [p.x for p in points]
    ys = [p.y for p in points] + [v for p in points for v in (p.y_lo, p.y_hi) if v is not None]
    xt = nice_ticks(min(0.0, min(xs)), max(xs) * 1.08)
    yt = nice_ticks(max(0.0, min(ys) - 5), min(100.0, max(ys) + 5) if max(ys) <= 100 else max(ys))
    pw, ph = width - left - right, height - top - bottom

    def sx(v: float) -> float:
        return left + (v - xt[0]) / (xt[-1] - xt[0]) * pw

    def sy(v: float) -> float:
        return top + ph - (v - yt[0]) / (yt[-1] - yt[0]) * ph

    out = [_open(chart_id, width, height, f"{y_title} against {x_title}")]
    out += _axes(left, top, pw, ph, [(sx(t), _tick_label(t)) for t in xt], [(sy(t), _tick_label(t)) for t in yt])
    out.append(_axis_titles(left, top, pw, ph, x_title, y_title))
    label_y = spread_labels([sy(p.y) + 4 for p in points], top + 10, top + ph - 2)
    for i, p in enumerate(points):
        cx, cy = sx(p.x), sy(p.y)
        has_ci = p.y_lo is not None and p.y_hi is not None
        tip = f"{p.label}: {p.y:.2f}" + (f" [{p.y_lo:.2f}, {p.y_hi:.2f}]" if has_ci else "") + f" at {p.x:g}"
        if has_ci:
            out.append(
                f'<line class="err" x1="{_num(cx)}" x2="{_num(cx)}" y1="{_num(sy(p.y_lo))}" '
                f'y2="{_num(sy(p.y_hi))}" stroke="{color(i)}"/>'
            )
        out.append(
            f'<circle class="point" data-label="{escape(p.label)}" cx="{_num(cx)}" cy="{_num(cy)}" r="5" '
            f'fill="{color(i)}"><title>{escape(tip)}</title></circle>'
        )
        # right of the point, or left of it where the label would run past the plot's right edge
        right_side = cx + 8 + CHAR_W * len(p.label) <= left + pw + right - 2
        lx, anchor = (cx + 8, "start") if right_side else (cx - 8, "end")
        out.append(f'<text class="pl" x="{_num(lx)}" y="{_num(label_y[i])}" text-anchor="{anchor}">{escape(p.label)}</text>')
    out.append("</svg>")
    return "".join(out)


def hbars(values: Mapping[str, float], *, title: str, chart_id: str, width: int = 600, unit: str = "%",
          ci: Mapping[str, tuple[float, float]] | None = None) -> str:
    """One horizontal bar per label, in the given order, value printed past its end, with a 95% CI
    whisker where `ci` has one (Figure 1a)."""
    ci = ci or {}
    # the label column as wide as the longest label, up to 40% of the chart; longer ones are cut with "…"
    left = math.ceil(min(max(60.0, CHAR_W * max((len(k) for k in values), default=0) + 12), 0.4 * width))
    row, right, top = 24, 60, 8
    height = top * 2 + row * len(values)
    hi = max([100.0 if unit == "%" else 0.0, *values.values()])
    pw = width - left - right
    out = [_open(chart_id, width, height, title)]
    for i, (label, v) in enumerate(values.items()):
        y = top + i * row
        w = max(0.0, v / hi * pw) if hi else 0.0
        out.append(f'<text class="yl" x="{left - 6}" y="{y + 16}" text-anchor="end">{escape(fit(label, left - 12))}'
                   f"<title>{escape(label)}</title></text>")
        out.append(
            f'<rect class="bar" data-label="{escape(label)}" x="{left}" y="{y + 3}" width="{_num(w)}" height="{row - 6}" '
            f'fill="{color(i)}"><title>{escape(label)}: {v:.2f}{unit}</title></rect>'
        )
        end = left + w
        if label in ci:
            x0, x1 = (left + (max(0.0, c / hi * pw) if hi else 0.0) for c in ci[label])
            mid = y + row / 2
            out.append(f'<path class="ci" data-label="{escape(label)}" d="M{_num(x0)} {_num(mid)}H{_num(x1)}'
                       f'M{_num(x0)} {_num(mid - 5)}V{_num(mid + 5)}M{_num(x1)} {_num(mid - 5)}V{_num(mid + 5)}" '
                       f'stroke="#1d2430" stroke-width="1.5" fill="none"><title>{escape(label)}: 95% CI '
                       f"[{ci[label][0]:.1f}, {ci[label][1]:.1f}]</title></path>")
            end = max(end, x1)
        out.append(f'<text class="vl" x="{_num(end + 4)}" y="{y + 16}">{v:.1f}</text>')
    out.append("</svg>")
    return "".join(out)


def ranked_bars(values: Mapping[str, float], *, title: str, chart_id: str, x_title: str, width: int = 760,
                ci: Mapping[str, tuple[float, float]] | None = None, tags: Mapping[str, str] | None = None,
                unit: str = "points") -> str:
    """One horizontal bar per label in the given (ranked) order on a ticked x axis with its title, a 95% CI
    whisker where `ci` has one, the value and a tag (e.g. the group letters) past the bar's end."""
    ci, tags = ci or {}, tags or {}
    left = math.ceil(min(max(60.0, CHAR_W * max((len(k) for k in values), default=0) + 12), 0.35 * width))
    row, right, top, bottom = 24, 96, 8, 44
    ph = row * len(values)
    pw = width - left - right
    xt = nice_ticks(0.0, max([1.0, *values.values(), *[hi for _, hi in ci.values()]]))

    def sx(v: float) -> float:
        return left + max(0.0, v) / xt[-1] * pw

    out = [_open(chart_id, width, top + ph + bottom, title)]
    out += _axes(left, top, pw, ph, [(sx(t), _tick_label(t)) for t in xt], [])
    out += [f'<line class="grid" x1="{_num(sx(t))}" y1="{top}" x2="{_num(sx(t))}" y2="{_num(top + ph)}"/>' for t in xt[1:]]
    for i, (label, v) in enumerate(values.items()):
        y, tag = top + i * row, tags.get(label, "")
        lo_hi = ci.get(label)
        tip = f"{label}: {v:.1f} {unit}" + (f", 95% CI [{lo_hi[0]:.1f}, {lo_hi[1]:.1f}]" if lo_hi else "") + (
            f", group {tag}" if tag else "")
        out.append(f'<text class="yl" x="{left - 6}" y="{y + 16}" text-anchor="end">{escape(fit(label, left - 12))}'
                   f"<title>{escape(label)}</title></text>")
        out.append(f'<rect class="bar" data-label="{escape(label)}" x="{left}" y="{y + 3}" width="{_num(sx(v) - left)}" '
                   f'height="{row - 6}" fill="{color(i)}"><title>{escape(tip)}</title></rect>')
        end = sx(v)
        if lo_hi:
            x0, x1, mid = sx(lo_hi[0]), sx(lo_hi[1]), y + row / 2
            out.append(f'<path class="ci" data-label="{escape(label)}" d="M{_num(x0)} {_num(mid)}H{_num(x1)}'
                       f'M{_num(x0)} {_num(mid - 5)}V{_num(mid + 5)}M{_num(x1)} {_num(mid - 5)}V{_num(mid + 5)}" '
                       f'stroke="#1d2430" stroke-width="1.5" fill="none"><title>{escape(tip)}</title></path>')
            end = max(end, x1)
        out.append(f'<text class="vl" x="{_num(end + 4)}" y="{y + 16}">{v:.1f}'
                   + (f' <tspan class="tag">{escape(tag)}</tspan>' if tag else "") + "</text>")
    out.append(f'<text class="at" x="{_num(left + pw / 2)}" y="{_num(top + ph + 36)}" text-anchor="middle">'
               f"{escape(x_title)}</text></svg>")
    return "".join(out)


def grouped_bars(
    groups: Sequence[str],
    series: Mapping[str, Mapping[str, float]],
    *,
    y_title: str,
    chart_id: str,
    width: int = 860,
    height: int = 340,
    ci: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
) -> str:
    """Bars per group (e.g. domain), one per series (e.g. agent) with a legend; absent values skipped;
    a 95% CI whisker on a bar where `ci` (series → group → (lo, hi)) has one."""
    ci = ci or {}
    left, right, top = 56, 12, 16
    legend = legend_rows(list(series), left, width - right)
    bottom = 44 + 16 * len(legend)  # tick labels, then one line per legend row
    height += 16 * (len(legend) - 1)
    pw, ph = width - left - right, height - top - bottom
    yt = nice_ticks(0.0, max([100.0, *[v for s in series.values() for v in s.values()],
                              *[hi for c in ci.values() for _, hi in c.values()]]))
    gw = pw / max(len(groups), 1)
    bw = gw * 0.8 / max(len(series), 1)

    def sy(v: float) -> float:
        return top + ph - v / yt[-1] * ph

    out = [_open(chart_id, width, height, y_title)]
    xt = [(left + (i + 0.5) * gw, g) for i, g in enumerate(groups)]
    out += _axes(left, top, pw, ph, xt, [(sy(t), _tick_label(t)) for t in yt])
    out.append(_axis_titles(left, top, pw, ph, "", y_title))
    for si, (name, vals) in enumerate(series.items()):
        for gi, g in enumerate(groups):
            if g not in vals:
                continue
            x = left + gi * gw + gw * 0.1 + si * bw
            v = vals[g]
            out.append(
                f'<rect class="bar" data-series="{escape(name)}" data-group="{escape(g)}" x="{_num(x)}" '
                f'y="{_num(sy(v))}" width="{_num(max(bw - 1, 1))}" height="{_num(top + ph - sy(v))}" '
                f'fill="{color(si)}"><title>{escape(name)} · {escape(g)}: {v:.2f}</title></rect>'
            )
            if g in ci.get(name, {}):
                lo, hi = ci[name][g]
                cx = x + max(bw - 1, 1) / 2
                out.append(f'<path class="ci" data-series="{escape(name)}" data-group="{escape(g)}" '
                           f'd="M{_num(cx)} {_num(sy(lo))}V{_num(sy(hi))}M{_num(cx - 3)} {_num(sy(lo))}H{_num(cx + 3)}'
                           f'M{_num(cx - 3)} {_num(sy(hi))}H{_num(cx + 3)}" stroke="#1d2430" stroke-width="1.2" '
                           f'fill="none"><title>{escape(name)} · {escape(g)}: 95% CI [{lo:.1f}, {hi:.1f}]</title></path>')
    si = 0
    for r, items in enumerate(legend):
        y = height - 18 - 16 * (len(legend) - 1 - r)
        for lx, name in items:
            out.append(f'<rect class="legend" x="{_num(lx)}" y="{y}" width="10" height="10" fill="{color(si)}"/>')
            out.append(f'<text x="{_num(lx + 14)}" y="{y + 9}">{escape(name)}</text>')
            si += 1
    out.append("</svg>")
    return "".join(out)


def fit(label: str, px: float) -> str:
    """The label cut with "…" to about `px` pixels of 11 px text."""
    n = max(1, int(px / CHAR_W + 1e-6))  # 99.2 / 6.2 is 15.999…: a label sized to fit must fit
    return label if len(label) <= n else label[: n - 1] + "…"


def legend_rows(names: Sequence[str], x0: float, x1: float) -> list[list[tuple[float, str]]]:
    """Legend entries (x, name) in rows that stay within [x0, x1]."""
    rows: list[list[tuple[float, str]]] = [[]]
    x = x0
    for name in names:
        w = 24 + CHAR_W * len(name)
        if rows[-1] and x + w - 10 > x1:
            rows.append([])
            x = x0
        rows[-1].append((x, name))
        x += w
    return rows


def _open(chart_id: str, width: int, height: int, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{escape(chart_id)}" class="chart" role="img" '
        f'aria-label="{escape(label)}" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
    )


def _axes(left: float, top: float, pw: float, ph: float, xt: list[tuple[float, str]], yt: list[tuple[float, str]]) -> list[str]:
    base = top + ph
    out = [f'<line class="axis" x1="{left}" y1="{_num(base)}" x2="{_num(left + pw)}" y2="{_num(base)}"/>']
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{_num(base)}"/>')
    for x, label in xt:
        out.append(f'<text class="xt" x="{_num(x)}" y="{_num(base + 16)}" text-anchor="middle">{escape(label)}</text>')
    for y, label in yt:
        out.append(f'<line class="grid" x1="{left}" y1="{_num(y)}" x2="{_num(left + pw)}" y2="{_num(y)}"/>')
        out.append(f'<text class="yt" x="{left - 6}" y="{_num(y + 4)}" text-anchor="end">{escape(label)}</text>')
    return out


def _axis_titles(left: float, top: float, pw: float, ph: float, x_title: str, y_title: str) -> str:
    cy = top + ph / 2
    return (
        f'<text class="at" x="{_num(left + pw / 2)}" y="{_num(top + ph + 36)}" text-anchor="middle">{escape(x_title)}</text>'
        f'<text class="at" transform="translate(14 {_num(cy)}) rotate(-90)" text-anchor="middle">{escape(y_title)}</text>'
    )
