"""A proxy around the reference runtime that leaves traps in its data dir, or floods its stderr.

    planting_proxy.py [--plant OUTSIDE_DIR] [--stderr-mb N] [--sparse-gib N] [--fill-mb N]

Standard library only. It starts ``python -m recoverykit.impl`` and passes every protocol line
through, with two changes that keep it an honest adapter: it declares no ``usage_receipts``
section (and sends that section as null), so the usage clauses cannot be judged and every case
ends unknown, which makes certify write a bundle; and, per option:

- ``--plant OUTSIDE_DIR``: once the runtime answered ``init``, its data dir gets ``loop`` (a link to
  the data dir itself) and ``outside`` (a link to OUTSIDE_DIR, a directory outside the run);
- ``--stderr-mb N``: writes N MiB to stderr before the first reply;
- ``--sparse-gib N``: once the runtime answered ``init``, its data dir gets ``sparse.bin``, N GiB long and all hole
  (nothing on disk);
- ``--fill-mb N``: likewise ``filled.bin``, N MiB of real bytes.
"""

import json
import os
import subprocess
import sys
import threading

HIDDEN = "usage_receipts"


def options():
    args, found = sys.argv[1:], {"plant": None, "stderr_mb": 0, "sparse_gib": 0, "fill_mb": 0}
    while args:
        name = args.pop(0)
        if name == "--plant":
            found["plant"] = args.pop(0)
        elif name == "--stderr-mb":
            found["stderr_mb"] = int(args.pop(0))
        elif name == "--sparse-gib":
            found["sparse_gib"] = int(args.pop(0))
        elif name == "--fill-mb":
            found["fill_mb"] = int(args.pop(0))
    return found


def plant(data_dir, outside):
    os.symlink(data_dir, os.path.join(data_dir, "loop"))
    os.symlink(outside, os.path.join(data_dir, "outside"))


def main():
    opts = options()
    child = subprocess.Popen([sys.executable, "-m", "recoverykit.impl"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    pending = {}  # msg_id of an init -> its data_dir

    def replies():
        for raw in child.stdout:
            message = json.loads(raw)
            if message.get("type") == "init_ok":
                message["observes"] = [s for s in message.get("observes", []) if s != HIDDEN]
                data_dir = pending.pop(message.get("in_reply_to"), None)
                if opts["plant"] and data_dir:
                    plant(data_dir, opts["plant"])
                if opts["sparse_gib"] and data_dir:
                    with open(os.path.join(data_dir, "sparse.bin"), "wb") as f:
                        f.truncate(opts["sparse_gib"] << 30)
                if opts["fill_mb"] and data_dir:
                    with open(os.path.join(data_dir, "filled.bin"), "wb") as f:
                        for _ in range(opts["fill_mb"]):
                            f.write(os.urandom(1 << 20))
            elif message.get("type") == "observe_ok":
                message["snapshot"][HIDDEN] = None
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    pump = threading.Thread(target=replies, daemon=True)
    pump.start()
    if opts["stderr_mb"]:
        line = b"x" * 1023 + b"\n"
        for _ in range(opts["stderr_mb"] * 1024):
            sys.stderr.buffer.write(line)
        sys.stderr.buffer.write(b"LAST-LINE-OF-THE-FLOOD\n")
        sys.stderr.flush()
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        if message.get("type") == "init":
            pending[message["msg_id"]] = message["data_dir"]
        child.stdin.write(raw)
        child.stdin.flush()
    child.stdin.close()
    child.wait()
    pump.join(timeout=5)


if __name__ == "__main__":
    main()
