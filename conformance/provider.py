"""The scripted provider: an OpenAI-compatible chat-completions endpoint the kit owns.

``POST /v1/chat/completions`` (stream and non-stream) on 127.0.0.1 with an OS-chosen port, one
thread per request. The reply comes from a ``ProviderScript`` (see ``provider_script``); every
request and every response (delivered or cut off) goes to the durable ledger (``provider_ledger``).
Streams are SSE ``data:`` chunks ending with ``data: [DONE]`` over chunked HTTP/1.1, so a cut is
visible to the client as an incomplete body. Usage is reported in the step's usage style
(``provider_script.USAGE_STYLES``): ``final`` (OpenAI's: one final usage-only chunk when the request
sets ``stream_options.include_usage``), ``cumulative`` (a running total in every chunk; a runtime must
settle by watermark, never by summing) or ``none``.

Every attempt gets its own OpenAI-style response id (``chatcmpl-...``), in the body of every 200
reply and in the ledger, so a receipt can name its attempt by the id an OpenAI client keeps, not only
by an ``X-Request-Id`` header the runtime sent.

A scripted hold parks the request and tells the kit (``wait_for_held``), which makes "provider
request in flight" and "response mid-stream" reachable without the runtime's cooperation; the kit
then kills the runtime, or ``release``s the request (``auto_release`` lets every later hold go at once).

Resources the kit takes away during downtime (``refuse``, undone by ``restore``), per script so that
variants run side by side in one run: a request of that script naming the missing model is answered
as OpenAI does, HTTP 404 ``model_not_found``, and one carrying a revoked key HTTP 401
``invalid_api_key`` (the credential is checked first). Every request record carries the model it named
and a fingerprint of its bearer key (``api_key_sha256``, never the key), so "no automatic switch of
model or account" is read from the ledger. Kit endpoints for an out-of-process kit:
``GET /_kit/held``, ``POST /_kit/release`` (``{"seq": N}`` or ``{}`` for all), ``GET /_kit/ledger``;
each needs ``provider.token`` (a random secret of this provider) in the ``X-Recoverykit-Token`` header.

``close()`` is bounded: handler threads are daemons, and a connection still open after a short grace
(a process that escaped the run and holds a socket, a client that sent half a request) is shut down
under its handler, which is then given a bounded time to record how its request ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from recoverykit.conformance import input_files
from recoverykit.conformance.errors import EnvironmentFault
from recoverykit.conformance.provider_handler import Handler
from recoverykit.conformance.provider_ledger import Ledger, read_ledger
from recoverykit.conformance.provider_script import VERIFIER, ProviderScript, Script, Step, _text_of
from recoverykit.model.errors import RecoveryKitError


class ProviderTimeout(RecoveryKitError, TimeoutError):
    """No request reached the expected hold within the time the kit allowed."""


@dataclass
class Held:
    """A request the provider is holding open."""

    seq: int
    request_id: str
    script_id: str
    step: int
    attempt: int
    at_chunk: int
    since: float
    _event: threading.Event = field(default_factory=threading.Event, repr=False)
    cut: bool = False  # set when released by close(): the handler cuts instead of continuing


@dataclass(frozen=True)
class Planned:
    """What the handler is to do for one request (decided under the provider's lock)."""

    seq: int
    request_id: str
    attempt: int
    script: Script
    step_index: int
    step: Step
    response_id: str = ""  # the reply's OpenAI ``id``, unique per attempt

    @property
    def usage_style(self) -> str:
        return self.script.style_of(self.step)


CLOSE_GRACE_S = 1.0  # in-flight replies may finish on their own before their connections are shut down
CLOSE_JOIN_S = 3.0  # then each handler has this long, in all, to notice and write its response record


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler a foreign client keeps busy must never keep the kit alive
    block_on_close = False  # close() joins the handlers itself, with a bound
    allow_reuse_address = False
    provider: ScriptedProvider

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._live: dict[socket.socket, threading.Thread] = {}
        self._live_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name="scripted-provider-request", daemon=True)
        with self._live_lock:
            self._live[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._live_lock:
            self._live.pop(request, None)
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_WR)
            # Bytes the handler never read (a refused body) would make close() send a reset, which can
            # destroy the answer before the client reads it: take what has arrived, without waiting.
            for _ in range(16):
                if not request.recv(65536, socket.MSG_DONTWAIT):
                    break
        self.close_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A handler that failed (a client gone mid-reply, a late request after close): never a traceback.

        What failed is kept in the ledger (``handler_error``) while it is open, not printed on the kit's stderr.
        """
        exc = sys.exception()
        with contextlib.suppress(Exception):
            self.provider.ledger.append("handler_error", error=f"{type(exc).__name__}: {exc}"[:500])

    def live(self) -> list[threading.Thread]:
        with self._live_lock:
            return list(self._live.values())

    def cut_all(self) -> None:
        """Shut down every open connection, so a handler blocked reading or writing it returns at once."""
        with self._live_lock:
            sockets = list(self._live)
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by its client
                sock.shutdown(socket.SHUT_RDWR)


class ScriptedProvider:
    """Serve ``script`` on 127.0.0.1; ``base_url`` is what a runtime's OpenAI client points at."""

    def __init__(self, script: ProviderScript | dict, ledger_path: str | os.PathLike, *, port: int = 0,
                 on_held: Callable[[Held], None] | None = None) -> None:
        """``on_held`` is called (from the request's thread) each time a request is parked."""
        self.script = script if isinstance(script, ProviderScript) else ProviderScript.model_validate(script)
        self._on_held = on_held
        self.ledger = Ledger(ledger_path)
        self._lock = threading.Condition()
        self._seq = 0
        self._attempts: dict[tuple[str, int], int] = {}
        self._held: dict[int, Held] = {}
        self._open: set[int] = set()  # admitted requests whose response record is not written yet
        self._partials: dict[str, set[str]] = {}  # script id -> text sent in its responses that were cut off
        self._worker_done: dict[str, int] = {}  # script id -> worker steps delivered (picks the verifier's reply)
        self._roles: dict[int, tuple[str, int, str]] = {}  # seq -> (script id, step, role) until it is answered
        self._resume_from(read_ledger(ledger_path))
        self._closing = False
        self._auto_release = False
        self.models: set[str] = set()  # models ``GET /v1/models`` lists besides the scripts' own (the run's model)
        self._missing_models: dict[str, set[str]] = {}  # script id -> models answered 404 for it
        self._revoked_keys: dict[str, set[str]] = {}  # script id -> bearer keys answered 401 for it
        self.token = secrets.token_hex(16)  # for the /_kit/ endpoints (X-Recoverykit-Token)
        try:
            self._server = _Server(("127.0.0.1", port), Handler)
        except OSError as exc:
            self.ledger.close()
            raise EnvironmentFault(f"the scripted provider cannot listen on 127.0.0.1:{port}: {exc}") from exc
        self._server.provider = self
        # close() waits for the loop to notice shutdown, half the poll on average: at 0.1 s that was ~50 ms of
        # every chaos case. 200 wake-ups a second cost the kit well under 1 % of a core while a provider lives.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005},
                                        name="scripted-provider", daemon=True)
        self._thread.start()

    def _resume_from(self, earlier: list[dict[str, Any]]) -> None:
        """Continue numbering after an existing ledger, so seq, attempts and probe tokens stay unique."""
        for record in earlier:
            if record.get("event") == "request" and record.get("script_id"):
                self._roles[int(record["seq"])] = (record["script_id"], int(record.get("step") or 0),
                                                   record.get("role") or "worker")
            if record.get("event") == "response":
                self._note_worker_done(record)
            if record.get("event") == "request":
                self._seq = max(self._seq, int(record["seq"]))
                key = ((record.get("script_id") or "") + ("#verifier" if record.get("role") == VERIFIER else ""),
                       int(record.get("step") or 0))
                self._attempts[key] = max(self._attempts.get(key, 0), int(record.get("attempt") or 0))
            elif record.get("event") == "response":
                self._note_partial(record)

    def _note_worker_done(self, outcome: dict[str, Any]) -> None:
        """A delivered worker step counts towards which verifier reply comes next."""
        script_id, step, role = self._roles.pop(int(outcome.get("seq") or 0), ("", 0, ""))
        if script_id and role != VERIFIER and outcome.get("delivered") and outcome.get("status") == 200:
            self._worker_done[script_id] = max(self._worker_done.get(script_id, 0), step + 1)

    def _note_partial(self, outcome: dict[str, Any]) -> None:
        if not outcome.get("delivered") and outcome.get("text_sent") and outcome.get("script_id"):
            self._partials.setdefault(outcome["script_id"], set()).add(outcome["text_sent"])

    def _retained_partials(self, script: Script, messages: Any) -> int:
        """How many assistant messages of a request retain the partial text of a response this provider cut off
        (seed 000: an interrupted response keeps its partial text and a marker): they answer no step."""
        with self._lock:
            partials = set(self._partials.get(script.id, ()))
        if not partials or not isinstance(messages, list):
            return 0
        complete = {step.text for step in script.steps if step.text}
        return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
                   and not m.get("tool_calls") and (text := _text_of(m)) not in complete
                   and any(text.startswith(p) for p in partials))

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- decisions, called by the handler ------------------------------------------------------

    def admit(self, body: dict[str, Any], header_request_id: str | None,
              idempotency_key: str | None = None, sender: dict[str, Any] | None = None,
              authorization: str | None = None, arrived: float | None = None, role: str | None = None,
              ) -> tuple[Planned | None, str, int, str]:
        """Record the request; return (plan, "", seq, request_id), or plan None and why when no step fits.

        ``arrived`` (the handler's first look at the request) is the ledger's time for it: under load the
        handler may reach this point well after the runtime sent the request, even after the kit killed the
        sender, and checks order requests against faults by this time. A request marked ``verifier`` (Goal
        acceptance) is answered from the script's ``verifier`` replies, by how many worker steps were delivered
        before it; every other request is a worker request."""
        role = VERIFIER if (role or "").strip().lower() == VERIFIER else "worker"
        script, step_index, why = self.script.select(body.get("messages", []))
        if script is not None:
            step_index -= self._retained_partials(script, body.get("messages"))
        with self._lock:
            if script is not None and role == VERIFIER:
                step_index = self._worker_done.get(script.id, 0)
            self._seq += 1
            seq = self._seq
            self._open.add(seq)
            key = ((script.id if script else "") + ("#verifier" if role == VERIFIER else ""), step_index)
            self._attempts[key] = attempt = self._attempts.get(key, 0) + 1
            if script is not None:
                self._roles[seq] = (script.id, step_index, role)
        request_id = header_request_id or f"req_{seq}_{uuid.uuid4().hex[:12]}"
        if script is None:
            step = None
        elif role == VERIFIER:
            step = script.verifier_step(step_index)
        else:
            step = script.step(step_index)
        response_id = new_response_id(seq) if step is not None else None
        if script is not None and step is None:
            why = (f"script {script.id!r} has no verifier reply after {step_index} worker steps" if role == VERIFIER
                   else f"script {script.id!r} has {len(script.steps)} steps; the request asks for step {step_index}")
        stream_options = body.get("stream_options") or {}
        self.ledger.append("request", seq=seq, request_id=request_id, response_id=response_id,
                           request_id_source="header" if header_request_id else "generated", attempt=attempt,
                           usage_style=script.style_of(step) if script and step else None,
                           script_id=script.id if script else None, step=step_index,
                           script_steps=len(script.steps) if script else None, stream=bool(body.get("stream")),
                           include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
                           model=body.get("model"), api_key_sha256=key_fingerprint(bearer_key(authorization)),
                           idempotency_key=idempotency_key, role=role,
                           sender_pid=(sender or {}).get("pid"), sender_create_time=(sender or {}).get("create_time"),
                           **_conversation(body), **({"time": arrived} if arrived is not None else {}))
        if step is None:
            return None, why, seq, request_id
        return Planned(seq, request_id, attempt, script, step_index, step, response_id), "", seq, request_id

    def hold(self, plan: Planned, at_chunk: int, client_gone: Callable[[], bool] = lambda: False) -> bool:
        """Park the calling handler until released; True to continue, False to cut.

        ``client_gone`` is polled meanwhile: when the runtime was killed during the hold, the request
        ends at once (recorded as released with ``client_gone``) instead of waiting for the kit.
        """
        held = Held(plan.seq, plan.request_id, plan.script.id, plan.step_index, plan.attempt, at_chunk, time.time())
        self.ledger.append("held", seq=plan.seq, request_id=plan.request_id, at_chunk=at_chunk)
        with self._lock:
            if self._closing:
                return False
            self._held[plan.seq] = held
            if self._auto_release:
                held._event.set()
            self._lock.notify_all()
        if self._on_held is not None:
            self._on_held(held)
        deadline = time.monotonic() + self.script.hold_timeout_s
        released = gone = False
        while not released and not gone and time.monotonic() < deadline:
            released = held._event.wait(min(0.05, max(0.0, deadline - time.monotonic())))
            gone = not released and client_gone()
        with self._lock:
            self._held.pop(plan.seq, None)
        self.ledger.append("released", seq=plan.seq, request_id=plan.request_id,
                           timed_out=not released and not gone, client_gone=gone, cut=held.cut)
        return released and not held.cut

    def stall(self, plan: Planned, at_chunk: int, seconds: float, client_gone: Callable[[], bool]) -> bool:
        """Stay silent for ``seconds``; False (cut) if the client went away or the provider is closing."""
        self.ledger.append("stalled", seq=plan.seq, request_id=plan.request_id, at_chunk=at_chunk, seconds=seconds)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._closing or client_gone():
                return False
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return True

    def respond(self, **outcome: Any) -> None:
        """Record how a request ended (delivered, error or cut); called once per admitted request."""
        self.ledger.append("response", **outcome)
        with self._lock:
            self._note_partial(outcome)
            self._note_worker_done(outcome)
            self._open.discard(outcome["seq"])
            self._lock.notify_all()

    # -- the kit's API -------------------------------------------------------------------------

    def wait_settled(self, timeout: float = 10.0) -> None:
        """Wait until every request received so far has its response record in the ledger."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProviderTimeout(f"requests {sorted(self._open)} still open after {timeout}s")
                self._lock.wait(remaining)

    def held(self) -> list[Held]:
        with self._lock:
            return sorted(self._held.values(), key=lambda h: h.seq)

    def wait_for_held(self, timeout: float = 10.0, *, script_id: str | None = None, step: int | None = None,
                      why: str = "") -> Held:
        """The first held request matching; ``ProviderTimeout`` after ``timeout`` s (``why``: the window's name)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for h in sorted(self._held.values(), key=lambda h: h.seq):
                    if (script_id is None or h.script_id == script_id) and (step is None or h.step == step):
                        return h
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProviderTimeout(f"no request held for script={script_id!r} step={step} within {timeout:g} s"
                                          f"{f' ({why})' if why else ''}; "
                                          f"requests so far: {self._seq}")
                self._lock.wait(remaining)

    def release(self, target: Held | int | None = None, *, cut: bool = False) -> int:
        """Let a held request (or every one) go on; ``cut=True`` closes it without finishing."""
        seq = target.seq if isinstance(target, Held) else target
        with self._lock:
            chosen = [h for h in self._held.values() if seq is None or h.seq == seq]
            for h in chosen:
                h.cut = cut
                h._event.set()
        return len(chosen)

    def auto_release(self, on: bool = True) -> None:
        """From now on every hold is released as soon as it is reached (the drive needs no more of them)."""
        with self._lock:
            self._auto_release = on
        if on:
            self.release()

    def refuse(self, script_id: str, *, model: str | None = None, api_key: str | None = None) -> None:
        """Take a resource away from the requests of ``script_id``: ``model`` is then not found (404), ``api_key``
        revoked (401). Recorded in the ledger (``resource_refused``)."""
        with self._lock:
            if model is not None:
                self._missing_models.setdefault(script_id, set()).add(model)
            if api_key is not None:
                self._revoked_keys.setdefault(script_id, set()).add(api_key)
        self.ledger.append("resource_refused", script_id=script_id, model=model,
                           api_key_sha256=key_fingerprint(api_key))

    def restore(self, script_id: str) -> None:
        """Give every resource taken from ``script_id`` back (recorded: ``resource_restored``)."""
        with self._lock:
            self._missing_models.pop(script_id, None)
            self._revoked_keys.pop(script_id, None)
        self.ledger.append("resource_restored", script_id=script_id)

    def refusal(self, plan: Planned, body: dict[str, Any], authorization: str | None) -> tuple[int, str, str] | None:
        """(HTTP status, OpenAI error code, message) when a resource of this request is missing, else None."""
        key, model = bearer_key(authorization), body.get("model")
        with self._lock:
            revoked = key is not None and key in self._revoked_keys.get(plan.script.id, set())
            missing = isinstance(model, str) and model in self._missing_models.get(plan.script.id, set())
        if revoked:
            return 401, "invalid_api_key", "Incorrect API key provided. You can find your API key in your account."
        if missing:
            return 404, "model_not_found", f"The model `{model}` does not exist or you do not have access to it."
        return None

    def listed_models(self) -> list[str]:
        """What ``GET /v1/models`` lists: the scripts' models and ``models``, less those missing for every script."""
        with self._lock:
            sets = [self._missing_models.get(s.id, set()) for s in self.script.scripts]
            known = {s.model for s in self.script.scripts} | self.models
        return sorted(known - (set.intersection(*sets) if sets else set()))

    def records(self) -> list[dict[str, Any]]:
        return self.ledger.records()

    def close(self) -> None:
        """Cut every held request, stop serving, end every connection, close the ledger: never forever.

        Handlers get ``CLOSE_GRACE_S`` to finish; the connections still open then are shut down, and
        their handlers get ``CLOSE_JOIN_S`` in all to record how their requests ended. A handler still
        running after that is a daemon thread, abandoned (its late ledger write fails quietly).
        """
        with self._lock:
            if self._closing:
                return
            self._closing = True
        self.release(cut=True)
        self._server.shutdown()
        _join(self._server.live(), CLOSE_GRACE_S)
        self._server.cut_all()
        _join(self._server.live(), CLOSE_JOIN_S)
        self._server.server_close()
        self._thread.join(timeout=10)
        self.ledger.close()

    def __enter__(self) -> ScriptedProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bearer_key(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header, or None."""
    if not authorization:
        return None
    scheme, _, key = authorization.strip().partition(" ")
    return (key.strip() or None) if scheme.lower() == "bearer" else None


def key_fingerprint(key: str | None) -> str | None:
    """What the ledger keeps of a credential: enough to tell two keys apart, never the key itself."""
    return hashlib.sha256(key.encode()).hexdigest()[:16] if key else None


def new_response_id(seq: int) -> str:
    """An OpenAI-style completion id, unique per attempt (``seq`` within a ledger, random across ledgers)."""
    return f"chatcmpl-rk{seq}-{uuid.uuid4().hex[:20]}"


def _join(threads: list[threading.Thread], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _conversation(body: dict[str, Any]) -> dict[str, Any]:
    """What the request carried, compactly: role counts, answered tool calls, a digest of the messages, the
    tools offered (by name) and each message's shape (role, the call ids it makes or answers, its text's
    length, digest and first characters, the probe tokens its text names; for a tool message also ``masked_sha``,
    its digest with its own call's id, tool name and probe token masked): the kit's own record of the history
    the runtime sent."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    roles: dict[str, int] = {}
    for m in messages:
        roles[str(m.get("role"))] = roles.get(str(m.get("role")), 0) + 1
    answered = [m.get("tool_call_id") for m in messages if m.get("role") == "tool"]
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    offered = [str((t.get("function") or {}).get("name") if isinstance(t, dict) and isinstance(t.get("function"), dict)
                   else t.get("name") if isinstance(t, dict) else t) for t in tools]
    return {"roles": roles, "tool_results_for": answered, "messages_sha256": digest, "tools_offered": offered,
            "messages": [_shape(m, own) for m, own in zip(messages[:MAX_SHAPES], _identities(messages), strict=False)]}


def _identities(messages: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """For each message, the identity of the call a tool message answers (its call id, the tool's name and the
    probe token of the nearest earlier call made with that id), else (): what ``masked_sha`` masks."""
    made: dict[str, tuple[str, ...]] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or [] if isinstance(m.get("tool_calls"), list) else []:
            if not isinstance(c, dict):
                continue
            f = c.get("function") if isinstance(c.get("function"), dict) else {}
            try:
                args = json.loads(f.get("arguments") or "{}")
            except (TypeError, ValueError):
                args = {}
            token = args.get("probe_token") if isinstance(args, dict) else None
            made[str(c.get("id"))] = tuple(str(x) for x in (c.get("id"), f.get("name"), token) if x)
        answers = m.get("tool_call_id")
        out.append(made.get(str(answers), (str(answers),)) if m.get("role") == "tool" and answers else ())
    return out


MAX_SHAPES = 200  # messages recorded per request (a runaway history must not blow up the ledger)


def _shape(m: dict[str, Any], own: tuple[str, ...] = ()) -> dict[str, Any]:
    content = m.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    text = content if isinstance(content, str) else ""
    calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
    return {"role": str(m.get("role")), "calls": [str(c.get("id")) for c in calls if isinstance(c, dict)],
            "answers": m.get("tool_call_id"), "len": len(text), "head": text[:160],
            "sha": hashlib.sha256(text.encode()).hexdigest()[:16],
            "probe_tokens": PROBE_TOKEN_RE.findall(text)[:8], **({"masked_sha": _masked_sha(text, own)} if own else {})}


def _masked_sha(text: str, names: tuple[str, ...]) -> str:
    """The digest of a tool message's text with its own call's id, tool name and probe token masked: two answers
    with the same masked digest say the same thing of their calls (EFF-02: never started vs outcome unknown)."""
    for name in sorted(set(names), key=len, reverse=True):
        text = text.replace(name, "\x00")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# A probe's result names its token (``probe``: one JSON line with sorted keys): the kit recognises a real result
# anywhere in a message's text, whatever the runtime wrapped around it (escaped into a JSON string too).
PROBE_TOKEN_RE = re.compile(r'\\?"probe_token\\?":\s*\\?"([A-Za-z0-9_.\-]+)')


def serve(script_path: str | os.PathLike, ledger_path: str | os.PathLike, port: int = 0) -> ScriptedProvider:
    """Start a provider from a JSON script file (what ``recoverykit env provider`` runs)."""
    script = ProviderScript.model_validate(input_files.read_json(script_path, "--script"))
    return ScriptedProvider(script, ledger_path, port=port)
