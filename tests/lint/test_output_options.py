"""--select / --ignore / --exit-zero / --statistics and JUnit's testcase per file (issue 13, output)."""

from __future__ import annotations

import random
from collections import Counter
from xml.etree import ElementTree

from .conftest import script

BODY = '''
op.drop_column("users", "a")
op.execute("UPDATE users SET b = 1")
op.execute("TRUNCATE logs")
op.create_foreign_key("fk", "users", "orgs", ["org_id"], ["id"])
op.add_column("users", sa.Column("n", sa.Integer, nullable=False))
'''


def _files(tmp_path):
    bad, clean = tmp_path / "bad.py", tmp_path / "clean.py"
    bad.write_text(script(BODY))
    clean.write_text(script('op.add_column("users", sa.Column("c", sa.Integer))'))
    return bad, clean


def test_select_and_ignore_filter_by_code_or_prefix(tmp_path, run_lint):
    bad, clean = _files(tmp_path)
    base = ["--format", "json", "--phase", "expand", "--dialect", "postgresql", bad, clean]
    everything = [(f["code"], f["line"]) for f in run_lint(*base).json["findings"]]
    codes = sorted({code for code, _ in everything})
    assert len(codes) >= 4
    rng = random.Random(13)
    for _ in range(12):
        select = rng.sample(codes + ["MP1", "MP10"], rng.randint(0, 2))
        ignore = rng.sample(codes + ["MP11"], rng.randint(0, 2))
        args = [a for code in select for a in ("--select", code.lower())] + [a for code in ignore for a in ("--ignore", code)]
        run = run_lint(*args, *base)
        expected = [(c, l) for c, l in everything
                    if (not select or c.startswith(tuple(select))) and not (ignore and c.startswith(tuple(ignore)))]
        assert [(f["code"], f["line"]) for f in run.json["findings"]] == expected, (select, ignore)
        assert run.code == (1 if expected else 0)
    run = run_lint("--select", "MP101,MP106", *base)
    assert {f["code"] for f in run.json["findings"]} == {"MP101", "MP106"}


def test_exit_zero_and_statistics(tmp_path, run_lint):
    bad, clean = _files(tmp_path)
    base = ["--phase", "expand", "--dialect", "postgresql", bad, clean]
    counts = Counter(f["code"] for f in run_lint("--format", "json", *base).json["findings"])
    assert run_lint(*base).code == 1 and run_lint("--exit-zero", *base).code == 0
    broken = tmp_path / "broken.py"
    broken.write_text("revision = 'x'\nthis is not python\n")
    assert run_lint("--exit-zero", *base, broken).code == 0
    run = run_lint("--statistics", *base)
    lines = run.out.strip().splitlines()
    assert [(int(line.split()[0]), line.split()[1]) for line in lines] == sorted(
        ((n, c) for c, n in counts.items()), key=lambda item: (-item[0], item[1]))
    assert "drop-in-expand" in run.out


def test_junit_has_a_testcase_per_file_clean_ones_passing(tmp_path, run_lint):
    bad, clean = _files(tmp_path)
    run = run_lint("--format", "junit", "--phase", "expand", clean)
    suite = ElementTree.fromstring(run.out.split("?>", 1)[1]).find("testsuite")
    (case,) = suite.findall("testcase")
    assert case.get("name") == str(clean) and case.find("failure") is None
    run = run_lint("--format", "junit", "--phase", "expand", bad, clean)
    suite = ElementTree.fromstring(run.out.split("?>", 1)[1]).find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")] == sorted([str(bad), str(clean)])
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
