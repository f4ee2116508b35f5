"""What the kit really judges, clause by clause: ``recoverykit contract coverage``.

Everything here is generated from the code, not kept by hand, so it cannot drift from what runs:

- **checks**: every function that can emit a verdict for a clause: the history checks (``checker.all_checks``),
  each scenario's drive function and the lockstep machine, found by reading their source for the clause ids
  they name (a check that names a clause is one that can return a verdict for it);
- **evidence**: ``kit`` when some check of the clause rests on evidence the kit owns (``@kit_evidence``),
  else ``self-reported``;
- **killing mutants**: ``conformance/proofs.json``, which CI keeps true (tests/test_mutants.py);
- **verdict on the reference runtime**: from a certify run (by default a fresh one of the bundled runtime).

A clause counts as *judged* only when a check names it, the reference runtime's verdict is valid (or
invalid) and a mutant proves the check can fail; valid with no killing mutant is *unproven*. A clause is
*observable from outside* when the catalogue lists a method other than the model for it (lockstep, chaos or
history) and ``contract.NOT_JUDGED`` does not say that no outside check can tell it held: model-only clauses are
invariants of the specification, not of a runtime. A clause the kit does not judge carries the reason from
``NOT_JUDGED`` (``why_not_judged``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from recoverykit.conformance.checker import KIT, SELF_REPORTED, all_checks
from recoverykit.conformance.proofs import proven
from recoverykit.model.contract import CLAUSES, NOT_JUDGED, Method

_IDS = {c.id for c in CLAUSES}


def _named(fn: Callable[..., Any]) -> set[str]:
    """Clause ids written in a function's source, or in the same module's functions and constants it uses
    (the clauses it can return a verdict for)."""
    try:
        module = inspect.getmodule(fn)
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    consts = {t.id: n for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    try:
        start = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return set()
    found: set[str] = set()
    seen: set[str] = set()
    todo: list[ast.AST] = [start]
    while todo:
        node = todo.pop()
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and n.value in _IDS:
                found.add(n.value)
            elif isinstance(n, ast.Name) and n.id not in seen and (n.id in defs or n.id in consts):
                seen.add(n.id)
                todo.append(defs.get(n.id) or consts[n.id])
    return found


def _module_named(module: Any) -> set[str]:
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in _IDS}


def registry() -> dict[str, list[dict[str, str]]]:
    """clause id -> the checks that can judge it: {"check", "kind", "evidence"}."""
    from recoverykit.conformance import lockstep
    from recoverykit.conformance.scenarios import all_scenarios

    out: dict[str, list[dict[str, str]]] = {}

    def add(clause_ids: set[str], name: str, kind: str, evidence: str) -> None:
        for c in sorted(clause_ids):
            entry = {"check": name, "kind": kind, "evidence": evidence}
            if entry not in out.setdefault(c, []):
                out[c].append(entry)

    for fn in all_checks():
        add(_named(fn), f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}", "history",
            getattr(fn, "evidence", SELF_REPORTED))
    for scenario in all_scenarios():
        add(_named(scenario.drive), f"scenario {scenario.id}", "scenario", SELF_REPORTED)
    add(_module_named(lockstep), "lockstep machine", "lockstep", SELF_REPORTED)
    return out


def observable(c: Any) -> bool:
    outside = NOT_JUDGED[c.id].observable if c.id in NOT_JUDGED else True
    return outside and any(m in c.methods for m in (Method.LOCKSTEP, Method.CHAOS, Method.HISTORY))


def coverage(verdicts: dict[str, str]) -> dict[str, Any]:
    """The coverage document: per clause and per profile; ``verdicts`` is clause -> verdict on the reference."""
    checks, proofs = registry(), proven()
    rows, totals = [], {}
    for c in CLAUSES:
        mine = checks.get(c.id, [])
        verdict = verdicts.get(c.id, "unknown")
        killing = list(proofs.get(c.id, ()))
        evidence = (KIT if any(x["evidence"] == KIT for x in mine) else SELF_REPORTED) if mine else None
        judged = bool(mine) and verdict in ("valid", "invalid") and bool(killing)
        status = ("judged" if judged else "unproven" if mine and verdict == "valid" else
                  "not exercised" if mine else "no check")
        rows.append({"clause": c.id, "profile": c.profile.value, "observable": observable(c),
                     "checks": mine, "evidence": evidence, "killing_mutants": killing, "reference_verdict": verdict,
                     "status": status, "why_not_judged": NOT_JUDGED[c.id].reason if c.id in NOT_JUDGED else None})
        t = totals.setdefault(c.profile.value, {"clauses": 0, "observable": 0, "with_check": 0, "valid": 0,
                                                "proven": 0, "judged": 0, "unproven": 0, "judged_observable": 0})
        t["clauses"] += 1
        t["observable"] += observable(c)
        t["with_check"] += bool(mine)
        t["valid"] += verdict == "valid"
        t["proven"] += bool(killing)
        t["judged"] += judged
        t["unproven"] += status == "unproven"
        t["judged_observable"] += judged and observable(c)
    for t in totals.values():
        seen = t["observable"]
        t["judged_share_of_observable"] = round(t["judged_observable"] / seen, 3) if seen else None
    return {"clauses": rows, "profiles": totals}
