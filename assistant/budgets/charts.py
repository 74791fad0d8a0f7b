"""Line charts drawn on the server as SVG: no JavaScript, readable without it, printable.

Every text that reaches the SVG (labels, legends) is escaped; numbers are formatted here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# One colour per category, in the order of the organisation's categories (at most 4).
PALETTE = ("#2f6fb0", "#c05a1c", "#3f8f4f", "#8a4fb0")


def nice_ceiling(value: float) -> float:
    """The smallest round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k) at or above ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(m * magnitude for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * magnitude >= value * (1 - 1e-9))


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: list[tuple[int, float]]
    """(x index, value); an index with no value is left out and the line jumps over it."""
    color: str


@dataclass(frozen=True, slots=True)
class Guide:
    """A dashed reference line from (x0, y0) to (x1, y1): a budget at 100 %, an even pace."""

    label: str
    x0: int
    y0: float
    x1: int
    y1: float


@dataclass(slots=True)
class Chart:
    title: str
    x_labels: list[str]
    series: list[Series]
    value_format: Callable[[float], str]
    guides: list[Guide] = field(default_factory=list)
    x_ticks: list[int] | None = None
    """The x indices that get a label (default: about eight, evenly spaced)."""
    width: int = 720
    height: int = 260

    def render(self) -> SafeString:
        left, right, top, bottom = 64, 12, 12, 28
        w, h = self.width - left - right, self.height - top - bottom
        n = max(len(self.x_labels) - 1, 1)
        values = (
            [v for s in self.series for _, v in s.points] + [g.y0 for g in self.guides] + [g.y1 for g in self.guides]
        )
        y_max = nice_ceiling(max(values, default=0.0) * 1.05)

        def x(i: float) -> float:
            return left + w * i / n

        def y(v: float) -> float:
            return top + h - h * v / y_max

        out = [
            f'<svg class="chart" viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{escape(self.title)}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(self.title)}</title>'
        ]
        for k in range(5):  # horizontal grid with its values
            v = y_max * k / 4
            out.append(
                f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{escape(self.value_format(v))}</text>'
            )
        step = max(1, round(len(self.x_labels) / 8))
        ticks = self.x_ticks if self.x_ticks is not None else list(range(0, len(self.x_labels), step))
        for i in ticks:
            out.append(
                f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{top + h}" y2="{top + h + 4}" class="grid"/>'
                f'<text x="{x(i):.1f}" y="{self.height - 8}" text-anchor="middle">{escape(self.x_labels[i])}</text>'
            )
        for g in self.guides:
            out.append(
                f'<line x1="{x(g.x0):.1f}" y1="{y(g.y0):.1f}" x2="{x(g.x1):.1f}" y2="{y(g.y1):.1f}" class="guide">'
                f"<title>{escape(g.label)}</title></line>"
            )
        for s in self.series:
            if not s.points:
                continue
            path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in s.points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>')
            for i, v in s.points:
                out.append(
                    f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{s.color}">'
                    f"<title>{escape(s.label)} — {escape(self.x_labels[i])}: {escape(self.value_format(v))}</title></circle>"
                )
        out.append("</svg>")
        return mark_safe("".join(out))  # every text above is escaped
