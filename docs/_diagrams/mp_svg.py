"""A small SVG drawing kit for the docs' diagrams: boxes, lines, arrows and text placed by hand,
measured as they are placed.

It fails closed: a label that does not fit its box (after wrapping at spaces), a text that runs
out of the picture or a text that overlaps another raises ``LayoutError`` naming it, so a
diagram whose words changed cannot be written with a label cut off.  Widths come from DejaVu
Sans's own advance widths (``mp_font_metrics``), the first font the pictures ask for; the
fallbacks (Verdana, then the platform's sans-serif) are no wider.  The output is deterministic:
the same drawing gives the same bytes (tests/docs/test_diagrams.py compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

import mp_font_metrics as metrics

FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
MONO_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
#: Room kept between a label and its box's edge, each side.
PAD = 6
#: Height of a line of text, in font sizes.
LEADING = 1.3
#: Where a line's ink starts above and ends below its baseline, in font sizes.
ASCENT, DESCENT = 0.76, 0.24

INK = "#333333"
#: Fills and strokes of the three phases (as in the operator guide) and of neutral things.
EXPAND = ("#d8ecd8", "#2e7d32")
DATA = ("#dde7f6", "#1f5fa8")
CONTRACT = ("#f6dada", "#b3261e")
RELEASE_N = ("#eeeeee", "#666666")
RELEASE_N1 = ("#fff3d6", "#a06b00")
NOTE = ("#ffffff", "#999999")


class LayoutError(ValueError):
    """A label does not fit, runs out of the picture, or overlaps another."""


def text_width(text: str, size: float, bold: bool = False, mono: bool = False) -> float:
    if mono:
        return len(text) * metrics.MONO * size / 1000
    table = metrics.BOLD if bold else metrics.REGULAR
    unknown = sorted({ch for ch in text if ch not in table})
    if unknown:
        raise LayoutError(f"{text!r}: no width known for {unknown} (add them in extract_metrics.py)")
    return sum(table[ch] for ch in text) * size / 1000


def wrap(text: str, width: float, size: float, bold: bool = False, mono: bool = False) -> list[str]:
    """*text* in lines no wider than *width*, broken at spaces; a word wider than that: LayoutError."""
    lines: list[str] = []
    for word in text.split():
        if text_width(word, size, bold, mono) > width:
            raise LayoutError(f"{word!r} is wider than {width:.0f} px at {size} px: {text!r}")
        if lines and text_width(lines[-1] + " " + word, size, bold, mono) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _n(value: float) -> str:
    """A coordinate as written: at most one decimal, no trailing zeros."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@dataclass(frozen=True)
class _Ink:
    left: float
    top: float
    right: float
    bottom: float
    label: str

    def overlaps(self, other: "_Ink") -> bool:
        return self.left < other.right and other.left < self.right and self.top < other.bottom \
            and other.top < self.bottom


class Drawing:
    def __init__(self, width: int, height: int, title: str, font_size: int = 13):
        self.width, self.height, self.title, self.font_size = width, height, title, font_size
        self._body: list[str] = []
        self._inks: list[_Ink] = []
        self._markers: set[str] = set()

    # -- shapes ---------------------------------------------------------------------------------
    def rect(self, x: float, y: float, w: float, h: float, colors: tuple[str, str] = NOTE, rx: float = 6,
             dash: str | None = None, stroke_width: float = 1) -> None:
        self._inside(x, y, x + w, y + h, f"a box at ({x}, {y})")
        fill, stroke = colors
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        extra += f' stroke-width="{_n(stroke_width)}"' if stroke_width != 1 else ""
        self._body.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="{_n(rx)}" '
                          f'fill="{fill}" stroke="{stroke}"{extra}/>')

    def line(self, points: list[tuple[float, float]], color: str = INK, width: float = 1.5,
             dash: str | None = None, arrow: bool = True, arrow_start: bool = False) -> None:
        for x, y in points:
            self._inside(x, y, x, y, f"a line through ({x}, {y})")
        marker = self._marker(color)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        extra += f' marker-end="url(#{marker})"' if arrow else ""
        extra += f' marker-start="url(#{marker})"' if arrow_start else ""
        path = " ".join(f"{'M' if i == 0 else 'L'} {_n(x)} {_n(y)}" for i, (x, y) in enumerate(points))
        self._body.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="{_n(width)}"{extra}/>')

    def curve(self, start: tuple[float, float], control1: tuple[float, float], control2: tuple[float, float],
              end: tuple[float, float], color: str = INK, width: float = 1.5, dash: str | None = None) -> None:
        for x, y in (start, control1, control2, end):
            self._inside(x, y, x, y, f"a curve through ({x}, {y})")
        marker = self._marker(color)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        d = "M {} {} C {} {}, {} {}, {} {}".format(*(_n(v) for v in (*start, *control1, *control2, *end)))
        self._body.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{_n(width)}"{extra} '
                          f'marker-end="url(#{marker})"/>')

    def _marker(self, color: str) -> str:
        self._markers.add(color)
        return "arrow-" + color.lstrip("#")

    # -- text -----------------------------------------------------------------------------------
    def text(self, x: float, y: float, label: str, size: float | None = None, anchor: str = "start",
             bold: bool = False, color: str = INK, mono: bool = False) -> _Ink:
        """One line at baseline *y*; refused when it leaves the picture or overlaps another text."""
        size = size or self.font_size
        width = text_width(label, size, bold, mono)
        left = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
        ink = _Ink(left, y - ASCENT * size, left + width, y + DESCENT * size, label)
        self._inside(ink.left, ink.top, ink.right, ink.bottom, repr(label))
        for other in self._inks:
            if ink.overlaps(other):
                raise LayoutError(f"{label!r} overlaps {other.label!r}")
        self._inks.append(ink)
        attributes = [f'x="{_n(x)}"', f'y="{_n(y)}"']
        if anchor != "start":
            attributes.append(f'text-anchor="{anchor}"')
        if size != self.font_size:
            attributes.append(f'font-size="{_n(size)}"')
        if bold:
            attributes.append('font-weight="bold"')
        if mono:
            attributes.append(f"font-family={quoteattr(MONO_FONT)}")
        if color != INK:
            attributes.append(f'fill="{color}"')
        if "  " in label or label != label.strip():  # SVG collapses runs of spaces unless told not to
            attributes.append('xml:space="preserve" style="white-space:pre"')
        self._body.append(f"<text {' '.join(attributes)}>{escape(label)}</text>")
        return ink

    def lines(self, x: float, y: float, labels: list[str], size: float | None = None, anchor: str = "start",
              bold_first: bool = False, color: str = INK, mono: bool = False, width: float | None = None) -> float:
        """Paragraphs from baseline *y* down, each wrapped to *width* if given; returns the next baseline."""
        size = size or self.font_size
        for i, label in enumerate(labels):
            bold = bold_first and i == 0
            for line in (wrap(label, width, size, bold, mono) if width else [label]):
                self.text(x, y, line, size, anchor, bold, color, mono)
                y += size * LEADING
        return y

    def box(self, x: float, y: float, w: float, h: float, labels: list[str], colors: tuple[str, str] = NOTE,
            size: float | None = None, bold_first: bool = True, color: str = INK, align: str = "middle",
            rx: float = 6, dash: str | None = None, mono: bool = False) -> None:
        """A box with *labels* wrapped inside it and centred vertically; LayoutError if they do not fit."""
        size = size or self.font_size
        wrapped = [(line, bold_first and i == 0)
                   for i, label in enumerate(labels)
                   for line in wrap(label, w - 2 * PAD, size, bold_first and i == 0, mono)]
        needed = (len(wrapped) - 1) * size * LEADING + (ASCENT + DESCENT) * size
        if needed > h - 2 * (PAD / 2):
            raise LayoutError(f"{' / '.join(labels)!r} needs {needed:.0f} px of height, the box has {h:.0f}")
        self.rect(x, y, w, h, colors, rx=rx, dash=dash)
        baseline = y + (h - needed) / 2 + ASCENT * size
        tx = x + w / 2 if align == "middle" else x + PAD
        for line, bold in wrapped:
            self.text(tx, baseline, line, size, align, bold, color, mono)
            baseline += size * LEADING

    def _inside(self, left: float, top: float, right: float, bottom: float, what: str) -> None:
        if left < 0 or top < 0 or right > self.width or bottom > self.height:
            raise LayoutError(f"{what} runs out of the picture ({left:.0f}, {top:.0f}, {right:.0f}, {bottom:.0f} "
                              f"of {self.width} x {self.height})")

    # -- output ---------------------------------------------------------------------------------
    def render(self) -> str:
        markers = "".join(
            f'<marker id="arrow-{c.lstrip("#")}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{c}"/></marker>'
            for c in sorted(self._markers))
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" height="{self.height}" font-family="{FONT}" font-size="{self.font_size}" '
                f'fill="{INK}">')
        return "\n".join([
            "<!-- Generated by docs/_diagrams/mp_diagrams.py: edit that, then run it. -->",
            head,
            f"<title>{escape(self.title)}</title>",
            f"<defs>{markers}</defs>" if markers else "<defs/>",
            f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="#ffffff" stroke="none"/>',
            *self._body,
            "</svg>",
            "",
        ])
