"""Reading the probe tools' witness log: which tool calls really executed, how often, still running.

The log is written by ``probe`` (one ``start`` and, unless the probe was killed, one ``finish``
record per execution). A probe killed mid-write can leave a torn last line; it is reported, not
fatal. An execution is identified by (probe_token, pid, create_time), so a recycled pid never
passes for a probe that is still alive.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from recoverykit.conformance.killer import ProcRef
from recoverykit.conformance.provider_ledger import read_jsonl
from recoverykit.model.errors import RecoveryKitError


class WitnessTimeout(RecoveryKitError, TimeoutError):
    """No probe execution appeared in the witness log within the time the kit allowed."""


@dataclass(frozen=True)
class Execution:
    probe_token: str
    tool: str
    effect_class: str
    pid: int
    create_time: float
    started: float
    finished: float | None
    outcome: str | None
    exit_code: int | None
    ppid: int | None = None
    emitted: bool | None = None  # the probe wrote its result on stdout; None: a log too old to say
    cwd: str | None = None  # the directory the runtime ran it in; None: removed under it, or a log too old to say
    tool_version: str | None = None  # the version the probe was declared with (its --tool-version)


    @property
    def done(self) -> bool:
        return self.finished is not None

    def alive(self) -> bool:
        """Is this very process (pid and start time) still running?"""
        return ProcRef(self.pid, self.create_time).alive()  # (across a clock step too: killer.same_start)


@dataclass(frozen=True)
class WitnessLog:
    records: list[dict[str, Any]]
    executions: list[Execution]
    torn: str | None  # an unfinished last line, if a writer was killed mid-write

    def by_token(self, token: str) -> list[Execution]:
        return [e for e in self.executions if e.probe_token == token]

    def count(self, token: str) -> int:
        return len(self.by_token(token))

    def duplicates(self) -> dict[str, int]:
        """Tokens that really executed more than once (the evidence of a re-run)."""
        counts = Counter(e.probe_token for e in self.executions)
        return {token: n for token, n in counts.items() if n > 1}

    def running(self) -> list[Execution]:
        return [e for e in self.executions if e.alive()]


def read_witness(path: str | os.PathLike) -> WitnessLog:
    records, torn = read_jsonl(path)
    finishes = {(r["probe_token"], r["pid"], r.get("create_time")): r for r in records if r.get("phase") == "finish"}
    emitted = {(r["probe_token"], r["pid"], r.get("create_time")) for r in records if r.get("phase") == "emitted"}
    executions = []
    for r in records:
        if r.get("phase") != "start":
            continue
        end = finishes.get((r["probe_token"], r["pid"], r.get("create_time")))
        executions.append(Execution(
            probe_token=r["probe_token"], tool=r.get("tool", ""), effect_class=r.get("effect_class", ""),
            pid=int(r["pid"]), create_time=float(r.get("create_time") or 0.0), started=float(r["time"]),
            finished=float(end["time"]) if end else None, outcome=end.get("outcome") if end else None,
            exit_code=end.get("exit_code") if end else None, ppid=r.get("ppid"),
            emitted=((r["probe_token"], r["pid"], r.get("create_time")) in emitted) if r.get("emits") else None,
            cwd=r.get("cwd"), tool_version=r.get("tool_version")))
    return WitnessLog(records, executions, torn)


def wait_for_execution(path: str | os.PathLike, token: str | None = None, timeout: float = 10.0, *,
                       finished: bool = False) -> Execution:
    """The first execution (of ``token``, if given) in the log, waiting up to ``timeout`` seconds.

    ``finished=True`` waits for its ``finish`` record (the effect is done). Raises TimeoutError.
    """
    deadline = time.monotonic() + timeout
    while True:
        if os.path.exists(path):
            for execution in read_witness(path).executions:
                if (token is None or execution.probe_token == token) and (execution.done or not finished):
                    return execution
        if time.monotonic() >= deadline:
            raise WitnessTimeout(f"no {'finished ' if finished else ''}execution of probe_token={token!r} "
                                 f"in {path} within {timeout}s")
        time.sleep(0.01)
