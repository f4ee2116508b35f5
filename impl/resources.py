"""Rechecking what a work item needs before it goes on: its working directory, the credential, its tools.

Downtime can take things away: the session's working directory is removed, the provider credential is
revoked, a tool is upgraded, the model is withdrawn. A work item never goes on without them and never
switches to something else on its own (another directory, key or model, a tool version nobody accepted):
it waits with a precise reason and Retry / Pause / End, keeping its pending-recovery record. The model
and the key are rechecked by the provider itself (404 ``model_not_found``, 401), see ``engine``; the
rest is rechecked here, at every claim and again right before a tool starts.

A tool's identity (argv and version) is fixed when the input is accepted. A different identity later is
a changed tool: the call waits until the user accepts the tool as it is now, by Resume (``accept_tools``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .config import Config, ToolSpec
from .db import Database
from .store import meta_get, meta_set


def _key(work_id: str) -> str:
    return f"tools:{work_id}"


def accept_tools(db: Database, cfg: Config, work_id: str) -> None:
    """Inside a transaction: the tools as configured now are the ones this work item may run."""
    current = Config.load(cfg.path).registry() if (cfg.path / "config.json").exists() else cfg.registry()
    meta_set(db, _key(work_id), json.dumps({name: spec.identity() for name, spec in current.items()}))


def accepted_identity(db: Database, work_id: str, tool: str) -> dict | None:
    """The identity of ``tool`` as accepted for this work item; None if it accepted none."""
    raw = meta_get(db, _key(work_id))
    return json.loads(raw).get(tool) if raw else None


def missing(db: Database, cfg: Config, item: dict, spec: ToolSpec | None = None) -> tuple[str, str] | None:
    """(reason_code, text) for the first resource the item lacks now, or None when it may go on."""
    working_dir = item["working_dir"]
    if working_dir and not Path(working_dir).is_dir():
        return "resource_missing_directory", f"working directory {working_dir} does not exist"
    if cfg.credentials_env and not os.environ.get(cfg.credentials_env):
        return "resource_missing_credentials", f"the provider credential ${cfg.credentials_env} is not set"
    if spec is not None:
        accepted = accepted_identity(db, item["work_id"], spec.name)
        if accepted is not None and accepted != spec.identity():
            return ("resource_tool_version_changed",
                    f"tool {spec.name} changed since this work was accepted (was version {accepted.get('version')}, "
                    f"now {spec.version}); Resume accepts it as it is now")
    return None
