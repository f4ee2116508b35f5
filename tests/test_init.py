"""``recoverykit init``: each template scaffolds a project that passes ``recoverykit protocol ping --start`` as it is.

The templates are package data (kit/templates/), so the wheel must carry them; a scaffold never overwrites a
directory that holds anything, and ``--help`` documents every template.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import psutil
import pytest
from recoverykit.cli_init import TEMPLATES

ROOT = Path(__file__).resolve().parent.parent


def kit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "recoverykit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=180)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_scaffolded_adapter_passes_ping_start(template, tmp_path):
    project = tmp_path / "my-agent"
    done = kit("init", project, "--template", template)
    assert done.returncode == 0, done.stderr
    files = {p.name for p in project.iterdir()}
    assert {"adapter.py", "worker.py", "store.py", "test_ping.py", "README.md"} <= files
    assert ("framework.py" in files) == (template == "framework")
    assert not [p for p in project.rglob("*.tmpl")]
    readme = (project / "README.md").read_text()
    for command in ("protocol ping --start", "certify", "chaos"):
        command = f'recoverykit {command} --adapter "python adapter.py"'
        assert command in readme
    assert "__NAME__" not in "".join(p.read_text() for p in project.iterdir())
    # the README's command, run where the README says (the project directory), with this interpreter
    ping = kit("protocol", "ping", "--start", "--adapter", shlex.join([sys.executable, "adapter.py"]),
               "--out", tmp_path / "ping", cwd=project)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert "adapter: my-agent 0.1.0" in ping.stdout and "1 runtime process(es) listed, all alive" in ping.stdout
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


def test_the_scaffold_s_own_test_runs_ping(tmp_path):
    project = tmp_path / "proj"
    assert kit("init", project, "--name", "proj-rt").returncode == 0
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "test_ping.py"], cwd=project, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_init_help_documents_every_template():
    done = kit("init", "--help")
    assert done.returncode == 0
    for name, about in TEMPLATES.items():
        assert name in done.stdout and about.split(":")[0] in " ".join(done.stdout.split())


def test_init_never_overwrites_and_refuses_bad_input_with_64(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "adapter.py").write_text("mine")
    (tmp_path / "afile").write_text("mine")
    for args, said in ((["init", tmp_path / "taken"], "not an empty directory"),
                       (["init", tmp_path / "afile"], ""),
                       (["init", tmp_path / "new", "--template", "nosuch"], "nosuch"),
                       (["init", tmp_path / "new2", "--name", "Bad Name"], "--name")):
        done = kit(*args)
        assert done.returncode == 64, (args, done.stdout, done.stderr)
        assert said in done.stderr
    assert (tmp_path / "taken" / "adapter.py").read_text() == "mine" and (tmp_path / "afile").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "taken"]


def test_the_wheel_carries_the_templates(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    for source in (ROOT / "kit" / "templates").rglob("*.tmpl"):
        expected = "recoverykit/" + source.relative_to(ROOT / "kit").as_posix()
        assert expected in names, f"{expected} is missing from the wheel: pyproject's package-data"
