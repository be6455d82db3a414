"""The CI gate's options (issue 28): ``--jobs N``, unknown codes in ``--select``/``--ignore`` are a usage error,
``migrations-policy rule CODE`` prints the rule's page."""

from __future__ import annotations

import os
import random
import string

from migrations_policy import cli
from migrations_policy.lint import rules

from .conftest import script

SEED = int(os.environ.get("MP_GATE_SEED") or random.randrange(10 ** 9))
print(f"test_gate_options: MP_GATE_SEED={SEED}")  # also in every assertion message


def _unknown_code(rng: random.Random) -> str:
    known = rules.codes()
    while True:
        code = rng.choice(["MP", "mp", "X", ""]) + "".join(rng.choice(string.digits + "XYZ") for _ in range(rng.randint(1, 4)))
        if not code or code.upper() == "MP" or any(rule.startswith(code.upper()) for rule in known):
            continue
        return code


def test_unknown_codes_in_select_or_ignore_are_one_usage_line(tmp_path, run_lint):
    rng = random.Random(SEED)
    path = tmp_path / "r1.py"
    path.write_text(script('op.drop_column("users", "a")'))
    for _ in range(6):
        bad = _unknown_code(rng)
        known = rng.choice(rules.codes())
        option = rng.choice(["--select", "--ignore"])
        value = ",".join(rng.sample([bad, known], 2))
        run = run_lint(option, value, "--phase", "expand", path)
        assert run.code == 2, (SEED, option, value, run.out, run.err)
        lines = run.err.strip().splitlines()
        assert len(lines) == 1 and bad.upper() in lines[0] and option.lstrip("-") in lines[0], (SEED, run.err)
        assert "Traceback" not in run.err and "checked" not in run.out
        # the known code alone is accepted
        assert run_lint(option, known, "--phase", "expand", path).code in (0, 1)


def test_jobs_flag_gives_the_same_report_as_the_environment_variable(tmp_path, run_lint, monkeypatch):
    rng = random.Random(SEED)
    bodies = ['op.drop_column("users", "a")', 'op.add_column("t", sa.Column("c", sa.Integer))',
              'op.create_index("ix", "t", ["c"])', 'op.execute("UPDATE t SET c = 1")']
    for i in range(5):
        (tmp_path / f"r{i}.py").write_text(script(rng.choice(bodies), revision=f"r{i}"))
    monkeypatch.setenv("MIGRATIONS_POLICY_CACHE_DIR", "off")
    reports = [run_lint("--format", "json", "--phase", "expand", "--jobs", str(jobs), tmp_path).json
               for jobs in (1, 2, 3)]
    assert reports[0] == reports[1] == reports[2], SEED
    assert reports[0]["files"] == 5
    run = run_lint("--jobs", "0", tmp_path)
    assert run.code == 2 and "jobs" in run.err


def test_rule_prints_the_rule_s_page(capsys):
    rng = random.Random(SEED)
    for rule in rng.sample(rules.all_rules(), 4):
        code = cli.main(["rule", rng.choice([rule.code, rule.code.lower()])])
        out = capsys.readouterr().out
        assert code == 0
        assert out.splitlines()[0] == f"{rule.code} {rule.name}"
        assert rule.doc.partition("\n")[0].strip() in out and f"Default severity: {rule.severity}" in out
        for section in ("What it does", "Why is this bad"):
            if section in rule.doc:
                assert section in out
    bad = _unknown_code(rng)
    code = cli.main(["rule", bad])
    captured = capsys.readouterr()
    assert code == 2 and len(captured.err.strip().splitlines()) == 1 and bad.upper() in captured.err
