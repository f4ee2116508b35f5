"""``recoverykit env``: the provider by hand, failpoint checks, docs check, reaping."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import openai
import pytest
from env_helpers import spawner  # noqa: F401  (fixture)
from recoverykit.cli import main
from recoverykit.conformance.provider_ledger import read_ledger

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run ``recoverykit env ...`` in this process through the real entry point (exit codes included)."""
    monkeypatch.chdir(ROOT)

    def run(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as info:
            main(["env", *args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=info.value.code, stdout=out, stderr=err)

    return run


def test_failpoint_check_prints_canonical_or_exits_64(cli):
    ok = cli("failpoints", "check", "tool.dispatch.after=2*off -> pause")
    assert ok.returncode == 0 and ok.stdout.strip() == "tool.dispatch.after=2*off->pause"
    bad = cli("failpoints", "check", "tool.dispatch.after=explode")
    assert bad.returncode == 64 and "'explode'" in bad.stderr and "Traceback" not in bad.stderr
    unknown = cli("failpoints", "check", "no.such=pause")
    assert unknown.returncode == 64 and "unknown failpoint" in unknown.stderr


def test_docs_check_and_points_list(cli):
    assert cli("docs").returncode == 0
    listing = cli("failpoints", "list")
    assert listing.returncode == 0 and "tool.result.commit.before" in listing.stdout


def test_reap_needs_one_target(cli):
    assert cli("reap").returncode == 64


def test_probe_tools_json(tmp_path, cli):
    out = cli("probe-tools", "--witness", str(tmp_path / "w.jsonl"))
    tools = json.loads(out.stdout)
    assert [(t["name"], t["effect_class"]) for t in tools] == [
        ("probe_read", "read_only"), ("probe_idempotent", "idempotent"), ("probe_unknown", "unknown"),
        ("probe_external", "idempotent")]  # the scripted external operation a durable wait waits on


def test_the_provider_by_hand(tmp_path, spawner):  # noqa: F811
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"scripts": [{"id": "s", "steps": [{"text": "hi"}]}]}))
    ledger = tmp_path / "ledger.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", "env", "provider", "--script", str(script),
                             "--ledger", str(ledger)], stdout=subprocess.PIPE, text=True, env=spawner.env())
    spawner.procs.append(proc)
    started = json.loads(proc.stdout.readline())
    client = openai.OpenAI(base_url=started["base_url"], api_key="x", max_retries=0, timeout=30)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "hi"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert [r["event"] for r in read_ledger(ledger)] == ["request", "response"]


def test_a_bad_provider_script_is_a_usage_error(tmp_path, cli):
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"scripts": [{"id": "s", "steps": [{}]}]}))
    out = cli("provider", "--script", str(script))
    assert out.returncode == 64 and "not valid" in out.stderr and "Traceback" not in out.stderr


def test_leftovers_and_reap_by_marker(cli, spawner):  # noqa: F811
    proc = spawner.python("import time; time.sleep(120)")
    deadline = time.monotonic() + 30
    listed = {}
    while not listed.get(spawner.marker) and time.monotonic() < deadline:
        listed = json.loads(cli("leftovers", "--marker", spawner.marker).stdout)
    assert [pid for pid, _ in listed[spawner.marker]] == [proc.pid]
    reaped = cli("reap", "--marker", spawner.marker)
    assert reaped.returncode == 0 and json.loads(reaped.stdout)["killed"] == [proc.pid]
    assert proc.wait(timeout=10) == -signal.SIGKILL
