"""docs/quickstart.md quotes the kit's messages for the five most common mistakes; this keeps them true.

Each quote (a fenced block after `<!-- message: NAME -->`, with `…` where a run's details differ) must match
what the kit prints today when that mistake is made, so the quickstart cannot drift from the kit. Every
mistake is made for real: an empty --adapter, an adapter printing to stdout, an adapter whose `processes`
lists nothing, a runtime too slow for the kit's window (a scaffolded adapter whose worker sleeps), an --out
holding another tool's results.json.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from env_helpers import cli_in_process, marked_by

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "quickstart.md"
PROXY = ROOT / "tests" / "adapters" / "procs_proxy.py"
MISTAKES = ("empty-adapter", "stdout-print", "nothing-killed", "too-slow", "foreign-out")


def quotes() -> dict[str, str]:
    text = QUICKSTART.read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- message: (\S+) -->\n```\n(.*?)\n```", text, re.S))


def _flat(text: str) -> str:
    return " ".join(text.split())  # the table printer wraps long lines; the quote is one line


def assert_quoted(name: str, output: str) -> None:
    """The quote, each `…` standing for anything, appears in the output (whitespace runs count as one space)."""
    quote = quotes()[name]
    pattern = ".*?".join(re.escape(_flat(part)) for part in quote.split("…"))
    assert re.search(pattern, _flat(output)), f"docs/quickstart.md quotes ({name}):\n{quote}\nthe kit said:\n{output}"


def recoverykit(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=cwd, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        leftovers = marked_by(proc.pid)
        for leftover in leftovers:
            leftover.kill()
    assert leftovers == [], f"the run left processes behind: {leftovers}"
    return proc.returncode, out


def test_the_quickstart_quotes_exactly_the_five_mistakes():
    assert tuple(quotes()) == MISTAKES


def test_an_empty_adapter_is_the_quoted_usage_error():
    code, text = cli_in_process("certify", "--adapter", "")
    assert code == 64
    assert_quoted("empty-adapter", text)


def test_an_adapter_printing_to_stdout_is_the_quoted_protocol_break(tmp_path):
    printer = f"{sys.executable} -c \"import sys; print('my-adapter starting', flush=True); sys.stdin.read()\""
    code, text = cli_in_process("protocol", "ping", "--adapter", printer, "--out", str(tmp_path / "ping"))
    assert code == 1
    assert_quoted("stdout-print", text)


def test_an_adapter_listing_no_process_gets_the_quoted_unknown(tmp_path):
    code, text = recoverykit("certify", "--seed", "1", "--only", "host_change", "--out", str(tmp_path / "o"),
                             "--adapter", f"{sys.executable} {PROXY} empty")
    assert code == 2, text[-3000:]
    assert_quoted("nothing-killed", text)


def test_a_runtime_too_slow_for_the_window_gets_the_quoted_unknown(tmp_path):
    """The scaffold of step 2, its worker made to wait 60 s before each model call."""
    assert cli_in_process("init", str(tmp_path / "slow"))[0] == 0
    worker = tmp_path / "slow" / "slow" / "worker.py"
    call = "    ask_model(env, work_id, store.text(work_id))\n"
    assert call in worker.read_text(), "the bare template's worker changed: update this test and docs/quickstart.md"
    worker.write_text(worker.read_text().replace(call, "    time.sleep(60)\n" + call))
    code, text = recoverykit("certify", "--seed", "1", "--only", "pause_restart", "--out", str(tmp_path / "o"),
                             "--adapter", f"{sys.executable} -m slow", cwd=tmp_path / "slow")
    assert code == 2, text[-3000:]
    assert_quoted("too-slow", text)


def test_an_out_holding_another_tools_files_is_the_quoted_refusal(tmp_path):
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "results.json").write_text("{}")
    code, text = cli_in_process("certify", "--adapter", "python adapter.py", "--out", str(out))
    assert code == 64
    assert_quoted("foreign-out", text)
    assert (out / "results.json").read_text() == "{}"


def test_the_check_fails_on_a_changed_message():
    with pytest.raises(AssertionError):
        assert_quoted("empty-adapter", "Error: The adapter command '' is empty.")
