"""Generates docs/protocol.md from the RPC registry, so the document cannot drift from the schemas.

The order follows Maelstrom's protocol document: transport, envelope, reserved keys, handshake, errors,
then every operation, then the observe snapshot. Prose lives here, field tables come from pydantic.
"""

from __future__ import annotations

import re
from typing import Any

from recoverykit.conformance.protocol import json_schema
from recoverykit.conformance.protocol_envelope import (
    ERROR_CODES,
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    RESERVED_KEYS,
    ErrorReply,
)
from recoverykit.conformance.protocol_rpcs import RPCS, BudgetLimit, Lack, Pending, ProbeTool, ProcessInfo, StorageDecl
from recoverykit.conformance.protocol_snapshot import (
    SECTION_DOCS,
    SECTION_MODELS,
    Budget,
    Owner,
    Section,
    StorageStatus,
)
from recoverykit.model.catalogue import INTERRUPTION_POINTS

COMMAND = "recoverykit protocol docs > docs/protocol.md"
CHANGELOG = """\
- **1.0** (first version): transport, envelope, handshake, errors, the operations listed here, the
  observe snapshot with sections work_items, goals, turns, tool_calls, approvals, usage_receipts, leases,
  waits, fenced_writes and runs. Revised the same day, before any release: `max_cost_usd` is a number
  (was a decimal string), and no field carries a regular-expression pattern any more (the kit checks
  `protocol_version` itself), so the schema and the parser agree exactly; `recovery_policy` is the
  catalogue's RecoveryPolicy (`automatic` / `disabled`), no longer free text documented as `auto`.
- **1.1**: storage faults. `init_ok.storage` (optional, [StorageDecl](#storagedecl)) names the runtime's
  durable store inside `data_dir`, so the kit can make it unreadable, or put it at a newer schema, during
  downtime and restore it afterwards, owning the evidence (a copy and a hash of the original). An adapter that
  declares it sends `snapshot.storage` ([StorageStatus](#storagestatus)) on every observe; while the store is
  not `ok` the declared sections may be null. `retry` is taken by sending `start` again. Adapters of 1.0 need
  no change: without the declaration the storage scenarios are not applicable.
- **1.1** (also): resources that can change during downtime (docs/adapter-guide.md, section 9), all optional:
  `init.model` and `init.api_key` (the model and credential every provider request must carry),
  `submit.working_dir` (the session's working directory), `start.probe_tools` (the tools as they are now,
  e.g. with a changed `version`) and `init_ok.resources` (which of `model`, `credentials`, `working_dir`,
  `tool_version` the runtime rechecks after a restart; the kit changes only those). A 1.0 adapter ignores
  the new keys and declares nothing: its resource clauses stay unknown, never valid.
- **1.2**: the operator's automatic-recovery setting (docs/adapter-guide.md, section 10), optional:
  `init_ok.automatic_recovery_setting` declares that the runtime has an explicit setting that disables
  automatic recovery, and `start.automatic_recovery` (sent only then) sets it for that start on. Adapters of
  1.1 need no change: without the declaration the scenario `recovery_disabled` is not applicable.
- **1.2** (also): an old paused record (docs/adapter-guide.md, section 11), optional: `init_ok.legacy_paused_record`
  declares that the adapter can write one, and the request `plant_paused_record` (sent only then, while the
  runtime is down) writes it. Without the declaration the scenario `legacy_paused_record` is not applicable.
- **1.2** (also): tools without a trusted class (docs/adapter-guide.md, section 2): a probe tool's
  `effect_class` may be null and it may carry `plugin_hints` (what its plugin declares, as MCP tool
  annotations do; never a class). Both are sent only to adapters answering 1.2 or later; a 1.1 adapter gets
  every tool with a class, and EFF-07 then stays unknown.
- **1.3**: approvals the kit can match to executions (docs/adapter-guide.md, section 12), optional: an
  approval in the snapshot may carry `tool_call_id` (the model's id of the call it binds to) and
  `effect_set` (the unknown-effect set it was asked under). Without them the approval checks that match an
  approval to the probe execution it allows stay unknown, never valid. The interruption points
  `approval.consume.before` / `.after` and `wait.notify.before_admit` / `.after` join the catalogue.
- **1.3** (profile `paperclip_retry`, seed 001 with #19759): Paperclip tasks. The requests `task_create` and
  `task_fault` (an environment fault the kit injects: a run failing with an error code, a workspace preparation
  failing validation), the snapshot sections `tasks`, `wakeup_receipts`, `workspaces`,
  `recovery_coordinators` and `retry_schedule`, optional `runs` fields (`generation`, `attempt`,
  `error_code`, `workspace`, `dispatched`), `retry_ok.receipt_status` and a `retry_ok.run_id` that is null
  while the receipt is deferred; the interruption points `retry.receipt.*`, `workspace.prepare.*`,
  `bootstrap.before_dispatch` and `coordinator.settle.*`. For a task, `retry.work_id` is its `task_id`.
  Adapters of earlier versions that do not declare `paperclip_retry` need no change.
- **1.3** (profile `goals`, also): a Goal in the snapshot may carry `requirements` (every requirement, waived
  ones with the waiver's reason, each with the current acceptance's verdict and evidence references with their
  version or digest), `terminal` (the record saved with a terminal state: revision, transcript anchor, digest)
  and `active_time_s` (from durable start/stop records); a budget may carry `max_active_s`, a hard limit of
  active time (`goal_create.budget`, `budget_set.limit` and the snapshot's `budget`). All optional: without them
  ACC-02, ACC-07, ACC-08, ACC-11, GOAL-10, USG-11, USG-12 and USG-14 stay unknown, never valid.
- **1.3** (profile `jobs`): background Jobs. The request `job_start` (a caller's Job: its authorized subtasks,
  its concurrency quota, the session it runs in), an optional `work_items[].provenance` (the caller whose
  request started a Job, kept by the Job and its subtasks) and an optional `usage_receipts[].job_id` (the Job an
  attempt's receipt is metered against, saved at dispatch). Adapters that do not declare `jobs` need no change;
  without `provenance` JOB-02, without `job_id` JOB-04 stays unknown, never valid.
- **1.4**: prices (seed 000, "Usage, cost and budget"), optional: `init_ok.pricing` declares that the runtime keeps
  a pricing table, the request `pricing_set` (sent only then) changes it, and `usage_receipts[].quote` is the
  price an attempt was quoted at, stored apart from its tokens and never rewritten. Without the declaration the
  scenario `pricing_history` is not applicable and USG-09 is not required.
- **1.4** (profile `paperclip_retry`), optional: the request `task_message` (a message saved on a task for its
  next execution start), the coordinator field `result` (`accepted` while a provider result waits for its
  finalizer) and the interruption point `run.finalize.before`; without them RTY-23, RTY-17 and RTY-25 stay
  unknown, never valid.
- **1.4** (profile `goals`, also): budget reservations, optional: the snapshot section `reservations` (declared in
  `init_ok.observes`) shows what each paid attempt under a hard budget holds of it: the attempt it covers
  (`request_id`, as its receipt names it), `max_tokens`, `expires_at` on the runtime's clock and its `state`
  (`reserved`, `started`, `settled`, `released`, `expired`). Without the section the scenario
  `goal_reservation_expiry` is not applicable and USG-19 is not required.

Changes within a MAJOR version are additive only: a new optional field in a request (adapters ignore keys
they do not know), a new request (adapters answer `not_supported`), a new optional snapshot section. Each
is listed here with the MINOR version that introduced it.
"""

INTRO = f"""\
# The recoverykit adapter protocol, version {PROTOCOL_VERSION}

The kit drives a runtime it did not write through an *adapter*: a long-lived program, in any language,
that the kit starts once per run and talks to over its standard input and output. The adapter translates
the kit's requests into the runtime's own API (HTTP, a CLI, a library call, a database read) and answers.
The kit owns the runtime's environment (provider, probe tools, failpoint broker, clock) and kills runtime
processes itself; the adapter process is never killed by the kit during a run.

Start with `recoverykit protocol ping --adapter "<your command>"`, then read docs/adapter-guide.md. The
machine-readable form of everything below is `recoverykit protocol schema` (JSON Schema, draft 2020-12).
"""

TRANSPORT = f"""\
## Transport

- Newline-delimited JSON, UTF-8: one message is one JSON object on one line, terminated by `\\n`.
- The kit writes requests to the adapter's **stdin**; the adapter writes replies to its **stdout**.
- **Nothing but messages on stdout.** Log to **stderr**; the kit saves it to `adapter.stderr.log` in the
  run directory. A stray `print` is a protocol break.
- A line may be at most {MAX_LINE_BYTES} bytes (1 MiB) without its newline; the kit can be configured
  with a larger limit. A longer line is a protocol break and the stream is not read further.
- The adapter is started without a shell, from the command split like a POSIX shell would (shlex), in
  its own process group, with its working directory inherited.
- Requests may overlap: the kit may send a request while an earlier one is still unanswered (it does
  so when an operation is held at a failpoint). Replies may come in any order; each request gets exactly
  one reply. An adapter that handles requests one at a time conforms, provided every request ends, with
  a reply or an `error`, when a runtime process it waits on dies.
- The kit waits a bounded time for each reply (10 s by default, 60 s for operations that start or stop
  processes, `timeout_s` + 10 s for `quiesce`). Silence past it ends the run with verdict **unknown**.
"""

ENVELOPE = """\
## Envelope

Every message is a JSON object with a `type` and a `msg_id`. A reply also carries `in_reply_to`, the
`msg_id` of the request it answers. The reply to a request of type `X` has type `X_ok`, or `error`.
The adapter never sends a message that is not a reply.

```
{"type":"observe","msg_id":7}
{"type":"observe_ok","msg_id":31,"in_reply_to":7,"snapshot":{"work_items":[],"goals":null}}
```

Messages are strict: no key other than the ones documented may appear in what the adapter sends, and
no value is coerced (`"1"` is not an integer). Fields whose type includes null must be sent, as null
when the value is not known; snapshot sections may be omitted, which means null. The adapter must
ignore keys it does not know in what the kit sends, so the kit can add optional fields.
"""

HANDSHAKE_INTRO = """\
## Handshake

The kit's first message is `init`. The adapter prepares (but does not yet start) the runtime with the
given data directory, provider, probe tools and failpoint socket, and answers `init_ok` with its
capabilities. The kit accepts any adapter whose protocol MAJOR version equals its own. Profiles the
adapter does not declare are reported *not applicable*, never as passed. Requests of a profile the
adapter did not declare may be answered `not_supported`.

**Storage faults (since 1.1, optional).** An adapter may declare in `init_ok.storage` which files under
`data_dir` hold the runtime's durable facts ([StorageDecl](#storagedecl)). The kit then faults that store
itself while the runtime is down (between a kill and the next `start`): it inverts the first 100 bytes of
every declared file that exists and of its `-wal` sibling (*unreadable*), or raises the first file's SQLite
`PRAGMA user_version` by one (*newer schema*, only with `schema_version: "sqlite_user_version"`). It keeps a
copy and a SHA-256 of every file, starts the runtime, observes, then restores the files and sends `start`
again (the `retry` action). While the store is faulted the runtime must start, write nothing (no repair, no
lease, no model request, no tool), and report the fault in `snapshot.storage` ([StorageStatus](#storagestatus))
with its recoverable actions; it must never delete, truncate or overwrite the faulted files. After the retry
the held work continues. Without the declaration these scenarios are *not applicable*, never passed.
"""

ERRORS_INTRO = """\
## Errors

Any request may be answered with an `error` instead of its `_ok` reply. Errors are **definite** (the
operation did not happen and never will) or **indefinite** (it may have happened, or may still). The
kit's checker accepts either outcome after an indefinite error. A registered code's definiteness is
fixed by the table below and the message's `definite` must agree; custom codes (any other snake_case
name) are indefinite. When in doubt, be indefinite: an indefinite error is always safe, a false
definite one is a contract violation. In particular, an operation in flight when a runtime process died
is `crashed`, indefinite.

| code | definite | meaning |
| --- | --- | --- |
"""

OPERATIONS_INTRO = """\
## Operations

One section per request. "Profile" names the part of the contract the request belongs to; "any" means
every adapter must answer it. Lifecycle requests (`start`, `stop`, `restart`, `processes`, `quiesce`)
are how the kit drives processes; it does its killing itself with SIGKILL on the pids from `processes`.
"""

SNAPSHOT_INTRO = """\
## Observe snapshot

`observe_ok.snapshot` is the only view the kit has of the runtime's state, and the model is checked
against it. It must be one consistent read of **durable** state (not in-memory guesses), and it should be
available while the runtime is stopped (read the store directly); if it cannot be, answer
`temporarily_unavailable` and the affected checks become unknown.

Honesty rules: a section the runtime cannot know is left out of `init_ok.observes` and sent as null
(or omitted); a section in `observes` is always a list (`[]` when empty). Inside a record, a value the
runtime does not know is null with the meaning the field gives. Never invent a value: an unknown is
reported as unknown by the kit, a fabricated one as a violation. Records in a section have no order.
Identifiers (`work_id`, `turn_id`, ...) are strings chosen by the runtime (send numbers as strings);
the kit only compares them for equality, within one run.
"""

CHECKS = """\
## What the kit checks on every message

Each of these ends the run with a one-paragraph protocol error naming what was sent, what was expected,
what came back and why; the verdict is in parentheses.

- a line that is not UTF-8 JSON, not an object, or has an unknown `type` (invalid);
- a message that fails its schema: missing or unknown key, wrong type, value out of range (invalid);
- a reply to no request in flight, or of the wrong type for its request (invalid);
- an `error` whose `definite` contradicts the registry, or a custom code claiming definite (invalid);
- `init_ok` with another MAJOR protocol version (invalid);
- a snapshot that fills an undeclared section or leaves a declared one null while its store is readable, or
  sends `storage` without declaring it in `init_ok` or omits it with the declaration (invalid);
- a line over the size limit (invalid);
- the adapter exiting, or closing stdout, while a reply is due (invalid);
- no reply within the timeout (unknown).
"""


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        anchor = "vocabulary" if "enum" in defs[name] else name.lower()
        return f"[{name}](#{anchor})"
    if "anyOf" in schema:
        return " or ".join(_type(s, defs) for s in schema["anyOf"])
    if "const" in schema:
        return f"`{schema['const']!r}`".replace("'", '"')
    if "enum" in schema:
        return "interruption point name" if len(schema["enum"]) > 8 else " / ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}), defs)}"
    bounds = [f"{op} {schema[key]}" for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
              if key in schema and schema[key] != 2**53 - 1]
    if "pattern" in schema:
        bounds.append(f"matching `{schema['pattern']}`")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _table(name: str, defs: dict[str, Any], skip: tuple[str, ...] = ("msg_id", "in_reply_to")) -> str:
    schema = defs[name]
    required = set(schema.get("required", []))
    rows = ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
    for field, prop in schema.get("properties", {}).items():
        if field in skip:
            continue
        desc = prop.get("description", "").replace("|", "\\|")
        rows.append(f"| `{field}` | {_type(prop, defs)} | {'yes' if field in required else 'no'} | {desc} |")
    return "\n".join(rows) + "\n"


def _rpc(rpc: Any, defs: dict[str, Any], level: str = "###") -> str:
    profile = rpc.profile.value if rpc.profile else "any"
    return (f"{level} {rpc.name}\n\n{rpc.doc}\n\nProfile: {profile}. Since {rpc.since}.\n\n"
            f"Request `{rpc.name}`:\n\n{_table(rpc.request.__name__, defs)}\n"
            f"Reply `{rpc.name}_ok`:\n\n{_table(rpc.reply.__name__, defs)}\n")


def _referenced_records(text: str, defs: dict[str, Any]) -> list[str]:
    """The records a table links to that no section documents yet (Snapshot, Quote, ...), so every
    `[Name](#name)` link resolves; each one's own table may link to more, hence the loop."""
    done = {name.lower() for name in re.findall(r"^### (\w+)", text, re.M)}
    out: list[str] = []
    while True:
        wanted = set(re.findall(r"\]\(#([a-z0-9_]+)\)", text + "".join(out))) - done - {"vocabulary"}
        names = sorted(name for name in defs if name.lower() in wanted)
        if not names:
            return out
        for name in names:
            done.add(name.lower())
            out.append(f"### {name}\n\n{_table(name, defs)}\n")


def render() -> str:
    defs = json_schema()["$defs"]
    out = [f"<!-- Generated by `{COMMAND}`. Do not edit: change conformance/protocol_*.py and regenerate. -->\n",
           INTRO + "\n", TRANSPORT + "\n", ENVELOPE + "\n", "## Reserved keys\n\n| key | meaning |\n| --- | --- |\n"]
    out += [f"| `{k}` | {v} |\n" for k, v in RESERVED_KEYS.items()]
    out.append("\n" + HANDSHAKE_INTRO + "\n" + _rpc(RPCS[0], defs))
    out.append(ERRORS_INTRO)
    out += [f"| `{c.name}` | {'yes' if c.definite else 'no'} | {c.doc} |\n" for c in ERROR_CODES]
    out.append(f"\nMessage `error`:\n\n{_table(ErrorReply.__name__, defs)}\n")
    out.append("\n" + OPERATIONS_INTRO + "\n")
    out += [_rpc(rpc, defs) for rpc in RPCS[1:]]
    out.append(SNAPSHOT_INTRO + "\n| section | what it holds |\n| --- | --- |\n")
    out += [f"| `{s.value}` | {SECTION_DOCS[s]} |\n" for s in Section]
    out.append("\n")
    for section, model in SECTION_MODELS.items():
        out.append(f"### {model.__name__}\n\nOne record of `{section.value}`.\n\n{_table(model.__name__, defs)}\n")
    out.append("## Shared records\n\n")
    for model in (Owner, Budget, ProbeTool, BudgetLimit, ProcessInfo, Pending, StorageDecl, StorageStatus, Lack):
        out.append(f"### {model.__name__}\n\n{_table(model.__name__, defs)}\n")
    out.append("### AcceptedInput\n\n" + _table("AcceptedInput", defs) + "\n")
    out += _referenced_records("".join(out), defs)
    out.append("## Vocabulary\n\nThe values come from `recoverykit.model.catalogue`; copy them verbatim.\n\n")
    for name, schema in sorted(defs.items()):
        if "enum" in schema:
            out.append(f"- **{name}**: {', '.join(f'`{v}`' for v in schema['enum'])}\n")
    out.append("- **interruption point names** (for `init_ok.failpoints`; see docs/failpoints.md): "
               + ", ".join(f"`{p.name}`" for p in INTERRUPTION_POINTS) + "\n\n")
    out.append(CHECKS + "\n## Changelog\n\n" + CHANGELOG)
    return "".join(out)
