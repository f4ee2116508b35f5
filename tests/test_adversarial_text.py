"""Adapter text is shown literally and safely: no Rich markup, no terminal escapes, always valid XML.

The adapter writes names, versions and error texts that the kit prints (certify's table and messages,
ping, chaos lines) and stores (junit.xml, the failure-acceptance report). ``tests/adapters/text_proxy.py``
puts Rich markup (``[/]`` crashed certify with exit 70), double brackets (silently dropped), terminal
escape sequences (a forged "verdict: valid" line) and control characters there; every consumer goes
through ``conformance/safe_text.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from env_helpers import marked_by
from hypothesis import given
from hypothesis import strategies as st
from recoverykit.conformance.safe_text import fence, markdown_text, rich_text, visible, xml_text
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "tests" / "adapters" / "text_proxy.py"
HOSTILE = ("cannot open [/var/lib/x] [[x]] [bold]b[/bold] \x1b[2K\rverdict: valid \x1b]0;title\x07 "
           "nul\x00 del\x7f csi\x9b1m bidi\u202e end \ud800 :thumbs_up:")
# A raw control character other than newline, a C1 control, a bidi override or a lone surrogate.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}


# -- the one module --------------------------------------------------------------------------------


@given(st.text())
def test_visible_leaves_no_control_format_or_surrogate_character(text):
    shown = visible(text)
    assert not any(_unsafe(ch) for ch in shown)
    shown.encode("utf-8")  # a lone surrogate would not encode
    assert visible(shown) == shown  # idempotent: already-safe text is kept as it is


@given(st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cf", "Cs", "Zl", "Zp"])))
def test_visible_keeps_ordinary_text_literally(text):
    assert visible(text) == text


@given(st.text())
def test_rich_text_renders_exactly_the_visible_text(text):
    console = Console(file=open(os.devnull, "w"), width=10_000, color_system=None, emoji=True)  # noqa: SIM115
    with console.capture() as captured:
        console.print(rich_text(text), end="", soft_wrap=True)
    console.file.close()
    assert captured.get() == visible(text)  # no markup parsed, no emoji code replaced, nothing dropped


@given(st.text())
def test_xml_text_always_parses_as_xml_1_0(text):
    el = ET.Element("e", {"message": xml_text(text)})
    el.text = xml_text(text)
    parsed = ET.fromstring(ET.tostring(el, encoding="utf-8"))
    assert parsed.get("message") == xml_text(text)


@given(st.text())
def test_markdown_text_has_no_html_no_cell_break_no_control(text):
    shown = markdown_text(text)
    assert "<" not in shown and ">" not in shown and not re.search(r"(?<!\\)\|", shown.replace("\\\\", ""))
    assert not any(_unsafe(ch) for ch in shown)


@given(st.text())
def test_a_fence_is_never_closed_by_its_body(text):
    opening, body, closing = fence(text)
    assert opening == closing and set(opening) == {"`"} and len(opening) >= 3
    assert opening not in body


def test_the_hostile_string_reads_as_it_was_meant():
    assert visible(HOSTILE).startswith("cannot open [/var/lib/x] [[x]] [bold]b[/bold] \\x1b[2K\\x0dverdict: valid")
    assert "\\u202e" in visible(HOSTILE) and "\\ud800" in visible(HOSTILE) and ":thumbs_up:" in visible(HOSTILE)


# -- junit.xml and the reports ---------------------------------------------------------------------


def test_certify_junit_parses_with_hostile_adapter_text(tmp_path):
    from recoverykit.conformance.certify import Case, Certification
    from recoverykit.conformance.junit import write_junit
    from recoverykit.model.catalogue import Verdict

    cert = Certification(f"adapter {HOSTILE}", tmp_path, 1, ("chat_core",), frozenset(),
                         adapter_info={"name": HOSTILE, "version": "1"})
    cert.cases = [Case("chat_read_tool", "scenario", Verdict.UNKNOWN, message=HOSTILE, program=[HOSTILE]),
                  Case("lockstep", "lockstep", Verdict.INVALID, message=HOSTILE),
                  Case("goal_restart", "scenario", Verdict.NOT_APPLICABLE, message=HOSTILE)]
    write_junit(cert, tmp_path / "junit.xml")
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert "[/]" not in suite.get("name") and "[/var/lib/x] [[x]]" in suite.get("name")
    assert "\\x1b[2K" in suite.find("testcase/error").get("message")
    assert "\\x1b[2K" in suite.find("testcase/failure").text


def _chaos_results(text: str) -> dict:
    from recoverykit.chaos.shard import Shard
    from recoverykit.chaos.systematic import results_document

    declared = {"command": "x", "name": text, "version": text, "profiles": ["chat_core"],
                "failpoints": ["tool.result.commit.before"], "restart_kinds": [], "observes": []}
    cid = "chat_unknown_write/tool.result.commit.before/1/tree_kill"
    clause = {"clause": "FA-15", "verdict": "invalid", "text": f"broke FA-15: {text}", "evidence": []}
    cases = [{"id": cid, "scenario": "chat_unknown_write", "point": "tool.result.commit.before", "hit": 1,
              "kind": "tree_kill", "status": "failed", "clauses": [clause], "leftovers": [],
              "violations": [clause["text"]], "replay": f"recoverykit chaos --replay {cid} --adapter '{text}'"},
             {"clauses": [], "violations": [], "leftovers": [], "id": cid.replace("tree", "worker"),
              "scenario": "chat_unknown_write", "point": "tool.result.commit.before", "hit": 1,
              "kind": "worker_kill", "status": "error", "why": text, "replay": text}]
    return results_document(cases, declared, mode="systematic", shard=Shard(1, 1), selection={}, seed=0,
                            started=0.0, wall_s=1.0)


def test_chaos_junit_and_reports_carry_hostile_text_safely():
    from recoverykit.reports import readable, render
    from recoverykit.reports.junit import junit_xml

    results = _chaos_results(HOSTILE + " <img src=x onerror=alert(1)> | ```")
    suite = ET.fromstring(junit_xml(results).encode())
    assert "\\x1b[2K" in suite.find("testcase/failure").get("message")
    assert "\\x1b[2K" in suite.find("testcase/error").get("message")
    view = readable.view(results)
    md, page = render.markdown(view), render.html(view)
    outside_code = re.sub(r"^````\n.*?\n````$", "", md, flags=re.S | re.M)  # in a code block it is literal
    for text in (md, page):
        assert not RAW.search(text) and "\\x1b[2K" in text
    assert "<img" not in outside_code and "<img" not in page and "&lt;img" in outside_code
    title = md.splitlines()[0]
    assert title.startswith("# Recovery report: cannot open [/var/lib/x] [[x]]") and " \\| " in title
    fenced = md.split("Shortest replay:\n\n", 1)[1].splitlines()
    assert fenced[0] == "````" and fenced[2] == "````"  # the ``` in the text cannot close the block


def test_chaos_progress_and_summary_lines_show_escapes(capsys):
    from recoverykit.cli_chaos import _progress, _summary

    results = _chaos_results(HOSTILE)
    show = _progress(2, quiet=False)
    for case in results["cases"]:
        show(case)
    _summary({**results, "reasons": [HOSTILE]}, Path("/tmp") / HOSTILE.replace("\x00", ""))
    err = capsys.readouterr().err
    assert not RAW.search(err)
    assert "[/var/lib/x] [[x]] [bold]b[/bold] \\x1b[2K" in err


# -- end to end: certify and ping against the proxy --------------------------------------------------


def _run(args: list[str], tmp_path: Path, timeout: float = 240) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "COLUMNS": "2000", "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "recoverykit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    seconds = time.monotonic() - began
    assert marked_by(proc.pid) == [], "the run left a process behind"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace")), seconds


@pytest.mark.slow
def test_certify_shows_hostile_adapter_text_literally_and_ends_in_a_verdict(tmp_path):
    out = tmp_path / "out"
    done, seconds = _run(["certify", "--adapter", f"{sys.executable} {PROXY} raw_submit", "--only", "chat_read_tool",
                          "--only", "lockstep", "--examples", "2", "--seed", "3", "--out", str(out)], tmp_path)
    both = done.stdout + done.stderr
    assert done.returncode in (1, 2), both  # a verdict; before the fix: exit 70, MarkupError on the name `[/]`
    assert "Traceback" not in both and "internal error" not in both
    assert seconds < 200
    assert not RAW.search(both), [m.group() for m in RAW.finditer(both)][:5]
    assert "certify: [/] 1.0" in done.stdout and "[[x]] \\x1b[31mred\\x1b[0m" in done.stdout  # the title, wrapped
    assert "[/var/lib/x] [[x]] [bold]b[/bold] \\x1b[2K\\x0dverdict: valid \\x1b]0;title\\x07" in done.stdout
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("name") == "recoverykit certify: [/]"
    assert "[/var/lib/x] [[x]] [bold]b[/bold] \\x1b[2K\\x0dverdict" in suite.find("testcase/failure").text
    page = (out / "report.html").read_text(encoding="utf-8")  # certify writes the readable report too
    assert not RAW.search(page) and "<script" not in page and "[/var/lib/x] [[x]]" in page


@pytest.mark.slow
def test_ping_shows_hostile_adapter_names_as_escapes(tmp_path):
    done, seconds = _run(["protocol", "ping", "--adapter", f"{sys.executable} {PROXY} names_only"], tmp_path, 120)
    both = done.stdout + done.stderr
    assert done.returncode == 0, both
    assert "Traceback" not in both and seconds < 100
    assert not RAW.search(both)
    assert "adapter: [/] 1.0 [[x]] \\x1b[31mred\\x1b[0m \\x07\\x08 (protocol" in done.stdout


@pytest.mark.slow
def test_the_pytest_plugin_shows_hostile_adapter_text_as_escapes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           f"--recoverykit-adapter={sys.executable} {PROXY} raw_submit", "-k", "chat_read_tool"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "[/var/lib/x] [[x]] [bold]b[/bold] \\x1b[2K\\x0dverdict: valid" in done.stdout
    assert not RAW.search(done.stdout + done.stderr)
