"""The docs' pictures: every SVG under docs/_static is well-formed, shown by a page, regenerated
identically by its generator (docs/_diagrams/mp_diagrams.py), and has no text cut off or
overlapping: each label fits inside the box it sits in and inside the picture.

The text check measures every ``<text>`` with DejaVu Sans's advance widths (the diagrams' first
font, docs/_diagrams/mp_font_metrics.py): it reads only the SVG, not the generator, so it judges
hand-drawn pictures too.  Nothing is built here (``tox -e docs`` builds the pages).
"""

from __future__ import annotations

import importlib
import os
import random
import re
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ..helpers import REPO

DOCS = REPO / "docs"
SVG_NS = "{http://www.w3.org/2000/svg}"


def _import(*names: str):
    sys.path.insert(0, str(DOCS / "_diagrams"))
    try:
        return [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(str(DOCS / "_diagrams"))


def _diagram_modules():
    return _import("mp_svg", "mp_diagrams")


def svg_files() -> list[Path]:
    return sorted(DOCS.joinpath("_static").rglob("*.svg"))


# -- an independent reading of an SVG: boxes and the extent of each text ---------------------------
@dataclass
class Extent:
    left: float
    top: float
    right: float
    bottom: float
    label: str

    def overlaps(self, other: "Extent") -> bool:
        return self.left < other.right and other.left < self.right and self.top < other.bottom \
            and other.top < self.bottom


def _number(value: str | None, default: float = 0.0) -> float:
    return float(value) if value not in (None, "") else default


def _width(metrics, text: str, size: float, bold: bool, mono: bool) -> float:
    if mono:
        return len(text) * metrics.MONO * size / 1000
    table = metrics.BOLD if bold else metrics.REGULAR
    unknown = [ch for ch in text if ch not in table]
    assert not unknown, f"no width known for {unknown!r} in {text!r}: add it to mp_font_metrics"
    return sum(table[ch] for ch in text) * size / 1000


def read_svg(text: str):
    """(viewBox (x, y, w, h), rects [(x, y, w, h)], texts [Extent]) of an SVG without transforms."""
    [metrics] = _import("mp_font_metrics")
    root = ElementTree.fromstring(text)
    assert root.tag == f"{SVG_NS}svg", root.tag
    view = tuple(float(v) for v in root.get("viewBox").split())
    rects, texts = [], []

    def walk(element, inherited):
        style = dict(inherited)
        for key in ("font-size", "font-weight", "font-family", "text-anchor"):
            if element.get(key) is not None:
                style[key] = element.get(key)
        assert element.get("transform") is None, "a transform: this reading does not follow it"
        if element.tag == f"{SVG_NS}rect":
            rects.append((_number(element.get("x")), _number(element.get("y")),
                          _number(element.get("width")), _number(element.get("height"))))
        elif element.tag == f"{SVG_NS}text":
            assert not list(element), "a <text> with children (tspan): this reading does not follow it"
            label = element.text or ""
            size = float(style.get("font-size", "16"))
            bold = style.get("font-weight") == "bold"
            mono = "Mono" in style.get("font-family", "")
            width = _width(metrics, label, size, bold, mono)
            x, y = _number(element.get("x")), _number(element.get("y"))
            anchor = style.get("text-anchor", "start")
            left = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
            texts.append(Extent(left, y - 0.76 * size, left + width, y + 0.24 * size, label))
        for child in element:
            walk(child, style)

    walk(root, {})
    return view, rects, texts


def layout_problems(text: str) -> list[str]:
    """Each text outside the picture, wider than the box its start sits in, or overlapping another."""
    (vx, vy, vw, vh), rects, texts = read_svg(text)
    problems = []
    for t in texts:
        if t.left < vx or t.right > vx + vw or t.top < vy or t.bottom > vy + vh:
            problems.append(f"{t.label!r} runs out of the picture ({t.left:.0f}..{t.right:.0f} of {vw:.0f})")
        baseline = t.bottom - (t.bottom - t.top) * 0.24
        anchor_x = (t.left + t.right) / 2
        holders = [r for r in rects if r[0] <= anchor_x <= r[0] + r[2] and r[1] <= baseline <= r[1] + r[3]
                   and (r[2], r[3]) != (vw, vh)]
        if holders:
            x, y, w, h = min(holders, key=lambda r: r[2] * r[3])
            if t.left < x + 1 or t.right > x + w - 1 or t.top < y or t.bottom > y + h:
                problems.append(f"{t.label!r} ({t.left:.0f}..{t.right:.0f}) is cut by its box ({x:.0f}..{x + w:.0f})")
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if a.overlaps(b):
                problems.append(f"{a.label!r} overlaps {b.label!r}")
    return problems


# -- the pictures in the tree ------------------------------------------------------------------------
def test_there_are_pictures():
    names = {p.name for p in svg_files()}
    assert {"rolling_upgrade.svg", "rename_lifecycle.svg", "check_states.svg", "project_layout.svg",
            "rollback_window.svg"} <= names, names


@pytest.mark.parametrize("path", svg_files(), ids=lambda p: p.name)
def test_each_svg_is_well_formed_titled_and_nothing_is_cut(path):
    text = path.read_text(encoding="utf-8")
    root = ElementTree.fromstring(text)  # raises on malformed XML
    assert root.find(f"{SVG_NS}title") is not None and root.find(f"{SVG_NS}title").text.strip(), \
        f"{path.name}: no <title> (screen readers and the tab's tooltip read it)"
    assert not layout_problems(text), f"{path.name}: " + "; ".join(layout_problems(text))


_FIGURE = re.compile(r"^\s*\.\. (?:figure|image):: (\S+\.svg)", re.MULTILINE)


def figure_references() -> dict[str, list[str]]:
    """{svg path relative to docs/: [pages that show it]}."""
    shown: dict[str, list[str]] = {}
    for page in DOCS.rglob("*.rst"):
        for target in _FIGURE.findall(page.read_text(encoding="utf-8")):
            resolved = (DOCS / target.lstrip("/")) if target.startswith("/") else (page.parent / target)
            shown.setdefault(str(resolved.resolve().relative_to(DOCS)), []).append(page.name)
    return shown


@pytest.mark.parametrize("path", svg_files(), ids=lambda p: p.name)
def test_each_svg_is_shown_by_a_page(path):
    assert str(path.relative_to(DOCS)) in figure_references(), f"{path.name}: no page shows it"


def test_every_picture_a_page_shows_exists():
    missing = {target: pages for target, pages in figure_references().items() if not (DOCS / target).is_file()}
    assert not missing, missing


def test_the_pictures_are_where_readers_need_them():
    shown = figure_references()
    wanted = {"rename_lifecycle.svg": {"data_migrations.rst", "authoring.rst"},
              "check_states.svg": {"operator_guide.rst"},
              "project_layout.svg": {"quickstart.rst", "authoring.rst"},
              "rollback_window.svg": {"operator_guide.rst"},
              "rolling_upgrade.svg": {"index.rst", "operator_guide.rst"}}
    for name, pages in wanted.items():
        showing = {p for target, ps in shown.items() if target.endswith("/" + name) for p in ps}
        assert pages <= showing, (name, showing)


def test_the_committed_svgs_are_what_the_generator_writes():
    _, diagrams = _diagram_modules()
    rendered = diagrams.render_all()
    committed = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "_static" / "diagrams").glob("*.svg")}
    assert set(rendered) == set(committed), (sorted(rendered), sorted(committed))
    stale = [name for name, text in rendered.items() if committed[name] != text]
    assert not stale, f"stale: {stale}; run python docs/_diagrams/mp_diagrams.py"


def test_the_generator_check_mode_says_stale_and_writes_nothing(tmp_path):
    _, diagrams = _diagram_modules()
    (tmp_path / "check_states.svg").write_text("<svg/>", encoding="utf-8")
    assert diagrams.main(["--check", "--out", str(tmp_path)]) == 1
    assert (tmp_path / "check_states.svg").read_text(encoding="utf-8") == "<svg/>"
    assert diagrams.main(["--out", str(tmp_path)]) == 0
    assert diagrams.main(["--check", "--out", str(tmp_path)]) == 0


# -- the drawing primitives: a label fits its box or the drawing is refused (generated labels) -------
def _random_label(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randrange(1, 14)):
        alphabet = rng.choice([string.ascii_lowercase, string.ascii_letters + string.digits, "WMm@%_-",
                               "il.,:;'|", string.punctuation + "…→⇄"])
        words.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 16))))
    return " ".join(words)


SEEDS = int(os.environ.get("MP_DOCS_LABEL_DRAWS", "300"))


def test_generated_labels_fit_their_boxes_or_are_refused():
    svg, _ = _diagram_modules()
    seed = int(os.environ.get("MP_DOCS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"MP_DOCS_SEED={seed}")
    rng = random.Random(seed)
    drawn = refused = 0
    for draw in range(SEEDS):
        width, height = rng.randrange(40, 700), rng.randrange(20, 300)
        drawing = svg.Drawing(720, 340, "generated")
        labels = [_random_label(rng) for _ in range(rng.randrange(1, 4))]
        size = rng.choice([10, 11, 12, 13, 14, 16])
        bold = rng.random() < 0.3
        try:
            drawing.box(rng.randrange(0, 720 - width + 1), rng.randrange(0, 340 - height + 1), width, height,
                        labels, size=size, bold_first=bold)
        except svg.LayoutError:
            refused += 1
            continue
        drawn += 1
        text = drawing.render()
        problems = layout_problems(text)
        assert not problems, (seed, draw, labels, width, height, problems)
        shown = " ".join(t.label for t in read_svg(text)[2])
        assert shown.split() == " ".join(labels).split(), (seed, draw, "words lost or changed", labels, shown)
    assert drawn and refused, (seed, drawn, refused)  # both outcomes were exercised


def test_generated_texts_that_collide_are_refused():
    svg, _ = _diagram_modules()
    seed = int(os.environ.get("MP_DOCS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"MP_DOCS_SEED={seed}")
    rng = random.Random(seed)
    for draw in range(SEEDS):
        drawing = svg.Drawing(400, 200, "generated")
        placed = []
        for _ in range(rng.randrange(2, 6)):
            label = _random_label(rng)[:30]
            x, y = rng.randrange(0, 300), rng.randrange(14, 200)
            try:
                drawing.text(x, y, label, size=12)
                placed.append(label)
            except svg.LayoutError:
                pass
        problems = layout_problems(drawing.render())
        assert not problems, (seed, draw, placed, problems)
