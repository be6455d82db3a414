"""Lint the alembic histories of real projects, as published in their wheels (issues 13, 28).

    python benchmarks/real_histories.py [--cache DIR] [--project NAME ...] [--dialect D ...] [--timeout S]
                                        [--with-deps PYTHON] [--after-first] [--compare-jobs]

Downloads each project's wheel (``pip download --no-deps``) into the cache directory
(default ``$XDG_CACHE_HOME/migrations_policy/real_histories`` or ``~/.cache/...``),
extracts it there, finds its alembic version directories (``versions/`` holding
``revision =`` scripts) and lints each whole tree with ``migrations-policy lint``
in a fresh process: cold (an empty cache) and warm (the cache of the cold run), and with
``--compare-jobs`` once more cold with one worker against two.  ``--with-deps PYTHON``: the
same runs again with the interpreter of a virtualenv where the projects (and so their
dependencies) are installed -- e.g. ``pip install mlflow-skinny dagster`` and this checkout --
for the "with deps" columns.  ``--after-first`` (implied by ``--with-deps``): each tree's first script that must run
(one ``lint.static`` does not read) is also linted alone, cold, and the time per script after the first is printed, ``(T(all) - T(first)) / (n - 1)``:
what a run pays once (start, imports, the fork server's pre-import of the installed packages) is left out.
Checks, per tree:

* no crash: the exit code is 0, 1 or 2 (never 3, the linter's internal error) and the
  JSON report parses;
* no hang: each run finishes within ``--timeout`` seconds;
* every file a verdict: the report counts as many files as the tree has scripts
  declaring ``revision =`` (none skipped);
* the same report cold and warm (and with one and two workers).

Prints per tree: scripts, MP000 and MP001 counts, the MP000 rate, total findings, the cold
time per script and the warm time, without and with the dependencies; the total MP000 rate;
and the most frequent MP000 reasons.  Exits 1 if a check failed.  Nothing downloaded is
committed anywhere: it stays in the cache directory.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

#: The trees issue 28 was measured on (11 histories in these 11 wheels; mlflow-skinny holds two).
PROJECTS = ["apache-superset", "ckan", "dagster", "mlflow-skinny", "neutron", "apache-airflow-core", "zenml",
            "open-webui", "aim", "apache-airflow-providers-fab", "ironic"]
_REVISION = re.compile(r"^revision\s*(?::[^=\n]+)?=", re.MULTILINE)
ROOT = Path(__file__).resolve().parent.parent


def _cache_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "migrations_policy" / "real_histories"


def _wheel(project: str, wheels: Path) -> Path | None:
    stem = project.replace("-", "_").lower()
    found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(stem + "-")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(wheels), project], check=False, capture_output=True, timeout=600)
        found = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(stem + "-")]
    return max(found, default=None)


def _extract(wheel: Path, into: Path) -> Path:
    target = into / wheel.stem
    if not (target / ".extracted").exists():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        (target / ".extracted").write_text("")
    return target


def _trees(root: Path) -> list[Path]:
    """The outermost ``versions`` directories holding revision scripts (at any depth below them)."""
    trees = []
    for directory in sorted(root.rglob("versions")):
        if directory.is_dir() and not any(t in directory.parents for t in trees) and _scripts(directory):
            trees.append(directory)
    return trees


def _histories(args, cache: Path):
    """(tree, root, name, scripts) of every alembic history in the wheels of the projects asked for (a project whose
    wheel could not be downloaded is said so and skipped)."""
    for project in args.project or PROJECTS:
        wheel = _wheel(project, cache / "wheels")
        if wheel is None:
            print(f"{project:44} (no wheel downloaded)")
            continue
        root = _extract(wheel, cache / "extracted")
        for tree in _trees(root):
            yield tree, root, str(tree.relative_to(root.parent)), _scripts(tree)


def _scripts(tree: Path) -> list[Path]:
    return [p for p in sorted(tree.rglob("*.py"))
            if "__pycache__" not in p.parts and _REVISION.search(p.read_text(encoding="utf-8", errors="replace"))]


def _lint(tree: Path | list[Path], cwd: Path, jobs: int, dialects: list[str], timeout: float, cache: str = "off",
          python: str = sys.executable) -> tuple[dict | None, float, str]:
    env = {**os.environ, "MIGRATIONS_POLICY_LINT_JOBS": str(jobs), "MIGRATIONS_POLICY_CACHE_DIR": cache,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [python, "-m", "migrations_policy.cli", "lint", "--format", "json",
               *[arg for d in dialects for arg in ("--dialect", d)],
               *([str(tree)] if isinstance(tree, Path) else [str(path) for path in tree])]
    start = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start, f"HANG (> {timeout:g} s)"
    elapsed = time.monotonic() - start
    if proc.returncode not in (0, 1, 2):
        return None, elapsed, f"CRASH exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    try:
        return json.loads(proc.stdout), elapsed, ""
    except ValueError:
        return None, elapsed, f"CRASH: no JSON report (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"


def _measure(tree: Path, root: Path, scripts: list[Path], args, python: str) -> tuple[dict | None, list, list[str]]:
    """Cold then warm (a fresh cache directory), and with --compare-jobs cold with 1 and 2 workers.

    Without the dependencies the run's directory is the extracted wheel (the project's own package imports from
    there, as in its checkout, its dependencies do not); with them (*python* is not this interpreter), an empty
    directory: the project and its dependencies import from that virtualenv."""
    import tempfile

    if python != sys.executable:
        root = Path(tempfile.mkdtemp(prefix="mp-real-cwd-"))

    with tempfile.TemporaryDirectory(prefix="mp-real-cache-") as cache:
        cold = _lint(tree, root, 2, args.dialect or [], args.timeout, cache, python)
        warm = _lint(tree, root, 2, args.dialect or [], args.timeout, cache, python)
    runs = [cold, warm]
    problems = [problem for _, _, problem in runs if problem]
    report = cold[0]
    if not problems and cold[0] != warm[0]:
        problems.append("DIFFERENT results cold and warm")
    if args.compare_jobs and not problems:
        one = _lint(tree, root, 1, args.dialect or [], args.timeout, "off", python)
        if one[2] or one[0] != report:
            problems.append(one[2] or "DIFFERENT results with 1 and 2 workers")
    if report is not None and report["files"] != len(scripts):
        problems.append(f"{len(scripts) - report['files']} script(s) without a verdict")
    if args.after_first and len(scripts) > 1:
        # the first script alone, cold: what every run pays once (start, imports, the fork server's pre-import);
        # then (T(all) - T(first)) / (n - 1) is the time of each further script.  The first script that must run
        # (one lint.static does not read): a plain first script would leave the worker's start and pre-import
        # to the "further" scripts
        first = _lint([_first_run(scripts, args)], root, 2, args.dialect or [], args.timeout, "off", python)
        if first[2]:
            problems.append(f"first script alone: {first[2]}")
        runs.append(first)
    return report, runs, problems


def _first_run(scripts: list[Path], args) -> Path:
    """The first of *scripts* that ``lint.static`` does not read (it runs in the worker); else the first."""
    sys.path.insert(0, str(ROOT))
    from migrations_policy.lint.options import Options
    from migrations_policy.lint.static import reader

    options = Options(dialects=tuple(args.dialect or ("postgresql", "mysql", "sqlite")))
    return next((script for script in scripts if reader.analyse(script, "expand", options) is None), scripts[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", help="where wheels are downloaded and extracted")
    parser.add_argument("--project", action="append", help=f"project to lint (default: {' '.join(PROJECTS)})")
    parser.add_argument("--dialect", action="append", help="dialects (default: the linter's, all three)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take before it is a hang")
    parser.add_argument("--with-deps", metavar="PYTHON",
                        help="also lint with this interpreter (a virtualenv where the projects are installed)")
    parser.add_argument("--compare-jobs", action="store_true", help="also check 1 worker gives what 2 give")
    parser.add_argument("--after-first", action="store_true",
                        help="also lint each tree's first script alone (cold) and print the time per script after "
                             "the first: (T(all) - T(first)) / (n - 1), both cold (implied by --with-deps)")
    parser.add_argument("--static-only", action="store_true",
                        help="only count the scripts lint.static reads without running them, and check each "
                             "one's findings equal running it (in this process)")
    args = parser.parse_args(argv)
    cache = _cache_dir(args.cache)
    (cache / "wheels").mkdir(parents=True, exist_ok=True)
    print(f"wheels and extracted trees in {cache}")
    if args.static_only:
        return _static_only(args, cache)
    pythons = [("no deps", sys.executable)] + ([("with deps", args.with_deps)] if args.with_deps else [])
    args.after_first = args.after_first or bool(args.with_deps)
    failures = 0
    header = (f"{'tree':44} {'deps':9} {'scripts':>7} {'MP000':>5} {'MP000%':>6} {'MP001':>5} {'findings':>8} "
              f"{'cold s':>7} {'ms/script':>9} {'warm s':>6} {'1st s':>6} {'ms/next':>7}  checks")
    print(header)
    reasons_by_tree = {}
    totals = {label: [0, 0, 0.0, 0.0, 0] for label, _ in pythons}  # scripts, MP000, cold s, after-first s and scripts
    for tree, root, name, scripts in _histories(args, cache):
        for label, python in pythons:
            report, runs, problems = _measure(tree, root, scripts, args, python)
            codes = collections.Counter(f["code"] for f in (report or {"findings": []})["findings"])
            unloadable = len({f["path"] for f in (report or {"findings": []})["findings"] if f["code"] == "MP000"})
            rate = 100.0 * unloadable / max(1, len(scripts))
            first, after = "", ""
            if len(runs) > 2 and not runs[2][2]:
                first, later = f"{runs[2][1]:6.2f}", runs[0][1] - runs[2][1]
                after = f"{1000 * later / (len(scripts) - 1):7.1f}"
                totals[label][3] += later
                totals[label][4] += len(scripts) - 1
            print(f"{name[-44:]:44} {label:9} {len(scripts):7} {unloadable:5} {rate:6.1f} {codes['MP001']:5} "
                  f"{sum(codes.values()):8} {runs[0][1]:7.1f} {1000 * runs[0][1] / max(1, len(scripts)):9.0f} "
                  f"{runs[1][1]:6.2f} {first:>6} {after:>7}  {'; '.join(problems) or 'ok'}", flush=True)
            failures += bool(problems)
            totals[label][0] += len(scripts)
            totals[label][1] += unloadable
            totals[label][2] += runs[0][1]
            if report:
                reasons = collections.Counter(f["message"][:110]
                                              for f in report["findings"] if f["code"] == "MP000")
                reasons_by_tree[f"{name} ({label})"] = reasons.most_common(3)
    for label, (scripts, unloadable, seconds, later, following) in totals.items():
        print(f"total {label}: {scripts} scripts, MP000 {unloadable} ({100.0 * unloadable / max(1, scripts):.1f}%), "
              f"cold {seconds:.1f} s ({1000 * seconds / max(1, scripts):.0f} ms per script)"
              + (f", {1000 * later / following:.1f} ms per script after each tree's first" if following else ""))
    print("\nmost frequent MP000 reasons:")
    for name, reasons in reasons_by_tree.items():
        for reason, count in reasons:
            print(f"  {name.split('/')[0][:40]:40} {count:4}  {reason}")
    return 1 if failures else 0


def _static_only(args, cache: Path) -> int:
    """Per tree: the scripts ``lint.static`` reads (plain: no worker, no alembic import), and whether each one's
    findings equal ``engine.analyse``'s, which runs it offline (as expand, on the dialects linted)."""
    sys.path.insert(0, str(ROOT))
    from migrations_policy.lint import engine
    from migrations_policy.lint.options import Options
    from migrations_policy.lint.static import reader as static

    options = Options(dialects=tuple(args.dialect or ("postgresql", "mysql", "sqlite")))
    print(f"{'tree':44} {'scripts':>7} {'static':>6} {'static%':>7} {'differ':>6} {'ms/script':>9}")
    total = [0, 0, 0]
    for _, _, name, scripts in _histories(args, cache):
        read, differ, seconds = 0, [], 0.0
        for script in scripts:
            start = time.process_time()
            found = static.analyse(script, "expand", options)
            seconds += time.process_time() - start
            if found is None:
                continue
            read += 1
            if found != engine.analyse(script, "expand", options):
                differ.append(script.name)
        print(f"{name[-44:]:44} {len(scripts):7} {read:6} {100.0 * read / max(1, len(scripts)):7.1f} "
              f"{len(differ):6} {1000 * seconds / max(1, len(scripts)):9.2f}  {' '.join(differ[:5])}", flush=True)
        total[0] += len(scripts)
        total[1] += read
        total[2] += len(differ)
    print(f"total: {total[0]} scripts, {total[1]} read by lint.static ({100.0 * total[1] / max(1, total[0]):.1f}%), "
          f"{total[2]} with other findings than running them")
    return 1 if total[2] else 0


if __name__ == "__main__":
    sys.exit(main())
