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


# the lines of each scaffold before it was a package on the SDK's RunIntentStore (store.py 69 lines, adapter.py 143)
LINES_BEFORE = {"bare": 347, "framework": 423}


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_scaffolded_adapter_passes_ping_start(template, tmp_path):
    project = tmp_path / "my-agent"
    done = kit("init", project, "--template", template)
    assert done.returncode == 0, done.stderr
    files = {p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()}
    package = {"my_agent/__init__.py", "my_agent/__main__.py", "my_agent/adapter.py", "my_agent/worker.py"}
    assert package | {"test_ping.py", "README.md"} <= files
    assert ("my_agent/framework.py" in files) == (template == "framework")
    assert not [p for p in project.rglob("*.tmpl")]
    readme = (project / "README.md").read_text()
    for command in ("protocol ping --start", "certify", "chaos"):
        command = f'recoverykit {command} --adapter "python -m my_agent"'
        assert command in readme
    assert "__NAME__" not in "".join(p.read_text() for p in project.rglob("*") if p.is_file())
    assert "__PACKAGE__" not in "".join(p.read_text() for p in project.rglob("*") if p.is_file())
    # the README's command, run where the README says (the project root), with this interpreter
    ping = kit("protocol", "ping", "--start", "--adapter", shlex.join([sys.executable, "-m", "my_agent"]),
               "--out", tmp_path / "ping", cwd=project)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert "adapter: my-agent 0.1.0" in ping.stdout and "1 runtime process(es) listed, all alive" in ping.stdout
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_the_scaffold_is_a_package_on_the_sdk_s_run_intent_store(template, tmp_path):
    """The newcomer deleted the scaffold's own store and adapter and copied the LangGraph adapter instead: the
    scaffold now writes no store of its own (the SDK's RunIntentStore, RetryPolicy), no sys.path hack, and fewer
    lines than before."""
    project = tmp_path / "proj"
    assert kit("init", project, "--template", template).returncode == 0
    sources = {p.relative_to(project).as_posix(): p.read_text() for p in project.rglob("*") if p.is_file()}
    assert "store.py" not in " ".join(sources) and "adapter.py" not in [p.name for p in project.iterdir()]
    assert "IntentAdapter" in sources["proj/adapter.py"] and "RunIntentStore" in sources["proj/worker.py"]
    assert "RetryPolicy" in sources["proj/worker.py"]
    assert not [path for path, text in sources.items() if "sys.path" in text or "CREATE TABLE" in text]
    lines = sum(len(text.splitlines()) for text in sources.values())
    assert lines < LINES_BEFORE[template], (template, lines)


def test_the_scaffold_s_own_test_runs_ping(tmp_path):
    project = tmp_path / "proj"
    assert kit("init", project, "--name", "proj-rt").returncode == 0
    assert (project / "proj_rt" / "__main__.py").is_file()
    for cwd in (project, tmp_path):  # from the project root, and from anywhere else
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                               str(project / "test_ping.py")], cwd=cwd, capture_output=True, text=True, timeout=180)
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
