"""The HTML report in a real browser: Debian's headless Chromium loads it, screenshots it and dumps its DOM.

Two pages: the committed reference report (reports/reference/) and one with findings (a chaos run with a
new and an accepted finding, and a certify run of the same adapter, whose adapter name and violation
text carry markup). For each, the rendered DOM (``--dump-dom``, parsed with html.parser) must resolve
every in-page link (``href="#..."``: every heatmap cell, clause and finding link) to an element id, and
the adapter's markup must be text in the DOM, never an element. CI installs chromium (.ci/run) and sets
RECOVERYKIT_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping; a local run without
chromium skips. RECOVERYKIT_REPORT_SHOTS=DIR keeps the screenshots. Every chromium process the test starts
runs in its own session with a private profile in tmp_path, and is killed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import psutil
import pytest
from recoverykit.reports import readable, reference, render
from report_samples import HOSTILE, certify_results, chaos_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("RECOVERYKIT_REQUIRE_BROWSER") == "1":
        raise RuntimeError("RECOVERYKIT_REQUIRE_BROWSER=1 but no chromium on PATH: install Debian's chromium "
                           "(apt-get install chromium); .ci/run does so when it is missing")
    pytest.skip("no chromium on PATH (CI installs it: .ci/run)", allow_module_level=True)

PNG = b"\x89PNG\r\n\x1a\n"
WINDOW = "1280,1600"


class Dom(HTMLParser):
    """Ids, in-page links, element names and text of a DOM dump."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "xlink:href") and value and value.startswith("#"):
                self.links.append(value[1:])

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _browse(pages: dict[str, Path], tmp_path: Path) -> dict[str, tuple[str, Path]]:
    """Each page's DOM after Chromium rendered it, and its screenshot; the pages load side by side."""
    procs = {}
    for name, page in pages.items():
        shot = tmp_path / f"{name}.png"
        cmd = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={tmp_path / f'profile-{name}'}",
               f"--window-size={WINDOW}", f"--screenshot={shot}", "--dump-dom", page.as_uri()]
        if os.geteuid() == 0:
            cmd.insert(2, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                                        start_new_session=True), shot)
    out = {}
    try:
        for name, (proc, shot) in procs.items():
            dom, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
            out[name] = (dom.decode("utf-8"), shot)
    finally:
        for proc, _ in procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the browser and every helper process of its session
            proc.wait(timeout=10)
        for p in psutil.process_iter(["cmdline"]):  # a helper that left the session still names the profile
            with contextlib.suppress(psutil.Error):
                if any(str(tmp_path) in arg for arg in p.info["cmdline"] or []):
                    p.kill()
    return out


def test_the_report_renders_in_chromium_with_every_link_resolved_and_adapter_markup_as_text(tmp_path):
    findings = tmp_path / "findings.html"
    findings.write_text(render.html(readable.view(chaos_results(), [certify_results()])), encoding="utf-8")
    pages = {"reference": reference.FOLDER / "report.html", "findings": findings}
    browsed = _browse(pages, tmp_path)
    keep = os.environ.get("RECOVERYKIT_REPORT_SHOTS")
    for name, (dom_text, shot) in browsed.items():
        data = shot.read_bytes()
        assert data.startswith(PNG) and len(data) > 20_000, f"{name}: no real screenshot"  # a blank page is ~5 kB
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / shot.name)
        dom = Dom()
        dom.feed(dom_text)
        assert "svg" in dom.tags and "script" not in dom.tags, name
        cells = [link for link in dom.links if link.startswith("cell-") or link == readable.NOT_SELECTED]
        assert cells, f"{name}: the heatmap has no cell links"
        unresolved = sorted({link for link in dom.links if link not in dom.ids})
        assert unresolved == [], f"{name}: links to no element: {unresolved[:10]}"
        text = "".join(dom.text)
        assert "Interruption point x restart kind" in text and "Clauses" in text
    dom = Dom()
    dom.feed(browsed["findings"][0])
    text = "".join(dom.text)
    assert f"Recovery report: {HOSTILE}" in text  # the adapter's name, shown as text
    assert f"executed 2 times {HOSTILE}" in text  # and a violation quoting it
    assert "b" not in dom.tags and "script" not in dom.tags  # never an element
    assert "Accepted findings (known, not passed)" in text and "USG-05" in text
    assert {"cell-tool.result.commit.before-tree_kill", "clause-FA_15", "clause-USG_05",
            "case-1-chat_stream_usage"} <= dom.ids


class Rows(HTMLParser):
    """The rows of the "why not valid" table (``tr`` with an id ``why-...``), each with the in-page links inside
    it, and the order in which the page's headings come."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, list[str]] = {}
        self.headings: list[str] = []
        self._row: str | None = None
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and (a.get("id") or "").startswith("why-"):
            self._row = a["id"]
            self.rows[self._row] = []
        elif tag == "a" and self._row is not None and (a.get("href") or "").startswith("#"):
            self.rows[self._row].append(a["href"][1:])
        elif tag == "h2":
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        elif tag == "h2" and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)


def test_the_langgraph_report_groups_before_it_lists(tmp_path):
    """reports/langgraph (a run with findings): the first thing after the summary is one row per broken clause
    (its count of failing cases, its most frequent distinct message, its shortest replay), and every failing
    case is one click away (the row's details list each case, linked to its cell's evidence). The screenshot of
    the first screen is kept in tmp_path (and in RECOVERYKIT_REPORT_SHOTS when set)."""
    from recoverykit.reports import runtimes

    results = runtimes.named("langgraph").load()
    view = readable.view(results)
    page = runtimes.named("langgraph").path / "report.html"
    assert page.read_text(encoding="utf-8") == render.html(view)  # the committed page is today's rendering
    dom_text, shot = _browse({"langgraph": page}, tmp_path)["langgraph"]
    data = shot.read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000
    if os.environ.get("RECOVERYKIT_REPORT_SHOTS"):
        Path(os.environ["RECOVERYKIT_REPORT_SHOTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(os.environ["RECOVERYKIT_REPORT_SHOTS"]) / "langgraph-why.png")
    rows = Rows()
    rows.feed(dom_text)
    broken = sorted(c["clause"] for c in view["clauses"] if c["verdict"] == "invalid")
    assert rows.headings[0] == f"Why not valid: {len(broken)} broken clauses", rows.headings[:3]
    assert rows.headings[1] == "Clauses"  # grouped first, the tables after
    assert sorted(rows.rows) == sorted(f"why-{readable.slug('clause', c)}" for c in broken)
    failed = [c for c in results["cases"] if c["status"] == "failed"]
    for group in view["why"]:
        links = rows.rows[f"why-{group['anchor']}"]
        assert links[0] == group["anchor"]  # the clause, to its finding
        cases = links[1:]
        assert len(cases) == group["count"] > 0, group["clause"]  # every failing case, one click away
        assert all(link.startswith("cell-") for link in cases)
        assert group["replay"] and group["replay"].startswith("recoverykit chaos --replay")
        assert 1 <= len(group["messages"]) <= readable.WHY_MESSAGES
    # USG-04 alone failed 42 cases: one row, its cases behind it, not 42 lines before the tables
    usg04 = next(g for g in view["why"] if g["clause"] == "USG-04")
    assert usg04["count"] == sum(any(v.startswith("broke USG-04:") for v in c["violations"]) for c in failed)
    dom = Dom()
    dom.feed(dom_text)
    assert sorted({link for link in dom.links if link not in dom.ids}) == []
