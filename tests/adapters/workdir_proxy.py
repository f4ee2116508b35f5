"""A proxy around the reference runtime that does to a session's working directory what runtimes do.

    workdir_proxy.py --recreate | --link OUTSIDE_DIR

Standard library only. It starts ``python -m recoverykit.impl`` and passes every protocol line through; per
option, for every ``working_dir`` a ``submit`` named:

- ``--recreate``: before each ``start`` reaches the runtime, ``os.makedirs(working_dir, exist_ok=True)`` (a runtime
  that makes its working directory again whenever it starts);
- ``--link OUTSIDE_DIR``: once the submit is answered, the directory is replaced by a link to OUTSIDE_DIR, a
  directory outside the run.
"""

import json
import os
import shutil
import subprocess
import sys
import threading


def main():
    args = sys.argv[1:]
    recreate = "--recreate" in args
    link = args[args.index("--link") + 1] if "--link" in args else None
    child = subprocess.Popen([sys.executable, "-m", "recoverykit.impl"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    workdirs, pending = [], {}  # pending: msg_id of a submit -> its working_dir

    def replies():
        for raw in child.stdout:
            message = json.loads(raw)
            where = pending.pop(message.get("in_reply_to"), None)
            if link and where and message.get("type") == "submit_ok" and not os.path.islink(where):
                shutil.rmtree(where, ignore_errors=True)
                os.symlink(link, where)
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    pump = threading.Thread(target=replies, daemon=True)
    pump.start()
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        if message.get("type") == "submit" and message.get("working_dir"):
            workdirs.append(message["working_dir"])
            pending[message["msg_id"]] = message["working_dir"]
        if message.get("type") == "start" and recreate:
            for path in workdirs:
                os.makedirs(path, exist_ok=True)
        child.stdin.write(raw)
        child.stdin.flush()
    child.stdin.close()
    child.wait()
    pump.join(timeout=5)


if __name__ == "__main__":
    main()
