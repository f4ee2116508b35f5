"""The kit's own file handling against a runtime that does ordinary or hostile things to its files (issue 27).

- item 12: a runtime that makes its session's working directory again at every start (``makedirs(exist_ok=True)``),
  or replaces it by a link, keeps the resource scenarios' clauses (before: the kit's own ``FileExistsError`` or
  "Cannot call rmtree on a symbolic link" made the case unknown), and the link is never followed out of the run;
- item 13: ``--out`` holding another tool's results.json, junit.xml, report.md and runs/ is refused (64) and every
  one of those files stays where it was, byte for byte and mode for mode (before: moved to previous/001/, the
  results.json re-serialised and made 0600).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from env_helpers import marked_by

ADAPTERS = Path(__file__).resolve().parent / "adapters"
BOUND_S = 300
RESOURCE_CASES = ("resources_after_downtime", "stop_before_resource")


def certify(out: Path, adapter: str, *only: str) -> subprocess.CompletedProcess:
    args = [a for case in only for a in ("--only", case)]
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", "certify", "--adapter", adapter, *args, "--seed",
                             "1", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert marked_by(proc.pid) == [], "a process of the run outlived it"
    assert "Traceback" not in stdout + stderr, (stdout + stderr)[-3000:]
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("habit", ["--recreate", "--link"])
def test_a_runtime_that_remakes_or_links_its_working_directory_keeps_the_resource_clauses(tmp_path, habit):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"not the run's\n")
    kept = tree(outside)
    proxy = f"{sys.executable} {ADAPTERS / 'workdir_proxy.py'} {habit}" + (f" {outside}" if habit == "--link" else "")
    done = certify(tmp_path / "out", proxy, *RESOURCE_CASES)
    assert done.returncode in (0, 1, 2), done.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    cases = {c["name"]: c for c in results["cases"]}
    for name in RESOURCE_CASES:
        case = cases[name]
        text = json.dumps(case)
        assert "FileExistsError" not in text and "rmtree" not in text, text[:2000]
        judged = {r["clause"] for r in case["results"] if r["verdict"] in ("valid", "invalid")}
        assert judged, f"{name}: every clause lost ({case.get('message')})"
    assert tree(outside) == kept and sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


FOREIGN = {"results.json": b'{"tool": "another", "passed": true}', "junit.xml": b"<testsuites/>\n",
           "report.md": b"# another tool\n", "runs/data.csv": b"a,b\n1,2\n", "notes.txt": b"mine\n"}


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", [("certify", "--only", "chat_read_tool", "--seed", "1"),
                                     ("chaos", "--replay", "chat_unknown_write/tool.result.commit.before/1/tree_kill",
                                      "--quiet")])
def test_another_tools_outputs_in_out_are_left_untouched(tmp_path, command):
    out = tmp_path / "out"
    for name, body in FOREIGN.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(body)
        os.chmod(out / name, 0o644)
    os.chmod(out, 0o755)
    before = snapshot(out)
    proc = subprocess.run([sys.executable, "-m", "recoverykit", *command, "--out", str(out)], capture_output=True,
                          text=True, timeout=BOUND_S)
    assert proc.returncode == 64, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "no recoverykit run wrote" in proc.stderr, proc.stderr
    assert snapshot(out) == before  # refused before anything is written: not even the kit's lock file
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # nor the folder made private
    assert not (out / "previous").exists()


def test_the_kits_own_earlier_outputs_move_byte_for_byte_and_keep_their_mode(tmp_path):
    from recoverykit.conformance import out_dir
    out = tmp_path / "out"
    with out_dir.claim(out):  # a run of the kit's: it marks the --out it claimed
        (out / "results.json").write_bytes(b'{"seed": 1,   "cases": []}')
        os.chmod(out / "results.json", 0o640)
        (out / "runs").mkdir()
    (out / "notes.txt").write_bytes(b"the user's own\n")
    with out_dir.claim(out) as moved:
        assert (moved / "results.json").read_bytes() == b'{"seed": 1,   "cases": []}'
        assert stat.S_IMODE((moved / "results.json").stat().st_mode) == 0o640 and (moved / "runs").is_dir()
        assert (out / "notes.txt").read_bytes() == b"the user's own\n" and not (out / "results.json").exists()


# --- item 5: bundles are bounded and keep holes; a full disk ends in unknown, never 70 -----------------------------


def allocated(path: Path) -> int:
    return path.lstat().st_blocks * 512


def test_a_copy_of_the_runtimes_files_keeps_holes_and_is_bounded(tmp_path):
    from recoverykit.conformance.private_files import copy_tree
    data = tmp_path / "data"
    data.mkdir()
    with open(data / "sparse.bin", "wb") as f:  # 1 GiB long, one 4 KiB extent in the middle, the rest hole
        f.truncate(1 << 30)
        f.seek(512 << 20)
        f.write(b"x" * 4096)
    (data / "a-big.bin").write_bytes(os.urandom(3 << 20))
    (data / "b-late.bin").write_bytes(b"y" * 100)
    report = copy_tree(data, tmp_path / "copy", file_cap=1 << 30, tree_cap=2 << 20)
    assert allocated(tmp_path / "copy" / "a-big.bin") <= (2 << 20) + 65536  # cut at the copy's cap
    assert [t["path"] for t in report["truncated"]] == ["a-big.bin"]
    assert {s["path"] for s in report["skipped"]} == {"b-late.bin", "sparse.bin"}
    report = copy_tree(data, tmp_path / "copy2", file_cap=1 << 30, tree_cap=64 << 20)
    copy = tmp_path / "copy2" / "sparse.bin"
    assert copy.stat().st_size == 1 << 30 and allocated(copy) < 1 << 20  # holes stay holes
    with open(copy, "rb") as f:
        f.seek(512 << 20)
        assert f.read(4096) == b"x" * 4096
    assert report["truncated"] == [] and report["bytes"] == (3 << 20) + 4096 + 100
    report = copy_tree(data, tmp_path / "copy3", file_cap=256 << 20)
    assert {t["path"]: t["copied_to"] for t in report["truncated"]} == {"sparse.bin": 256 << 20}


def proxy(*args: str) -> str:
    return f"{sys.executable} {ADAPTERS / 'planting_proxy.py'} {' '.join(args)}"


def test_a_sparse_file_in_the_data_dir_is_bundled_as_a_hole(tmp_path):
    out = tmp_path / "out"
    done = certify(out, proxy("--sparse-gib", "1"), "chat_read_tool")
    assert done.returncode == 2, done.stderr[-3000:]  # unknown: the proxy hides the usage section
    bundle = out / "bundles" / "chat_read_tool"
    assert allocated(bundle / "data" / "sparse.bin") < 1 << 20
    assert json.loads((bundle / "bundle.json").read_text())["data_copy"]["truncated"] == [
        {"path": "sparse.bin", "size": 1 << 30, "copied_to": 64 << 20, "data_bytes": 0,
         "why": f"only the first {64 << 20} bytes of a file are copied"}]
    assert sum(allocated(p) for p in out.rglob("*")) < 64 << 20


@pytest.fixture
def small_disk(tmp_path):
    """A 20 MiB file system of its own (tmpfs), unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs here (the disk-full tests need root): {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_under_out_ends_unknown_with_the_results_never_70(small_disk):
    out = small_disk / "out"
    done = certify(out, proxy("--fill-mb", "12"), "chat_read_tool")  # 12 MiB in the run, 12 more for its bundle
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "unknown" and results["outputs_incomplete"], results.get("outputs_incomplete")
    assert "bundles/chat_read_tool" in results["outputs_incomplete"][0]
    assert not (out / "bundles" / "chat_read_tool").exists()  # a partial bundle is removed, not left as evidence


def test_a_runtime_that_fills_its_own_disk_ends_unknown_never_70(small_disk):
    out = small_disk / "out"
    done = certify(out, proxy("--fill-mb", "30"), "chat_read_tool")  # more than the disk holds
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "the verdict is unknown" in done.stderr and "internal error" not in done.stderr, done.stderr[-3000:]
