"""The session working directory the kit takes away and gives back, whatever the runtime did to it meanwhile.

Why a module: the resource scenarios (``scenarios.drive_resources``, ``drive_stop_before_resource``) create a
directory in the run, give it to a session as its working directory, remove it during downtime and create it
again later. A runtime may have made it again itself (``os.makedirs(exist_ok=True)`` at its start, a common habit:
the kit's ``mkdir`` then raised ``FileExistsError``) or replaced it by a link (``shutil.rmtree`` then raised
"Cannot call rmtree on a symbolic link"), and either error turned the whole case unknown, every clause lost.
Here a link is removed as a link (never followed out of the run), a directory the runtime made again is kept as
it is, and what the kit found is returned for the history's ``resource_missing`` / ``resource_restored`` fault
(``found``), so the checks judge the same windows as before with the runtime's doing on record.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

MODE = 0o700


def _kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    return "directory" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode) else "file"


def take_away(path: Path) -> dict[str, Any]:
    """Remove the working directory; a link or file the runtime left in its place is removed itself, unfollowed."""
    found = _kind(path)
    if found == "directory":
        shutil.rmtree(path)  # never follows a link inside the tree
    elif found != "missing":
        os.unlink(path)
    return {} if found == "directory" else {"found": found}


def give_back(path: Path) -> dict[str, Any]:
    """Make the working directory exist again: kept if the runtime already made it again as a directory, in place
    of anything else the runtime left there (a link is removed, never followed)."""
    found = _kind(path)
    if found == "directory":
        return {"found": "recreated"}
    if found != "missing":
        os.unlink(path)
    os.mkdir(path, MODE)
    return {} if found == "missing" else {"found": found}
