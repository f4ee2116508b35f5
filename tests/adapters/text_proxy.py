#!/usr/bin/env python3
"""A proxy around the reference runtime's adapter that puts hostile text where the adapter may write text.

``text_proxy.py [MODE]``; standard library only. The proxy starts ``python -m recoverykit.impl`` and
relays JSON lines both ways, changing only:

- ``init_ok``: ``name`` is ``[/]`` (Rich's closing tag) and ``version`` carries Rich markup, terminal
  escape sequences and control characters;
- MODE ``raw_submit`` (the default): every ``submit`` is answered, without reaching the runtime, by
  an ``error`` line whose ``text`` is ``HOSTILE`` with its control characters written raw (so the line
  is not JSON, and the kit quotes it in a protocol error);
- MODE ``refuse_submit``: every ``submit`` is answered with a well-formed definite ``error`` whose
  ``text`` is ``HOSTILE`` (it reaches the history, ``check`` and the lockstep machine's messages);
- MODE ``names_only``: nothing else changes.

A kit that prints this text must show it literally: no MarkupError, nothing dropped, no raw ESC.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

MODE = sys.argv[1] if len(sys.argv) > 1 else "raw_submit"
# Rich markup that crashes ([/]), a path that reads as a closing tag, text in double brackets that Rich
# would swallow, a terminal escape that clears the line and forges a verdict, a bell, NUL, CR, DEL, C1.
HOSTILE = ("cannot open [/var/lib/x] [[x]] [bold]b[/bold] \x1b[2K\rverdict: valid \x1b]0;title\x07 "
           "nul\x00 del\x7f csi\x9b1m bidi\u202e end")
NAME = "[/]"
VERSION = "1.0 [[x]] \x1b[31mred\x1b[0m \x07\x08"


def write(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def pump(inner: subprocess.Popen, lock: threading.Lock) -> None:
    assert inner.stdout is not None
    for line in inner.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and msg.get("type") == "init_ok":
            msg = {**msg, "name": NAME, "version": VERSION}
        with lock:
            if isinstance(msg, dict):
                write(msg)
            else:
                sys.stdout.write(line)
                sys.stdout.flush()


def main() -> None:
    inner = subprocess.Popen([sys.executable, "-m", "recoverykit.impl"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)
    lock = threading.Lock()
    relay = threading.Thread(target=pump, args=(inner, lock), daemon=True)
    relay.start()
    assert inner.stdin is not None
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if MODE in ("raw_submit", "refuse_submit") and isinstance(msg, dict) and msg.get("type") == "submit":
            refusal = {"type": "error", "msg_id": 10_000_000 + msg["msg_id"], "in_reply_to": msg["msg_id"],
                       "code": "precondition_failed", "definite": True, "text": HOSTILE}
            with lock:
                if MODE == "refuse_submit":
                    write(refusal)
                else:  # json.dumps escapes control characters; put them back raw (no quote or backslash in HOSTILE)
                    line = json.dumps({**refusal, "text": "@"})
                    sys.stdout.write(line.replace('"@"', f'"{HOSTILE}"') + "\n")
                    sys.stdout.flush()
            continue
        inner.stdin.write(line)
        inner.stdin.flush()
    inner.stdin.close()
    relay.join(timeout=30)
    inner.wait(timeout=30)


if __name__ == "__main__":
    main()
