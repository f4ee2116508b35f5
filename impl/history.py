"""The request projection: the message list sent to the provider, built from durable records.

Original history is never rewritten; this is a view over it (seed 000, request-history repair):
each assistant tool call is followed immediately by its result (the result of that very call: the nearest
earlier call with its id, since providers may reuse ids across responses), where the last saved real result
wins over a recovery placeholder, and a call with neither gets a deterministic unknown placeholder.
Tool results without a matching call are not sent. User-message order is untouched. The partial text
of a response lost mid-stream is sent as it was saved, with its interruption marker, so it is never taken
for a complete answer (and it never carried a reasoning signature to reuse).
"""

from __future__ import annotations

import json

from .db import Database
from .store import rows


def placeholder_text(status: str, tool: str) -> str:
    if status == "never_started":
        return f"[recovery] The call to {tool} never started; it had no effect. Call it again if still needed."
    return (f"[recovery] The outcome of the call to {tool} is unknown: it was interrupted after it started, "
            "so its effect may or may not have happened. Do not assume either; investigate with read-only tools.")


def build(db: Database, session_id: str, work_id: str | None = None) -> list[dict]:
    """The session's conversation; for a Job or a subtask (``work_id``) its own conversation only."""
    own = " AND work_id=?" if work_id else ""
    args = (session_id, work_id) if work_id else (session_id,)
    msgs = rows(db, f"SELECT * FROM messages WHERE session_id=?{own} ORDER BY msg_seq", args)
    # Each result belongs to the nearest earlier assistant message that made its call: providers may reuse call
    # ids from one response to the next (call_0, call_1, ...), so an id alone does not name a call.
    maker: dict[str, int] = {}  # call id -> msg_seq of the latest assistant message making it, so far
    results: dict[tuple[int, str], dict] = {}
    for m in msgs:
        if m["role"] == "assistant" and m["tool_calls"]:
            for c in json.loads(m["tool_calls"]):
                maker[c["id"]] = m["msg_seq"]
        if m["role"] != "tool" or not m["tool_call_id"] or m["tool_call_id"] not in maker:
            continue
        key = (maker[m["tool_call_id"]], m["tool_call_id"])
        prior = results.get(key)
        # A real result always replaces a placeholder; among reals, the last saved one wins.
        if prior is None or m["origin"] == "real" or prior["origin"] != "real":
            results[key] = m
    # the calls' records in the order they were made, per provider id (the k-th call made with an id is its k-th)
    status: dict[str, list[dict]] = {}
    made_in = f"SELECT work_id FROM work_items WHERE session_id=?{own}"
    for c in rows(db, f"SELECT provider_call_id, status, tool_name FROM tool_calls WHERE work_id IN ({made_in})"
                      " ORDER BY created_at, call_id", args):
        status.setdefault(c["provider_call_id"], []).append(c)
    made: dict[str, int] = {}
    out: list[dict] = []
    for m in msgs:
        if m["role"] == "tool":
            continue
        if m["role"] == "assistant" and m["tool_calls"]:
            calls = json.loads(m["tool_calls"])
            out.append({"role": "assistant", "content": m["content"] or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]})
            for c in calls:
                nth = made.get(c["id"], 0)
                made[c["id"]] = nth + 1
                found = results.get((m["msg_seq"], c["id"]))
                if found is not None:
                    text = found["content"]
                else:
                    records = status.get(c["id"], [])
                    known = records[nth] if nth < len(records) else {}
                    text = placeholder_text(known.get("status", "outcome_unknown"), c["name"])
                out.append({"role": "tool", "tool_call_id": c["id"], "content": text})
            continue
        out.append({"role": m["role"], "content": m["content"] or ""})
    return out
