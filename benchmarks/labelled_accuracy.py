"""How right the linter is on hand-labelled real scripts (issue 28): unsafe scripts caught, false positives.

    python benchmarks/labelled_accuracy.py [--cache DIR] [--labels FILE] [--with-deps PYTHON] [--show]

``benchmarks/real_labels.tsv`` names revision scripts of real projects by their path inside the
project's wheel, each labelled ``unsafe`` or ``safe`` as an expand script on a live PostgreSQL (read
against ``docs/rules``), with a one-line reason.  The wheels are the ones ``real_histories.py``
downloads (``pip download --no-deps``, extracted in the same cache directory); nothing of them is
copied into this repository.  Each labelled script is linted as CI would (``migrations-policy lint
--phase expand --dialect postgresql --format json``, from the extracted wheel, without the project's
dependencies unless ``--with-deps PYTHON``), and judged:

* *flagged*: at least one ``MP1xx`` finding (a rule of the policy);
* an unsafe script flagged is *caught*, one not flagged is *missed* (``MP000``: no verdict, missed too);
* a safe script flagged is a *false positive*.

Prints per tree and in total: unsafe / caught / missed, safe / false positives, MP000, the caught rate
(goal >= 95 %) and every miss and false positive with the codes found, so that each can be looked at.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_histories  # noqa: E402 - the same cache of wheels

HERE = Path(__file__).resolve().parent


def _labels(path: Path) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            tree, script, revision, label, reason = line.split("\t")
            if label not in ("safe", "unsafe"):
                sys.exit(f"{path}: {script}: label must be safe or unsafe, not {label!r}")
            rows.append((tree, script, revision, label, reason))
    return rows


def _lint(paths: list[Path], cwd: Path, python: str) -> dict:
    env = {**os.environ, "MIGRATIONS_POLICY_CACHE_DIR": "off",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(real_histories.ROOT), os.environ.get("PYTHONPATH")]))}
    run_in = cwd if python == sys.executable else Path(tempfile.mkdtemp(prefix="mp-labelled-cwd-"))
    proc = subprocess.run([python, "-m", "migrations_policy.cli", "lint", "--format", "json", "--phase", "expand",
                           "--dialect", "postgresql", *map(str, paths)], cwd=run_in, env=env, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode not in (0, 1, 2):
        sys.exit(f"lint failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", help="where real_histories.py downloads and extracts the wheels")
    parser.add_argument("--labels", default=str(HERE / "real_labels.tsv"))
    parser.add_argument("--with-deps", metavar="PYTHON", help="lint with this interpreter (projects installed)")
    parser.add_argument("--show", action="store_true", help="also print the codes found for every script")
    args = parser.parse_args(argv)
    cache = real_histories._cache_dir(args.cache)
    (cache / "wheels").mkdir(parents=True, exist_ok=True)
    python = args.with_deps or sys.executable
    by_tree: dict[str, list] = collections.defaultdict(list)
    for row in _labels(Path(args.labels)):
        by_tree[row[0]].append(row)
    totals = collections.Counter()
    problems = []
    print(f"{'tree':22} {'unsafe':>6} {'caught':>6} {'missed':>6} {'safe':>5} {'FP':>3} {'MP000':>5}")
    for tree, rows in by_tree.items():
        wheel = real_histories._wheel(tree, cache / "wheels")
        if wheel is None:
            print(f"{tree:22} (no wheel)")
            continue
        root = real_histories._extract(wheel, cache / "extracted")
        paths = [root / script for _, script, _, _, _ in rows]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            sys.exit(f"{tree}: labelled scripts not in {wheel.name}: {', '.join(missing[:3])}")
        report = _lint(paths, root, python)
        codes: dict[str, set[str]] = collections.defaultdict(set)
        for finding in report["findings"]:
            codes[str(Path(finding["path"]).resolve())].add(finding["code"])
        count = collections.Counter()
        for (_, script, revision, label, reason), path in zip(rows, paths):
            found = codes.get(str(path.resolve()), set())
            flagged = any(code.startswith("MP1") for code in found)
            count["MP000"] += "MP000" in found
            count[label] += 1
            if label == "unsafe":
                count["caught" if flagged else "missed"] += 1
            elif flagged:
                count["fp"] += 1
            wrong = (label == "unsafe") != flagged
            if wrong or args.show:
                kind = "MISSED" if label == "unsafe" and not flagged else "FALSE POSITIVE" if wrong else label
                problems.append(f"  {kind:14} {tree}: {script} ({revision}): {','.join(sorted(found)) or '-'}"
                                f"  -- labelled {label}: {reason}")
        totals.update(count)
        print(f"{tree:22} {count['unsafe']:6} {count['caught']:6} {count['missed']:6} {count['safe']:5} "
              f"{count['fp']:3} {count['MP000']:5}", flush=True)
    rate = 100.0 * totals["caught"] / max(1, totals["unsafe"])
    print(f"{'total':22} {totals['unsafe']:6} {totals['caught']:6} {totals['missed']:6} {totals['safe']:5} "
          f"{totals['fp']:3} {totals['MP000']:5}")
    print(f"caught {totals['caught']} of {totals['unsafe']} unsafe scripts ({rate:.1f} %; goal >= 95 %), "
          f"{totals['fp']} false positive(s) among {totals['safe']} safe ones (goal 0)")
    for line in problems:
        print(line)
    return 0 if rate >= 95.0 and not totals["fp"] else 1


if __name__ == "__main__":
    sys.exit(main())
