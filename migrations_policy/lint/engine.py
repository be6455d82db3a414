"""Lint one revision script: load it, record ``upgrade()`` per dialect, ask the policy, apply rules.

``analyse(path, phase, options) -> list[Hit]`` is the whole pipeline for one file.
It imports alembic (through ``recorder`` / ``astscan``) only when called, so that a
run answered entirely from the cache never imports it.  Hits are dialect-merged
(the same problem on several dialects is one hit naming them all) and already
filtered through the file's inline ignores.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from migrations_policy.policy.script import annotate
from migrations_policy.lint import rules
from migrations_policy.lint.script.ignores import find_ignores
from migrations_policy.lint.judge import judge_dialects, signature
from migrations_policy.lint.offline.loader import (LoadError,
    line_in,
    compile_script,
    load_module,
    needs_database,
    refuses,
    one_line,
    read_source,
    sandbox)
from migrations_policy.lint.options import Options

UNLOADABLE, OFFLINE, IGNORE_NO_REASON, UNUSED_IGNORE, UNKNOWN_OPERATION = "MP000", "MP001", "MP002", "MP003", "MP005"
#: A script that never mentions these runs the same on every dialect: record it once.
DIALECT_DEPENDENT = re.compile(r"dialect|get_bind|get_context|bind\b|engine")


@dataclass(frozen=True)
class Hit:
    """A finding before severity and path are attached (what the cache stores)."""

    line: int
    code: str
    message: str
    dialect: str = ""

    def to_list(self) -> list:
        """What the cache stores: the fields and the rule's default severity (a cached run imports no rule)."""
        return [self.line, self.code, self.message, self.dialect, _default_severity(self.code)]


def _default_severity(code: str) -> str:
    if code == UNLOADABLE:
        return "error"  # unreadable input is always an error (exit status 2)
    try:
        return rules.get(code).severity
    except KeyError:
        return "error"


def _record_all(module, source: str, upgrade, path: Path, options: Options, hits: list[Hit], dependent: bool,
                notes=None):
    from migrations_policy.lint.offline import recorder
    from migrations_policy.lint.offline.missing import MissingError, Notes
    from migrations_policy.policy.sql import noting_divergence

    notes = notes or Notes()
    filename = str(path)
    results: dict[str, list] = {}
    refused: dict[str, tuple[int, str]] = {}  # dialect -> (line, error) of each dialect the script refuses itself
    tree = None  # parsed only for the source fallback
    # Recorded once for every dialect unless the script names its dialect, or reads SQL that one of them
    # reads differently (``$$`` quotes on PostgreSQL only): then each dialect's own recording.
    with noting_divergence(*options.dialects) as diverged:
        for dialect in options.dialects:
            if results and not (dependent or diverged()):
                results[dialect] = next(iter(results.values()))
                continue
            executed = None  # what ran offline, when it ran but cannot be trusted alone
            touched = len(notes.touched)
            notes.strict = True
            try:
                recording, exc = recorder.run_offline(upgrade, dialect, filename, options.alembic_ini)
            finally:
                notes.strict = False
            if isinstance(exc, MemoryError):
                raise exc
            dependent = dependent or recording.dialect_asked  # a helper may ask what the script does not mention
            if refuses(exc, filename) and not (len(notes.touched) > touched or notes.failed or needs_database(exc)
                                               or recording.inspected or recording.mode_asked):
                # (only where its error is its own: else, as below, its source is read) nothing of that run is judged
                refused[dialect] = (line_in(exc, filename), one_line(exc))
                continue
            _unknown_operations(recording, hits)
            if isinstance(exc, ImportError) and not len(notes.touched) > touched:
                # an import inside upgrade() of a package that is not installed: its source is read
                line = line_in(exc, filename)
                reason = f"upgrade() could not import what it needs ({one_line(exc)})"
            elif len(notes.touched) > touched or isinstance(exc, MissingError):
                # It used what its module could not import: what it did with it is unknown; its source is read.
                line = line_in(exc, filename) if exc is not None else 0
                used = notes.touched[touched] if len(notes.touched) > touched else "an object"
                reason = (f"upgrade() uses {used}, which could not be imported or defined offline "
                          f"({notes.describe() or 'not installed'})")
            elif exc is not None and notes.failed:
                # It raised while its module is incomplete: a placeholder may have reached a function that checks
                # its argument's type without touching it (``os.getenv(MISSING_NAME)``), so the error is not known
                # to be the script's own.  Its source is read, as for any use of what could not be imported.
                line = line_in(exc, filename)
                reason = f"upgrade() raised {one_line(exc)} while its module is incomplete ({notes.describe()})"
            elif exc is not None:
                line = line_in(exc, filename)
                # After an (empty) inspection, the script's own error may come from the empty answers.
                if not (needs_database(exc) or recording.inspected or recording.mode_asked):
                    raise LoadError(f"upgrade() raised {one_line(exc)}", line) from None
                reason = f"upgrade() cannot run offline ({one_line(exc)})"
            else:
                if not (recording.inspected or recording.mode_asked):
                    results[dialect] = recording.ops
                    continue
                # Offline the database is empty: "if 'x' in columns: drop x" took one branch only; a script that asks
                # is_offline_mode() ran its offline path only.  Read every branch.
                line, executed = recording.inspected or recording.mode_asked, recording.ops
                reason = ("upgrade() inspected the database, which is empty offline" if recording.inspected else
                          "upgrade() asked context.is_offline_mode(): only its offline path ran")
            if options.url:
                from migrations_policy.lint.scratch.url import record_on_scratch_database

                results[dialect] = record_on_scratch_database(upgrade, options.url, filename)
                continue
            try:
                from migrations_policy.lint.offline import astscan  # only for scripts that cannot run offline

                tree = tree if tree is not None else ast.parse(source, filename)
                scan = astscan.scan(module, tree, dialect, filename, options.alembic_ini)
            except MemoryError:
                raise
            except Exception as scan_exc:  # noqa: BLE001 - the source could not be followed either
                results[dialect] = executed or []
                outcome = "its offline run (empty database) was linted" if executed is not None else "NOT linted"
                hits.append(Hit(line or 1, OFFLINE, f"{reason} and its source could not be followed "
                                f"({one_line(scan_exc)}): {outcome}; run with --replay (or --url SCRATCH_DB)", dialect))
                continue
            results[dialect] = scan.recording.ops
            _unknown_operations(scan.recording, hits)
            message = (f"{reason}; linted from source instead"
                       f"{f', {len(set(scan.unevaluated))} op call(s) read from literals only' if scan.unevaluated else ''}"
                       "; run with --replay (or --url SCRATCH_DB) to execute it")
            hits.append(Hit(line or 1, OFFLINE, message, dialect))
    if refused and not results:  # every dialect linted is refused: nothing could be analysed
        line, error = next(iter(refused.values()))
        raise LoadError(f"upgrade() raised {error}", line)
    for dialect, (line, error) in refused.items():
        hits.append(Hit(line or 1, OFFLINE, f"upgrade() refuses {dialect} itself (it raised {error}): not linted for "
                        f"{dialect}, linted for {', '.join(results)}", dialect))
    return results


def _unknown_operations(recording, hits: list[Hit]) -> None:
    """``MP005`` for each call of an operation the linter does not know (once per line and operation)."""
    for what, line in dict.fromkeys(recording.unknown):
        message = (f"{what} is not an operation the linter knows: what it does is not checked "
                   "(name the module that registers it in the lint_plugins setting)")
        hit = Hit(line or 1, UNKNOWN_OPERATION, message)
        if hit not in hits:
            hits.append(hit)


def _apply_rules(results: dict[str, list], phase: str, options: Options) -> list[tuple]:
    """(line, code, headline, dialect, note, alternative) for every rule that fires."""
    found = []
    context = options.context
    shared: dict[int, list[str]] = {}  # dialects that share one recording are judged together
    for dialect, recorded in results.items():
        shared.setdefault(id(recorded), []).append(dialect)
    for dialect, recorded in results.items():
        dialects = shared.pop(id(recorded), None)
        if dialects is None:
            continue
        dialects = tuple(dialects)
        ops = annotate([op for op, _ in recorded])
        for op, (_, line) in zip(ops, recorded):
            for rule, headline, verdict in judge_dialects(op, dialects, context, phase, signature(op)):
                alternative = verdict.alternative if rule.alternative is None else rule.alternative
                found.append((line, rule.code, headline, verdict.dialect, verdict.effect.note, alternative))
    rank = {dialect: i for i, dialect in enumerate(results)}
    found.sort(key=lambda hit: rank[hit[3]])  # dialect by dialect, ops in order (the merged messages' order)
    return found


def _merge_dialects(found: list[tuple], order: tuple[str, ...]) -> list[Hit]:
    """One hit per (line, code, headline): the dialects' explanations joined into its message."""
    groups: dict[tuple, dict[tuple, list[str]]] = {}
    for line, code, headline, dialect, note, alternative in found:
        details = groups.setdefault((line, code, headline), {})
        dialects = details.setdefault((note, alternative), [])
        if dialect not in dialects:
            dialects.append(dialect)
    rank = {d: i for i, d in enumerate(order)}
    hits = []
    for (line, code, headline), details in sorted(groups.items()):
        parts, alternatives = [headline], {alt for _, alt in details if alt}
        for (note, alternative), dialects in details.items():
            explained = note + (f" (instead: {alternative})" if alternative and len(alternatives) > 1 else "")
            if explained:
                parts.append(f"{','.join(dialects)}: {explained}")
        message = "; ".join(parts) + (f" (instead: {alternatives.pop()})" if len(alternatives) == 1 else "")
        every = sorted({d for ds in details.values() for d in ds}, key=lambda d: rank.get(d, 99))
        hits.append(Hit(line, code, message, ",".join(every)))
    return hits


def _apply_ignores(source: str, hits: list[Hit]) -> list[Hit]:
    ignores = find_ignores(source)
    if not ignores:
        return hits
    kept = []
    for hit in hits:
        covering = [ig for ig in ignores if ig.covers(hit.line, hit.code)]
        for ignore in covering:
            ignore.used.add(hit.code)
        if not covering:
            kept.append(hit)
    for ignore in ignores:
        codes = ",".join(sorted(ignore.codes))
        if not ignore.reason:
            kept.append(Hit(ignore.line, IGNORE_NO_REASON, f"ignore[{codes}] needs a reason after the brackets; it suppresses nothing"))
        elif ignore.codes - ignore.used:
            unused = ",".join(sorted(ignore.codes - ignore.used))
            kept.append(Hit(ignore.line, UNUSED_IGNORE, f"unused ignore[{unused}]: no such finding on this line or the next"))
    return sorted(kept, key=lambda h: (h.line, h.code))


def analyse(path: Path, phase: str, options: Options, source: str | None = None, record=None,
            code=None) -> list[Hit]:
    """Every finding of the script at *path* linted as *phase* (see module docstring).

    *record* replaces how ``upgrade()`` is recorded (``lint --replay`` runs it on a database): called as
    ``record(module, source, upgrade, path, options, hits, dependent)``, it returns ``{dialect: ops}``."""
    try:
        source = read_source(path) if source is None else source
        code = compile_script(source, path) if code is None else code  # *code*: compiled by the caller
        hits: list[Hit] = []
        from migrations_policy.lint.offline.missing import Notes
        from migrations_policy.lint.offline.recorder import recording

        notes = Notes()
        with sandbox():
            # loaded as alembic loads it: alembic.context and alembic.op in place (context.config read at import)
            with recording(options.dialects[0], str(path), ini=options.alembic_ini):
                module = load_module(code, path, source, notes)
            upgrade = getattr(module, "upgrade", None)
            if not callable(upgrade):
                raise LoadError("no upgrade() function in the script")
            dependent = bool(DIALECT_DEPENDENT.search(source)) or bool(notes.failed)
            if record is None:
                results = _record_all(module, source, upgrade, path, options, hits, dependent, notes)
            else:  # lint --replay: what could not be imported raises when used (missing.MissingError)
                notes.strict = True
                try:
                    results = record(module, source, upgrade, path, options, hits, dependent)
                finally:
                    notes.strict = False
    except LoadError as exc:
        return [Hit(exc.line, UNLOADABLE, str(exc))]
    except RecursionError:
        return [Hit(1, UNLOADABLE, "maximum recursion depth exceeded while running the script")]
    except MemoryError as exc:
        limit = f"the memory limit of {options.memory_limit} MiB (lint_memory_limit)" if options.memory_limit else "memory"
        return [Hit(line_in(exc, str(path)) or 1, UNLOADABLE, f"exceeded {limit} while running the script")]
    return judged(source, hits, results, phase, options)


def judged(source: str, hits: list[Hit], results: dict[str, list], phase: str, options: Options) -> list[Hit]:
    """The findings of a script from what was recorded of it (``{dialect: [(operation, line)]}``, one list shared
    by the dialects recorded once) and the *hits* found on the way: the one path after the operations, for a
    script that ran (``analyse``) and one read without running (``lint.static``)."""
    hits = _same_on_every_dialect(hits)
    hits.extend(_merge_dialects(_apply_rules(results, phase, options), options.dialects))
    return _apply_ignores(source, sorted(hits, key=lambda h: (h.line, h.code)))


def _same_on_every_dialect(hits: list[Hit]) -> list[Hit]:
    """One hit for the same (line, code, message) on several dialects, naming them all (``MP001``)."""
    merged: dict[tuple, list[str]] = {}
    for hit in hits:
        merged.setdefault((hit.line, hit.code, hit.message), []).append(hit.dialect)
    return [Hit(line, code, message, ",".join(d for d in dialects if d)) for (line, code, message), dialects
            in merged.items()]
