"""A proxy adapter: the reference runtime behind it, chosen traffic corrupted on the way back.

    python tests/adapters/proxy_adapter.py --mode ACTION:REQUEST [--mode ...] [--after N] [--spare REQUEST ...]
                                           [--if-init-contains TEXT] [-- CMD...]

It starts ``CMD`` (default: ``python -m recoverykit.impl``, the reference runtime's adapter, with
this interpreter), forwards every line the kit writes to it unchanged, and forwards every reply
back, except the replies to requests of type ``REQUEST`` (``init``, ``observe``, ``start``, ...;
``*`` matches any), which it corrupts by ``ACTION``:

    extra-key           adds an undocumented key ``"proxy_extra": 1`` (a protocol break)
    wrong-type          every string field of the reply body becomes the number 12345
    oversize            pads the reply past the kit's 1 MiB line limit
    invalid-utf8        writes the reply with an invalid UTF-8 byte in it
    close               closes the proxy's stdout instead of answering (the process lives on)
    hang                never answers (the request stays in flight; the process lives on)
    bogus-declarations  (init) declares a profile, failpoint and restart kind that do not exist
    indefinite          replaces the reply (the runtime performed the request) by an indefinite error,
                        ``{"type": "error", "code": "internal", "definite": false}``: "it may have happened"

``--after N`` lets the first N matching replies through untouched and corrupts the later ones, so a
break can land in the middle of a run (``--mode extra-key:observe --after 3``). ``--spare REQUEST`` lets every
reply to ``REQUEST`` through whatever the modes say (``--mode indefinite:* --spare init --spare observe``: every
user operation performed, every reply lost). ``--if-init-contains
TEXT`` corrupts nothing unless the kit's ``init`` line contains TEXT: certify starts one adapter per
case, and its run directory (in the paths ``init`` hands over) names the case, so ``--if-init-contains
lockstep`` breaks the lockstep machine alone and every scenario stays honest. With no ``--mode`` the
proxy is transparent.

Standard library only. The runtime behind it inherits the environment (and so the kit's run marker)
and the proxy's process group: the kit's usual teardown ends both. The proxy exits when the kit
closes its stdin, after closing the runtime's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading

ACTIONS = ("extra-key", "wrong-type", "oversize", "invalid-utf8", "close", "hang", "bogus-declarations",
           "indefinite")
ENVELOPE = {"type", "msg_id", "in_reply_to"}
MAX_LINE = 1 << 20


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", action="append", default=[], metavar="ACTION:REQUEST")
    parser.add_argument("--after", type=int, default=0, metavar="N")
    parser.add_argument("--spare", action="append", default=[], metavar="REQUEST")
    parser.add_argument("--if-init-contains", default="", metavar="TEXT")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args(argv)
    modes = []
    for mode in args.mode:
        action, _, request = mode.partition(":")
        if action not in ACTIONS or not request:
            parser.error(f"--mode {mode!r}: use ACTION:REQUEST with ACTION one of {', '.join(ACTIONS)}")
        modes.append((action, request))
    args.modes = modes
    args.command = args.command or [sys.executable, "-m", "recoverykit.impl"]
    return args


class Proxy:
    def __init__(self, args: argparse.Namespace) -> None:
        self.modes, self.after, self.spare = args.modes, args.after, set(args.spare)
        self.condition = args.if_init_contains
        self.armed = not self.condition  # with a condition: only once an init line contains it
        self.types: dict[int, str] = {}  # msg_id -> request type, from what the kit sent
        self.seen: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.child = subprocess.Popen(args.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.out = sys.stdout.buffer

    def write(self, data: bytes) -> None:
        with self.lock:
            if not self.closed:
                self.out.write(data)
                self.out.flush()

    def downstream(self) -> None:
        """Kit -> runtime, unchanged (msg ids remembered to know what each reply answers)."""
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
                self.types[int(request["msg_id"])] = str(request["type"])
                if request["type"] == "init" and self.condition and self.condition.encode() in line:
                    self.armed = True
            except (ValueError, KeyError, TypeError):
                pass
            try:
                self.child.stdin.write(line)
                self.child.stdin.flush()
            except (BrokenPipeError, OSError):
                break
        with contextlib.suppress(OSError):
            self.child.stdin.close()

    def upstream(self) -> None:
        """Runtime -> kit, corrupted where a mode says so."""
        for line in self.child.stdout:
            self.write(self.corrupt(line))

    def action_for(self, reply: dict) -> str | None:
        if not self.armed:
            return None
        request = self.types.get(reply.get("in_reply_to")) if isinstance(reply.get("in_reply_to"), int) else None
        if request in self.spare:
            return None
        for action, wanted in self.modes:
            if request is not None and wanted in ("*", request):
                key = (action, wanted)
                self.seen[key] = self.seen.get(key, 0) + 1
                if self.seen[key] > self.after:
                    return action
        return None

    def corrupt(self, line: bytes) -> bytes:
        try:
            reply = json.loads(line)
        except ValueError:
            return line
        if not isinstance(reply, dict):
            return line
        action = self.action_for(reply)
        if action is None:
            return line
        if action == "extra-key":
            reply["proxy_extra"] = 1
        elif action == "wrong-type":
            reply = {k: (12345 if k not in ENVELOPE and isinstance(v, str) else v) for k, v in reply.items()}
        elif action == "oversize":
            reply["name"] = "x" * (MAX_LINE + 16)
        elif action == "invalid-utf8":
            text = json.dumps(reply)
            return text[:-1].encode() + b', "name": "\xff\xfe"}\n' if text.endswith("}") else b"\xff\n"
        elif action == "close":
            with self.lock:  # sys.stdout never closes fd 1 itself (closefd=False): close the descriptor
                self.closed = True
                self.out.flush()
                os.close(self.out.fileno())
            return b""
        elif action == "hang":
            return b""
        elif action == "bogus-declarations":
            reply["profiles"] = [*reply.get("profiles", []), "no_such_profile"]
            reply["failpoints"] = [*reply.get("failpoints", []), "no.such.point"]
            reply["restart_kinds"] = [*reply.get("restart_kinds", []), "no_such_kind"]
        elif action == "indefinite":
            reply = {"type": "error", "msg_id": reply.get("msg_id"), "in_reply_to": reply.get("in_reply_to"),
                     "code": "internal", "text": "proxy: the reply was lost (the request was performed)",
                     "definite": False}
        return (json.dumps(reply) + "\n").encode()


def main(argv: list[str]) -> int:
    proxy = Proxy(parse(argv))
    up = threading.Thread(target=proxy.upstream, daemon=True)
    up.start()
    proxy.downstream()
    code = proxy.child.wait()
    up.join(timeout=5)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
