"""USG-19: an expired unstarted reservation never dispatches, and a started request is never released automatically.

Seed 000, "Usage, cost and budget": "Reserve a maximum request amount when calculable", and "Expired unstarted
reservations cannot dispatch; started requests are not automatically released." A runtime that declares the
snapshot section ``reservations`` (protocol 1.4) shows what each paid attempt under a hard budget holds of it: the
attempt it covers (``request_id``, as its receipt names it), its ``expires_at`` on the runtime's clock and its
state. Evidence: the reservations ``observe`` shows (the runtime's word), the provider's ledger (which attempts
really reached the provider, and when: the kit's), and the kit's clock offsets (``start.clock_offset_s``: long
downtime moves the runtime's clock past an expiry). What a reservation is, and which attempt it covers, is the
runtime's word, so the verdict is self-reported; when an attempt was sent is the kit's.

- An expired unstarted reservation never dispatches: no attempt a reservation covers reaches the provider for the
  first time after that reservation's ``expires_at`` (the kit's arrival time moved to the runtime's clock), and a
  reservation once observed ``expired`` is never observed ``started`` or ``settled`` later.
- A started request is never released automatically: a reservation whose attempt reached the provider, or that was
  observed ``started``, is never later ``released``, ``expired`` or gone from the section; only its receipt settles
  it (``settled`` with its receipt's usage ``known`` or ``partial`` beside it, never with usage unknown).

Valid needs both halves exercised: an unstarted reservation observed before a restart and observed again after the
runtime's clock passed its expiry, and a reservation whose attempt reached the provider observed still held after a
restart while its receipt's usage was unknown. Anything less is unknown, never valid.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _judgement
from recoverykit.conformance.checks_paperclip import kit_clock
from recoverykit.conformance.history import restarts
from recoverykit.conformance.provider_ledger import calls

TOLERANCE_S = 1.0  # the runtime marks a reservation started just before it sends; clocks are read apart
GIVEN_BACK = ("released", "expired")


def _sent(ev: Evidence) -> dict[str, float]:
    """request id (the runtime's X-Request-Id) -> when it first reached the provider, on the kit's clock."""
    out: dict[str, float] = {}
    for c in calls(ev.ledger):
        rid = c.header_request_id
        if rid and "time" in c.request:
            out.setdefault(rid, float(c.request["time"]))
    return out


def check_reservations(ev: Evidence) -> list[ClauseResult]:
    """USG-19: expired unstarted reservations never dispatch; started ones are settled only by their receipts."""
    observed = [o for o in ev.history.observations if isinstance(o.snapshot.get("reservations"), list)]
    if not any(o.snapshot["reservations"] for o in observed):
        return []  # no reservation was ever shown (no hard budget, or the section is not declared)
    sent, kills = _sent(ev), [f.time for f in restarts(ev.history)]
    problems: list[str] = []
    held: dict[str, dict[str, Any]] = {}  # reservation id -> its last row, while it must stay (started)
    unstarted: dict[str, tuple[float, dict[str, Any]]] = {}  # first observation of each as reserved
    expired_seen: set[str] = set()
    passed, kept = set(), set()
    for o in observed:
        rows = {v.get("reservation_id"): v for v in o.snapshot["reservations"]}
        receipts = {r.get("request_id"): r for r in o.snapshot.get("usage_receipts") or []}
        for rid, last in list(held.items()):
            if rid not in rows:
                problems.append(f"reservation {rid} of started request {last.get('request_id')} is no longer shown "
                                f"(observation {o.index}): released without its receipt")
                del held[rid]
        for rid, v in rows.items():
            req, state, expires = v.get("request_id"), v.get("state"), v.get("expires_at")
            first = sent.get(req)
            if first is not None and expires is not None and kit_clock(ev, first) > float(expires) + TOLERANCE_S:
                problems.append(f"request {req} first reached the provider at {kit_clock(ev, first):.3f} on the "
                                f"runtime's clock, after its reservation {rid} expired at {float(expires):.3f}")
            if rid in expired_seen and state in ("started", "settled"):
                problems.append(f"reservation {rid} was observed expired, then {state} (observation {o.index})")
            if state == "expired":
                expired_seen.add(rid)
            started = state == "started" or (first is not None and first < o.time)
            receipt = receipts.get(req)
            if state in GIVEN_BACK and (rid in held or (first is not None and first < o.time)):
                problems.append(f"reservation {rid} is {state} (observation {o.index}), though its request {req} "
                                "was started: only its receipt may settle it")
            elif state == "settled" and receipt is not None and receipt.get("usage") not in ("known", "partial"):
                problems.append(f"reservation {rid} is settled while its receipt's usage is {receipt.get('usage')}")
            if state == "reserved" and first is None and expires is not None:
                unstarted.setdefault(rid, (o.time, v))
            if rid in unstarted and expires is not None and kit_clock(ev, o.time) > float(expires) and any(
                    unstarted[rid][0] < k < o.time for k in kills):
                passed.add(rid)  # seen unstarted, a restart, then seen again once the runtime's clock passed it
            if state == "started" and first is not None and any(first < k < o.time for k in kills) and (
                    receipt is None or receipt.get("usage") not in ("known", "partial")):
                kept.add(rid)  # sent, a restart, its usage still unknown: still held
            if started and state not in GIVEN_BACK and state != "settled":
                held[rid] = v
            else:
                held.pop(rid, None)
    return _judgement("USG-19", problems, min(len(passed), len(kept)),
                      "no unstarted reservation was observed across a restart past its expiry, or no started one "
                      "across a restart with its usage unknown",
                      f"{len(passed)} unstarted reservation(s) past their expiry never dispatched, {len(kept)} "
                      "started one(s) with unknown usage still held after a restart")


RESERVATION_CHECKS = (check_reservations,)
