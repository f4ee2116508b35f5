"""The scripted provider's script: which reply a chat-completions request gets, deterministically.

A request picks its script by a tag anywhere in its messages' text, ``[[rk-script:<id>]]`` (the
kit puts it in the user's input), and its step by the number of assistant messages already in the
request: the first call of a turn gets step 0, the call after one tool round trip gets step 1, and
so on (an assistant message that keeps the partial text of a response the provider cut off is an interrupted
response, not a step: ``ScriptedProvider`` discounts it). Replaying the same conversation therefore always gets
the same reply, whatever the runtime restarted in between; the ``attempt`` (how many times that script step
was requested) only selects faults, so "first attempt fails, the retry succeeds" is scriptable.

How usage is reported (``usage_style``, per script, a step may override it; see ``USAGE_STYLES``):
``final`` as OpenAI does, ``cumulative`` running totals in every chunk, ``none`` never. The old
boolean ``cumulative_usage`` still works: true is ``cumulative``, false ``final``.

Example (JSON or YAML-free Python dicts; ``ProviderScript.model_validate``)::

    {"scripts": [{"id": "t1", "usage_style": "cumulative", "steps": [
        {"tool_calls": [{"name": "probe_unknown", "arguments": {"sleep_s": 1}}],
         "usage": {"prompt_tokens": 20, "completion_tokens": 8},
         "faults": [{"kind": "hold", "at_chunk": 2, "attempts": [1]}]},
        {"text": "done", "usage": {"prompt_tokens": 40, "completion_tokens": 3}}]}]}
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from recoverykit.model.errors import InvalidArgument

SCRIPT_TAG_RE = re.compile(r"\[\[rk-script:([A-Za-z0-9_.\-]+)\]\]")
ID_PATTERN = r"^[A-Za-z0-9_.\-]+$"


ROLE_HEADER = "X-Recoverykit-Role"  # a runtime marks its Goal acceptance requests with ``verifier``
VERIFIER = "verifier"


def script_tag(script_id: str) -> str:
    """The text to put in a user message so the provider answers it from script ``script_id``."""
    return f"[[rk-script:{script_id}]]"


UsageStyle = Literal["final", "cumulative", "none"]
USAGE_STYLES: dict[str, str] = {
    "final": "as OpenAI does: a stream carries usage only when the request sets stream_options.include_usage, "
             "in one final chunk with empty choices (the other chunks say \"usage\": null); a non-streamed "
             "response carries it in its body",
    "cumulative": "every stream chunk carries the running cumulative usage (and, with include_usage, the final "
                  "usage chunk too); a runtime must keep a watermark, never sum the chunks",
    "none": "no usage anywhere, whatever the request asks: the runtime must report usage unknown",
}


def _style(style: str | None, cumulative: bool | None, where: str) -> str | None:
    """``usage_style``, or the old ``cumulative_usage`` flag mapped onto it; both given must agree."""
    legacy = None if cumulative is None else ("cumulative" if cumulative else "final")
    if style is not None and legacy is not None and style != legacy:
        raise ValueError(f"{where}: usage_style {style!r} contradicts cumulative_usage {cumulative!r} "
                         f"(which means {legacy!r}); give usage_style only")
    return style if style is not None else legacy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Usage(_Strict):
    prompt_tokens: int = Field(10, ge=0)
    completion_tokens: int = Field(5, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_openai(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens}

    def fraction(self, done: int, of: int) -> Usage:
        """Cumulative usage after ``done`` of ``of`` chunks: the prompt at once, completion pro rata."""
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=(self.completion_tokens * done) // max(of, 1))


class ToolCall(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Fault(_Strict):
    """Something to go wrong on some attempts of a step.

    - ``error``: answer with HTTP ``status`` and an OpenAI-style error body (nothing billed).
    - ``hold``: after ``at_chunk`` stream chunks (0: before the response starts, i.e. the request is
      in flight) hold the request until the kit releases it, then ``then`` (continue or cut).
    - ``cut``: after ``at_chunk`` chunks close the connection without finishing the response.
    - ``stall``: after ``at_chunk`` chunks go silent for ``seconds``, then go on (for a runtime's
      read timeouts; no kit action needed).
    """

    kind: Literal["error", "hold", "cut", "stall"]
    attempts: list[int] | None = Field(None, description="1-based attempts it applies to; None: every attempt")
    status: int = Field(500, ge=400, le=599)
    message: str = "scripted provider error"
    at_chunk: int = Field(0, ge=0)
    then: Literal["continue", "cut"] = "continue"
    seconds: float = Field(1.0, ge=0, le=3600, description="stall: how long the provider stays silent")

    def applies(self, attempt: int) -> bool:
        return self.attempts is None or attempt in self.attempts


class Step(_Strict):
    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    stream: bool | None = Field(None, description="force streaming on/off; None: as the request asks")
    chunks: int = Field(3, ge=1, description="how many content chunks the text is streamed in")
    usage_style: UsageStyle | None = Field(None, description="how usage is reported; None: the script's style")
    cumulative_usage: bool | None = Field(None, description="old form of usage_style: true cumulative, false final")
    faults: list[Fault] = Field(default_factory=list)
    duplicate_call_ids: bool = Field(False, description="every tool call of the step carries the first call's id "
                                                        "(an ambiguous response, CTX-11)")

    @model_validator(mode="after")
    def _has_a_reply(self) -> Step:
        if self.text is None and not self.tool_calls:
            raise ValueError("a step needs text, tool_calls or both")
        _style(self.usage_style, self.cumulative_usage, "a step")
        return self

    def fault_for(self, attempt: int) -> Fault | None:
        return next((f for f in self.faults if f.applies(attempt)), None)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


class Script(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    steps: list[Step] = Field(min_length=1)
    model: str = "recoverykit-scripted"
    usage_style: UsageStyle | None = Field(None, description="how usage is reported; None: final (as OpenAI)")
    cumulative_usage: bool | None = Field(None, description="old form of usage_style: true cumulative, false final")
    when_exhausted: Literal["error", "repeat_last"] = "error"
    reuse_call_ids: bool = Field(False, description="every response names its calls call_0, call_1, ... so ids repeat "
                                                    "from one response to the next, as some OpenAI-compatible servers' "
                                                    "do (a history must match each result to its nearest call, CTX-06)")
    verifier: dict[int, Step] = Field(
        default_factory=dict, description="Goal acceptance: the reply to a verifier request (one sent with the header "
        "X-Recoverykit-Role: verifier), keyed by how many worker steps of this script were delivered before it; the "
        "entry with the largest key not above that count answers (none: the request is refused as a mismatch)")

    @model_validator(mode="after")
    def _one_style(self) -> Script:
        _style(self.usage_style, self.cumulative_usage, f"script {self.id!r}")
        return self

    @property
    def style(self) -> str:
        """The script's usage style (``final`` unless it says otherwise)."""
        return _style(self.usage_style, self.cumulative_usage, self.id) or "final"

    def style_of(self, step: Step) -> str:
        """The usage style ``step`` is served with: its own, else the script's."""
        return _style(step.usage_style, step.cumulative_usage, "a step") or self.style

    def verifier_step(self, worker_steps: int) -> Step | None:
        """The verifier's reply after ``worker_steps`` delivered worker steps (the nearest entry at or below)."""
        keys = [k for k in self.verifier if k <= worker_steps]
        return self.verifier[max(keys)] if keys else None

    def step(self, index: int) -> Step | None:
        if index < len(self.steps):
            return self.steps[index]
        return self.steps[-1] if self.when_exhausted == "repeat_last" else None


class ProviderScript(_Strict):
    scripts: list[Script] = Field(min_length=1)
    default_script: str | None = Field(None, description="for requests without a tag; else the only script")
    hold_timeout_s: float = Field(600.0, gt=0, description="a held request is cut after this long")

    @model_validator(mode="after")
    def _ids_unique(self) -> ProviderScript:
        ids = [s.id for s in self.scripts]
        if len(set(ids)) != len(ids):
            raise ValueError(f"script ids must be unique, got {ids}")
        if self.default_script is not None and self.default_script not in ids:
            raise ValueError(f"default_script {self.default_script!r} is not one of {ids}")
        return self

    def by_id(self, script_id: str) -> Script | None:
        return next((s for s in self.scripts if s.id == script_id), None)

    def select(self, messages: list[dict[str, Any]]) -> tuple[Script | None, int, str]:
        """(script, step index, why) for a request's messages; script None with why if none fits."""
        if not isinstance(messages, list):
            raise InvalidArgument(f"messages must be a list, got {type(messages).__name__}")
        tag = None
        for message in messages:
            match = SCRIPT_TAG_RE.search(_text_of(message))
            if match:
                tag = match.group(1)
                break
        step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        if tag is None:
            tag = self.default_script or (self.scripts[0].id if len(self.scripts) == 1 else None)
            if tag is None:
                return None, step, f"no {script_tag('<id>')} tag in the messages and no default_script"
        script = self.by_id(tag)
        if script is None:
            return None, step, f"unknown script {tag!r}; known: {[s.id for s in self.scripts]}"
        return script, step, ""


def _text_of(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
