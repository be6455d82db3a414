"""The docs' pictures, drawn by hand-placed shapes (``mp_svg``), written to docs/_static/diagrams/.

    python docs/_diagrams/mp_diagrams.py           # write the SVGs
    python docs/_diagrams/mp_diagrams.py --check   # exit 1 if a committed SVG differs (writes nothing)

The SVGs are committed, so the docs build needs nothing but Sphinx; tests/docs/test_diagrams.py
checks they are what this script writes, that each is shown by a page, and that no label is cut
off or overlaps another.  Every label is measured when it is placed: a label that no longer fits
its box stops this script with a LayoutError naming it, instead of writing a picture with
overflowing text.  What each picture says comes from the code it describes (named beside each
function): change the picture when that code changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mp_svg import (CONTRACT, DATA, EXPAND, INK, LEADING, NOTE, RELEASE_N, RELEASE_N1,  # noqa: E402
                    Drawing, LayoutError, wrap)

OUT = Path(__file__).resolve().parent.parent / "_static" / "diagrams"
GREY = "#666666"


def rolling_upgrade() -> Drawing:
    """The operator guide's five steps on one time line, the contract gate between 4 and 5."""
    d = Drawing(720, 340, "A rolling upgrade from release N to N+1: expand, the rollout, online data "
                          "migrations, the contract gate, contract")
    d.text(10, 22, "database (dbsync)", bold=True)
    d.line([(542, 30), (542, 296)], CONTRACT[1], width=3, dash="7 5", arrow=False)  # the gate, behind
    d.box(10, 34, 180, 58, ["1. expand", "dbsync upgrade --expand"], EXPAND, size=12)
    d.box(215, 34, 310, 58, ["4. online data migrations", "dbsync online_data_migrations", "(until it exits 0)"],
          DATA, size=12)
    d.box(560, 34, 150, 58, ["5. contract", "dbsync upgrade --contract"], CONTRACT, size=12)
    d.lines(100, 112, ["additive only:", "release N keeps working"], size=11, anchor="middle", color=EXPAND[1])
    d.lines(370, 112, ["batched, resumable, while both", "releases serve traffic"], size=11, anchor="middle",
            color=DATA[1])
    d.lines(635, 112, ["drops, NOT NULL: only", "N+1 code is left"], size=11, anchor="middle", color=CONTRACT[1])
    d.box(452, 152, 180, 44, ["contract gate", "data done? expand applied?"], ("#fff4f4", CONTRACT[1]), size=11,
          color=CONTRACT[1])
    d.text(10, 186, "services (your deployment tool)", bold=True)
    d.box(10, 198, 360, 28, ["release N"], RELEASE_N, bold_first=False, size=12)
    d.box(200, 234, 170, 28, ["2. release N+1, pinned"], RELEASE_N1, bold_first=False, size=12)
    d.box(370, 234, 340, 28, ["3. unpinned: writes the new shape"], RELEASE_N1, bold_first=False, size=12)
    d.line([(370, 194), (370, 270)], GREY, width=1, dash="3 3", arrow=False)
    d.text(376, 284, "last release-N service gone", size=11, color=GREY)
    d.line([(10, 306), (706, 306)], INK)
    d.text(706, 328, "time", anchor="end")
    return d


def rename_lifecycle() -> Drawing:
    """One column rename across the phases: the inventory example's nodes.name -> display_name
    (examples/inventory: expand 0002 adds the column and op.create_sync_trigger, the data
    migration nodes_name_to_display_name copies, contract 0003 drops the trigger, then the column)."""
    d = Drawing(720, 420, "The life of one column rename, nodes.name to nodes.display_name: old column, new "
                          "column, sync trigger, copy and drop, across expand, data migration and contract")
    # the phases, as columns
    phases = [(150, 220, ["before"], NOTE), (222, 318, ["1. expand"], EXPAND),
              (320, 543, ["2-4. both releases run;", "the data migration copies"], DATA),
              (545, 640, ["5. contract"], CONTRACT), (642, 714, ["after"], NOTE)]
    for left, right, labels, colors in phases:
        d.box(left, 8, right - left, 46, labels, colors, size=12, bold_first=True)
    rows = [("release N", 70), ("release N+1", 116), ("name (the old column)", 162),
            ("display_name (the new column)", 208), ("sync trigger", 254), ("the copy (data migration)", 300)]
    for label, top in rows:  # centred on the row's bar (34 px high)
        count = len(wrap(label, 136, 12, bold=True))
        d.lines(8, top + 21 - (count - 1) * 12 * LEADING / 2, [label], size=12, bold_first=True, width=136)
    # the gate, behind the bars
    d.line([(544, 58), (544, 352)], CONTRACT[1], width=3, dash="7 5", arrow=False)
    # release N: until its last service is gone, before the contract
    d.box(150, 70, 330, 34, ["reads and writes name"], RELEASE_N, size=12, bold_first=False)
    d.box(330, 116, 384, 34, ["reads and writes display_name"], RELEASE_N1, size=12, bold_first=False)
    d.box(150, 162, 440, 34, ["name VARCHAR(64): release N's column, kept up by the trigger"], NOTE, size=12,
          bold_first=False)
    d.text(596, 184, "DROP", size=12, bold=True, color=CONTRACT[1])
    d.box(236, 208, 478, 34, ["display_name VARCHAR(255): ADD COLUMN in expand (nullable)"], EXPAND, size=12,
          bold_first=False)
    d.box(256, 254, 308, 34, ["name ⇄ display_name: keeps both in step"], EXPAND, size=12,
          bold_first=False)
    d.text(570, 276, "DROP first", size=12, bold=True, color=CONTRACT[1])
    d.box(330, 300, 200, 44, ["batches copy the rows written before the trigger: until 0 are left"], DATA, size=11,
          bold_first=False)
    d.box(330, 362, 384, 50, ["contract gate: the copy has 0 rows left (read live). Run contract once the last "
                              "release-N service is gone: the trigger goes first, then the column"],
          ("#fff4f4", CONTRACT[1]), size=11, bold_first=False, color=CONTRACT[1])
    return d


def check_states() -> Drawing:
    """``dbsync check``'s exit codes as states (commands/state.py UpgradeState.check_code: 2 first,
    then 3, 4, 5/4, else 0; cli/operator.py's exit_codes for ``check``)."""
    d = Drawing(720, 470, "dbsync check's exit codes as states: 3 expand pending, 4 data migrations pending, "
                          "5 contract pending and allowed, 0 up to date; 2 when a revision cannot be applied as "
                          "it stands")
    left, width, height = 120, 240, 58
    tops = {3: 20, 4: 135, 5: 250, 0: 365}
    d.box(left, tops[3], width, height, ["3 · expand pending", "expand revisions are not applied"], EXPAND, size=12)
    d.box(left, tops[4], width, height, ["4 · data migrations pending", "rows left to copy, or the gate refuses "
                                         "the contract"], DATA, size=12)
    d.box(left, tops[5], width, height, ["5 · contract pending, allowed", "the gate lets the contract run"],
          CONTRACT, size=12)
    d.box(left, tops[0], width, height, ["0 · up to date", "schema at head, data complete"], NOTE, size=12)
    x = left + width / 2
    steps = [(3, 4, ["dbsync upgrade --expand"]), (4, 5, ["dbsync online_data_migrations", "until it exits 0"]),
             (5, 0, ["dbsync upgrade --contract"])]
    for source, target, labels in steps:
        d.line([(x, tops[source] + height), (x, tops[target] - 2)])
        d.lines(x + 10, tops[source] + height + 20, labels, size=12, mono=True)
    # 4 stays 4 while rows remain
    d.curve((left + width, tops[4] + 16), (left + width + 40, tops[4] + 6), (left + width + 40, tops[4] + 52),
            (left + width + 2, tops[4] + 44))
    d.lines(left + width + 46, tops[4] + 24, ["online_data_migrations exit 1 or 3:", "run it again (3: stop release N first)"], size=11)
    # the next release starts over at 3
    d.line([(left, tops[0] + 29), (100, tops[0] + 29), (100, tops[3] + 29), (left - 2, tops[3] + 29)], GREY,
           dash="5 4")
    d.lines(8, 190, ["the next", "release's", "revisions"], size=11, color=GREY)
    d.box(470, 250, 242, 212, ["2 · cannot go on as it stands",
                               "checked first, whatever else is pending:",
                               "• a pending revision cannot be applied as it stands: fix the script",
                               "• a rollback was interrupted: run dbsync rollback again",
                               "• a sync trigger was left behind by its contract",
                               "• bad configuration, database unreachable, or object rows with unfinished "
                               "versions before an expand"],
          ("#fff4f4", CONTRACT[1]), size=11, align="start")
    d.lines(8, 448, ["check answers with the first that holds:", "2, then 3, 4, 5; else 0"], size=11, color=GREY)
    return d


_TREE = [
    ("examples/inventory/", None),
    ("├── alembic.ini", None),
    ("├── migrations/", None),
    ("│   ├── env.py", None),
    ("│   └── versions/", None),
    ("│       ├── expand/", "expand"),
    ("│       │   ├── 0000_expand_root.py", "expand"),
    ("│       │   ├── 0001_r1_inventory.py", "expand"),
    ("│       │   └── 0002_r2_meta_display_name_version.py", "expand"),
    ("│       └── contract/", "contract"),
    ("│           ├── 0000_contract_root.py", "contract"),
    ("│           └── 0003_r3_drop_extra_name.py", "contract"),
    ("└── inventory/", None),
    ("    ├── data_migrations.py", "data"),
    ("    ├── releases.py", None),
    ("    └── models/", None),
]


def project_layout() -> Drawing:
    """examples/inventory's tree: alembic.ini's version_locations, the two branch folders,
    the contract revision's depends_on and requires_data_migrations, the data-migration module."""
    d = Drawing(720, 380, "The layout of a project: versions/expand and versions/contract, one alembic branch "
                          "each, and the data-migration module the contract revisions name")
    top, step, x = 24, 22, 14
    baseline = {i: top + i * step for i in range(len(_TREE))}
    bands = {"expand": EXPAND, "contract": CONTRACT, "data": DATA}
    for kind, colors in bands.items():
        rows = [i for i, (_, k) in enumerate(_TREE) if k == kind]
        d.rect(8, baseline[rows[0]] - 15, 412, (rows[-1] - rows[0]) * step + 20, (colors[0], "none"), rx=4)
    for i, (label, _) in enumerate(_TREE):
        d.text(x, baseline[i], label, size=12, mono=True)
    end = {i: x + len(label) * 12 * 0.602 for i, (label, _) in enumerate(_TREE)}
    # 0003 (contract) depends_on 0002 (expand); requires_data_migrations names data_migrations.py's migrations
    d.curve((end[11] + 4, baseline[11] - 4), (414, baseline[11] - 10), (414, baseline[8] + 4),
            (end[8] + 4, baseline[8] - 2), color=CONTRACT[1])
    d.text(300, baseline[10], "depends_on", size=10, mono=True, color=CONTRACT[1])
    d.curve((end[11] - 20, baseline[11] + 4), (end[11] - 20, baseline[12] + 4), (end[13] + 40, baseline[13] - 4),
            (end[13] + 4, baseline[13] - 4), color=CONTRACT[1])
    d.text(250, baseline[12] + 2, "requires_data_migrations", size=10, mono=True, color=CONTRACT[1])
    right, width = 428, 284
    d.box(right, baseline[1] - 15, width, 40, ["alembic.ini: version_locations names both folders; "
                                               "[migrations_policy] names the modules"], NOTE, size=11,
          bold_first=False, align="start")
    d.box(right, baseline[3] - 14, width, 24, ["env.py: every revision runs through the gate"], NOTE, size=11,
          bold_first=False, align="start")
    d.box(right, baseline[5] - 15, width, 3 * step + 20,
          ["versions/expand: the branch labelled expand", "additive only; applied while release N runs "
           "(dbsync upgrade --expand)"], EXPAND, size=11, align="start")
    d.box(right, baseline[9] - 15, width, 2 * step + 20,
          ["versions/contract: the branch labelled contract", "drops; a revision depends_on its expand revision "
           "and lists requires_data_migrations"], CONTRACT, size=11, align="start")
    d.box(right, baseline[13] - 15, width, 40, ["the data migrations: DataMigration(...) values, named once, "
                                                "never renamed (the ledger's keys)"], DATA, size=11,
          bold_first=False, align="start")
    d.box(right, baseline[14] + 8, width, 24, ["releases.py: object versions per release"], NOTE, size=11,
          bold_first=False, align="start")
    return d


def rollback_window() -> Drawing:
    """When ``dbsync rollback`` reverts and when it refuses (lifecycle/rollback.py:
    revisions_to_revert and plan; cli/operator.py's exit codes for ``rollback``)."""
    d = Drawing(720, 400, "When dbsync rollback is possible: after the expand of release N+1 and before its "
                          "contract; refused once the contract has run")
    d.box(10, 10, 130, 50, ["release N", "complete"], RELEASE_N, size=12)
    d.box(145, 10, 120, 50, ["1. expand", "of N+1"], EXPAND, size=12)
    d.box(270, 10, 260, 50, ["2-4. rollout and", "data migrations"], DATA, size=12)
    d.box(555, 10, 155, 50, ["5. contract", "of N+1"], CONTRACT, size=12)
    d.line([(542, 6), (542, 150)], CONTRACT[1], width=3, dash="7 5", arrow=False)
    d.box(10, 80, 130, 62, ["nothing to roll", "back (exit 4)"], ("#fff4f4", CONTRACT[1]), size=11,
          bold_first=False, color=CONTRACT[1])
    d.box(145, 80, 385, 62, ["dbsync rollback: possible",
                             "reverts the expand revisions applied since the last completed release"],
          ("#eef7ee", EXPAND[1]), size=12)
    d.box(555, 80, 155, 62, ["refused (exit 4)", "the dropped data is gone: restore from backup"],
          ("#fff4f4", CONTRACT[1]), size=11, color=CONTRACT[1])
    # the ladder: what rollback checks, in order
    x = 250
    d.line([(x, 142), (x, 168)])
    d.box(145, 170, 210, 50, ["an expand revision partly applied?"], NOTE, size=12, bold_first=False)
    d.line([(355, 195), (398, 195)])
    d.text(362, 188, "yes", size=11)
    d.box(400, 170, 310, 50, ["refused (exit 4): finish it first,", "dbsync upgrade --expand"], NOTE, size=11,
          bold_first=False)
    d.line([(x, 220), (x, 246)])
    d.text(x + 6, 237, "no", size=11)
    d.box(145, 248, 210, 56, ["rows whose only copy is in a column or table it drops?"], NOTE, size=12,
          bold_first=False)
    d.line([(355, 276), (398, 276)])
    d.text(362, 269, "yes", size=11)
    d.box(400, 248, 310, 56, ["refused (exit 4) unless --force --reason \"...\"", "(recorded in migrations_policy_gate_overrides)"], NOTE,
          size=11, bold_first=False)
    d.line([(x, 304), (x, 330)])
    d.text(x + 6, 321, "no", size=11)
    d.box(145, 332, 210, 60, ["each downgrade(), newest first, then their ledger entries go: exit 0"],
          ("#eef7ee", EXPAND[1]), size=11, bold_first=False)
    d.box(400, 332, 310, 60, ["interrupted? dbsync check exits 2 until", "dbsync rollback runs again: it resumes"],
          NOTE, size=11, bold_first=False)
    d.line([(355, 362), (398, 362)], GREY, dash="4 3")
    return d


DIAGRAMS = {
    "rolling_upgrade.svg": rolling_upgrade,
    "rename_lifecycle.svg": rename_lifecycle,
    "check_states.svg": check_states,
    "project_layout.svg": project_layout,
    "rollback_window.svg": rollback_window,
}


def render_all() -> dict[str, str]:
    return {name: draw().render() for name, draw in DIAGRAMS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed SVG is stale; write nothing")
    parser.add_argument("--out", type=Path, default=OUT, help="the directory (default: docs/_static/diagrams)")
    args = parser.parse_args(argv)
    try:
        rendered = render_all()
    except LayoutError as exc:
        print(f"mp_diagrams: {exc}", file=sys.stderr)
        return 2
    stale = [name for name, text in rendered.items()
             if not (args.out / name).is_file() or (args.out / name).read_text(encoding="utf-8") != text]
    if args.check:
        for name in stale:
            print(f"stale: {args.out / name} (run python docs/_diagrams/mp_diagrams.py)", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (args.out / name).write_text(rendered[name], encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
