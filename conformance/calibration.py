"""Calibration: how slow is this runtime, on this machine, now? Measured once, before the catalogue.

A framework that loads its model client at its first model call (seconds of CPU), on a loaded machine, can be
slower than every window the kit waits in (``pacing``): its scenarios then end unknown, though nothing is wrong
with its recovery. So before the scenarios the kit starts the runtime once in a run of its own and submits one
simple turn against the scripted provider, and measures

- ``start_s``: ``start`` sent until answered (the runtime up and ready);
- ``first_request_s``: the submit until the runtime's first model request reached the provider;
- ``turn_s``: the submit until the runtime reported quiescence (the turn answered and done).

Each is compared with the window it must fit in, with ``HEADROOM`` to spare (a scenario fits several starts and
turns in one window, and runs beside others): the scale is the largest of ``HEADROOM * measured / window``, at
least the user's ``--timeout-scale``, and at most ``CAP`` above it. A runtime that never answers is not made
slower to give up on: what calibration could not measure does not raise the scale, and says so.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recoverykit.conformance.client import start_timeout_s
from recoverykit.conformance.environment import BrokerFactory, Run, make_run_dir
from recoverykit.conformance.errors import AdapterCommandError, OperationFailed, ProtocolError
from recoverykit.conformance.pacing import REQUEST, SETTLE, Pacing
from recoverykit.conformance.provider_script import script_tag
from recoverykit.model.errors import RecoveryKitError

HEADROOM = 4.0  # a window is at least this many times what calibration measured
CAP = 10.0  # calibration never scales the windows beyond this (the user's --timeout-scale may)
SCRIPT_ID = "calibrate"
SCRIPT = {"scripts": [{"id": SCRIPT_ID, "steps": [{"text": "calibrated"}]}]}


@dataclass
class Calibration:
    """What was measured (seconds; None: not measured) and the scale it asks for."""

    asked: float
    start_s: float | None = None
    first_request_s: float | None = None
    turn_s: float | None = None
    needed: float = 1.0  # the scale the measurements ask for (before the user's and the cap)
    scale: float = 1.0
    notes: list[str] = field(default_factory=list)
    run_dir: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)
        return {"start_s": r(self.start_s), "first_request_s": r(self.first_request_s), "turn_s": r(self.turn_s),
                "needed": self.needed, "asked": self.asked, "scale": self.scale, "headroom": HEADROOM, "cap": CAP,
                "notes": list(self.notes), "run_dir": str(self.run_dir) if self.run_dir else None}


def calibrate(adapter: str, out: Path, asked: Pacing, *, broker_factory: BrokerFactory | None = None) -> Pacing:
    """Measure the runtime once (a run of its own under ``out``); the pacing for the catalogue, its calibration
    recorded in it. The adapter command failing to start at all is the user's (``AdapterCommandError``)."""
    found = Calibration(asked.scale)
    try:
        _measure(adapter, out, asked, broker_factory, found)
    except AdapterCommandError:
        raise
    except (ProtocolError, OperationFailed, RecoveryKitError, TimeoutError, OSError) as exc:
        found.notes.append(f"calibration stopped: {type(exc).__name__}: {str(exc)[:300]}")
    if not found.notes and found.run_dir is not None:  # measured in full: nothing in it to look at, as a passing case
        _remove(found.run_dir)
        found.run_dir = None
    limits = {"start": start_timeout_s(), "request": REQUEST.seconds, "settle": SETTLE.seconds}
    measured = {"start": found.start_s, "request": found.first_request_s, "settle": found.turn_s}
    asks = [HEADROOM * v / limits[k] for k, v in measured.items() if v is not None]
    found.needed = math.ceil(max(asks, default=0.0) * 10) / 10  # up, to a tenth
    found.scale = max(asked.scale, min(CAP, found.needed))
    if found.needed > CAP:
        found.notes.append(f"the runtime needs x{found.needed:g}, more than calibration gives (x{CAP:g}): "
                           "give --timeout-scale")
    return asked.with_scale(found.scale, found.as_dict())


def _measure(adapter: str, out: Path, asked: Pacing, broker_factory: BrokerFactory | None,
             found: Calibration) -> None:
    # the user's windows for the adapter's replies (a hung adapter costs no more than in any case); the first model
    # request gets as long as calibration could ever act on (CAP / HEADROOM request windows), or the user's
    pacing = asked
    wait_first = REQUEST.seconds * max(asked.scale, CAP / HEADROOM)
    found.run_dir = make_run_dir(out, "calibration")
    with Run(adapter, found.run_dir, SCRIPT, broker_factory=broker_factory, pacing=pacing) as run:
        began = time.monotonic()
        started = run.start(failpoints="")
        if not started.ok:
            found.notes.append(f"start was refused ({started.error}); not measured")
            return
        found.start_s = time.monotonic() - began
        if "chat_core" not in run.profiles:
            found.notes.append("no chat_core profile: no turn to time")
            return
        began = time.monotonic()
        out_ = run.op("submit", session_id="s-calibrate", text=f"{script_tag(SCRIPT_ID)} calibration",
                      client_msg_id="c-calibrate-1")
        if not out_.ok:
            found.notes.append(f"the submit was refused ({out_.error}); no turn timed")
            return
        deadline = began + wait_first
        while time.monotonic() < deadline:
            if any(r.get("event") == "request" for r in run.provider.records()):
                found.first_request_s = time.monotonic() - began
                break
            time.sleep(0.02)
        else:
            found.notes.append(f"no model request within {wait_first:g} s: not calibrated by it")
            return
        quiescent, _ = run.settle(SETTLE.seconds)
        if quiescent:
            found.turn_s = time.monotonic() - began
        else:
            found.notes.append(f"the turn had not settled within {pacing(SETTLE):g} s: not calibrated by it")


def _remove(run_dir: Path) -> None:
    """The calibration run's directory, gone (and ``runs/`` with it when it was the only thing there): like a
    passing case, a measurement that went as planned leaves no run directory behind."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()  # only when empty
