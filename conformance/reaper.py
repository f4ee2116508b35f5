"""Nothing outlives a run: every process started for it carries a marker, and the reaper finds it.

The kit puts ``RECOVERYKIT_RUN_MARKER=<marker>`` in the environment of everything it starts (the
adapter, the runtime, and through them every worker and tool child, since environments are
inherited). ``leftovers(marker)`` scans process environments with psutil; ``reap(marker)`` kills
what it finds. A marker names its owner (the kit process's pid and start time), so when the kit
itself was SIGKILLed, the next run's ``reap_stale()`` finds markers whose owner is dead and reaps
them, while the markers of other live kits (parallel test workers) are left alone.

Marker format: ``recoverykit-<owner pid>-<owner start in ms since boot>-<8 hex>`` (since boot, not a create_time:
a wall-clock step must never make a live owner look gone).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Mapping

import psutil
from recoverykit.conformance import proc_markers
from recoverykit.conformance.killer import KillReport, ProcRef, create_time, kill_all, proc_stat, since_boot
from recoverykit.model.errors import InvalidArgument

ENV_RUN_MARKER = "RECOVERYKIT_RUN_MARKER"
MARKER_PREFIX = "recoverykit-"
_MARKER_RE = re.compile(r"recoverykit-(\d+)-(\d+)-([0-9a-f]{8})")
STALE_PASSES = 4  # chaos command -> xdist workers -> case processes: two kills deep, then one pass finding nothing


def _started_ms(pid: int) -> int | None:
    """A process's start in milliseconds since boot: fixed for its life, whatever the wall clock does (a
    create_time moves with every clock step, and a reaper that misread its owner as gone would reap a live run)."""
    started = create_time(pid)
    return None if started is None else round(since_boot(started) * 1000)


def new_marker() -> str:
    """A fresh marker owned by this process."""
    return f"{MARKER_PREFIX}{os.getpid()}-{_started_ms(os.getpid())}-{uuid.uuid4().hex[:8]}"


def marked_env(marker: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus the run marker."""
    if not _MARKER_RE.fullmatch(marker):
        raise InvalidArgument(f"not a run marker: {marker!r}; make one with reaper.new_marker()")
    return {**(os.environ if base is None else base), ENV_RUN_MARKER: marker}


def owner_alive(marker: str) -> bool:
    """Is the kit process that made ``marker`` still running? Unparseable markers count as alive."""
    match = _MARKER_RE.fullmatch(marker)
    if match is None:
        return True  # not ours to judge: never reap what we cannot attribute
    pid, created_ms = int(match.group(1)), int(match.group(2))
    # a zombie owner has ended (its parent has not collected it yet: e.g. an xdist worker just killed by
    # reap_stale itself), so the processes it marked are stale
    st = proc_stat(pid)
    if st is None or st[0] == psutil.STATUS_ZOMBIE:
        return False
    return abs(since_boot(st[2]) * 1000 - created_ms) < 50


def _marked() -> dict[str, list[ProcRef]]:
    """marker -> processes carrying it (only processes whose environment we may read)."""
    found: dict[str, list[ProcRef]] = {}
    me = psutil.Process()
    protected = {me.pid, *(p.pid for p in me.parents())}  # the kit never reaps itself or its parents
    for pid, marker in proc_markers.values(ENV_RUN_MARKER).items():
        if pid in protected or not marker:
            continue
        st = proc_stat(pid)
        if st is not None and st[0] != psutil.STATUS_ZOMBIE:
            found.setdefault(marker, []).append(ProcRef(pid, st[2]))
    return found


def leftovers(marker: str) -> list[ProcRef]:
    """Live processes carrying ``marker``."""
    return sorted(_marked().get(marker, []))


def reap(marker: str, timeout: float = 5.0) -> KillReport:
    """SIGKILL every live process carrying ``marker`` and verify each is dead."""
    if not marker:
        raise InvalidArgument("reap() needs a marker; an empty one would match nothing or everything")
    return kill_all(leftovers(marker), timeout)


def stale_markers() -> dict[str, list[ProcRef]]:
    """Markers of recoverykit runs whose owner is dead, with their live processes."""
    return {m: sorted(refs) for m, refs in _marked().items() if m.startswith(MARKER_PREFIX) and not owner_alive(m)}


def reap_stale(timeout: float = 5.0, only: Iterable[str] | None = None, passes: int = STALE_PASSES) -> KillReport:
    """Reap the leftovers of earlier runs whose kit died without cleaning up (or only those ``only`` names).

    A marker must therefore be made by the long-lived kit process (``new_marker`` in it), never by a
    short-lived helper whose exit would make its run look abandoned.

    Killing one stale run can make more markers stale: a chaos run scaled out with pytest-xdist marks
    its pytest processes with the chaos command's marker, while each case's processes carry a marker
    owned by the xdist worker running it, which is alive until the first pass kills it. So the scan
    repeats until a pass finds nothing more to kill (at most ``passes`` times).
    """
    wanted = None if only is None else set(only)
    total = KillReport()
    for _ in range(max(1, passes)):
        targets = [ref for m, refs in stale_markers().items() if wanted is None or m in wanted for ref in refs]
        if not targets:
            break
        report = kill_all(targets, timeout)
        total.targets += report.targets
        total.killed += report.killed
        total.already_gone += report.already_gone
        total.survivors = report.survivors  # a survivor is still stale: the next pass targets it again
    total.survivors = [ref for ref in total.survivors if ref.alive()]
    return total


def owned_prefix() -> str:
    """The start of every marker this process made (a live process: its start is always known)."""
    return f"{MARKER_PREFIX}{os.getpid()}-{_started_ms(os.getpid())}-"


def reap_owned(timeout: float = 5.0) -> KillReport:
    """SIGKILL every process carrying a marker this process made (its runs, spares, pytest workers), then
    the stale runs those owned (an xdist worker's cases): how an interrupted kit stops everything of its run."""
    prefix = owned_prefix()
    report = kill_all([ref for m, refs in _marked().items() if m.startswith(prefix) for ref in refs], timeout)
    more = reap_stale(timeout)
    report.targets += more.targets
    report.killed += more.killed
    report.survivors += more.survivors
    return report
