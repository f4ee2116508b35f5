"""One run's environment: the runtime under test inside everything the kit owns around it.

A ``Run`` makes a private run directory, starts the scripted provider (with its ledger), declares
the probe tools (with their witness log), optionally a failpoint broker, spawns the adapter and
hands all of it over in ``init``. Every operation goes through ``Run.op`` so the kit's own history
records it (invoke, then ok / fail / info: an error with definite=false, a timeout or a dead
adapter is info, it may have happened); observations and quiesce results are recorded as
observations, kills and restarts as faults. ``close()`` always reaps every process carrying the
run marker, then closes the provider, the broker and the history, even after an exception.

The environment is one layer, here in conformance/, used by certify, chaos and the Python API alike:
the scripted provider, the probe tools and their witness, the failpoint broker (``broker``), the
killer and the reaper. Every run gets a broker unless ``broker_factory=None`` asks for none (then no
runtime failpoint can pause, though ``crash`` terms still work: a process kills itself).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from recoverykit.conformance import killer, paused, proc_guard, reaper
from recoverykit.conformance.broker import FailpointBroker
from recoverykit.conformance.checker import Evidence
from recoverykit.conformance.client import AdapterClient, start_timeout_s
from recoverykit.conformance.errors import AdapterTimeout, NothingKilled, OperationFailed, ProtocolError
from recoverykit.conformance.history import NOTHING_KILLED, Recorder
from recoverykit.conformance.killer import ProcRef
from recoverykit.conformance.pacing import REPLY, REQUEST, SETTLE, Pacing, current
from recoverykit.conformance.private_files import copy_tree, private_dir
from recoverykit.conformance.probe_tools import standard_probe_tools
from recoverykit.conformance.protocol_rpcs import InitOk
from recoverykit.conformance.provider import ScriptedProvider, key_fingerprint
from recoverykit.conformance.provider_script import ProviderScript
from recoverykit.conformance.reaper import new_marker
from recoverykit.conformance.witness import read_witness

RUN_MODEL = "rk-model-1"  # the model every run's runtime is told to use (init.model)
MAX_DATA_DIR = 48  # bytes; leaves a runtime room for socket names under it


class Broker(Protocol):
    """What the environment needs of a failpoint broker (``recoverykit.conformance.broker.FailpointBroker``)."""

    @property
    def address(self) -> str: ...

    def hits(self) -> list[Any]: ...

    def release_all(self) -> int: ...

    def close(self) -> None: ...


BrokerFactory = Callable[[Path], Broker]


def make_run_dir(out: str | os.PathLike | None, name: str) -> Path:
    """A new private (0700) directory for one run, never one that existed; short when no --out is given
    (Unix socket paths). ``<out>/<name>`` when free, else ``<out>/<name>-2``, ``-3``, ..."""
    if out is None:
        path = Path(tempfile.mkdtemp(prefix=f"rk-{name[:12]}-"))
    else:
        base = private_dir(Path(out))
        for n in itertools.count(1):
            path = base / (name if n == 1 else f"{name}-{n}")
            try:
                path.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
    os.chmod(path, 0o700)
    return path


@dataclass
class Outcome:
    """What one operation came to: ``type`` ok / fail / info, the reply or the error."""

    type: str
    reply: Any = None
    error: str | None = None
    code: str | None = None

    @property
    def ok(self) -> bool:
        return self.type == "ok"


class Run:
    """Use as a context manager; ``close()`` leaves no process behind."""

    def __init__(self, command: str, run_dir: Path, script: ProviderScript | dict, *,
                 broker_factory: BrokerFactory | None = FailpointBroker, timeout_s: float = REPLY.seconds,
                 slow_timeout_s: float | None = None, pacing: Pacing | None = None) -> None:
        self.command, self.run_dir = command, Path(run_dir)
        self.script = script
        self.broker_factory = broker_factory
        self.pacing = current() if pacing is None else pacing  # every window below is scaled by it
        self.timeout_s, self.slow_timeout_s = timeout_s, slow_timeout_s  # base windows; None: start_timeout_s()
        self.marker = new_marker()
        self.data_dir = self.run_dir / "data"
        self._short_data: Path | None = None  # the data dir's real place in the temp dir, while the run is open
        self.witness_path = self.run_dir / "witness.jsonl"
        self.ledger_path = self.run_dir / "provider-ledger.jsonl"
        self.provider: ScriptedProvider | None = None
        self.broker: Broker | None = None
        self.client: AdapterClient | None = None
        self.recorder: Recorder | None = None
        self.init_ok: InitOk | None = None
        self.clock_offset_s = 0.0
        self.host_id = "host-a"
        self._paused: list[ProcRef] = []  # processes the pause nemesis stopped (continued before close)
        self.failpoints = ""
        self.model = RUN_MODEL
        self.api_key = f"sk-rk-{secrets.token_hex(12)}"  # this run's provider credential (init.api_key)
        self.probe_tools: list = []

    # --- setting up and tearing down ----------------------------------------------------------------

    def open(self) -> Run:
        try:
            if len(os.fsencode(self.data_dir)) > MAX_DATA_DIR:
                # A runtime puts Unix sockets in its data dir (108-byte sun_path): keep the real path short
                # and leave a link where the run directory's layout expects it.
                short = self._short_data = Path(tempfile.mkdtemp(prefix="rkd-"))
                os.symlink(short, self.data_dir)
                self.data_dir = short
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.recorder = Recorder(self.run_dir / "history.jsonl")
            self.provider = ScriptedProvider(self.script, self.ledger_path)
            self.provider.models.add(self.model)
            if self.broker_factory is not None:
                self.broker = self.broker_factory(self.run_dir)
            socket_path = self.broker.address if self.broker else str(self.run_dir / "failpoints.sock")
            slow = start_timeout_s() if self.slow_timeout_s is None else self.slow_timeout_s
            self.client = AdapterClient(self.command, self.run_dir, timeout_s=self.pacing(self.timeout_s),
                                        slow_timeout_s=self.pacing(slow), run_marker=self.marker,
                                        cwd=os.getcwd(), pacing=self.pacing)
            self.client.start()
            invoke = self.recorder.invoke("init", {"data_dir": str(self.data_dir), "model": self.model,
                                                   "api_key_sha256": key_fingerprint(self.api_key)})
            self.probe_tools = standard_probe_tools(self.witness_path)
            try:
                self.init_ok = self.client.handshake(
                    data_dir=self.data_dir, provider_base_url=self.provider.base_url, failpoint_socket=socket_path,
                    probe_tools=self.probe_tools, model=self.model, api_key=self.api_key)
            except (ProtocolError, OperationFailed) as exc:
                self._failed(invoke, exc)
                raise
            self.recorder.complete(invoke, "ok", {"name": self.init_ok.name, "version": self.init_ok.version,
                                                  "resources": sorted(self.resources)})
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> Run:
        return self.open() if self.client is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Reap everything by the run marker, whatever happened before; then close the kit's side."""
        self.continue_paused()  # a stopped process exits on SIGKILL too, but never leave one stopped
        if self.provider is not None:
            self.provider.release(cut=True)  # a runtime blocked on a held request must not hang its own exit
        with contextlib.suppress(Exception):
            self.release_probes()
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None
        reaper.reap(self.marker)
        for closer in (self.provider, self.broker, self.recorder):
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer.close()
        self.provider = self.broker = self.recorder = None
        self._bring_data_home()

    def _bring_data_home(self) -> None:
        """A short data dir moves into the run dir in place of its link (bundles read it there); nothing
        of the run stays in the system temp dir."""
        short, self._short_data = self._short_data, None
        if short is None:
            return
        home = self.run_dir / "data"
        with contextlib.suppress(OSError):
            if home.is_symlink():
                home.unlink()
            try:
                os.rename(short, home)
            except OSError:  # another file system: copy (links as links), then remove the original
                copy_tree(short, home)
        shutil.rmtree(short, ignore_errors=True)
        self.data_dir = home

    # --- operations, recorded ------------------------------------------------------------------------

    @property
    def profiles(self) -> set[str]:
        return {str(p) for p in self.init_ok.profiles} if self.init_ok else set()

    @property
    def resources(self) -> set[str]:
        """Resources the adapter declared it rechecks after a restart (``init_ok.resources``, protocol 1.1)."""
        return {str(r) for r in self.init_ok.resources} if self.init_ok else set()

    @property
    def history(self):
        return self.recorder.history

    def op(self, name: str, *, reply_within_s: float | None = None, **fields: Any) -> Outcome:
        """Send one request; record invoke and its completion; never raise for an answered error."""
        invoke = self.recorder.invoke(name, fields)
        try:
            reply = self.client.call(name, reply_within_s=reply_within_s, **fields)
        except OperationFailed as exc:
            kind = "fail" if exc.definite else "info"
            self.recorder.complete(invoke, kind, {"code": exc.code, "text": exc.text})
            return Outcome(kind, error=str(exc), code=exc.code)
        except ProtocolError as exc:
            self._failed(invoke, exc)
            raise
        body = reply.model_dump(mode="json", exclude={"type", "msg_id", "in_reply_to"})
        self.recorder.complete(invoke, "ok", body)
        return Outcome("ok", reply=reply)

    def _failed(self, invoke: Any, exc: ProtocolError | OperationFailed) -> None:
        """Complete ``invoke`` as info; a protocol break or silence carries its verdict (``protocol``), so the
        history checker, and ``recoverykit check`` on a bundle later, judge it like the run did."""
        if isinstance(exc, OperationFailed):
            self.recorder.complete(invoke, "fail" if exc.definite else "info", {"code": exc.code, "text": exc.text})
            return
        code = "timeout" if isinstance(exc, AdapterTimeout) else "protocol_error"
        self.recorder.complete(invoke, "info", {"code": code, "text": str(exc), "protocol": exc.verdict.value})

    def start(self, *, failpoints: str | None = None, clock_offset_s: float | None = None,
              host_id: str | None = None, probe_tools: list | None = None,
              automatic_recovery: bool | None = None) -> Outcome:
        """``probe_tools``: the tools as they are now (a changed version is a resource change); None keeps them.
        ``automatic_recovery``: the operator's setting from this start on (protocol 1.2; only to an adapter that
        declares ``automatic_recovery_setting``); None sends nothing and keeps it."""
        self.failpoints = self.failpoints if failpoints is None else failpoints
        self.clock_offset_s = self.clock_offset_s if clock_offset_s is None else clock_offset_s
        self.host_id = host_id or self.host_id
        if probe_tools is not None:
            self.probe_tools = list(probe_tools)
        tools = None if probe_tools is None else [t.model_dump(mode="json") for t in probe_tools]
        extra = {} if automatic_recovery is None else {"automatic_recovery": automatic_recovery}
        return self.op("start", failpoints=self.failpoints, clock_offset_s=self.clock_offset_s, host_id=self.host_id,
                       probe_tools=tools, **extra)

    def restart(self, kind: str, **env: Any) -> Outcome:
        self.recorder.fault(kind, via="adapter")
        return self.op("restart", kind=kind, failpoints=env.get("failpoints"),
                       clock_offset_s=env.get("clock_offset_s"), host_id=env.get("host_id"))

    def observe(self, quiescent: bool | None = None) -> dict[str, Any]:
        invoke = self.recorder.invoke("observe", {})
        try:
            snap = self.client.observe().model_dump(mode="json")
        except OperationFailed as exc:
            self.recorder.complete(invoke, "fail" if exc.definite else "info", {"code": exc.code, "text": exc.text})
            raise
        except ProtocolError as exc:
            self._failed(invoke, exc)
            raise
        self.recorder.complete(invoke, "ok", {})
        self.recorder.observe(snap, quiescent)
        return snap

    def window(self, base_s: float) -> float:
        """The seconds this run gives a window of ``base_s`` at scale 1 (``pacing``): for a drive's own waits."""
        return self.pacing(base_s)

    def settle(self, timeout_s: float = 10.0) -> tuple[bool, dict[str, Any]]:
        """Quiesce (bounded by the window ``timeout_s``, scaled by the run's pacing), then observe; both
        recorded. (quiescent, snapshot)."""
        out = self.op("quiesce", timeout_s=self.pacing(timeout_s))
        quiescent = bool(out.ok and out.reply.quiescent)
        return quiescent, self.observe(quiescent)

    def processes(self) -> list[dict[str, Any]]:
        out = self.op("processes")
        if not out.ok:
            return []
        return [p.model_dump(mode="json") for p in out.reply.processes]

    # --- faults the kit does itself ------------------------------------------------------------------

    def kill(self, kind: str, *, roles: tuple[str, ...] | None = None, required: bool = True) -> list[int]:
        """SIGKILL runtime processes named by ``processes`` (pid + create_time); recorded as a fault.

        ``worker_kill`` kills workers alone (tool children live on); anything else kills every listed
        process with its descendants. Every listed pid is vetted first (``proc_guard``): a pid not of
        this run raises ``RefusedProcess`` (a protocol break) before anything is signalled, recorded in the
        history as a ``kill_refused`` fault. A kill that kills nothing (the adapter listed no process of the
        roles, as chaos finds) is no restart: it is recorded as a ``nothing_killed`` fault, and, when
        ``required``, raises ``NothingKilled``, so the case is unknown with that reason instead of blaming the
        runtime's clauses for a restart that never happened.
        """
        listed = self.processes()
        if roles is None:
            roles = ("worker",) if kind == "worker_kill" else ("control", "worker", "tool", "other")
        chosen = [p for p in listed if p["role"] in roles]
        adapter_pid = self.client.pid if self.client else None
        vetted = proc_guard.vet_recorded(chosen, self.marker, adapter_pid=adapter_pid, during=kind,
                                         fault=self.recorder.fault)
        targets = [{"pid": pid, "create_time": ct} for pid, ct in vetted]
        killed = kill_listed(targets, tree=kind != "worker_kill")
        if not killed:
            shown = [(p.get("pid"), p.get("role")) for p in listed]
            self.recorder.fault(NOTHING_KILLED, during=kind, roles=list(roles), listed=shown, required=required)
            if required:
                raise NothingKilled(f"the {kind.replace('_', ' ')} killed nothing: the adapter's processes reply "
                                    f"listed {shown or 'no process'} (roles {', '.join(roles)}), so no runtime "
                                    "process was interrupted and the case proves nothing about recovery")
            return killed
        self.recorder.fault(kind, pids=killed, roles=list(roles))
        return killed

    def pause_process(self, pid: int) -> bool:
        """Jepsen's pause nemesis: SIGSTOP one process the runtime lists (vetted as this run's, like a kill);
        recorded as a ``process_pause`` fault. False when the runtime does not list it or it is gone."""
        chosen = [p for p in self.processes() if p["pid"] == pid]
        adapter_pid = self.client.pid if self.client else None
        vetted = proc_guard.vet_recorded(chosen, self.marker, adapter_pid=adapter_pid, during="process_pause",
                                         fault=self.recorder.fault)
        if not vetted:
            return False
        ref = ProcRef(*vetted[0])
        if not ref.alive():
            return False
        paused.paused(ref)  # before the SIGSTOP: a signal that ends the kit in between still lets it go on
        os.kill(ref.pid, signal.SIGSTOP)
        self._paused.append(ref)
        self.recorder.fault("process_pause", pids=[ref.pid])
        return True

    def continue_paused(self) -> list[int]:
        """SIGCONT every process ``pause_process`` stopped that is still the same process; recorded."""
        went_on = []
        for ref in self._paused:
            if ref.alive():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(ref.pid, signal.SIGCONT)
                    went_on.append(ref.pid)
            paused.released(ref)
        if self._paused:
            self.recorder.fault("process_continue", pids=went_on)
        self._paused = []
        return went_on

    def clock_jump(self, seconds: float) -> None:
        self.clock_offset_s += seconds
        self.recorder.fault("clock_jump", seconds=seconds)

    # --- the environment's moves ---------------------------------------------------------------------

    def release_probes(self) -> None:
        """Let every probe tool holding before its exit go on (no broker: by release file)."""
        folder = Path(str(self.witness_path) + ".release")
        folder.mkdir(exist_ok=True)
        (folder / "ALL").touch()

    @property
    def external_dir(self) -> Path:
        """Where the scripted external operations keep their state (profile waits; ``probe --external``)."""
        from recoverykit.conformance.probe_tools import external_dir
        return Path(external_dir(self.witness_path))

    def external(self, handle: str, state: str, version: str = "1") -> None:
        """Set a scripted external operation's state (``running``, ``completed``, ``failed``, or ``hang``: its
        queries never answer); recorded as a fault of the kit's that takes nothing down."""
        from recoverykit.conformance.probe import write_state
        write_state(str(self.external_dir / f"{Path(handle).name}.json"),
                    {"handle": handle, "state": state, "version": version})
        self.recorder.fault("external_state", handle=handle, state=state, version=version)

    def wait_held(self, timeout_s: float = REQUEST.seconds, **match: Any):
        """The first held request matching ``match``, waiting the request window ``timeout_s`` (scaled);
        ``ProviderTimeout`` naming the window when none came."""
        given = self.pacing(timeout_s)
        return self.provider.wait_for_held(given, why=self.pacing.says(REQUEST.name, given), **match)

    def wait_hit(self, point: str, timeout_s: float = SETTLE.seconds, **match: Any):
        """The broker's first hit of ``point`` matching ``match``, waiting the window ``timeout_s`` (scaled);
        ``FailpointNotHit`` naming the window when none came."""
        given = self.pacing(timeout_s)
        return self.broker.wait_for_hit(point, timeout=given, why=self.pacing.says("failpoint", given), **match)

    def wait_witness(self, predicate: Callable[[Any], bool], timeout_s: float = 10.0) -> bool:
        """Whether a witnessed execution matching ``predicate`` showed within the window ``timeout_s`` (scaled)."""
        deadline = time.monotonic() + self.pacing(timeout_s)
        while time.monotonic() < deadline:
            if any(predicate(e) for e in read_witness(self.witness_path).executions):
                return True
            time.sleep(0.02)
        return False

    def evidence(self) -> Evidence:
        witness = read_witness(self.witness_path) if self.witness_path.exists() else None
        ledger = self.provider.records() if self.provider else _read_ledger(self.ledger_path)
        observes = frozenset(str(s) for s in self.init_ok.observes) if self.init_ok else frozenset()
        return Evidence(self.recorder.history, ledger, witness, observes)

    def copy_data(self, target: Path) -> None:
        """The runtime's data dir into ``target``: symlinks copied as links, never followed out of the run."""
        copy_tree(self.data_dir, target)


def _read_ledger(path: Path) -> list[dict[str, Any]]:
    from recoverykit.conformance.provider_ledger import read_ledger
    return read_ledger(path) if path.exists() else []


def kill_listed(targets: list[dict[str, Any]], *, tree: bool) -> list[int]:
    """SIGSTOP then SIGKILL each listed process (and with ``tree`` its descendants); verified dead.

    The killer (``conformance.killer``) does it, as for chaos: a listed pid whose create time no longer
    matches was reused and is never signalled, and the kit, its ancestors and init never are.
    """
    guard = proc_guard.protected()
    refs = [ProcRef(int(t["pid"]), float(t["create_time"])) for t in targets
            if t.get("create_time") is not None and int(t["pid"]) not in guard]
    refs = [r for r in refs if r.alive()]
    members = killer.freeze_trees(refs) if tree else refs
    report = killer.kill_all([m for m in members if m.pid not in guard])
    return sorted(r.pid for r in report.killed)
