"""Storage faults judged from the kit's own evidence: REC-01, RES-05 (storage part), OWN-04 (storage part).

Why a module: a runtime that cannot read or migrate its facts is the one case where its own report is least
to be trusted (it may have just replaced its store with an empty one and report that, honestly, as fine).
So each verdict rests first on what the kit recorded itself (``conformance.storage_fault``): the SHA-256 of
every store file as the kit left it when it faulted the store and as it found it when it restored it, the
provider's ledger and the probe tools' witness log between those two moments (the *fault window*), and the
operations it sent. What the runtime says in ``snapshot.storage`` is only read for what nobody else can see:
that it names the fault and offers a way out.

- **REC-01**: every faulted file is byte for byte as the kit left it at the end of the window (nothing
  cleared, truncated or overwritten), the runtime showed a recovery failure (never ``ok``) while faulted, and
  after the retry every work item acknowledged before the fault is still there.
- **OWN-04, storage part**: while the store was faulted no model request reached the provider, no probe tool
  started and no byte of the store changed, and no lease newer than before the fault was shown. (Writes while
  a *lease* is uncertain are judged elsewhere.)
- **RES-05, storage part**: while faulted the state named the fault (``unreadable`` or ``migration_failed``,
  with its reason code) and offered a recoverable action; once the kit restored the store and took ``retry``,
  the store was ``ok`` again and the held work went on (the ledger shows its request after the retry) with
  its inputs kept. (Credentials, directories, tool versions and projection events are other checks' part.)

A history without a storage fault gives no result: the clauses are judged only where the kit faulted a store.
"""

from __future__ import annotations

from typing import Any

from recoverykit.conformance.checker import ClauseResult, Evidence, _result, kit_evidence
from recoverykit.conformance.history import Fault, Observation, Op
from recoverykit.conformance.storage_fault import FAULT, RESTORE
from recoverykit.model.catalogue import ReasonCode, StorageAction, StorageFault, StorageState, Verdict

_UNAVAILABLE, _MIGRATION = ReasonCode.RECOVERY_FAILED_STORAGE_UNAVAILABLE, ReasonCode.RECOVERY_FAILED_MIGRATION
EXPECTED = {  # fault -> (the state that names it, its reason code)
    StorageFault.UNREADABLE.value: (StorageState.UNREADABLE.value, _UNAVAILABLE.value),
    StorageFault.NEWER_SCHEMA.value: (StorageState.MIGRATION_FAILED.value, _MIGRATION.value),
}
WHAT = {StorageFault.UNREADABLE.value: "unreadable", StorageFault.NEWER_SCHEMA.value: "at a newer schema"}
RECOVERY_FAILED = {code for _, code in EXPECTED.values()}
KIT = "kit evidence: sha256 of the store files, the provider ledger and the witness log in the fault window"


class Window:
    """One storage fault as the history holds it: its two fault events and everything between and after."""

    def __init__(self, ev: Evidence, fault: Fault, restore: Fault | None, nxt: Fault | None) -> None:
        self.ev, self.fault, self.restore = ev, fault, restore
        self.kind = str(fault.detail.get("fault"))
        self.what = WHAT.get(self.kind, self.kind)
        self.files: dict[str, dict[str, Any]] = fault.detail.get("files") or {}
        self.start, self.end = fault.time, restore.time if restore else float("inf")
        end_index = restore.index if restore else len(ev.history.events)
        stop_index = nxt.index if nxt else len(ev.history.events)
        events = ev.history.events
        self.during: list[Observation] = [e for e in events[fault.index:end_index] if isinstance(e, Observation)]
        self.before: list[Observation] = [e for e in events[:fault.index] if isinstance(e, Observation)]
        self.after: list[Observation] = [e for e in events[end_index:stop_index] if isinstance(e, Observation)]
        ops = [e for e in events[fault.index:end_index] if isinstance(e, Op)]
        self.started_on_fault = any(o.f == "start" and o.type != "invoke" for o in ops)
        done = {op.invoke: op for op in ev.history.ops if op.type != "invoke"}
        self.retry: Op | None = next((e for e in events[end_index:stop_index] if isinstance(e, Op)
                                      and e.f == "start" and e.type == "invoke"
                                      and getattr(done.get(e.index), "type", None) == "ok"), None)

    def storages(self) -> list[dict[str, Any] | None]:
        return [o.snapshot.get("storage") for o in self.during]

    def changed(self) -> list[str]:
        found = (self.restore.detail.get("found") or {}) if self.restore else {}
        return [f"{name}: sha256 {info.get('damaged', '')[:12]} as the kit left it, "
                f"{(found.get(name) or 'gone')[:12]} at the restore" for name, info in sorted(self.files.items())
                if found.get(name) != info.get("damaged")]


def windows(ev: Evidence) -> list[Window]:
    faults = ev.history.faults
    out = []
    for n, fault in enumerate(faults):
        if fault.kind != FAULT:
            continue
        later = faults[n + 1:]
        restore = next((f for f in later if f.kind == RESTORE), None)
        nxt = next((f for f in later if f.kind == FAULT), None)
        out.append(Window(ev, fault, restore, nxt))
    return out


def _held_work(w: Window) -> tuple[str | None, str | None]:
    return w.fault.detail.get("script"), w.fault.detail.get("work_id")


def _acknowledged_before(w: Window) -> dict[str, str]:
    """work_id -> client_msg_id of every submit acknowledged before the fault."""
    out = {}
    for invoke, done in w.ev.history.completions():
        if invoke.f == "submit" and invoke.index < w.fault.index and done is not None and done.type == "ok":
            out[done.value["work_id"]] = invoke.value.get("client_msg_id")
    return out


def _final_readable(w: Window) -> Observation | None:
    final = w.after[-1] if w.after else None
    storage = final.snapshot.get("storage") if final else None
    return final if storage and storage.get("state") == StorageState.OK.value else None


def check_rec01(w: Window) -> ClauseResult:
    """REC-01: a read or migration failure shows recovery failure and never clears old state."""
    if w.restore is None:
        return _result("REC-01", Verdict.UNKNOWN, f"the store ({w.what}) was never restored, so never hashed again")
    changed = w.changed()
    if changed:
        return _result("REC-01", Verdict.INVALID, f"the runtime changed or removed its store ({w.what}) instead of "
                       f"leaving it: {changed[0]}", changed)
    if not w.during or not w.started_on_fault:
        return _result("REC-01", Verdict.UNKNOWN, "the runtime was not started and observed on the faulted store")
    storages = w.storages()
    if any(s is None for s in storages):
        return _result("REC-01", Verdict.UNKNOWN, "snapshot.storage not sent while the store was faulted")
    shown_ok = [s for s in storages if s.get("state") == StorageState.OK.value]
    if shown_ok:
        return _result("REC-01", Verdict.INVALID, f"the store was {w.what} (the kit's fault) but the runtime "
                       "reported it ok: no recovery failure shown")
    silent = [s for s in storages if s.get("reason_code") not in RECOVERY_FAILED]
    if silent:
        return _result("REC-01", Verdict.INVALID, f"while the store was {w.what} the runtime showed reason "
                       f"{silent[0].get('reason_code')!r}, not a recovery failure")
    final = _final_readable(w)
    if final is not None and final.snapshot.get("work_items") is not None:
        present = {i["work_id"] for i in final.snapshot["work_items"]}
        lost = [f"{wid} (input {cid})" for wid, cid in _acknowledged_before(w).items() if wid not in present]
        if lost:
            return _result("REC-01", Verdict.INVALID, f"after the store was restored and retried, work acknowledged "
                           f"before the fault is gone: {', '.join(lost)}", lost)
    return _result("REC-01", Verdict.VALID, f"{KIT}: {len(w.files)} files unchanged while the store was "
                   f"{w.what}, and the runtime showed {storages[0].get('reason_code')} in {len(storages)} observations")


def check_own04(w: Window) -> ClauseResult:
    """OWN-04, storage part: nothing written (no model request, no tool, no byte, no new lease) while unreadable."""
    if w.restore is None or not w.started_on_fault:
        return _result("OWN-04", Verdict.UNKNOWN, "storage part: the runtime never ran on a faulted store that was "
                       "then restored")
    requests = [r for r in w.ev.ledger if r.get("event") == "request" and w.start < r.get("time", 0) < w.end]
    if requests:
        return _result("OWN-04", Verdict.INVALID, f"storage part: the runtime sent {len(requests)} model requests "
                       f"while its store was {w.what} (ledger seq {requests[0].get('seq')}, script "
                       f"{requests[0].get('script_id')}): it acted on facts it could not read")
    tools = [e for e in (w.ev.witness.executions if w.ev.witness else []) if w.start < e.started < w.end]
    if tools:
        return _result("OWN-04", Verdict.INVALID, f"storage part: probe tool {tools[0].tool} started (pid "
                       f"{tools[0].pid}) while the store was {w.what}")
    changed = w.changed()
    if changed:
        return _result("OWN-04", Verdict.INVALID, f"storage part: the {w.what} store was written while the runtime "
                       f"could not use it: {changed[0]}", changed)
    seen = {lease.get("generation", 0) for o in w.before for lease in o.snapshot.get("leases") or []}
    before = max((g for g in seen if isinstance(g, int)), default=0)
    new = [lease for o in w.during for lease in o.snapshot.get("leases") or []  # an opaque token: one not seen before
           if (lease.get("generation", 0) not in seen if isinstance(lease.get("generation", 0), str)
               else lease.get("generation", 0) > before)]
    if new:
        return _result("OWN-04", Verdict.INVALID, f"storage part: lease generation {new[0].get('generation')} for "
                       f"{new[0].get('work_id')} appeared while the store was {w.what}")
    return _result("OWN-04", Verdict.VALID, f"storage part ({KIT}): no model request, no tool start, no store "
                   f"write and no new lease while the store was {w.what}; the uncertain-lease part is not judged here")


def check_res05(w: Window) -> ClauseResult:
    """RES-05, storage part: an explicit state and a recoverable action, which, taken, lets the work go on."""
    part = "storage part (unavailable database / broken migration)"
    if not w.during or not w.started_on_fault:
        return _result("RES-05", Verdict.UNKNOWN, f"{part}: the runtime was not observed on the faulted store")
    state, code = EXPECTED.get(w.kind, (None, None))
    storages = w.storages()
    if any(s is None for s in storages):
        return _result("RES-05", Verdict.UNKNOWN, f"{part}: snapshot.storage not sent while the store was faulted")
    for s in storages:
        if s.get("state") != state or s.get("reason_code") != code:
            return _result("RES-05", Verdict.INVALID, f"{part}: the store was {w.what}, but the runtime showed state "
                           f"{s.get('state')!r} with reason {s.get('reason_code')!r} (expected {state} / {code})")
        if not s.get("actions"):
            return _result("RES-05", Verdict.INVALID, f"{part}: the {w.what} store is shown as {state} with no "
                           "recoverable action: the user is left with nothing to do")
    if any(StorageAction.RETRY.value not in s["actions"] for s in storages):
        return _result("RES-05", Verdict.UNKNOWN, f"{part}: no `retry` offered, so the kit could not take the action")
    if w.restore is None or w.retry is None:
        return _result("RES-05", Verdict.UNKNOWN, f"{part}: the store was not restored and retried")
    final = w.after[-1] if w.after else None
    storage = final.snapshot.get("storage") if final else None
    if not storage or storage.get("state") != StorageState.OK.value:
        return _result("RES-05", Verdict.INVALID, f"{part}: after the store was restored and `retry` taken, the "
                       f"runtime still shows {storage.get('state') if storage else 'nothing'}: the action recovers "
                       "nothing")
    script, work_id = _held_work(w)
    asked = [r for r in w.ev.ledger if r.get("event") == "request" and r.get("script_id") == script
             and r.get("time", 0) > w.retry.time]
    if script and not asked:
        return _result("RES-05", Verdict.INVALID, f"{part}: after the store was restored and `retry` taken, the "
                       f"held work ({work_id}) never asked the provider again: it did not continue")
    item = next((i for i in final.snapshot.get("work_items") or [] if i.get("work_id") == work_id), None)
    cid = _acknowledged_before(w).get(work_id)
    if work_id and (item is None or cid not in {i.get("client_msg_id") for i in item.get("inputs", [])}):
        return _result("RES-05", Verdict.INVALID, f"{part}: after the retry the held work {work_id} or its input "
                       f"{cid!r} is gone: history was cleared")
    return _result("RES-05", Verdict.VALID, f"{part}: shown as {state} ({code}) with actions "
                   f"{storages[0]['actions']}; after the kit restored the store and took retry, the held work "
                   f"asked the provider again ({len(asked)} requests, kit ledger) with its input kept")


def check_storage_faults(ev: Evidence) -> list[ClauseResult]:
    """Every storage fault the kit applied in this run, judged for REC-01, OWN-04 and RES-05."""
    return [check(w) for w in windows(ev) for check in (check_rec01, check_own04, check_res05)]


STORAGE_CHECKS = (kit_evidence(check_storage_faults),)
