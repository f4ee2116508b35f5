"""The mini runtime's worker: claims runnable work, calls the provider over HTTP, runs probe tools.

Started by ``mini_runtime.py`` as a real child process; everything it knows comes from
``config.json`` and ``state.db`` in the data dir, so a SIGKILL loses nothing committed. Each
``--bug`` is one deliberate contract violation for the kit's tests (a comma list combines them):

- ``resume_paused``: at start, paused work is set running again (breaks RI-03);
- ``rerun_unknown``: a dispatched unknown-effect call whose child is gone is run again (breaks FA-15);
- ``sum_usage``: streamed cumulative usage snapshots are summed (breaks USG-05).

``--no-request-id`` (not a bug) sends no ``X-Request-Id`` and renames each receipt to the response id
(``chatcmpl-...``) once the reply is read, as a runtime on an OpenAI client would keep it.

Honest behaviours of real runtimes (not bugs; the kit must not call them invalid):

- ``slow_start``: a worker's first model request waits this many seconds (a framework that imports its model client
  at the first call), so work is unsettled past the kit's settle window;
- ``turn_per_input``: each queued input of a session is answered in its own turn, with the session's earlier work
  items as history (no later input joins a recovered turn); a turn the provider refuses (HTTP 4xx other than
  408 / 409 / 429) fails: ``failed`` / ``retry_exhausted``;
- ``notice_delay``: the HTTP client notices a cut stream this many seconds after the provider cut it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mini_store import connect, dumps, now, one, rows, tx

try:  # the kit's copyable failpoint client (standard library only)
    from recoverykit.conformance.failpoint_client import failpoint
except ImportError:  # pragma: no cover - the mini runtime then has no failpoints
    def failpoint(point, work_id=None):
        return None

POLL_S = 0.03


class Stale(Exception):
    """The work item changed under us (a user control won): drop this step."""


class Cut(OSError):
    """The provider's stream broke off before ``[DONE]``: the reply is incomplete. ``text`` is what had arrived,
    ``usage`` the last running total read, if any."""

    def __init__(self, text: str, usage: list[int] | None) -> None:
        super().__init__("the provider's stream ended before [DONE]")
        self.text = text
        self.usage = usage


class Refusal(Exception):
    """The provider refused the request for good (HTTP 4xx, not one worth retrying)."""


RETRYABLE = (408, 409, 429)
SAFE = ("read_only", "state_probe")  # what may run while an earlier write's outcome is unknown


class Worker:
    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        with open(os.path.join(data_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.bugs = set(filter(None, (self.cfg.get("bug") or "").split(",")))
        self.no_request_id = bool(self.cfg.get("no_request_id"))
        self.slow_start = float(self.cfg.get("slow_start") or 0)
        self.turn_per_input = bool(self.cfg.get("turn_per_input"))
        self.notice_delay = float(self.cfg.get("notice_delay") or 0)
        self.host = os.environ.get("MINI_HOST_ID", "host-a")
        self.offset = float(os.environ.get("MINI_CLOCK_OFFSET_S", "0") or 0)
        self.db = connect(data_dir)
        self.pid = os.getpid()
        self.create_time = _create_time(self.pid)
        self.tools = {t["name"]: t for t in self.cfg["tools"]}
        self.mine: set[str] = set()

    # --- recovery at start ---------------------------------------------------------------------------

    def recover(self) -> None:
        with tx(self.db):
            if "resume_paused" in self.bugs:  # BUG: a restart is taken as a reason to resume paused work
                self.db.execute("UPDATE work SET desired='run', status='queued', reason='queued', cv=cv+1 "
                                "WHERE desired='paused'")
            for lease in rows(self.db, "SELECT * FROM leases WHERE released=0"):
                if lease["host_id"] != self.host:
                    self.db.execute("UPDATE work SET status='waiting', reason='owner_on_other_host' "
                                    "WHERE work_id=? AND desired='run'", (lease["work_id"],))
                    continue
                if not _alive(lease["pid"], lease["create_time"]):  # also when it waited for this host to return
                    self.db.execute("UPDATE work SET status='queued', reason='queued' WHERE work_id=? AND "
                                    "desired='run' AND (status='running' OR reason='owner_on_other_host')",
                                    (lease["work_id"],))

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> None:
        self.recover()
        open(os.path.join(self.data_dir, f"ready-{self.pid}"), "w").close()
        failures: dict[str, int] = {}  # work_id -> consecutive failed steps (the backoff's exponent)
        while True:
            # fair across sessions: the session served least so far goes first, then the oldest item
            item = one(self.db, "SELECT * FROM work w WHERE desired='run' AND status IN ('queued','running') "
                                "ORDER BY (SELECT COUNT(*) FROM work d WHERE d.session_id=w.session_id AND "
                                "d.status='finished'), created LIMIT 1")
            if item is None:
                time.sleep(POLL_S)
                continue
            try:
                self.step(self.claim(item))
                failures.pop(item["work_id"], None)
            except Stale:
                continue
            except Refusal as exc:  # turn_per_input: the provider refused this turn; it fails, no retry
                print(f"mini-worker: step of {item['work_id']} refused: {exc}", file=sys.stderr)
                with tx(self.db):
                    self.db.execute("UPDATE work SET status='failed', reason='retry_exhausted' WHERE work_id=? AND "
                                    "desired='run'", (item["work_id"],))
                    self.db.execute("UPDATE leases SET released=1 WHERE work_id=?", (item["work_id"],))
                    self.db.execute("UPDATE turns SET status='interrupted' WHERE work_id=? AND status='active'",
                                    (item["work_id"],))
                continue
            except (OSError, RuntimeError, ValueError) as exc:  # provider cut or refused: retry, growing pace
                n = failures[item["work_id"]] = failures.get(item["work_id"], 0) + 1
                print(f"mini-worker: step of {item['work_id']} failed: {exc!r}; retrying", file=sys.stderr)
                time.sleep(min(0.3 * 2 ** (n - 1), 4.0))  # doubling: a loaded machine never makes a pause look shorter

    def claim(self, item: dict) -> dict:
        with tx(self.db):
            lease = one(self.db, "SELECT * FROM leases WHERE work_id=?", (item["work_id"],))
            gen = (lease["generation"] if lease else 0) + (0 if lease and lease["pid"] == self.pid else 1)
            self.db.execute("INSERT OR REPLACE INTO leases VALUES (?,?,?,?,?,0)",
                            (item["work_id"], self.host, self.pid, self.create_time, gen))
            done = self.db.execute("UPDATE work SET status='running', reason=NULL WHERE work_id=? AND cv=? "
                                   "AND desired='run'", (item["work_id"], item["cv"])).rowcount
        if not done:
            raise Stale()
        return one(self.db, "SELECT * FROM work WHERE work_id=?", (item["work_id"],))

    def current(self, item: dict) -> dict:
        row = one(self.db, "SELECT * FROM work WHERE work_id=?", (item["work_id"],))
        if row["desired"] != "run" or row["cv"] != item["cv"]:
            raise Stale()
        return row

    def step(self, item: dict) -> None:
        work_id = item["work_id"]
        turn = self.open_turn(item)
        pending = rows(self.db, "SELECT * FROM tool_calls WHERE work_id=? AND status IN ('never_started',"
                                "'dispatched') ORDER BY at", (work_id,))
        if pending:
            for call in pending:
                self.current(item)
                self.finish_call(item, call)
            return
        messages = json.loads(item["messages"])
        tried = len(rows(self.db, "SELECT 1 FROM receipts WHERE work_id=?", (work_id,)))
        if self.turn_per_input:  # the session's earlier turns are this turn's history
            earlier = rows(self.db, "SELECT messages FROM work WHERE session_id=? AND created<? ORDER BY created",
                           (item["session_id"], item["created"]))
            history = [m for r in earlier for m in json.loads(r["messages"])]
            messages = [*history, *messages]
        elif tried > sum(1 for m in messages if m["role"] == "assistant"):
            # this step was asked before and never answered (a restart or a fault cut it): the session's inputs
            # queued since then go with the retry, so an input acknowledged while the step was under way is not
            # left behind by the old turn's recovery (CTL-05; each still gets its own turn after)
            later = rows(self.db, "SELECT messages FROM work WHERE session_id=? AND created>? AND desired='run' AND "
                                  "status IN ('queued','running') ORDER BY created",
                         (item["session_id"], item["created"]))
            messages = [*messages, *(json.loads(r["messages"])[0] for r in later)]
        request_id = f"{work_id}-r{len(rows(self.db, 'SELECT 1 FROM receipts WHERE work_id=?', (work_id,))) + 1}"
        with tx(self.db):
            self.db.execute("INSERT INTO receipts VALUES (?,?,?,?,?,?,?)",
                            (request_id, work_id, 1, None, None, "unknown", now()))
        failpoint("provider.request.before", work_id)
        try:
            reply = self.call_provider(messages, request_id, work_id)
        except Cut as cut:  # running totals read before the stream broke: a lower bound, never the whole count
            if cut.usage is not None:
                with tx(self.db):
                    self.db.execute("UPDATE receipts SET prompt=?, completion=?, usage='partial' WHERE request_id=?",
                                    (cut.usage[0], cut.usage[1], request_id))
            if cut.text:  # keep what was said, marked as interrupted, for the retry's history
                with tx(self.db):
                    row = self.current(item)
                    msgs = [*json.loads(row["messages"]), {"role": "assistant", "content": cut.text + " [interrupted]"}]
                    self.db.execute("UPDATE work SET messages=? WHERE work_id=?", (dumps(msgs), work_id))
            raise
        failpoint("usage.persist.before", work_id)
        if self.no_request_id and reply["id"]:  # the receipt now names its attempt by the response id
            with tx(self.db):
                self.db.execute("UPDATE receipts SET request_id=? WHERE request_id=?", (reply["id"], request_id))
            request_id = reply["id"]
        if reply["usage"] is not None:  # a reply that reported no usage leaves the receipt unknown, never zero
            with tx(self.db):
                self.db.execute("UPDATE receipts SET prompt=?, completion=?, usage='known' WHERE request_id=?",
                                (reply["usage"][0], reply["usage"][1], request_id))
        failpoint("usage.persist.after", work_id)
        ids = [c.get("id") for c in reply["tool_calls"]]
        if len(ids) != len(set(ids)):  # which result belongs to which call would be a guess: an explicit error
            with tx(self.db):
                self.db.execute("UPDATE work SET status='waiting', reason='retry_exhausted' WHERE work_id=?",
                                (work_id,))
                self.db.execute("UPDATE leases SET released=1 WHERE work_id=?", (work_id,))
            return
        assistant = {"role": "assistant", "content": reply["text"] or None}
        if reply["tool_calls"]:
            assistant["tool_calls"] = reply["tool_calls"]
        with tx(self.db):
            row = self.current(item)
            msgs = [*json.loads(row["messages"]), assistant]
            self.db.execute("UPDATE work SET messages=?, progress=progress+1 WHERE work_id=?", (dumps(msgs), work_id))
            for call in reply["tool_calls"]:
                name = call["function"]["name"]
                effect = self.tools.get(name, {}).get("effect_class", "unknown")
                # the provider's ids may repeat across responses (call_0, call_1 ...): ours are per attempt
                self.db.execute("INSERT INTO tool_calls VALUES (?,?,?,?,?,'never_started',NULL,NULL,?,NULL,?)",
                                (f"{request_id}~{call['id']}", work_id, turn, name, effect,
                                 call["function"]["arguments"], now()))
            if not reply["tool_calls"]:
                self.db.execute("UPDATE work SET desired='done', status='finished', reason=NULL WHERE work_id=?",
                                (work_id,))
                self.db.execute("UPDATE turns SET status='completed' WHERE turn_id=?", (turn,))
                self.db.execute("UPDATE leases SET released=1 WHERE work_id=?", (work_id,))
        if not reply["tool_calls"]:  # the point is after the completion commit (docs/failpoints.md)
            failpoint("completion.commit.before_projection", work_id)

    def open_turn(self, item: dict) -> str:
        """The active turn this process opened under the current control version, or a new one."""
        work_id = item["work_id"]
        turn = one(self.db, "SELECT * FROM turns WHERE work_id=? AND status='active'", (work_id,))
        key = f"{work_id}:{item['cv']}:{item['progress']}"
        if turn is not None and (turn["ckey"] == key or (turn["turn_id"] in self.mine
                                                          and turn["ckey"].split(":")[1] == str(item["cv"]))):
            self.mine.add(turn["turn_id"])  # same continuation: a new attempt of the same turn
            return turn["turn_id"]
        with tx(self.db):
            if turn is not None:  # opened by a dead owner or under an older control version: interrupted
                self.db.execute("UPDATE turns SET status='interrupted' WHERE turn_id=?", (turn["turn_id"],))
            count = len(rows(self.db, "SELECT 1 FROM turns WHERE work_id=?", (work_id,)))
            turn_id = f"{work_id}.t{count + 1}"
            self.db.execute("INSERT OR IGNORE INTO turns VALUES (?,?,?,?,'active',?)",
                            (turn_id, work_id, key, turn["turn_id"] if turn else None, now()))
        turn_id = one(self.db, "SELECT turn_id FROM turns WHERE ckey=?", (key,))["turn_id"]
        self.mine.add(turn_id)
        return turn_id

    # --- tools ---------------------------------------------------------------------------------------

    def finish_call(self, item: dict, call: dict) -> None:
        out_path = os.path.join(self.data_dir, "tools", f"{call['call_id']}.out")
        if call["status"] == "dispatched":
            if _alive(call["pid"], call["create_time"]):
                _wait_gone(call["pid"], call["create_time"])  # reattach: wait, never run it again
                self.commit(item, call, _read_result(out_path))
                return
            done = _read_result(out_path)
            if done is not None:
                self.commit(item, call, done)
                return
            if call["effect"] == "unknown" and "rerun_unknown" not in self.bugs:
                self.commit(item, call, None, repair=f"repair:{call['call_id']}")
                return
        self.dispatch(item, call, out_path)

    def dispatch(self, item: dict, call: dict, out_path: str) -> None:
        tool = self.tools.get(call["tool"])
        if tool is None:
            self.commit(item, call, f"error: unknown tool {call['tool']!r}")
            return
        if call["effect"] not in SAFE and one(self.db, "SELECT 1 FROM tool_calls WHERE work_id=? AND "
                                              "status='outcome_unknown' AND effect='unknown'", (item["work_id"],)):
            self.commit(item, call, "not executed: an earlier write's outcome is unknown; only read-only tools run "
                                    "until it is reconciled or approved", refused=True)
            return
        failpoint("tool.dispatch.before", item["work_id"])
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        with open(out_path, "wb") as out:
            proc = subprocess.Popen([*tool["argv"], call["args"]], stdout=out, stderr=subprocess.DEVNULL,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        with tx(self.db):
            self.db.execute("UPDATE tool_calls SET status='dispatched', pid=?, create_time=? WHERE call_id=?",
                            (proc.pid, _create_time(proc.pid), call["call_id"]))
        failpoint("tool.dispatch.after", item["work_id"])
        proc.wait()
        self.commit(item, call, _read_result(out_path))

    def commit(self, item: dict, call: dict, result: str | None, repair: str | None = None,
               refused: bool = False) -> None:
        failpoint("tool.result.commit.before", item["work_id"])
        content = result if result is not None else "[outcome unknown: the tool's process ended before its result " \
                                                     "was committed; do not repeat the write]"
        with tx(self.db):
            row = one(self.db, "SELECT * FROM work WHERE work_id=?", (item["work_id"],))
            msgs = [*json.loads(row["messages"]), {"role": "tool", "tool_call_id": call["call_id"].split("~", 1)[-1],
                                                   "content": content}]
            status = "refused" if refused else "outcome_unknown" if result is None else "result_committed"
            self.db.execute("UPDATE tool_calls SET status=?, repair_key=? WHERE call_id=?",
                            (status, repair, call["call_id"]))
            self.db.execute("UPDATE work SET messages=?, progress=progress+1 WHERE work_id=?",
                            (dumps(msgs), item["work_id"]))
        failpoint("tool.result.commit.after", item["work_id"])

    # --- the provider --------------------------------------------------------------------------------

    def call_provider(self, messages: list, request_id: str, work_id: str) -> dict:
        if self.slow_start:  # the first model call of this process: the model client is still being loaded
            time.sleep(self.slow_start)
            self.slow_start = 0.0
        url = urllib.parse.urlsplit(self.cfg["provider_base_url"])
        body = dumps({"model": "mini", "messages": messages, "stream": True,
                      "stream_options": {"include_usage": True}})
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
        conn.request("POST", url.path.rstrip("/") + "/chat/completions", body=body,
                     headers={"Content-Type": "application/json",
                              **({} if self.no_request_id else {"X-Request-Id": request_id})})
        failpoint("provider.request.after", work_id)
        resp = conn.getresponse()
        if resp.status != 200 and self.turn_per_input and 400 <= resp.status < 500 and resp.status not in RETRYABLE:
            raise Refusal(f"provider answered {resp.status}: {resp.read()[:200]!r}")
        if resp.status != 200:
            raise RuntimeError(f"provider answered {resp.status}: {resp.read()[:200]!r}")
        text, calls, usage, response_id, done = "", {}, None, None, False
        for raw in _lines(resp):
            line = raw.decode().strip()
            if line == "data: [DONE]":
                done = True
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            response_id = response_id or chunk.get("id")
            if chunk.get("usage"):
                got = [chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"]]
                usage = usage or [0, 0]
                if "sum_usage" in self.bugs:  # BUG: cumulative snapshots summed instead of a watermark
                    usage = [usage[0] + got[0], usage[1] + got[1]]
                else:
                    usage = [max(usage[0], got[0]), max(usage[1], got[1])]
            for choice in chunk.get("choices", []):
                delta = choice.get("delta", {})
                text += delta.get("content") or ""
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc["index"], {"id": "", "type": "function",
                                                          "function": {"name": "", "arguments": ""}})
                    slot["id"] = tc.get("id") or slot["id"]
                    fn = tc.get("function") or {}
                    slot["function"]["name"] += fn.get("name") or ""
                    slot["function"]["arguments"] += fn.get("arguments") or ""
        conn.close()
        if not done:
            time.sleep(self.notice_delay)  # the client noticed the cut only now
            raise Cut(text, usage)
        return {"text": text, "tool_calls": [calls[i] for i in sorted(calls)], "usage": usage, "id": response_id}


def _lines(resp: http.client.HTTPResponse):
    """The response's lines until it ends; a connection cut mid-body just ends them (no [DONE] then)."""
    try:
        yield from resp
    except (http.client.HTTPException, OSError):
        return


def _create_time(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
        return int(fields[19]) / os.sysconf("SC_CLK_TCK") + boot
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _alive(pid: int | None, create_time: float | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    if state == b"Z":
        return False
    ct = _create_time(pid)
    return ct is not None and create_time is not None and abs(ct - create_time) < 0.05


def _wait_gone(pid: int, create_time: float) -> None:
    while _alive(pid, create_time):
        time.sleep(POLL_S)


def _read_result(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
    except OSError:
        return None
    return text or None


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # every step is committed; exit at once
    Worker(sys.argv[1]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
