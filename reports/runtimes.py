"""docs/runtimes.md and reports/<runtime>/: what each certified runtime did, clause by clause, from stored results.

Each runtime in ``RUNTIMES`` keeps the results document of one chaos run under ``reports/<folder>/results.json.gz``
with its failure-acceptance report rendered beside it (``report.md``, ``report.html``, as ``reports/reference/``);
docs/runtimes.md is the matrix of runtime x clause: verdict, the evidence it rests on, and the shortest command
that replays it. Both are rebuilt from the stored results by tests/test_runtimes_doc.py, so neither can drift from
its evidence. Adding a runtime (DBOS) is one ``Runtime`` entry and one regeneration::

    python -m recoverykit.reports.runtimes RUNTIME path/to/results.json   # store a run, re-render everything
    python -m recoverykit.reports.runtimes                                 # re-render docs/runtimes.md only
    python -m recoverykit.reports.runtimes --certify RUNTIME results.json  # store a certify run beside it

docs/runtimes.md counts each runtime's unknown clauses apart by reason class (conformance/unknowns.py).

The stored results name the adapter command the run used (a path on the machine that ran it); it is replaced by
the runtime's portable command (``Runtime.adapter``) before storing, so the replay commands work anywhere.
"""

from __future__ import annotations

import gzip
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recoverykit.conformance import unknowns
from recoverykit.reports import readable, reference, render

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "runtimes.md"
COMMAND = "python -m recoverykit.reports.runtimes"
CERTIFY_FILE = "certify.json.gz"


@dataclass(frozen=True)
class Runtime:
    name: str  # the matrix's name for it
    folder: str  # reports/<folder>/
    adapter: str | None  # the portable --adapter of its replays; None: the bundled reference runtime
    run: str  # the command that produced the stored results, as a reader would type it
    triage: str  # where each invalid clause is triaged (true behaviour or artefact)

    @property
    def path(self) -> Path:
        return HERE / self.folder

    def load(self) -> dict[str, Any]:
        with gzip.open(self.path / "results.json.gz", "rt", encoding="utf-8") as f:
            return json.load(f)

    def load_certify(self) -> dict[str, Any] | None:
        """The stored certify run (``certify.json.gz``), if the runtime keeps one beside its chaos run."""
        path = self.path / CERTIFY_FILE
        if not path.exists():
            return None
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)

    def replay(self, case_id: str) -> str:
        cmd = ["recoverykit", "chaos", "--replay", case_id]
        return shlex.join(cmd + (["--adapter", self.adapter] if self.adapter else []))


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("reference", "reference", None, "recoverykit chaos (every scenario, every kind)",
            "reports/reference/report.md"),
    Runtime("langgraph", "langgraph", "python -m recoverykit_adapters.langgraph",
            "recoverykit chaos --adapter 'python -m recoverykit_adapters.langgraph' --durable-writes --kinds tree_kill "
            "--scenarios <the 11 chat-core scenarios with tree_kill cells> --out A; the same with --scenarios "
            "chat_long_tool,long_downtime --kinds worker_kill,long_downtime --out B; recoverykit merge A B",
            "adapters/recoverykit_adapters/langgraph/README.md"),
    Runtime("dbos", "dbos", "python -m recoverykit_adapters.dbos",
            "recoverykit chaos --adapter 'python -m recoverykit_adapters.dbos' --scenarios chat_unknown_write "
            "--kinds tree_kill", "adapters/recoverykit_adapters/dbos/README.md"),
)


def named(name: str) -> Runtime:
    for runtime in RUNTIMES:
        if runtime.name == name:
            return runtime
    raise SystemExit(f"unknown runtime {name!r}; known: {[r.name for r in RUNTIMES]}")


def rendered_report(runtime: Runtime, results: dict[str, Any]) -> dict[str, str]:
    """reports/<folder>/report.md and report.html, as the reference report is rendered."""
    page = readable.view(results)
    by = f"{COMMAND} {runtime.name} path/to/results.json"
    return {"report.md": render.markdown(page, generated_by=by), "report.html": render.html(page)}


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def rows(runtime: Runtime, results: dict[str, Any]) -> list[dict[str, str]]:
    """One row per clause the run judged: verdict, evidence, the shortest replay."""
    judged: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    unknown = unknowns.of_chaos(results)
    for case in results["cases"]:
        for clause in case.get("clauses", []):
            judged.setdefault(clause["clause"], []).append((case, clause))
    out = []
    for clause_id, verdict in sorted(results["clauses"].items(), key=lambda kv: _order(kv[0])):
        seen = judged.get(clause_id, [])
        broke = [(case, c) for case, c in seen if c["verdict"] == "invalid"]
        chosen = broke or [(case, c) for case, c in seen if c["verdict"] == verdict] or seen
        # the shortest replay: the case that gets there first (lowest hit, then catalogue order)
        chosen = sorted(chosen, key=lambda pair: (pair[0]["hit"], pair[0]["id"]))
        why = unknown.get(clause_id) if verdict == "unknown" else None
        if broke:
            case, c = chosen[0]
            evidence = f"{len(broke)} of {len(seen)} case(s) broke it, on {c.get('basis', 'self-reported')} " \
                       f"evidence: {str(c.get('text', ''))[:160]}"
        elif seen:
            evidence = f"{sum(c['verdict'] == verdict for _, c in seen)} of {len(seen)} case(s) {verdict}"
        else:
            evidence = "no case judged it"
        if why:
            evidence = f"[{why['class']}] {evidence}; {str(why.get('why', ''))[:120]}"
        replay = runtime.replay(chosen[0][0]["id"]) if chosen else ""
        out.append({"runtime": runtime.name, "clause": clause_id, "verdict": verdict, "evidence": _cell(evidence),
                    "replay": replay})
    return out


def _order(clause_id: str) -> tuple[str, int]:
    prefix, _, number = clause_id.rpartition("-")
    return (prefix, int(number) if number.isdigit() else 0)


def markdown(runtimes: tuple[Runtime, ...] = RUNTIMES) -> str:
    lines = ["# Runtimes: clause by clause", "",
             f"<!-- GENERATED by `{COMMAND}` from reports/<runtime>/results.json.gz; tests/test_runtimes_doc.py "
             "checks it -->", "",
             "Each runtime's stored chaos run, clause by clause: the verdict, the evidence it rests on (`kit`: the "
             "provider's ledger, the probes' witness log, the process table; `self-reported`: the runtime's "
             "`observe`), and the shortest command that replays it. Each invalid clause is triaged (a true "
             "behaviour of the runtime, or an artefact) where the last column of the first table says.", "",
             "| runtime | run | verdict | cases | wall | triage |", "| --- | --- | --- | --- | --- | --- |"]
    loaded = [(runtime, runtime.load()) for runtime in runtimes]
    for runtime, results in loaded:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(results.get("statuses", {}).items()))
        lines.append(f"| {runtime.name} | `{_cell(runtime.run)}` | {results['verdict']} | {statuses} | "
                     f"{results.get('wall_s', 0):.0f} s | {runtime.triage} |")
    lines += unknown_counts(loaded)
    lines += ["", "| runtime | clause | verdict | evidence | replay |", "| --- | --- | --- | --- | --- |"]
    for runtime, results in loaded:
        for row in rows(runtime, results):
            lines.append(f"| {row['runtime']} | {row['clause']} | {row['verdict']} | {row['evidence']} | "
                         f"`{row['replay']}` |")
    return "\n".join(lines) + "\n"


def unknown_counts(loaded: list[tuple[Runtime, dict[str, Any]]]) -> list[str]:
    """Each runtime's unknown clauses counted apart by reason class (conformance/unknowns.py), from its chaos run
    and, where stored, its certify run; ``adapter %``: the share of applicable clauses the adapter could end."""
    lines = ["", "Why each unknown clause is unknown, counted apart (`[class]` in the evidence column below; "
             "docs/adapter-guide.md section 20 says how an adapter supplies what it could):", "",
             "| runtime | run | applicable | unknown | " + " | ".join(unknowns.CLASSES) + " | adapter % |",
             "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in unknowns.CLASSES) + " | ---: |"]
    for runtime, results in loaded:
        runs = [("chaos", unknowns.of_chaos(results), _applicable(results["clauses"]))]
        certified = runtime.load_certify()
        if certified is not None:
            runs.append(("certify", unknowns.of_certify_doc(certified), _applicable(certified["clauses"])))
        for run, found, applicable in runs:
            n = unknowns.counts(found)
            share = 100 * n[unknowns.ADAPTER_COULD_SUPPLY] / applicable if applicable else 0
            lines.append(f"| {runtime.name} | {run} | {applicable} | {len(found)} | "
                         + " | ".join(str(n[c]) for c in unknowns.CLASSES) + f" | {share:.1f} |")
    return lines


def _applicable(clauses: dict[str, Any]) -> int:
    """Clauses judged other than not applicable (a chaos verdict string, or a certify clause entry)."""
    verdicts = [v if isinstance(v, str) else v.get("finding", v.get("verdict")) for v in clauses.values()]
    return sum(v != "not_applicable" for v in verdicts)


def store_certify(runtime: Runtime, results_path: str | Path) -> None:
    """Store one certify run for ``runtime`` beside its chaos run (its adapter command made portable)."""
    text = Path(results_path).read_text(encoding="utf-8")
    results = json.loads(text)
    command = results.get("adapter", {}).get("command")
    if runtime.adapter and isinstance(command, str) and command != runtime.adapter:
        results = json.loads(text.replace(json.dumps(command)[1:-1], json.dumps(runtime.adapter)[1:-1]))
    with gzip.GzipFile(runtime.path / CERTIFY_FILE, "wb", mtime=0) as f:  # same results, same bytes
        f.write((json.dumps(results, sort_keys=True, indent=0) + "\n").encode())


def store(runtime: Runtime, results_path: str | Path) -> None:
    """Store one run's results for ``runtime`` (its adapter command made portable) and render its report."""
    text = Path(results_path).read_text(encoding="utf-8")
    results = json.loads(text)
    command = results.get("adapter", {}).get("command")
    if runtime.adapter and isinstance(command, str) and command != runtime.adapter:
        results = json.loads(text.replace(json.dumps(command)[1:-1], json.dumps(runtime.adapter)[1:-1]))
    runtime.path.mkdir(exist_ok=True)
    with gzip.GzipFile(runtime.path / "results.json.gz", "wb", mtime=0) as f:  # same results, same bytes
        f.write((json.dumps(results, sort_keys=True, indent=0) + "\n").encode())
    if runtime.folder != reference.FOLDER.name:  # the reference report keeps its own generator
        for name, body in rendered_report(runtime, runtime.load()).items():
            (runtime.path / name).write_text(body, encoding="utf-8")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--certify"] and len(argv) == 3:
        store_certify(named(argv[1]), argv[2])
    elif len(argv) not in (0, 2):
        raise SystemExit(f"usage: {COMMAND} [[--certify] RUNTIME path/to/results.json]")
    elif argv:
        store(named(argv[0]), argv[1])
    DOC.write_text(markdown(), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
