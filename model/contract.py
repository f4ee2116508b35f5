"""The contract catalogue: every clause of the seeds a runtime must honour, as a numbered invariant.

Each clause has a stable id (area prefix + number), a one-line statement that doubles as the
violation message ("broke OWN-06: ..."), safety or liveness, the seed file and section it rests on,
a short verbatim quote from that seed, the profile it belongs to and the ways the kit can check it.
The model's invariants, the lockstep suite, the chaos runner and the history checker all cite these
ids, so ids are never renumbered: new clauses are appended at the end of ``CLAUSES``, and an id taken out
of the catalogue is kept in ``RETIRED`` with the reason, never reused.

This module is one piece on purpose (it is longer than the house norm): it is a data table, and
splitting the table would only scatter the ids other layers cite. Pure: strings in, strings out;
docs/contract.md is ``render_markdown()`` (regenerate with ``recoverykit contract docs``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from recoverykit.model.catalogue import DURABLE_WRITE_POINTS, POINTS_BY_NAME, Profile, RestartKind
from recoverykit.model.errors import InvalidArgument

SEED_000 = "000_af485c2424ce917b.txt"
SEED_001 = "001_d5bcb6a14f4f2c59.txt"
SEED_003 = "003_19071bbcad35ccb3.txt"
SEEDS: tuple[str, ...] = (SEED_000, SEED_001, SEED_003)


class Kind(StrEnum):
    SAFETY = "safety"  # something bad never happens; one counterexample state or history refutes it
    LIVENESS = "liveness"  # something good eventually happens; checked under bounded fairness


class Method(StrEnum):
    """How the kit can check a clause."""

    MODEL = "model"  # an invariant of the model, checked in every state bounded exploration reaches
    LOCKSTEP = "lockstep"  # the adapter's observed snapshot is compared with the model after each operation
    CHAOS = "chaos"  # checked after real process faults at interruption points and restart kinds
    HISTORY = "history"  # checked on the recorded history, provider ledger and probe witness log


METHOD_LETTERS: dict[str, Method] = {"M": Method.MODEL, "L": Method.LOCKSTEP, "C": Method.CHAOS,
                                     "H": Method.HISTORY}

# Area prefixes, in the order the docs list them.
AREAS: dict[str, str] = {
    "RI": "Run intent",
    "INP": "Input acceptance",
    "CTL": "User controls",
    "OWN": "Ownership, leases and generations",
    "REC": "Recovery procedure",
    "CTX": "Context repair",
    "EFF": "Effects, tools and the safety boundary",
    "APR": "Approvals",
    "WAIT": "Waits and notifications",
    "GOAL": "Goal states",
    "ACC": "Todo and acceptance",
    "USG": "Usage, cost and budget",
    "JOB": "Background Jobs",
    "UI": "Interface and reason codes",
    "RES": "Resources and fault states",
    "RTY": "Paperclip Retry admission and retry policy",
    "FA": "Restart failure acceptance",
}

_ID = re.compile(r"^(?P<area>[A-Z]{2,4})-(?P<num>\d{2,3})$")


class UnknownClause(InvalidArgument, KeyError):
    """A clause id that is not in the catalogue."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class Clause:
    id: str
    statement: str
    kind: Kind
    seed: str
    section: str
    quote: str
    profile: Profile
    methods: frozenset[Method]
    points: tuple[str, ...] = field(default=())  # interruption points the clause is exercised at
    restarts: tuple[RestartKind, ...] = field(default=())  # restart kinds the clause is exercised under

    def __post_init__(self) -> None:
        match = _ID.match(self.id)
        if match is None or match["area"] not in AREAS:
            raise InvalidArgument(f"clause id {self.id!r} is not AREA-NN with AREA one of {sorted(AREAS)}")
        if self.seed not in SEEDS:
            raise InvalidArgument(f"clause {self.id}: seed {self.seed!r} is not one of {SEEDS}")
        if not self.statement or "\n" in self.statement:
            raise InvalidArgument(f"clause {self.id}: the statement must be one non-empty line")
        if not self.quote.strip() or not self.section.strip():
            raise InvalidArgument(f"clause {self.id}: a clause needs a section and a quote from its seed")
        # no method: the kit has no check of it (yet); it is then never judged, so never valid
        unknown = [p for p in self.points if p not in POINTS_BY_NAME]
        if unknown:
            raise InvalidArgument(f"clause {self.id}: unknown interruption points {unknown}; see model/catalogue.py")

    @property
    def area(self) -> str:
        return self.id.split("-", 1)[0]

    @property
    def number(self) -> int:
        return int(self.id.split("-", 1)[1])

    def broke(self, detail: str = "") -> str:
        """The violation message: ``broke OWN-06: <statement>`` plus what was seen."""
        text = f"broke {self.id}: {self.statement}"
        return f"{text} ({detail})" if detail else text

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "statement": self.statement,
            "kind": self.kind.value,
            "seed": self.seed,
            "section": self.section,
            "quote": self.quote,
            "profile": self.profile.value,
            "methods": [m.value for m in Method if m in self.methods],
            "points": list(self.points),
            "restarts": [r.value for r in self.restarts],
        }


@dataclass(frozen=True, slots=True)
class Omission:
    what: str
    seed: str
    section: str
    reason: str


_S, _L = Kind.SAFETY, Kind.LIVENESS
_CHAT, _GOALS, _JOBS, _APR, _PC, _WAITS = (Profile.CHAT_CORE, Profile.GOALS, Profile.JOBS, Profile.APPROVALS,
                                           Profile.PAPERCLIP_RETRY, Profile.WAITS)
_RK = RestartKind

# Section headings (or, for paragraphs without one, the phrase that opens them) as the seeds spell them.
ARC = "Automatic recovery contract: run intent survives the process"
MATRIX = "Complete recovery-state matrix"
LAYER = "One chat execution layer, five durable data categories"
INTR = "Interruption recovery: confirm execution ownership before restoring context"
SAFE = "Safety boundary"
HIST = "Request-history repair"
GOALUI = "Only an explicitly activated Goal produces Goal UI"
TODO = "Todo manages the plan; acceptance manages the objective"
COST = "Cost: attribute per request, settle per receipt"
CTRL = "Controls and interface: show state, reason, and action together"
IMPL = "Implementation sequence and required acceptance"
FAIL = "Restart failure acceptance: more than testing Resume once"
ZH_ARC = "自动恢复合同：运行意图不随进程消失"
ZH_CTRL = "控制与界面：状态、原因、操作同时可见"
ZH_FAIL = "重启故障验收：不是只测一次 Resume"
PC_TOP = "Automatic task recovery"
PC_ADM = "Admission and execution"
PC_FILES = "Files, ownership and effects"
PC_POLICY = "Retry policy and historical adoption"
PC_DIAG = "Local diagnostics and presentation"
PC_PR = "What Changed"


def _c(id: str, kind: Kind, profile: Profile, methods: str, seed: str, section: str, statement: str,
       quote: str, points: Iterable[str] = (), restarts: Iterable[RestartKind] = ()) -> Clause:
    return Clause(id=id, statement=statement, kind=kind, seed=seed, section=section, quote=quote,
                  profile=profile, methods=frozenset(METHOD_LETTERS[letter] for letter in methods),
                  points=tuple(points), restarts=tuple(restarts))


_IN = ("input.accept.before", "input.accept.after")
_TOOL = ("tool.dispatch.before", "tool.dispatch.after", "tool.running")
_RESULT = ("tool.finished.uncommitted", "tool.result.commit.before", "tool.result.commit.after")
_PROVIDER = ("provider.request.before", "provider.request.after", "provider.request.inflight",
             "provider.response.midstream")
_USAGE = ("usage.persist.before", "usage.persist.after")
_RECOVERY = ("recovery.claim.after", "recovery.repair.after", "recovery.decide.after")
_KILLS = (_RK.WORKER_KILL, _RK.TREE_KILL)

# fmt: off
CLAUSES: tuple[Clause, ...] = (
    # ---- Run intent (seed 000, Automatic recovery contract)
    _c("RI-01", _S, _CHAT, "MLH", SEED_000, ARC,
       "Every work item has a durable run_intent with work_id, original input and unconsumed messages, desired_state, "
       "latest control version, permission scope, objective revision, host identity, parent/child, last committed "
       "progress and recovery policy.",
       "It records work_id, original input and unconsumed messages, desired_state (run / paused / cancelled / done)"),
    _c("RI-02", _L, _CHAT, "MLCH", SEED_000, ARC,
       "Authorized work whose desired_state is still run is recovered automatically after a restart, for ordinary "
       "sessions and Goals alike, without the user reopening the session.",
       "By default, automatically recover previously authorized work whose state remains run",
       restarts=(_RK.NORMAL_EXIT, _RK.GRACEFUL_WORKER_RESTART, *_KILLS)),
    _c("RI-03", _S, _CHAT, "MLCH", SEED_000, ARC,
       "Recovery preserves pauses, stops, completion, outstanding approvals and exhausted budgets: none of them is "
       "resumed by a restart.",
       "Preserve pauses, stops, completion, outstanding approval, and exhausted budgets."),
    _c("RI-04", _S, _CHAT, "MLH", SEED_000, ARC,
       "An ordinary request without a Goal continues only until that request finishes; it never becomes an "
       "indefinite Goal.",
       "Ordinary requests without a Goal continue only until that request finishes, not as indefinite Goals."),
    _c("RI-05", _S, _CHAT, "MLC", SEED_000, ARC,
       "There is no hidden recovery expiry: downtime of any length, past the old two-hour window, preserves run "
       "intent.",
       "Remove the hidden two-hour recovery expiry. Long downtime preserves run intent",
       restarts=(_RK.LONG_DOWNTIME,)),
    _c("RI-06", _S, _CHAT, "MLH", SEED_000, ARC,
       "Work whose automatic recovery was explicitly disabled is not recovered automatically.",
       "Explicit automatic-recovery disabling remains effective"),
    _c("RI-07", _S, _CHAT, "MLH", SEED_000, ARC,
       "An old paused record with an unknown reason stays paused with an explanation; it is never guessed to have "
       "been running.",
       "old paused records with unknown reasons stay paused with an explanation rather than being guessed"),
    _c("RI-08", _L, _CHAT, "MLCH", SEED_000, INTR,
       "A restart by itself never makes work wait for a manual Resume; only a specific permission, budget, resource "
       "or unknown-operation issue needs a person.",
       "restart itself is not a reason to require manual Resume"),

    # ---- Input acceptance
    _c("INP-01", _S, _CHAT, "MLCH", SEED_000, ARC,
       "Acceptance is acknowledged to the client only after the original user request is durably saved.",
       "Acknowledge acceptance to the client only after reliably saving the original user request.",
       points=_IN),
    _c("INP-02", _S, _CHAT, "MLH", SEED_000, ARC,
       "A client-only draft the server never acknowledged is never represented as a submitted request.",
       "Client-only drafts without server acknowledgment must not be represented as submitted requests.",
       points=("input.accept.before",), restarts=(_RK.FRONTEND_RELOAD,)),

    # ---- User controls
    _c("CTL-01", _S, _CHAT, "MLCH", SEED_000, ARC,
       "Closing a window or reloading the frontend only disconnects the client and changes no run intent.",
       "Closing a window or reloading the frontend only disconnects the client",
       restarts=(_RK.FRONTEND_RELOAD,)),
    _c("CTL-02", _S, _CHAT, "MLC", SEED_000, ARC,
       "The \"quit and stop all tasks\" exit persists the user's stop intent first; nothing it stopped resumes.",
       "must persist user stop intent", restarts=(_RK.STOP_ALL_EXIT,)),
    _c("CTL-03", _S, _CHAT, "MLCH", SEED_000, ARC,
       "An ordinary App exit, upgrade, worker crash or machine restart is never taken as a user Pause.",
       "Ordinary App exit, upgrades, worker crashes, and machine restarts do not implicitly mean user Pause.",
       restarts=(_RK.NORMAL_EXIT, _RK.GRACEFUL_WORKER_RESTART, *_KILLS, _RK.HOST_IDENTITY_CHANGE)),
    _c("CTL-04", _S, _CHAT, "LCH", SEED_000, ARC,
       "Graceful shutdown first stops new admission and saves accepted controls and checkpoints, then exits the "
       "worker.",
       "Graceful shutdown first stops new admission and saves accepted controls and checkpoints, then exits the worker",
       restarts=(_RK.NORMAL_EXIT, _RK.GRACEFUL_WORKER_RESTART)),
    _c("CTL-05", _S, _CHAT, "MLH", SEED_000, CTRL,
       "User input takes priority over automatic continuation (steer/queue semantics).",
       "User input takes priority over automatic continuation using existing steer/queue semantics."),
    _c("CTL-06", _S, _GOALS, "ML", SEED_003, ZH_CTRL,
       "A Goal's continuation key binds goal_id, revision and the previous committed turn, and state checks and "
       "admission use the same version comparison.",
       "续轮去重键绑定 goal_id、revision 和前序已提交 turn；状态检查和准入必须共用版本比较"),
    _c("CTL-07", _S, _CHAT, "MLCH", SEED_000, CTRL,
       "When pause, edit, explicit cancellation and admission race, durable state and generation checks block the "
       "stale action.",
       "Durable state and generation checks block stale actions when pause, edit, explicit cancellation, and "
       "admission race."),

    # ---- Ownership, leases and generations
    _c("OWN-01", _S, _CHAT, "MLCH", SEED_000, ARC,
       "Recovery reconnects live executors and excludes dead ones through generation fencing.",
       "Reconnect live executors; exclude dead executors through generation fencing.",
       points=("recovery.claim.after",)),
    _c("OWN-02", _S, _CHAT, "MCH", SEED_000, ARC,
       "Only one host recovers a work item, and at most one owner holds it at any time.",
       "Only one host recovers each work item."),
    _c("OWN-03", _S, _CHAT, "MCH", SEED_000, ARC,
       "Single-host recovery never silently becomes a cross-host takeover.",
       "Single-host recovery must not silently become cross-host takeover.",
       restarts=(_RK.HOST_IDENTITY_CHANGE,)),
    _c("OWN-04", _S, _CHAT, "MCH", SEED_000, INTR,
       "No repair is written while the lease is uncertain or storage is unreadable.",
       "do not write repairs when the lease is uncertain or storage unreadable"),
    _c("OWN-05", _S, _CHAT, "MCH", SEED_000, INTR,
       "A disconnected connection alone is never taken as proof that a process died.",
       "A disconnected connection alone does not prove process death.", restarts=(_RK.WORKER_KILL,)),
    _c("OWN-06", _S, _CHAT, "MLCH", SEED_000, INTR,
       "Writes from an old generation are rejected once a newer generation owns the work item.",
       "Reject subsequent writes from the old generation."),
    _c("OWN-07", _S, _CHAT, "MCH", SEED_000, INTR,
       "A trackable live child process is reconnected and waited for or explicitly cancelled; a running shell is "
       "never treated as stopped.",
       "do not treat a running shell as stopped", points=("tool.running",), restarts=(_RK.WORKER_KILL,)),

    # ---- Recovery procedure
    _c("REC-01", _S, _CHAT, "MLCH", SEED_000, ARC,
       "A read or migration failure while loading facts shows recovery failure and never clears old state.",
       "Read/migration failures show recovery failure without clearing old state."),
    _c("REC-02", _S, _CHAT, "MLH", SEED_000, ARC,
       "Recovery decides in order: user stop first, then approval, permissions, budget, resources and unknown "
       "effects.",
       "User stops take priority, followed by approval, permissions, budget, resources, and unknown effects."),
    _c("REC-03", _S, _CHAT, "MLH", SEED_000, ARC,
       "After recovery runnable work is queued, work waiting on a dependency is waiting, and a fault carries a "
       "retryable reason.",
       "Runnable work becomes queued; dependency waits become waiting; faults expose retryable reasons."),
    _c("REC-04", _S, _CHAT, "ML", SEED_000, ARC,
       "Every recovery decision is persisted in the same control service before it takes effect.",
       "Persist all decisions in the same control service.", points=("recovery.decide.after",)),
    _c("REC-05", _S, _CHAT, "MLH", SEED_000, ARC,
       "A continuation key is derived from work_id + control version + predecessor commit point and is stable "
       "across restarts.",
       "derive a stable continuation key from work_id + control version + predecessor commit point"),
    _c("REC-06", _S, _CHAT, "MCH", SEED_000, ARC,
       "Persisting admission and consuming recovery intent leave no window in which the same continuation is "
       "admitted twice.",
       "Admission persistence and recovery-intent consumption must leave no duplication window",
       points=("recovery.decide.after",), restarts=(_RK.CRASH_DURING_RECOVERY,)),
    _c("REC-07", _L, _CHAT, "MC", SEED_000, ARC,
       "Cross-database recovery steps converge through a retryable outbox; no cross-database atomic transaction is "
       "assumed.",
       "converge cross-database steps through a retryable outbox"),
    _c("REC-08", _S, _JOBS, "MC", SEED_000, ARC,
       "The server and the JobRunner may call the same idempotent recovery entry point but never make independent "
       "recovery decisions.",
       "cannot make independent recovery decisions"),
    _c("REC-09", _L, _CHAT, "MCH", SEED_000, ARC,
       "After a forced shutdown, recovery proceeds from the last committed records.",
       "forced shutdown recovers from the last committed records", restarts=_KILLS),
    _c("REC-10", _S, _CHAT, "LCH", SEED_000, MATRIX,
       "State that was lost (unpersisted stream fragments, a dead shell's memory, receipts an external service "
       "lost) is reported as lost, never hidden by clearing tasks or by fabricated success.",
       "must be reported accurately, not hidden by clearing tasks or fabricated success"),
    _c("REC-11", _S, _CHAT, "MCH", SEED_000, INTR,
       "Exactly one recovery mode is chosen per recovery decision (reattach, new attempt from checkpoint, or repair "
       "and new turn); a checkpoint is never resumed while a new turn is also started.",
       "never resume a checkpoint and start a new turn together"),
    _c("REC-12", _S, _CHAT, "MCH", SEED_000, INTR,
       "A live owner is only reconnected, never replaced by a new attempt or a new turn.",
       "Only reconnect a live owner.", restarts=(_RK.WORKER_KILL,)),
    _c("REC-13", _S, _CHAT, "MCH", SEED_000, INTR,
       "A new attempt under the same execution is created only when the owner's death is confirmed and a verifiable "
       "safe checkpoint exists.",
       "If death is confirmed and a verifiable safe checkpoint exists, create a new attempt under the same execution."),
    _c("REC-14", _S, _CHAT, "MCH", SEED_000, INTR,
       "Repair-and-new-turn happens only when no reliable checkpoint exists and only under exclusive recovery "
       "ownership: missing outputs filled with a stable repair key, the old turn ended interrupted, a new turn "
       "admitted.",
       "Only when no reliable checkpoint exists, acquire exclusive recovery ownership, fill missing outputs using a "
       "stable repair key, end the old turn as interrupted, and admit a new turn."),
    _c("REC-15", _S, _CHAT, "MH", SEED_000, INTR,
       "The chosen recovery mode binds to one durable recovery decision, control version and continuation key.",
       "bind to the same durable recovery decision, control version, and continuation key"),
    _c("REC-16", _S, _GOALS, "ML", SEED_000, SAFE,
       "Ordinary chat and Goals go through the same recovery entry point.",
       "Ordinary chat and Goals share the recovery entry point."),

    # ---- Context repair
    _c("CTX-01", _S, _CHAT, "MLH", SEED_000, ARC,
       "Recovery resumes from a complete safe checkpoint when one exists, otherwise starts a new turn with the same "
       "work_id without re-appending user input.",
       "otherwise start a new turn with the same work_id without re-appending user input",
       points=("recovery.repair.after",)),
    _c("CTX-02", _S, _CHAT, "MCH", SEED_000, INTR,
       "A checkpoint used for recovery covers committed effects and satisfies the current permission, wait and "
       "safe-point contracts, without replaying unknown writes.",
       "Checkpoints must cover committed effects and satisfy current permission, wait, and safe-point contracts, "
       "without replaying unknown writes."),
    _c("CTX-03", _S, _CHAT, "MC", SEED_000, INTR,
       "Repeating a repair has no side effects.",
       "Repeating repairs has no side effects", points=("recovery.repair.after",),
       restarts=(_RK.CRASH_DURING_RECOVERY,)),
    _c("CTX-04", _S, _CHAT, "MLH", SEED_000, INTR,
       "A real result takes priority over any placeholder, and repair never fabricates usage.",
       "real results take priority and no usage is fabricated"),
    _c("CTX-05", _S, _CHAT, "L", SEED_000, INTR,
       "A late verifiable receipt is appended as a reconciliation event that replaces the synthetic placeholder in "
       "later context.",
       "Append late verifiable receipts as reconciliation events that replace synthetic placeholders in subsequent "
       "context."),
    _c("CTX-06", _S, _CHAT, "LH", SEED_000, HIST,
       "History repair matches the nearest call by original call ID first; existing real outputs win and among "
       "duplicates the last saved real record is used.",
       "Existing real outputs take priority; duplicate outputs use the last saved real record."),
    _c("CTX-07", _S, _CHAT, "LH", SEED_000, HIST,
       "A missing tool result gets a deterministic unknown placeholder.",
       "Missing results get deterministic unknown placeholders."),
    _c("CTX-08", _S, _CHAT, "LH", SEED_000, HIST,
       "In the repaired request projection calls and results are adjacent, user-message order is intact and the "
       "original history is unchanged.",
       "Calls and results are adjacent in the request projection while user-message order remains intact; original "
       "history is unchanged."),
    _c("CTX-09", _S, _CHAT, "LH", SEED_000, HIST,
       "A result without a corresponding call is never sent as a valid tool-protocol item.",
       "Results without corresponding calls are not sent as valid tool-protocol items."),
    _c("CTX-10", _S, _CHAT, "LCH", SEED_000, HIST,
       "An interrupted response keeps its partial text and an interruption marker and never reuses an incomplete "
       "reasoning signature.",
       "Interrupted responses retain partial text and an interruption marker without reusing incomplete reasoning "
       "signatures.", points=("provider.response.midstream",)),
    _c("CTX-11", _S, _CHAT, "LH", SEED_000, HIST,
       "Ambiguous duplicate call IDs within one response produce an explicit error, never guessed execution facts.",
       "Ambiguous duplicate call IDs within one response produce an explicit error rather than guessed execution "
       "facts."),
    _c("CTX-12", _S, _CHAT, "MLH", SEED_000, HIST,
       "History repair grants no execution permission and never replaces the recovery decision.",
       "This conversion grants no execution permission and cannot replace recovery decisions."),

    # ---- Effects, tools and the safety boundary
    _c("EFF-01", _S, _CHAT, "MCH", SEED_000, INTR,
       "The unknown-effect record of an unreachable remote operation is preserved.",
       "Preserve unknown-effect records for unreachable remote operations."),
    _c("EFF-02", _S, _CHAT, "MLCH", SEED_000, INTR,
       "After recovery the new turn knows which calls never started and which outcomes are unknown.",
       "New turns know which calls never started and which outcomes are unknown.", points=_TOOL),
    _c("EFF-03", _L, _CHAT, "MLH", SEED_000, INTR,
       "An old unknown result does not globally block investigation or independent work.",
       "Old unknown results do not globally block investigation or independent work"),
    _c("EFF-04", _S, _APR, "ML", SEED_000, INTR,
       "Writes related to an unknown effect keep their original approval and recovery restrictions.",
       "related writes retain original approval and recovery restrictions"),
    _c("EFF-05", _S, _CHAT, "MLH", SEED_000, SAFE,
       "The effect classes read_only, idempotent and state_probe come only from trusted tool registration and the "
       "implementation identity saved at execution.",
       "read_only / idempotent / state_probe capabilities come from trusted tool registration and implementation "
       "identity saved at execution"),
    _c("EFF-06", _S, _CHAT, "MLH", SEED_000, SAFE,
       "A model's claim of read-only behaviour or a tool name containing \"read\" never classifies a tool's effect.",
       "Do not accept model claims of read-only behavior or infer them from a name containing read."),
    _c("EFF-07", _S, _CHAT, "MLH", SEED_000, SAFE,
       "General shell, third-party MCP and custom tools default to the unknown effect class.",
       "General shell, third-party MCP, and custom tools default to unknown."),
    _c("EFF-08", _S, _CHAT, "MLCH", SEED_000, SAFE,
       "A recovery turn related to an unknown write initially allows only trusted reads and state queries.",
       "Recovery turns related to unknown writes initially allow only trusted reads and state queries."),
    _c("EFF-09", _S, _APR, "MLC", SEED_000, SAFE,
       "Without reliable relevance determination no write is allowed automatically: reconcile first or obtain "
       "explicit user authorization.",
       "Without reliable relevance determination, do not automatically allow writes; reconcile first or obtain "
       "explicit user authorization."),
    _c("EFF-10", _S, _CHAT, "LH", SEED_000, SAFE,
       "Only the actual built-in read, grep, glob and list implementations qualify for read-only investigation; "
       "names, acceptEdits flags and plugin declarations do not.",
       "Only actual built-in read, grep, glob, and list execution functions qualify for read-only investigation"),
    _c("EFF-11", _L, _CHAT, "MLH", SEED_000, SAFE,
       "An unresolved old effect audit does not prevent its chat turn from ending as interrupted.",
       "Old effect audits may remain unresolved while their chat turns end as interrupted"),
    _c("EFF-12", _S, _PC, "M", SEED_001, PC_FILES,
       "Uncertain API and upstream tool mutations stay fenced across run replacement and need authoritative "
       "reconciliation, not a new call key; reads and independent work stay available.",
       "Uncertain API mutations and upstream tool mutations remain fenced across run replacement."),

    # ---- Approvals
    _c("APR-01", _S, _APR, "MLH", SEED_000, SAFE,
       "Recovery permission checks are scoped by the same conversation provenance and never expand to every "
       "execution in the invoked session.",
       "without expanding to all executions in the invoked session"),
    _c("APR-02", _S, _APR, "MLH", SEED_000, SAFE,
       "Within the scope of an uncertain effect every operation other than a trusted read needs a one-time approval "
       "that bypass, automatic classification and allow rules cannot waive.",
       "all other operations require one-time approval; bypass, automatic classification, and existing allow rules "
       "cannot waive it."),
    _c("APR-03", _S, _APR, "MLH", SEED_000, SAFE,
       "A durable approval binds to the new tool call and its unknown-effect set; a change to that set needs fresh "
       "approval and erases no old effect.",
       "Durable approval binds to the new tool call and unknown-effect set; changes to that set require fresh "
       "approval and do not erase old effects."),
    _c("APR-04", _S, _APR, "MLCH", SEED_000, SAFE,
       "Execution is rejected when recovery state cannot be read.",
       "Reject execution if recovery state cannot be read."),
    _c("APR-05", _S, _APR, "MLH", SEED_000, SAFE,
       "The recovery permission check alone neither changes old execution state nor enables Resume.",
       "it does not independently change old execution state or enable Resume"),
    _c("APR-06", _S, _APR, "MLCH", SEED_003, ZH_FAIL,
       "Accepted approvals are consumed at most once, never repeatedly, and unaccepted requests are never approved "
       "automatically.",
       "已接受审批不重复消费，审批未接受不自动批准", points=("approval.consume.before", "approval.consume.after")),
    _c("APR-07", _S, _APR, "MLCH", SEED_003, ZH_ARC,
       "An approval that was not granted stays not granted across a restart; recovery keeps the work held.",
       "暂停、停止、完成、审批未通过和预算耗尽均保留"),

    # ---- Waits and notifications
    _c("WAIT-01", _S, _WAITS, "MLH", SEED_000, TODO,
       "A durable wait saves work_id / Goal revision, handle, observed version and a unique consumption key.",
       "saving work_id / Goal revision, handle, observed version, and unique consumption key"),
    _c("WAIT-02", _S, _WAITS, "MCH", SEED_000, TODO,
       "A completion, failure or timeout notification admits its continuation exactly once, never twice, and only if "
       "intent is still run, versions match and no other execution is current.",
       "admit exactly once only if intent remains run, versions match, and no other current execution exists",
       points=("wait.notify.before_admit", "wait.notify.after")),
    _c("WAIT-03", _L, _WAITS, "MCH", SEED_000, TODO,
       "A missing notification is found by reconciliation polling with backoff.",
       "Existing reconciliation polls for missing notifications with backoff."),
    _c("WAIT-04", _L, _WAITS, "MCH", SEED_000, TODO,
       "A result arriving during a restart is saved and then continued automatically under the same rules.",
       "Save results arriving during restart, then automatically continue under the same rules."),
    _c("WAIT-05", _S, _WAITS, "MLH", SEED_000, TODO,
       "Pause, cancel or a revision invalidates old wakeups without discarding their results.",
       "Pause, cancel, or revision invalidates old wakeups without discarding results"),
    _c("WAIT-06", _S, _WAITS, "MLH", SEED_000, TODO,
       "A query timeout is never taken to mean the external operation stopped.",
       "query timeout does not imply the external operation stopped"),

    # ---- Goal states
    _c("GOAL-01", _S, _GOALS, "MLH", SEED_000, LAYER,
       "A Goal's state is one of active, paused, blocked, achieved, cancelled, budget_exhausted; working, waiting and "
       "verifying are phases, not states.",
       "Goal states remain active / paused / blocked / achieved / cancelled / budget_exhausted."),
    _c("GOAL-02", _S, _GOALS, "MLH", SEED_000, LAYER,
       "A revision or permission change invalidates earlier acceptance and automatic-continuation reservations.",
       "Revision or permission changes invalidate old acceptance and automatic-continuation reservations"),
    _c("GOAL-03", _S, _GOALS, "MLH", SEED_000, ARC,
       "A Goal's after-terminal hook submits continuation requests only for the current version.",
       "Goal.after_terminal submits continuation requests only for the current version."),
    _c("GOAL-04", _S, _GOALS, "MLCH", SEED_000, TODO,
       "Only the current goal_id + revision + verified result version may submit achieved.",
       "Only the current goal_id + revision + verified result version may submit achieved.",
       points=("acceptance.verifier.before", "acceptance.verifier.after", "acceptance.achieve.before")),
    _c("GOAL-05", _S, _GOALS, "MLH", SEED_000, TODO,
       "Evidence versions and the Goal control version are rechecked before achieved is committed.",
       "Recheck evidence versions and compare the Goal control version before committing."),
    _c("GOAL-06", _S, _GOALS, "MLH", SEED_000, TODO,
       "An achieved Goal is not monitored or reopened afterwards; later work needs separate acceptance.",
       "it does not automatically monitor files or reopen the Goal afterward"),
    _c("GOAL-07", _S, _GOALS, "MLH", SEED_000, TODO,
       "A Goal enters blocked only when the same real blocker recurs consecutively and no independent work is "
       "available.",
       "Enter blocked only when the same real blocker recurs consecutively and no independent work is available."),
    _c("GOAL-08", _S, _GOALS, "MLH", SEED_000, TODO,
       "A Goal waiting on a live handle is in phase waiting and makes no idle model turns.",
       "Waiting with a live handle enters waiting without idle model turns."),
    _c("GOAL-09", _S, _GOALS, "MLH", SEED_000, TODO,
       "A round count is never evidence of blocking or completion, and there is no default round cap.",
       "A fixed total round count is not evidence of blocking or completion."),
    _c("GOAL-10", _S, _GOALS, "LH", SEED_000, GOALUI,
       "Each terminal Goal record keeps its own snapshot and transcript anchor; a later Goal never replaces it.",
       "Each record carries its own Goal snapshot and transcript anchor; a later Goal cannot replace its contents."),
    _c("GOAL-11", _S, _GOALS, "ML", SEED_000, GOALUI,
       "Terminal history is saved together with the Goal state under optimistic concurrency.",
       "Terminal history is saved with the Goal state under optimistic concurrency."),

    # ---- Todo and acceptance
    _c("ACC-01", _S, _GOALS, "MLH", SEED_000, TODO,
       "Goal creation preserves the original objective and extracts verifiable requirements from it.",
       "At creation, preserve the original objective and extract verifiable requirements"),
    _c("ACC-02", _S, _GOALS, "MLH", SEED_000, TODO,
       "Every necessary requirement has an evidence checkpoint; adding or removing Todo items never removes an "
       "original requirement.",
       "adding or removing Todo must not implicitly remove original requirements"),
    _c("ACC-03", _S, _GOALS, "LH", SEED_000, TODO,
       "Ordinary work turns run no second judge.",
       "Ordinary work turns do not run a second judge."),
    _c("ACC-04", _L, _GOALS, "MLC", SEED_000, TODO,
       "A Goal enters verifying when the worker submits a complete candidate or all required Todo items finish "
       "without verification.",
       "Enter verifying when the worker submits a complete candidate or all required Todo items finish without "
       "verification.", points=("todo.complete.before_acceptance",)),
    _c("ACC-05", _S, _GOALS, "MLH", SEED_000, TODO,
       "Acceptance first checks current revision, required Todo, unfinished subtasks and relevant unknown effects, "
       "then runs one independent read-only review.",
       "then run one independent read-only acceptance review"),
    _c("ACC-06", _S, _GOALS, "MLH", SEED_000, TODO,
       "The worker's completion text is never an acceptance fact.",
       "The worker's completion text is not an acceptance fact."),
    _c("ACC-07", _S, _GOALS, "MLH", SEED_000, TODO,
       "Acceptance returns met, unmet or unknown with evidence references for each requirement.",
       "Acceptance returns met / unmet / unknown and evidence references for each requirement."),
    _c("ACC-08", _S, _GOALS, "LH", SEED_000, TODO,
       "Evidence for a controlled artifact carries a version number or content digest; an external fact carries its "
       "verification time and query receipt.",
       "Controlled artifacts use version numbers or content digests"),
    _c("ACC-09", _S, _GOALS, "MLH", SEED_000, TODO,
       "Verification tests keep ordinary tool approval and budget rules; shell verification is not read-only.",
       "calling shell verification does not make it read-only"),
    _c("ACC-10", _S, _GOALS, "MLH", SEED_000, TODO,
       "Missing evidence returns the Goal to another work turn, never to a fabricated acceptance.",
       "Missing evidence returns to another work turn rather than fabricated acceptance."),
    _c("ACC-11", _S, _GOALS, "MLH", SEED_000, TODO,
       "A human waiver is an explicit objective revision with a reason; the agent never reduces scope itself.",
       "Human waivers must be explicit objective revisions with reasons; the agent cannot reduce scope itself."),

    # ---- Usage, cost and budget
    _c("USG-01", _S, _CHAT, "MLH", SEED_000, COST,
       "A provider request's goal_id, revision, turn_id and request_id are fixed before it is dispatched.",
       "Fix goal_id / revision / turn_id / request_id before dispatch.", points=("provider.request.before",)),
    _c("USG-02", _S, _GOALS, "MLH", SEED_000, COST,
       "Ordinary chat after a Goal is paused carries no attribution to that Goal.",
       "Ordinary chat after pausing has no old Goal attribution."),
    _c("USG-03", _S, _CHAT, "MH", SEED_000, COST,
       "Each usage receipt is counted once, never as both a parent total and child details.",
       "count each receipt once rather than adding both parent totals and child details"),
    _c("USG-04", _S, _CHAT, "H", SEED_000, COST,
       "A retry is a new provider attempt and counts separately when it incurs actual consumption.",
       "Retries are new provider attempts and count separately when they incur actual consumption."),
    _c("USG-05", _S, _CHAT, "MH", SEED_000, COST,
       "Streamed cumulative usage raises a watermark for the same attempt; cumulative snapshots are never summed.",
       "Streaming cumulative usage updates a watermark for the same attempt; do not sum cumulative snapshots.",
       points=("provider.response.midstream",)),
    _c("USG-06", _S, _GOALS, "MH", SEED_000, COST,
       "Goal usage projections update only after the durable receipt write succeeds.",
       "Update Goal projections only after durable receipt writes succeed.", points=_USAGE),
    _c("USG-07", _S, _CHAT, "MCH", SEED_000, COST,
       "A failed receipt write is retried with the same idempotency key, and statistics can be rebuilt after restart.",
       "Temporary failures retry with the same idempotency key, and restart can reconstruct statistics."),
    _c("USG-08", _S, _GOALS, "MLH", SEED_000, COST,
       "A late receipt stays attributed to its original Goal even if the Goal was paused, ended or edited.",
       "Late receipts remain attributed to the original Goal even if paused, ended, or edited."),
    _c("USG-09", _S, _CHAT, "MH", SEED_000, COST,
       "Known tokens and known prices are stored separately, and a pricing-table change never rewrites a historical "
       "quote.",
       "Store known tokens and known prices separately. Pricing-table changes do not rewrite historical quotes."),
    _c("USG-10", _S, _CHAT, "MLH", SEED_000, COST,
       "Estimates, known values and unknown usage are kept apart; unknown usage stays unknown, never zero.",
       "Display estimates, known values, and partial unknowns separately"),
    _c("USG-11", _S, _GOALS, "MLH", SEED_000, COST,
       "Active time accumulates from durable start/stop records, excludes pauses and downtime and is not reset by "
       "recovery.",
       "Accumulate active time from durable start/stop records, excluding pauses and downtime and without resetting "
       "on recovery.", restarts=(_RK.LONG_DOWNTIME,)),
    _c("USG-12", _S, _GOALS, "MCH", SEED_000, COST,
       "When an executor disappears its last heartbeat is kept; the time the crash was discovered is never recorded "
       "as its stop time.",
       "crash-discovery time is not stop time", restarts=_KILLS),
    _c("USG-13", _S, _GOALS, "ML", SEED_000, COST,
       "Late usage does not restart a paused timer.",
       "Late usage does not restart paused timers."),
    _c("USG-14", _S, _GOALS, "MLH", SEED_000, COST,
       "If an explicit time limit cannot be verified new admission stops; no default limit is added.",
       "If an explicit time limit cannot be verified, stop new admission without adding a default limit."),
    _c("USG-15", _S, _GOALS, "MLH", SEED_000, COST,
       "Budgets are unlimited by default: a Goal without a budget gets no default restriction.",
       "Budgets are unlimited by default."),
    _c("USG-16", _S, _GOALS, "MLH", SEED_000, COST,
       "Under a hard cost budget unknown prices or unverifiable consumption are never available balance: new paid "
       "admission pauses with a reason.",
       "unknown prices or unverifiable consumption cannot be treated as available balance; pause new paid admission "
       "and explain why"),
    _c("USG-17", _S, _GOALS, "MLH", SEED_000, COST,
       "Explicit budgets are rechecked after a ledger reload and before execution recovery or acceptance.",
       "Recheck explicit budgets after ledger reload and before execution recovery or acceptance."),
    _c("USG-18", _S, _CHAT, "MH", SEED_000, COST,
       "Unknown tokens and unknown costs keep separate reservations; partial cumulative data records only lower "
       "bounds.",
       "Unknown tokens and unknown costs retain separate reservations; partial cumulative data records only lower "
       "bounds."),
    _c("USG-19", _S, _GOALS, "MH", SEED_000, COST,
       "An expired unstarted reservation never dispatches, and a started request is never released automatically.",
       "Expired unstarted reservations cannot dispatch; started requests are not automatically released."),

    # ---- Background Jobs
    _c("JOB-01", _S, _JOBS, "MLCH", SEED_000, ARC,
       "Background work keeps its prior authorization and concurrency quota; a restart authorizes no additional "
       "subtasks.",
       "Background work retains its prior authorization and concurrency quota; restart does not authorize additional "
       "subtasks."),
    _c("JOB-02", _S, _JOBS, "MLCH", SEED_000, COST,
       "Background Jobs save Goal identity at the real active caller's admission boundary, restore it at startup, "
       "and clear unrelated temporary attribution.",
       "Background Jobs save Goal identity at the real active caller's admission boundary, restore it at startup, "
       "and clear unrelated temporary attribution."),
    _c("JOB-03", _S, _JOBS, "MLH", SEED_000, COST,
       "A cross-session call keeps the original caller's provenance without creating a cross-session canonical "
       "parent.",
       "Cross-session calls preserve original caller provenance without creating a cross-session canonical parent."),
    _c("JOB-04", _S, _JOBS, "MCH", SEED_000, COST,
       "Receipts save the Job's reservation identity, so metering is rebuilt after restart without an in-memory "
       "governor.",
       "receipts save Job reservation identity so metering can be reconstructed without an in-memory governor after "
       "restart"),

    # ---- Interface and reason codes
    _c("UI-01", _S, _CHAT, "LH", SEED_000, ARC,
       "Clients rebuild from canonical snapshots and monotonic event sequences; display is never a second control "
       "implementation.",
       "App/Web/TUI reconstruct from canonical snapshots and monotonic event sequences"),
    _c("UI-02", _S, _CHAT, "LCH", SEED_000, ARC,
       "UI orphan cleanup repairs only derived projections, never original records.",
       "UI orphan cleanup repairs only derived projections"),
    _c("UI-03", _S, _CHAT, "LCH", SEED_000, LAYER,
       "Derived UI and statistics are reconstructable and never overwrite original records.",
       "Derived UI and statistics can be reconstructed and must not overwrite original records."),
    _c("UI-04", _S, _GOALS, "MLH", SEED_000, CTRL,
       "The flags can_resume, can_verify, can_end and the reason_code come from the backend; no client infers them "
       "from status strings.",
       "Backend can_resume / can_verify / can_end and reason_code determine button permissions"),
    _c("UI-05", _S, _CHAT, "MLH", SEED_000, CTRL,
       "A UI read failure shows \"State temporarily unavailable\" with a refresh, never permanently disabled "
       "unexplained controls.",
       "UI read failures show “State temporarily unavailable” with refresh, not permanently disabled unexplained "
       "controls."),
    _c("UI-06", _S, _GOALS, "LH", SEED_000, GOALUI,
       "Verifier messages are internal records: no assessment text, evidence identifiers or raw report is appended "
       "to chat.",
       "Canonically identified verifier messages are internal records, not assistant chat prose"),

    # ---- Resources and fault states
    _c("RES-01", _S, _CHAT, "MLCH", SEED_000, ARC,
       "Before continuing, recovery rechecks directory, host, model/tool availability, credentials, current "
       "permissions and budget.",
       "continuation rechecks directory, host, model/tool availability, credentials, current permissions, and budget",
       restarts=(_RK.LONG_DOWNTIME,)),
    _c("RES-02", _S, _CHAT, "MLCH", SEED_000, ARC,
       "A missing resource or revoked permission yields a precise waiting reason, never an automatic switch of "
       "project, account or model or a widening of permissions.",
       "without switching project, account, or model or expanding permissions automatically"),
    _c("RES-03", _S, _CHAT, "MLH", SEED_000, ARC,
       "A temporary fault waits on a durable retry time with bounded backoff, never on idle model calls.",
       "Temporary faults use durable retry times and bounded backoff instead of idle model calls."),
    _c("RES-04", _S, _CHAT, "MLCH", SEED_000, ARC,
       "A persistent fault keeps the pending-recovery record and shows the error with Retry / Pause / End; no task "
       "is deleted.",
       "Persistent faults retain pending-recovery records and show the error plus Retry / Pause / End without "
       "deleting tasks."),
    _c("RES-05", _S, _CHAT, "LCH", SEED_000, FAIL,
       "Unavailable databases, broken migrations, missing credentials or directories, changed tool versions and lost "
       "projection events all get explicit states and recoverable actions, without clearing history or leaving "
       "unexplained disabled controls.",
       "Unavailable databases, broken migrations, missing credentials/directories, changed tool versions, and lost "
       "projection events all need explicit states and recoverable actions, without clearing history or leaving "
       "unexplained disabled controls."),
    _c("RES-06", _L, _CHAT, "MCH", SEED_000, FAIL,
       "Once a missing resource is restored through the offered action, the held work continues.",
       "all need explicit states and recoverable actions"),

    # ---- Paperclip: admission and execution (seed 001)
    _c("RTY-01", _S, _PC, "MLH", SEED_001, PC_TOP,
       "A task shows exactly one of: a working state, one scheduled retry, or an ordinary Retry action.",
       "A task shows one working state, one scheduled retry, or an ordinary Retry action."),
    _c("RTY-02", _S, _PC, "MLCH", SEED_001, PC_ADM,
       "A Retry records its wakeup receipt before any physical work.",
       "It records an agent_wakeup_requests receipt before physical work.",
       points=("retry.receipt.before", "retry.receipt.after")),
    _c("RTY-03", _S, _PC, "MLH", SEED_001, PC_ADM,
       "A Retry requires authenticated board task-mutation authority.",
       "It requires authenticated board task-mutation authority."),
    _c("RTY-04", _S, _PC, "MLH", SEED_001, PC_ADM,
       "Company/key uniqueness covers completed and failed receipts as well as pending ones.",
       "Company/key uniqueness covers completed and failed receipts as well as pending ones."),
    _c("RTY-05", _S, _PC, "MLH", SEED_001, PC_ADM,
       "Concurrent Retry clicks attach to the already accepted work.",
       "Concurrent clicks attach to accepted work."),
    _c("RTY-06", _S, _PC, "MLH", SEED_001, PC_ADM,
       "Only a new deliberate click after exhaustion may open a new generation; a repeated HTTP request never does.",
       "A new deliberate click after exhaustion can create a new generation; a repeated HTTP request cannot."),
    _c("RTY-07", _S, _PC, "ML", SEED_001, PC_ADM,
       "A click on an exhausted generation that needs an alternative strategy binds to that generation and "
       "continues without repeating the failed step.",
       "The click binds to that generation and continues without repeating the failed step."),
    _c("RTY-08", _S, _PC, "LCH", SEED_001, PC_ADM,
       "A Retry never silently drops the agent's work.",
       "A Retry never silently drops the agent's work"),
    _c("RTY-09", _S, _PC, "MCH", SEED_001, PC_ADM,
       "A workspace is reused only when it is the same one local directory the failed run used, still bound to and "
       "owned by this task, not a shared project workspace and not under remote storage authority, with the prior "
       "executor stopped, its leases released and the recovery generation settled, and no other lease, failed "
       "cleanup or running workspace operation holding it; a restart orphan does not count (an operation of the "
       "stopped source that started before the source settled and before the current server process started), but "
       "operations with no run, of another run, or started in the current process still block reuse.",
       "The prior executor must be stopped, its leases released, and the recovery generation settled."),
    _c("RTY-10", _S, _PC, "MCH", SEED_001, PC_ADM,
       "Otherwise the Retry runs in a fresh isolated attempt seeded from committed files, and the previous "
       "directory is retained unmodified.",
       "Otherwise the Retry continues in a fresh isolated attempt seeded from committed files. The previous "
       "directory is retained unmodified."),
    _c("RTY-11", _S, _PC, "ML", SEED_001, PC_ADM,
       "Reuse and fresh attempt alike consume the generation's one alternative attempt.",
       "Either choice consumes the generation's one alternative attempt."),
    _c("RTY-12", _S, _PC, "MCH", SEED_001, PC_ADM,
       "Preparing the same attempt again after a restart reuses the directory it already created and bound.",
       "Preparing the same attempt again after a restart reuses the directory that attempt already created and bound",
       points=("workspace.prepare.before", "workspace.prepare.after", "bootstrap.before_dispatch"), restarts=_KILLS),
    _c("RTY-13", _S, _PC, "MCH", SEED_001, PC_ADM,
       "A task directory is never the base of a new git worktree.",
       "a task directory is never the base of a new git worktree"),
    _c("RTY-14", _L, _PC, "MCH", SEED_001, PC_ADM,
       "A re-preparation that fails after a restart before the provider starts settles the coordinator as a terminal "
       "failure, so a later Retry is admitted.",
       "the run settles its native coordinator as a terminal failure, so a later Retry is admitted",
       restarts=_KILLS),
    _c("RTY-15", _S, _PC, "MCH", SEED_001, PC_PR,
       "Settling a failed re-preparation changes only a coordinator still observed, owned by that claim, without a "
       "result, for a failed run; a reattach claim of a live runner is never changed.",
       "Reattach claims (live runner) are not changed.",
       points=("coordinator.settle.before", "coordinator.settle.after")),
    _c("RTY-16", _S, _PC, "MC", SEED_001, PC_ADM,
       "A GitHub Retry selects already-saved, undelivered input before replaying the failed run's older request; the "
       "selected receipts transfer to the retry owner under the dispatch transaction and link to its one successor, "
       "including after a restart or a lost dispatch response.",
       "A GitHub Retry selects already-saved, undelivered input before replaying the failed run's older request. The "
       "selected receipts transfer to the retry owner under the dispatch transaction. They link to its one "
       "successor, including after a restart or a lost dispatch response."),
    _c("RTY-17", _L, _PC, "MLH", SEED_001, PC_ADM,
       "A rejected, unadmitted Retry releases its saved input for another deliberate Retry.",
       "Rejected, unadmitted retries release the saved input for another deliberate Retry."),
    _c("RTY-18", _S, _PC, "ML", SEED_001, PC_ADM,
       "Saving a deferred Retry grants no execution authority; pause, budget and access gates still pass before one "
       "successor starts.",
       "Saving that wait grants no execution authority."),
    _c("RTY-19", _S, _PC, "MCH", SEED_001, PC_ADM,
       "Restarts reuse the Retry receipt: no new Retry generation and no repeated external publication.",
       "Restarts reuse the receipt; they do not create another Retry generation or another external publication."),
    _c("RTY-20", _S, _PC, "MLH", SEED_001, PC_ADM,
       "Attaching a Retry to active automatic recovery preserves its generation, attempt count and deadline.",
       "Attaching a Retry to active automatic recovery preserves its generation, attempt count and deadline."),
    _c("RTY-21", _S, _PC, "ML", SEED_001, PC_ADM,
       "Missing, cyclic, contradictory or overlong (over 32 runs) retry lineage stays held; transcript hints confer "
       "no authority.",
       "Missing, cyclic, contradictory or overlong lineage stays held; transcript hints confer no authority."),
    _c("RTY-22", _S, _PC, "M", SEED_001, PC_ADM,
       "Prior action outcomes stay recorded and are never replayed by a Retry's authorization.",
       "Prior action outcomes remain recorded and are never replayed by this authorization."),
    _c("RTY-23", _S, _PC, "MLH", SEED_001, PC_ADM,
       "A saved message is consumed once, when execution starts.",
       "The saved message is consumed once when execution starts"),
    _c("RTY-24", _S, _PC, "MLH", SEED_001, PC_ADM,
       "Unknown execution, operator Stop, changed ownership or missing receipts keep a Retry request held; "
       "preservation alone authorizes no automatic replay.",
       "Unknown execution, operator Stop, changed ownership and missing receipts keep the request held."),
    _c("RTY-25", _S, _PC, "MCH", SEED_001, PC_ADM,
       "An accepted result goes to its existing finalizer; recovery never starts a second agent to reproduce it.",
       "Recovery does not create a second agent to reproduce that result.", points=("run.finalize.before",),
       restarts=_KILLS),

    # ---- Paperclip: retry policy and historical adoption
    _c("RTY-26", _S, _PC, "MH", SEED_001, PC_POLICY,
       "Maintenance allows an initial attempt and at most five retries, at 30, 60, 120, 240 and 480 s each with "
       "±20 % jitter.",
       "Maintenance allows an initial attempt and five retries at 30, 60, 120, 240 and 480 seconds with persisted "
       "±20% jitter."),
    _c("RTY-27", _S, _PC, "MCH", SEED_001, PC_POLICY,
       "A retry's jitter is persisted: a restart never redraws a scheduled retry time.",
       "with persisted ±20% jitter", restarts=_KILLS),
    _c("RTY-28", _S, _PC, "MH", SEED_001, PC_POLICY,
       "Retry scheduling stops 30 minutes after the first failure: no retry is scheduled after then, while a longer "
       "provider cooldown takes precedence, even when it ends past the window.",
       "Scheduling stops 30 minutes after the first failure."),
    _c("RTY-29", _S, _PC, "MH", SEED_001, PC_POLICY,
       "A longer provider cooldown takes precedence over the retry schedule.",
       "A longer provider cooldown takes precedence."),
    _c("RTY-30", _S, _PC, "MCH", SEED_001, PC_POLICY,
       "Restarts, phase changes and rescans never replenish the retry budget.",
       "Restarts, phase changes and rescans do not replenish the budget.",
       restarts=(_RK.GRACEFUL_WORKER_RESTART, *_KILLS, _RK.LONG_DOWNTIME)),
    _c("RTY-31", _S, _PC, "MLH", SEED_001, PC_POLICY,
       "Stricter execution retry limits stay separate and are never loosened by the maintenance policy.",
       "Existing stricter execution retry limits remain separate."),
    _c("RTY-32", _S, _PC, "M", SEED_001, PC_POLICY,
       "The maintenance sweep classifies at most 50 historical records per tick, and durable markers prevent repeat "
       "adoption.",
       "The maintenance sweep classifies at most 50 historical records per tick."),
    _c("RTY-33", _S, _PC, "LH", SEED_001, PC_POLICY,
       "Historical failure evidence stays intact through adoption.",
       "Historical failure evidence remains intact."),
    _c("RTY-34", _S, _PC, "MLH", SEED_001, PC_POLICY,
       "A task with no waiting request needs a Retry before another agent turn.",
       "A task with no waiting request requires Retry before another agent turn."),
    _c("RTY-35", _S, _PC, "MLH", SEED_001, PC_POLICY,
       "Completed, cancelled, deliberately paused and superseded tasks never reopen merely because old files need "
       "maintenance.",
       "Completed, cancelled, deliberately paused and superseded tasks do not reopen merely because old files need "
       "maintenance."),
    _c("RTY-36", _S, _PC, "L", SEED_001, PC_POLICY,
       "Adoption alone is never reported as proof that files were recovered.",
       "Adoption alone is not proof that files were recovered."),
    _c("RTY-37", _S, _PC, "LH", SEED_001, PC_DIAG,
       "An admission whose outcome is unknown reconciles the same request key, never a new one.",
       "Unknown admission reconciles the same request key."),
    _c("RTY-38", _S, _PC, "ML", SEED_001, PC_ADM,
       "Each retained recovery hold of a failed execution keeps its own containment and effect checks; a hold never "
       "borrows another run's workspace strategy.",
       "It does not borrow another run's strategy or skip any hold's independent containment and effect checks."),
    _c("RTY-39", _S, _PC, "MCH", SEED_001, PC_ADM,
       "Continuing a failed native preparation needs proof that no provider work started and exact stop receipts for "
       "every source lease; any input, result, process, output or usage evidence prevents admission.",
       "input, result, process, output and provider usage evidence still prevent admission"),
    _c("RTY-40", _S, _PC, "H", SEED_001, PC_FILES,
       "A fresh attempt is used only when the task's own workspace cannot safely continue the work: a Retry whose "
       "prior directory is safe to reuse continues there.",
       "It is used only when the task's own workspace cannot safely continue the work."),
    _c("RTY-41", _S, _PC, "H", SEED_001, PC_DIAG,
       "Exhausted attempts remain on the source recovery record with their failure code and retry budget.",
       "Exhausted attempts remain on the system-owned source recovery record with their failure code, evidence "
       "fingerprint and retry budget."),

    # ---- Restart failure acceptance (seed 000, with 003 where it is more precise)
    _c("FA-01", _S, _CHAT, "CH", SEED_000, FAIL,
       "Every safety clause holds after each restart kind: frontend reload, normal exit, graceful worker restart, "
       "forced kill, downtime past two hours, and a crash during recovery.",
       "Cover frontend reload, normal App exit, graceful worker restart, forced worker termination, downtime beyond "
       "the old two-hour window, and another crash during recovery.", restarts=tuple(RestartKind),
       points=DURABLE_WRITE_POINTS),
    _c("FA-02", _S, _CHAT, "CH", SEED_000, FAIL,
       "Host-restart semantics, tested through process-identity changes, hold: work meant to run is recovered, the "
       "restart is never read as a user Pause, and recovery never silently becomes cross-host takeover.",
       "Test host-restart semantics through process-identity changes", restarts=(_RK.HOST_IDENTITY_CHANGE,)),
    _c("FA-03", _S, _CHAT, "CH", SEED_000, FAIL,
       "A crash before input acceptance leaves no acknowledged request; a crash after it leaves the request saved "
       "exactly once and not re-appended.",
       "Interruption points include before/after input acceptance", points=_IN, restarts=_KILLS),
    _c("FA-04", _S, _CHAT, "CH", SEED_003, ZH_FAIL,
       "A crash around or during a provider request leaves its usage counted once or marked unknown, never "
       "fabricated, and the work continues under the recovery rules.",
       "provider 请求中", points=_PROVIDER, restarts=_KILLS),
    _c("FA-05", _S, _CHAT, "CH", SEED_000, FAIL,
       "A crash before tool dispatch leaves the call never started; after dispatch its outcome is unknown or its "
       "live child is reconnected, and a non-idempotent tool is never run twice automatically.",
       "before/after tool dispatch", points=_TOOL, restarts=_KILLS),
    _c("FA-06", _S, _CHAT, "CH", SEED_000, FAIL,
       "A crash before result commit leaves the effect recorded as unknown or the real result recovered; after "
       "commit the committed result is used; the effect is never repeated.",
       "before/after result commit", points=_RESULT, restarts=_KILLS),
    _c("FA-07", _S, _JOBS, "CH", SEED_003, ZH_FAIL,
       "A crash during parent/child delivery delivers the child's result to the parent exactly once.",
       "父子消息投递中", points=("child.delivery.before", "child.delivery.after"), restarts=_KILLS),
    _c("FA-08", _S, _GOALS, "CH", SEED_000, FAIL,
       "A crash after all Todo items complete but before acceptance leads to acceptance after recovery, never to "
       "achieved without it.",
       "all Todo complete before acceptance", points=("todo.complete.before_acceptance",), restarts=_KILLS),
    _c("FA-09", _L, _CHAT, "CH", SEED_000, FAIL,
       "A crash after the completion commit but before projection delivery converges the projection to the "
       "committed completion without re-running the work.",
       "after completion commit before projection delivery", points=("completion.commit.before_projection",),
       restarts=_KILLS),
    _c("FA-10", _S, _CHAT, "CH", SEED_000, FAIL,
       "A crash before or after usage persistence leaves each receipt counted exactly once or marked unknown.",
       "before/after usage persistence", points=_USAGE, restarts=_KILLS),
    _c("FA-11", _S, _CHAT, "MCH", SEED_000, FAIL,
       "A second crash at any recovery phase leaves recovery idempotent: one owner, one mode, no duplicate repair or "
       "admission.",
       "another crash during recovery", points=_RECOVERY, restarts=(_RK.CRASH_DURING_RECOVERY,)),
    _c("FA-12", _L, _CHAT, "MCH", SEED_000, FAIL,
       "Several sessions recovered together are admitted through fair queueing and shared quotas: no session is "
       "starved by the others, and together they stay within the quotas they share.",
       "Recover multiple sessions together to prove fair queueing, shared quotas"),
    _c("FA-13", _S, _CHAT, "MCH", SEED_000, FAIL,
       "Recovering several sessions together keeps one owner per work item and executes nothing twice because a "
       "notification was repeated.",
       "one owner per work item, and no duplicate execution from repeated notifications"),
    _c("FA-14", _S, _CHAT, "MLCH", SEED_000, FAIL,
       "User Pause / End, permission changes and new input take priority during recovery; old versions never "
       "continue.",
       "User Pause / End, permission changes, and new input take priority during recovery; old versions cannot "
       "continue.", points=_RECOVERY),
    _c("FA-15", _S, _CHAT, "MCH", SEED_000, FAIL,
       "Live child processes are only reconnected, and unknown non-idempotent writes are only investigated, never "
       "re-run.",
       "Live child processes only reconnect; unknown non-idempotent writes only undergo investigation.",
       points=("tool.running", "tool.finished.uncommitted"), restarts=(_RK.WORKER_KILL,)),
    _c("FA-16", _S, _CHAT, "MH", SEED_000, FAIL,
       "Late results and late usage keep their original identity and attribution.",
       "Late results and usage retain their original identity."),
)
# fmt: on

OMISSIONS: tuple[Omission, ...] = (
    Omission("Goal UI styling: transcript cards, attachment-card styling, the read-only details dialog, keyboard "
             "focus, the composer showing the current Goal, an empty Todo's placeholder",
             SEED_000, GOALUI,
             "presentation, not recovery behaviour; the adapter protocol observes state, not pixels (the state behind "
             "it is covered by GOAL-10, GOAL-11, UI-04, UI-06)"),
    Omission("the exact wording of \"State temporarily unavailable\" and of its refresh entry", SEED_000, CTRL,
             "UI wording; the behaviour (an unavailable state with a refresh, never an unexplained disabled control, "
             "when the UI cannot read state) is UI-05"),
    Omission("create_goal/get_goal/update_goal only read and write objectives", SEED_000,
             "Restart recovery and Goal design for the complete session runtime",
             "a tool-surface design choice with no restart behaviour to observe"),
    Omission("no exactly-once promise for arbitrary external operations; no general scheduler; keep the Python "
             "Workflow API", SEED_000, "Restart recovery and Goal design for the complete session runtime",
             "non-goals of the design; they bound the contract rather than add to it"),
    Omission("Retain compatibility reads for paused_recoverable", SEED_000, LAYER,
             "legacy storage migration inside one product; not visible through the adapter protocol"),
    Omission("Goal and Job share start/settlement transactions in usage.db", SEED_000, COST,
             "names one product's storage layout; the observable consequence is JOB-04 and USG-03"),
    Omission("reserve a maximum request amount when calculable, otherwise no promise of absolute overspend "
             "prevention; hard budgets accept only audited limits, explicit prices and service tiers", SEED_000, COST,
             "price-table and tier configuration is product policy the kit cannot observe; USG-16 covers unknown cost"),
    Omission("semantic requirements use independent model review; independent acceptance can also err; ask the user "
             "only when ambiguity would change scope", SEED_000,
             TODO, "the judgement's quality is not a recovery property; ACC-05 keeps the review independent"),
    Omission("test isolation rules: isolated storage, non-user-visible processes, never terminate the user's work, "
             "default-instance App acceptance, never reboot the user's machine, OS reboot listed as unverified",
             SEED_000, FAIL,
             "obligations on the test harness, honoured by the kit's design (private temp dirs, its own process "
             "groups, no reboot: an actual OS reboot is reported as not covered), not clauses a runtime honours"),
    Omission("stage order: public-entry failure reproduction, minimal implementation, regression; release gates",
             SEED_000, IMPL, "project process, not runtime behaviour"),
    Omission("acceptance distinguishes source, automated tests, local App and remote release; designs without test "
             "or deployment evidence are not marked implemented (was FA-17)", SEED_000, IMPL,
             "a rule of the framework's own release process: it governs how the design's implementation status is "
             "reported, which no runtime shows through the adapter protocol, so no method the kit runs can judge it; "
             "the kit holds its own verdicts to the same rule (missing evidence is unknown, never valid: "
             "docs/decisions.md D9)"),
    Omission("GitHub App reconnect, webhook, App-binding and legacy processed-response proofs for Retry", SEED_001,
             PC_ADM, "GitHub-integration machinery specific to Paperclip; the general rules (RTY-18, RTY-19, RTY-24) "
             "are kept"),
    Omission("saved-input batching (batch sizes, per-principal access checks), Agent Chat owner checks, object run "
             "logs with zero-byte SHA-256 proofs, sessionIdBefore, the priorWorkspace hint and Git status readability",
             SEED_001, PC_ADM,
             "implementation detail of Paperclip's storage and integrations with no counterpart in the abstract "
             "runtime"),
    Omission("hosted Cloud / Daytona machinery: signed absence observations, sandbox reopen, stop receipts, export and "
             "provider-pack cache reclamation, Core-managed storage", SEED_001, PC_FILES,
             "hosted-infrastructure protocols; the kit has no cloud provider, and the general fence is EFF-12"),
    Omission("historicalRecoveryCounts diagnostics, Thinking presentation, Steer/Interrupt targets, local server log, "
             "no Cloud incident endpoint", SEED_001, PC_DIAG,
             "diagnostics and presentation; the checkable rule kept is RTY-37"),
    Omission("workspace-export failures keep their repair path; the exact-run retry endpoint keeps its "
             "source-bound contract; a new run clears the prior failure notice", SEED_001, PC_ADM,
             "Paperclip's export machinery, its second retry API and its UI notice; the protocol has one retry "
             "request and no export operation"),
    Omission("connected conversations keep their inbound authorization owner; a board Retry keeps the external "
             "principal, conversation access and publication checks; a resumed chat Retry keeps its exact input "
             "batch while independent board messages keep their own receipts; undelivered receipts of a refused "
             "merged batch can be restored", SEED_001, PC_ADM,
             "external principals and conversation input batches have no counterpart in the protocol; the general "
             "rules are RTY-18, RTY-19 and RTY-23"),
    Omission("the systemRecovery record's revision and generation fence late bookkeeping writes; another agent "
             "needs authoritative containment of the old executor; copyback needs a quiescent writer and a "
             "verified destination", SEED_001, PC_FILES,
             "bookkeeping and copyback internals; generation fencing of writes is judged in the chat core (OWN "
             "clauses), and a stopped prior executor is one of RTY-09's conditions"),
    Omission("saved authorized follow-ups continue through normal dispatch", SEED_001, PC_POLICY,
             "saved follow-up input on tasks is not in the protocol; RTY-34 states the rule for a task without one"),
    Omission("a recovery binding the task no longer points to keeps its existing path; a git worktree base is "
             "always the project's checkout or the task's own worktree", SEED_001, PC_PR,
             "the first needs a request that moves a task's binding, which the protocol does not have; the second is "
             "RTY-13 seen from the base, judged there by `git worktree list` of every repository"),
    Omission("Qualification: vitest suites, the Daytona probe, browser fixture, hosted acceptance", SEED_001,
             "Qualification", "Paperclip's own test commands; the kit's chaos waves play that role"),
)

# Ids taken out of the catalogue, with the reason. They stay reserved: a new clause takes the next free number.
RETIRED: dict[str, str] = {
    "FA-17": "a rule of the framework's own release process (designs without test or deployment evidence are not "
             "marked implemented), not runtime behaviour the kit can judge; moved to the omissions",
}



@dataclass(frozen=True, slots=True)
class NotJudged:
    """Why the kit does not judge a clause against a runtime. ``observable`` False: no check from outside the
    runtime can tell it held (the clause then does not count among the observable ones); True: an outside check
    could, but none that can fail on the reference runtime exists yet (it still counts, as not judged)."""

    reason: str
    observable: bool


# Clauses no certify or chaos check judges, with the reason; `recoverykit contract coverage` prints it, and a test
# fails when a clause listed here gets a killing mutant (the entry is then stale).
NOT_JUDGED: dict[str, NotJudged] = {
    "REC-04": NotJudged(
        "The recovery decision record is internal: what a client sees of a decision (status, reason_code, actions) "
        "comes from the durable store either way, so a runtime that derives the same decision again at every start "
        "looks the same as one that reads it back. Its visible consequence, an effect with no durable record "
        "behind it, is judged where the effect is (USG-01, FA-04, EFF-01, REC-06, RI-08).", observable=False),
    "REC-07": NotJudged(
        "Which mechanism makes cross-database steps converge (a retryable outbox or another) cannot be told from "
        "outside, nor whether a runtime assumes a cross-database transaction that never fails; the visible "
        "consequence, one receipt per attempt in flight at a crash, is judged as USG-01 and FA-04.",
        observable=False),
    "CTX-03": NotJudged(
        "A repeated repair shows only when a runtime repairs the same turn twice; the reference repairs in one "
        "transaction that also ends the turn, so no kill point (crash_during_recovery at claim, repair or decide "
        "included) makes it repeat, and no realistic mutant gives a check a failure to show. What a second crash "
        "leaves is judged as FA-11 and CTX-07.", observable=True),
    "CTX-05": NotJudged(
        "A late receipt needs a result that arrives after the runtime already sent a placeholder for it; the "
        "kit's probes are local children, which a runtime rightly waits for (OWN-07), and the protocol has no "
        "operation that delivers an external receipt late. A real result never displaced once sent is judged as "
        "CTX-04.", observable=True),
    # --- approvals profile: what checks_approvals does not judge yet, and why
    "EFF-04": NotJudged(
        "Which writes a runtime counts as related to an unknown effect is its own determination; the kit's "
        "scenarios put every write of the conversation in the effect's scope, where keeping the approval and the "
        "restriction shows as APR-02, APR-03 and APR-07 and, for a runtime that refuses, EFF-08. Telling a runtime "
        "that drops them for a related write from one that rightly judged a write unrelated needs a scenario with "
        "writes of known relevance (the same target as the unknown write, and another), which the probes lack.",
        observable=True),
    "EFF-09": NotJudged(
        "The visible symptom, a write in an unknown effect's scope run without reconciliation or the user's "
        "approval, is APR-02's (EFF-08's for a runtime that refuses; one bug, one clause: D21). What EFF-09 adds, "
        "that a runtime's relevance determination is reliable, needs the same writes of known relevance as EFF-04.",
        observable=True),
    # --- Jobs profile (D41): what checks_jobs cannot judge, and why
    "REC-08": NotJudged(
        "Whether the server or the JobRunner took a recovery decision, and through which entry point, is internal: "
        "one decision taken twice by the same code looks the same as two taken independently until they disagree, "
        "and what a disagreement does is judged where it shows: one owner per work item (OWN clauses), no subtask "
        "started again and the quota held (JOB-01), each child's result delivered once (FA-07).", observable=False),
    # --- Goal profile (D22): what checks_goals cannot judge yet, and why
    "REC-16": NotJudged(
        "Which code path a runtime recovers a Goal through is internal; what a shared entry point guarantees, a "
        "Goal continuing by itself after a restart with one owner and nothing asked twice, is judged by the chat "
        "checks on goal_restart and goal_work_turns's chaos cells.", observable=False),
    "GOAL-11": NotJudged(
        "That the terminal record is written in the same transaction as the state is internal; its visible "
        "consequence, achieved only for the Goal version its acceptance judged, is judged as GOAL-04 and GOAL-05.",
        observable=False),
    "CTL-06": NotJudged(
        "A continuation key is opaque to the kit (the protocol compares it for equality only), and a key that "
        "failed to bind the revision or the previous turn shows only if two continuations meet on it, which a key "
        "that also binds the transcript (as the reference's does) never lets happen; its visible consequence, a "
        "continuation sent for a version no longer current, is judged as GOAL-03, and an old acceptance never "
        "achieving a new revision as GOAL-02.", observable=True),
    "USG-13": NotJudged(
        "Late usage reaches a paused Goal only as the response of a request in flight at the Pause, which the "
        "worker that sent it settles before it lets go; a timer that usage restarted is closed by that same worker "
        "moments later, below what two observations of active_time_s can tell apart from the Pause itself. The kit "
        "has no operation that delivers a receipt after the worker let go (see CTX-05); what a paused Goal's timer "
        "does is judged as USG-11 (active time stands still while paused).", observable=True),
}

# Paperclip clauses (seed 001) no check judges yet: what the kit would need first. Observable from outside, so
# they stay in the observable count as not judged (D20); issue 15's slices judge the Retry path of #19759 (D38,
# D50, D51).
_PC_NEEDS = {
    "RTY-07": "which exhausted generation 'requires an alternative strategy' and what its 'failed step' is belong "
              "to a strategy model the protocol does not expose (only a workspace strategy per run); the reference "
              "opens a new generation on every click after exhaustion",
    "RTY-11": "the generation's one alternative attempt is not in the snapshot (runs carry generation and "
              "attempt, not whether the alternative was consumed)",
    "RTY-16": "a GitHub Retry's selection of saved deliveries before the failed run's older request, and the "
              "transfer of their receipts under the dispatch transaction to one successor, need GitHub deliveries "
              "with receipts; task_message (1.4) saves input with no receipt to transfer or link (its general rule, "
              "consumed once when execution starts, is RTY-23)",
    "RTY-18": "a deferred connected-conversation Retry needs pause, budget and access gates on tasks, which the "
              "protocol does not have",
    "RTY-21": "lineage (32-run chains, cycles) needs historical runs the kit can plant; the protocol has no such "
              "request",
    "RTY-36": "adoption diagnostics (historicalRecoveryCounts) are not in the snapshot",
    "RTY-38": "several retained holds of one failed execution need historical holds the kit cannot plant",
}
NOT_JUDGED.update({cid: NotJudged(why, observable=True) for cid, why in _PC_NEEDS.items()})


def index(clauses: Iterable[Clause]) -> dict[str, Clause]:
    """Clauses by id; a duplicate id or a retired one is refused (ids are never reused)."""
    found: dict[str, Clause] = {}
    for c in clauses:
        if c.id in RETIRED:
            raise InvalidArgument(f"clause id {c.id} is retired ({RETIRED[c.id]}); give the clause the next free "
                                  f"number of its area")
        if c.id in found:
            raise InvalidArgument(f"duplicate clause id {c.id}")
        found[c.id] = c
    return found


_BY_ID: dict[str, Clause] = index(CLAUSES)


def clause(clause_id: str) -> Clause:
    """The clause with this id; ``UnknownClause`` (an InvalidArgument and a KeyError) otherwise."""
    if not isinstance(clause_id, str):
        raise UnknownClause(f"a clause id is a string like 'OWN-06', got {clause_id!r} ({type(clause_id).__name__})")
    found = _BY_ID.get(clause_id.strip().upper())
    if found is None and clause_id.strip().upper() in RETIRED:
        wanted = clause_id.strip().upper()
        raise UnknownClause(f"clause {wanted} was retired: {RETIRED[wanted]} (see OMISSIONS in "
                            "recoverykit.model.contract, \"Deliberate omissions\" in docs/contract.md)")
    if found is None:
        close = difflib.get_close_matches(clause_id.upper(), _BY_ID, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownClause(f"no clause {clause_id!r} in the contract catalogue{hint} "
                            "(`recoverykit contract list` shows every id)")
    return found


def _coerce(value: object, enum: type[StrEnum], what: str) -> StrEnum:
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(m.value for m in enum)
        raise InvalidArgument(f"{what} {value!r} is not one of: {choices}") from None


def by_profile(profile: Profile | str) -> tuple[Clause, ...]:
    wanted = _coerce(profile, Profile, "profile")
    return tuple(c for c in CLAUSES if c.profile is wanted)


def by_method(method: Method | str) -> tuple[Clause, ...]:
    wanted = _coerce(method, Method, "method")
    return tuple(c for c in CLAUSES if wanted in c.methods)


def by_area(area: str) -> tuple[Clause, ...]:
    if area not in AREAS:
        raise InvalidArgument(f"area {area!r} is not one of: {', '.join(AREAS)}")
    return tuple(sorted((c for c in CLAUSES if c.area == area), key=lambda c: c.number))


def to_json(clauses: Iterable[Clause] | None = None) -> list[dict[str, object]]:
    """JSON-ready dicts, in catalogue order."""
    return [c.to_json() for c in (CLAUSES if clauses is None else clauses)]


DOCS_COMMAND = "recoverykit contract docs > docs/contract.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """The text of docs/contract.md."""
    out = [
        f"<!-- Generated by `{DOCS_COMMAND}` from recoverykit.model.contract; do not edit by hand. -->",
        "# The recovery contract",
        "",
        "Every clause of the requirement documents (the seeds: OpenProgram's restart-recovery and Goal design, "
        "000 in English and 003 in Chinese, and Paperclip's task-recovery document with its PR #19759, 001) "
        "that a runtime must honour, as a numbered invariant. "
        "A clause's statement doubles as its violation message (`broke OWN-06: ...`). Ids are stable: new "
        "clauses are appended, never renumbered.",
        "",
        "Kinds: **safety** (a single state or history refutes it) and **liveness** (checked under bounded "
        "fairness). Methods: **model** (an invariant checked in every state the bounded exploration reaches), "
        "**lockstep** (the adapter's snapshot compared with the model after each operation), **chaos** (checked "
        "after real process faults at interruption points and restart kinds), **history** (checked on the "
        "recorded history, provider ledger and probe witness log).",
        "",
        f"{len(CLAUSES)} clauses ({sum(c.kind is Kind.SAFETY for c in CLAUSES)} safety, "
        f"{sum(c.kind is Kind.LIVENESS for c in CLAUSES)} liveness), {len(OMISSIONS)} deliberate omissions, "
        f"{len(RETIRED)} retired id{'s' if len(RETIRED) != 1 else ''}. "
        "Checkable by " + ", ".join(f"{m.value}: {sum(m in c.methods for c in CLAUSES)}" for m in Method) + ".",
        "",
        "Cite a clause from code with `clause(\"OWN-06\").broke(detail)` (`recoverykit.model.contract`); look one "
        "up with `recoverykit contract show OWN-06`; list them with `recoverykit contract list [--json] "
        "[--profile P] [--method M]`.",
        "",
        "| area | clauses | " + " | ".join(p.value for p in Profile) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in Profile) + " |",
    ]
    for area, title in AREAS.items():
        members = [c for c in CLAUSES if c.area == area]
        counts = " | ".join(str(sum(c.profile is p for c in members)) for p in Profile)
        out.append(f"| {area} {title} | {len(members)} | {counts} |")
    for area, title in AREAS.items():
        out += ["", f"## {area}: {title}", ""]
        for c in by_area(area):
            methods = ", ".join(m.value for m in Method if m in c.methods)
            out += [f"### {c.id} ({c.kind.value}, {c.profile.value})", "", c.statement, "",
                    f"- source: `{c.seed}`, section \"{c.section}\"",
                    f"- quote: \"{c.quote}\"",
                    f"- checked by: {methods}"]
            if c.points:
                out.append("- interruption points: " + ", ".join(f"`{p}`" for p in c.points))
            if c.restarts:
                out.append("- restart kinds: " + ", ".join(f"`{r.value}`" for r in c.restarts))
            out.append("")
        if out[-1] == "":
            out.pop()
    out += ["", "## Deliberate omissions", "",
            "What the seeds say that this catalogue leaves out, and why.", "",
            "| what | source | why |", "| --- | --- | --- |"]
    for o in OMISSIONS:
        out.append(f"| {_cell(o.what)} | `{o.seed}`, \"{_cell(o.section)}\" | {_cell(o.reason)} |")
    out += ["", "## Clauses the kit does not judge", "",
            "No certify or chaos check judges these against a runtime, and why. *Not observable*: no check from "
            "outside a runtime can tell whether it held.", "",
            "| id | observable from outside | why |", "| --- | --- | --- |"]
    out += [f"| {clause_id} | {'yes' if nj.observable else 'no'} | {_cell(nj.reason)} |"
            for clause_id, nj in NOT_JUDGED.items()]
    out += ["", "## Retired ids", "",
            "Ids taken out of the catalogue. They stay reserved and are never given to another clause.", "",
            "| id | why |", "| --- | --- |"]
    out += [f"| {clause_id} | {_cell(reason)} |" for clause_id, reason in RETIRED.items()]
    return "\n".join(out) + "\n"


__all__ = [
    "AREAS", "CLAUSES", "DOCS_COMMAND", "NOT_JUDGED", "OMISSIONS", "RETIRED", "SEEDS", "SEED_000", "SEED_001",
    "SEED_003", "Clause", "Kind", "Method", "NotJudged", "Omission", "UnknownClause", "by_area", "by_method",
    "by_profile", "clause", "index", "render_markdown", "to_json",
]
