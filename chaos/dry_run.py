"""The dry run: which interruption points each scenario really reaches against this adapter, how often.

Chaos enumerates cases from what a run shows, not from a table kept by hand. Before enumerating, each
applicable scenario of the catalogue (``conformance.scenarios``) runs once with every runtime failpoint
the adapter declares armed to report and go on (``sleep(0)``: the broker records point, process and
hit, and the runtime does not stop). The points the kit holds itself are read from its own records:
provider requests per script and step (the ledger), probe executions (the witness log). Recovery points
are reached only after a crash, so a scenario that chaos interrupts at recovery points gets a second
pass: its first request held, the whole tree killed, the runtime restarted with the recovery points
armed to report. A scenario whose points are reached only after a restart the kit makes in the middle of its
work (``Chaos.restart_kick``: #19759's restart during bootstrap) gets a pass of its own for them.

Failpoint hits are counted per process, and a case for hit k pauses the k-th hit of whichever process
gets there. A point's count in the trace is how often one work item passed it in one process (hits
without a work item: per process), which does not depend on how the scheduler spread several sessions
over the workers, so the case list is the same on every run. A runtime that reaches a point more often
than the script suggests (a retry loop, a second tool call) gets cases for those hits too. A scenario whose work
items pass a point in several processes (``Chaos.item_hits``: a task's runs, each claimed by whichever worker is
free) counts an item's passes in every process together, and its cases let the broker hold the k-th. The trace is
stored as ``trace.json`` beside the results; ``--trace FILE`` makes shards and later runs enumerate
exactly the same cases.

Opt-in points (``durable.write.before`` / ``.after``, the durable-write hook) are armed only when the run asks
for them (``durable_writes=True``, ``chaos --durable-writes``): the trace records that it did, so a run from
the stored trace covers the same commit boundaries, and says for each hit which write it was (``labels``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverykit.chaos import restarts
from recoverykit.chaos.case_env import CaseEnv
from recoverykit.conformance import input_files
from recoverykit.conformance.errors import ProtocolError
from recoverykit.conformance.pacing import CHAOS_QUIESCE
from recoverykit.conformance.provider_script import script_tag
from recoverykit.conformance.scenarios import FIRST_HOLD, Scenario, all_scenarios
from recoverykit.model.catalogue import (
    INTERRUPTION_POINTS,
    OPT_IN_POINTS,
    POINTS_BY_NAME,
    RECOVERY_POINTS,
    Reach,
    Verdict,
)
from recoverykit.model.errors import InvalidArgument, RecoveryKitError

TRACE_KIND = "recoverykit-chaos-trace"
TRACE_VERSION = 1
TRACE_FILE = "trace.json"
QUIESCE_S = CHAOS_QUIESCE.seconds  # a base window: scaled by the case's pacing (``env.pacing``)
NEVER_UP_LIMIT = 2  # as the case runner: an adapter silent twice in a row is not asked again
TOOL_POINTS = ("tool.running", "tool.finished.uncommitted")
HOLD_POINTS = ("provider.request.inflight", "provider.response.midstream")


@dataclass
class Trace:
    """scenario -> point -> hits reached; scenarios left out, with the reason; what the dry run cost.

    ``failed`` holds the scenarios whose dry run broke off: their cases are missing, so a run that
    enumerates from this trace cannot be valid (missing evidence is unknown); ``broken`` those whose
    adapter broke the protocol there (a refused pid, a malformed reply): the run is invalid. ``undeclared`` holds, per
    scenario, the runtime points of its profile the adapter does not declare: no dry run can see them,
    so they get one case each, reported not implemented, never dropped.
    """

    adapter: dict[str, Any]
    reached: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    undeclared: dict[str, list[str]] = field(default_factory=dict)
    durable_writes: bool = False  # the opt-in durable-write points were armed (chaos --durable-writes)
    labels: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # scenario -> point -> what each hit was
    # scenario -> opt-in point -> hits made while the runtime started, before ``start`` answered: no case holds
    # them (a pause there would hold ``start`` itself, and the case would time out on it; D55)
    startup: dict[str, dict[str, int]] = field(default_factory=dict)

    def hits(self, scenario: str) -> dict[str, int]:
        """point -> hits to enumerate: what the dry run reached, and one for each undeclared point."""
        out = {p: 1 for p in self.undeclared.get(scenario, [])}
        out.update(self.reached.get(scenario, {}))
        return out

    def first_hit(self, scenario: str, point: str) -> int:
        """The first hit of ``point`` a case can hold: hits made while the runtime started get none."""
        return self.startup.get(scenario, {}).get(point, 0) + 1

    @property
    def total_s(self) -> float:
        return round(sum(self.seconds.values()), 3)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": TRACE_KIND, "version": TRACE_VERSION, "adapter": self.adapter,
                "reached": {s: dict(sorted(p.items())) for s, p in sorted(self.reached.items())},
                "skipped": dict(sorted(self.skipped.items())), "failed": dict(sorted(self.failed.items())),
                "broken": dict(sorted(self.broken.items())),
                "undeclared": {s: sorted(p) for s, p in sorted(self.undeclared.items())},
                "seconds": {s: round(v, 3) for s, v in sorted(self.seconds.items())}, "total_s": self.total_s,
                **({"durable_writes": True,
                    "labels": {s: dict(sorted(p.items())) for s, p in sorted(self.labels.items())},
                    "startup": {s: dict(sorted(p.items())) for s, p in sorted(self.startup.items())}}
                   if self.durable_writes else {})}

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.as_dict(), indent=1) + "\n")
        path.chmod(0o600)
        return path

    @classmethod
    def from_dict(cls, doc: Any, where: str = "the trace") -> Trace:
        if not isinstance(doc, dict) or doc.get("kind") != TRACE_KIND:
            raise InvalidArgument(f"{where} is not a chaos dry-run trace (kind {TRACE_KIND!r}); "
                                  f"write one with `recoverykit chaos --list --out DIR` ({TRACE_FILE})")
        reached, skipped, failed = doc.get("reached"), doc.get("skipped", {}), doc.get("failed", {})
        ok = (isinstance(reached, dict) and isinstance(skipped, dict) and isinstance(failed, dict)
              and isinstance(doc.get("adapter"), dict)
              and all(isinstance(p, dict) and all(isinstance(k, str) and type(v) is int and v >= 0
                                                  for k, v in p.items()) for p in reached.values()))
        if not ok:
            raise InvalidArgument(f"{where}: `reached` must map scenario -> point -> a whole number of hits")
        unknown = sorted({p for pts in reached.values() for p in pts if p not in POINTS_BY_NAME})
        if unknown:
            raise InvalidArgument(f"{where} names interruption points the catalogue does not have: {unknown}")
        seconds = doc.get("seconds") if isinstance(doc.get("seconds"), dict) else {}
        return cls(doc["adapter"], {s: dict(p) for s, p in reached.items()},
                   {str(k): str(v) for k, v in skipped.items()},
                   {str(k): float(v) for k, v in seconds.items() if isinstance(v, int | float)},
                   {str(k): str(v) for k, v in failed.items()},
                   {str(k): str(v) for k, v in (doc.get("broken") or {}).items()},
                   {str(k): [str(p) for p in v] for k, v in (doc.get("undeclared") or {}).items()
                    if isinstance(v, list)}, doc.get("durable_writes") is True,
                   {str(s): {str(p): [str(x) for x in v] for p, v in pts.items() if isinstance(v, list)}
                    for s, pts in (doc.get("labels") or {}).items() if isinstance(pts, dict)},
                   {str(s): {str(p): int(v) for p, v in pts.items() if type(v) is int}
                    for s, pts in (doc.get("startup") or {}).items() if isinstance(pts, dict)})

    @classmethod
    def read(cls, path: str | Path) -> Trace:
        path = Path(path)
        if path.is_dir():
            path = path / TRACE_FILE
        doc = input_files.read_json(path, "the dry-run trace")
        return cls.from_dict(doc, str(path))


def _declared_runtime_points(declared: dict[str, Any], recovery: bool, opt_in: bool = False) -> list[str]:
    return [p for p in declared["failpoints"] if p in POINTS_BY_NAME and POINTS_BY_NAME[p].reach is Reach.RUNTIME
            and (p in RECOVERY_POINTS) == recovery and (opt_in or p not in OPT_IN_POINTS)]


def _spec(points: Iterable[str]) -> str:
    return ";".join(f"{p}=sleep(0)" for p in points)


def _submit_all(env: CaseEnv, scenario: Scenario) -> None:
    if scenario.chaos.kick is not None:  # the scenario starts its own work (Paperclip tasks)
        scenario.chaos.kick(env)
        return
    for session in scenario.sessions:
        kind, fields = scenario.open_request(session, f"dry-{scenario.id}-{session}", f"{session}-1",
                                             f"dry run {script_tag(scenario.script_id(session))}")
        env.request_async(kind, **fields)


def _reports_settled(env: CaseEnv, quiet_s: float = 0.2, limit_s: float = 3.0) -> None:
    """A report is written just before the runtime goes on, so the run can look quiescent before the
    broker has read the last one (completion.commit.before_projection): wait until no new report comes."""
    deadline, count, since = time.monotonic() + limit_s, len(env.broker.hits()), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet_s:
        time.sleep(0.02)
        now = len(env.broker.hits())
        if now != count:
            count, since = now, time.monotonic()


def _runtime_hits(env: CaseEnv, points: Iterable[str], per_item: bool = False) -> dict[str, int]:
    """point -> how often one work item passed it in one process, at most (hits without a work item:
    per process).

    Not the largest per-process hit number: with several sessions, which worker serves which item is the
    scheduler's choice, so a worker that served all three items on one run reaches hit 3 and on the next
    run none does. How often one item passes a point does not depend on that, and a process serving the
    item reaches that hit whichever it is, so the case list is the same on every run.
    """
    _reports_settled(env)
    wanted, counts = set(points), {}
    for hit in env.broker.hits():
        if hit.point in wanted:
            # per_item (``Chaos.item_hits``): an item's passes in every process count together
            key = (hit.point, None if per_item and hit.work_id is not None else hit.pid, hit.work_id)
            counts[key] = counts.get(key, 0) + 1
    out: dict[str, int] = {}
    for (point, _, _), n in counts.items():
        out[point] = max(out.get(point, 0), n)
    return out


def _labels(env: CaseEnv, points: Iterable[str]) -> dict[str, list[str]]:
    """point -> what each hit was (``file op`` from the report's detail), in the process that hit it most."""
    per: dict[tuple[str, int], list[str]] = {}
    for hit in env.broker.hits():
        if hit.point in points and hit.detail:
            name = Path(str(hit.detail.get("file") or "")).name or "?"
            per.setdefault((hit.point, hit.pid), []).append(f"{name} {hit.detail.get('op', '')}".strip())
    out: dict[str, list[str]] = {}
    for (point, _), seen in per.items():
        if len(seen) > len(out.get(point, [])):
            out[point] = seen
    return out


def _environment_hits(env: CaseEnv, scenario: Scenario) -> dict[str, int]:
    """Points the kit holds itself: requested steps per script (ledger), probe executions (witness)."""
    steps: dict[str, set[int]] = {}
    for record in env.provider.records():
        # a Goal's verifier request is held at the acceptance points, not as one of the script's worker steps
        worker = record.get("role") != "verifier"
        if record.get("event") == "request" and record.get("script_id") is not None and worker:
            steps.setdefault(record["script_id"], set()).add(int(record.get("step") or 0))
    mine = {s for s in scenario.sessions}
    most = max((len(v) for k, v in steps.items() if k in mine), default=0)
    out = {p: most for p in HOLD_POINTS if most}
    if scenario.tools and any(e.tool in scenario.tools for e in env.witness().executions):
        out.update({p: 1 for p in TOOL_POINTS})
    return out


def _undeclared(scenario: Scenario, declared: dict[str, Any]) -> list[str]:
    mine = set(declared["failpoints"])
    return [p.name for p in INTERRUPTION_POINTS if p.reach is Reach.RUNTIME and p.profile is scenario.profile
            and p.name not in mine and not p.opt_in and (p.name not in RECOVERY_POINTS or _wants_recovery(scenario))]


def _wants_recovery(scenario: Scenario) -> bool:
    return scenario.chaos.points is None or any(p in RECOVERY_POINTS for p in scenario.chaos.points)


def trace_scenario(scenario: Scenario, adapter: str | list[str] | None, declared: dict[str, Any], *,
                   base_dir: str | Path | None = None, timeout_s: float = 20.0,
                   into: dict[str, int] | None = None, durable_writes: bool = False,
                   labels: dict[str, list[str]] | None = None,
                   startup: dict[str, int] | None = None) -> dict[str, int]:
    """One scenario's points and hits against this adapter (one pass, two with recovery points).

    ``into`` is filled as each pass ends, so what the first pass found survives a second that breaks off;
    ``labels`` gets what each opt-in hit was, ``startup`` how many it made before ``start`` answered.
    """
    reached: dict[str, int] = {} if into is None else into
    plain = _declared_runtime_points(declared, recovery=False, opt_in=durable_writes)
    env = CaseEnv(adapter, scenario.provider_script(chaos=True), base_dir=base_dir, timeout_s=timeout_s)
    try:
        env.start()
        env.start_runtime(failpoints=_spec(plain))
        if startup is not None:
            startup.update(_runtime_hits(env, OPT_IN_POINTS))
        _submit_all(env, scenario)
        env.wait_pending()
        env.quiesce(env.pacing(QUIESCE_S))
        reached.update(_runtime_hits(env, plain, scenario.chaos.item_hits))
        reached.update(_environment_hits(env, scenario))
        if labels is not None:
            labels.update(_labels(env, OPT_IN_POINTS))
    finally:
        env.close()
        env.remove()
    late = [p for p in plain if p in scenario.chaos.restart_points]
    if late and scenario.chaos.restart_kick is not None:  # points reached only after the kit's own restart
        env = CaseEnv(adapter, scenario.provider_script(chaos=True), base_dir=base_dir, timeout_s=timeout_s)
        try:
            env.start()
            env.start_runtime(failpoints=scenario.chaos.restart_first)
            scenario.chaos.restart_kick(env, _spec(late))
            env.wait_pending()
            env.quiesce(env.pacing(QUIESCE_S))
            reached.update(_runtime_hits(env, late, scenario.chaos.item_hits))
        finally:
            env.close()
            env.remove()
    recovery = _declared_runtime_points(declared, recovery=True)
    if recovery and _wants_recovery(scenario):
        env = CaseEnv(adapter, scenario.provider_script(FIRST_HOLD, chaos=True), base_dir=base_dir,
                      timeout_s=timeout_s)
        try:
            env.start()
            env.start_runtime()
            _submit_all(env, scenario)
            env.provider.wait_for_held(env.timeout_s)
            restarts.tree_kill(env, "tree_kill")
            env.release_holds(cut_provider=True)
            env.start_runtime(failpoints=_spec(recovery))
            env.auto_release()
            env.wait_pending()
            env.quiesce(env.pacing(QUIESCE_S))
            reached.update(_runtime_hits(env, recovery, scenario.chaos.item_hits))
        finally:
            env.close()
            env.remove()
    return reached


def dry_run(adapter: str | list[str] | None, declared: dict[str, Any], *,
            scenarios: Sequence[Scenario] | None = None, base_dir: str | Path | None = None,
            timeout_s: float = 20.0, durable_writes: bool = False) -> Trace:
    """The trace of every scenario in ``scenarios`` against the adapter described by ``declared``; with
    ``durable_writes``, the opt-in durable-write points it declares are armed and counted too."""
    trace = Trace({k: declared[k] for k in ("name", "version", "failpoints", "restart_kinds", "profiles")
                   if k in declared}, durable_writes=durable_writes)
    silent = 0  # dry runs in a row whose adapter went silent: after NEVER_UP_LIMIT the rest are not tried
    for scenario in all_scenarios() if scenarios is None else scenarios:
        if silent >= NEVER_UP_LIMIT and scenario.has_chaos:
            trace.failed[scenario.id] = (f"not traced: the adapter went silent in the last {silent} dry runs "
                                         "(see their reasons), so this one was not tried")
            continue
        if not scenario.has_chaos:
            trace.skipped[scenario.id] = scenario.chaos.none
            continue
        if scenario.profile.value not in declared["profiles"]:
            trace.skipped[scenario.id] = f"profile {scenario.profile.value} not declared by the adapter"
            continue
        t0 = time.monotonic()
        trace.undeclared[scenario.id] = _undeclared(scenario, declared)
        try:
            trace_scenario(scenario, adapter, declared, base_dir=base_dir, timeout_s=timeout_s,
                           into=trace.reached.setdefault(scenario.id, {}), durable_writes=durable_writes,
                           labels=trace.labels.setdefault(scenario.id, {}) if durable_writes else None,
                           startup=trace.startup.setdefault(scenario.id, {}) if durable_writes else None)
        except ProtocolError as exc:  # evidence about the adapter: a definite break is invalid, silence unknown
            why = f"the adapter broke the protocol during the dry run: {exc}"[:1500]
            (trace.broken if exc.verdict is Verdict.INVALID else trace.failed)[scenario.id] = why
            silent = silent + 1 if exc.verdict is Verdict.UNKNOWN else 0
        except (RecoveryKitError, OSError) as exc:
            trace.failed[scenario.id] = f"the dry run could not complete: {type(exc).__name__}: {exc}"[:500]
            silent = 0
        else:
            silent = 0
        trace.seconds[scenario.id] = time.monotonic() - t0
    return trace
