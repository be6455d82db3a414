"""Render a ``LintReport``: text, json, github (workflow commands), sarif (2.1.0), junit (XML).

``render(report, fmt)``; ``FORMATS`` lists the names.  The JSON shape is part of the
stable interface: ``{"findings": [{"path", "line", "code", "severity", "message",
"phase", "dialect", "url"}...], "files": N}`` (``url``: the rule's page), and
``"skipped": {"baseline": N, "excluded": M}`` when the adoption settings skipped scripts.
"""

from __future__ import annotations

from migrations_policy import __version__
from migrations_policy.lint.output.report import ERROR, RULES_URL, LintReport, rule_url

FORMATS = ("text", "json", "github", "sarif", "junit")
INFORMATION_URI = f"{RULES_URL}/index.rst"


def text(report: LintReport) -> str:
    """``path:line:col: CODE [severity] message (phase; dialects)`` per finding (ruff's and squawk's
    shape; the column is 1: an operation is reported at its line), then each code's page once."""
    lines = [
        f"{f.path}:{f.line}:1: {f.code} [{f.severity}] {f.message} ({f.phase}{'; ' + f.dialect if f.dialect else ''})"
        for f in report.findings
    ]
    for code in sorted({f.code for f in report.findings}):
        lines.append(f"  {code}: {rule_url(code)}")
    if report.findings:
        lines.append(f"{report.files} file(s) checked: {report.errors} error(s), {report.warnings} warning(s)"
                     + (f", {report.unreadable} unreadable" if report.unreadable else "") + _skipped(report))
    else:
        lines.append(f"{report.files} file(s) checked: no findings{_skipped(report)}")
    return "\n".join(lines)


def _skipped(report: LintReport) -> str:
    """What the adoption settings left out, in the summary line ("" when nothing)."""
    parts = []
    if report.baseline:
        parts.append(f"{report.baseline} at or before the baseline not checked (--include-baseline checks them)")
    if report.excluded:
        parts.append(f"{report.excluded} excluded")
    return f"; {', '.join(parts)}" if parts else ""


def json_(report: LintReport) -> str:
    """One finding per line, each through the C encoder (``indent=`` falls back to the
    pure-Python one: ~3x slower on thousands of findings)."""
    import json

    findings = "[]"
    if report.findings:
        findings = "[\n" + ",\n".join(f"    {json.dumps(f.to_dict())}" for f in report.findings) + "\n  ]"
    skipped = report.skipped()
    more = f',\n  "skipped": {json.dumps(skipped["skipped"])}' if skipped else ""
    return f'{{\n  "findings": {findings},\n  "files": {report.files}{more}\n}}'


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github(report: LintReport) -> str:
    lines = []
    for f in report.findings:
        level = "error" if f.severity == ERROR else "warning"
        props = f"file={_escape_property(f.path)},line={f.line},title={_escape_property(f.code)}"
        lines.append(f"::{level} {props}::{_escape_data(f'{f.code} {f.message} ({rule_url(f.code)})')}")
    return "\n".join(lines)


def sarif(report: LintReport) -> str:
    from urllib.parse import quote

    from migrations_policy.lint import rules

    all_rules = rules.all_rules()
    index = {rule.code: i for i, rule in enumerate(all_rules)}
    driver = {
        "name": "migrations-policy",
        "version": __version__,
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "fullDescription": {"text": rule.doc},
                "defaultConfiguration": {"level": rule.severity},
                "helpUri": rule_url(rule.code),
            }
            for rule in all_rules
        ],
    }
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": "error" if f.severity == ERROR else "warning",
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": quote(f.path)},  # a URI reference: '#', '%', '?', ' ' escaped
                "region": {"startLine": max(f.line, 1)},
            }}],
            "properties": {"phase": f.phase, "dialect": f.dialect},
        }
        for f in report.findings
    ]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    import json

    return json.dumps(doc)  # compact: the C encoder (indent= is ~8x slower on thousands of results)


def junit(report: LintReport) -> str:
    from xml.etree import ElementTree as ET  # only for this format

    by_path: dict[str, list] = {path: [] for path in report.paths}  # a clean file is a passing testcase
    for f in report.findings:
        by_path.setdefault(f.path, []).append(f)
    failures = sum(1 for fs in by_path.values() if any(f.severity == ERROR for f in fs))
    suites = ET.Element("testsuites", name="migrations-policy")
    suite = ET.SubElement(suites, "testsuite", name="migrations-policy lint", tests=str(max(report.files, len(by_path))),
                          failures=str(failures), errors="0")
    for path, found in sorted(by_path.items()):
        case = ET.SubElement(suite, "testcase", classname="migrations-policy", name=path)
        errors = [f for f in found if f.severity == ERROR]
        body = "\n".join(f"{f.path}:{f.line}: {f.code} [{f.severity}] {f.message}" for f in found)
        if errors:
            failure = ET.SubElement(case, "failure", message=f"{len(errors)} error finding(s)", type=errors[0].code)
            failure.text = body
        elif body:
            ET.SubElement(case, "system-out").text = body
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def statistics(report: LintReport) -> str:
    """Findings counted per code, most frequent first (``--statistics``, like ruff's)."""
    from collections import Counter

    from migrations_policy.lint import rules

    counts = Counter(f.code for f in report.findings)
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        try:
            name = rules.get(code).name
        except KeyError:
            name = ""
        lines.append(f"{count:6} {code} {name}".rstrip())
    return "\n".join(lines)


_RENDERERS = {"text": text, "json": json_, "github": github, "sarif": sarif, "junit": junit}


def render(report: LintReport, fmt: str) -> str:
    try:
        return _RENDERERS[fmt](report)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})") from None
