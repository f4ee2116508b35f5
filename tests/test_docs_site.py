"""The docs are a site (mkdocs.yml) whose links are checked: `mkdocs build --strict` fails on a link to a
missing page, a missing anchor, or a repository file that does not exist (docs/_hooks/site.py), and no link
in README.md or docs/*.md points to a file the repository does not have."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "docs" / "_hooks" / "site.py"
# An inline Markdown link's target (code blocks and code spans are removed first).
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # never -q: it silences the warnings before --strict counts them, and a broken link then builds
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(site)], capture_output=True, text=True, timeout=300)


def test_the_site_builds_strict(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, f"mkdocs build --strict failed (pip install -e '.[test]' has mkdocs):\n{done.stderr}"
    site = tmp_path / "site"
    assert (site / "quickstart" / "index.html").is_file() and (site / "cli" / "index.html").is_file()
    # a link to a repository file outside docs/ points at its copy in the site
    shipped = site / "repo" / "examples" / "github-actions" / "recoverykit.yml"
    assert shipped.read_bytes() == (ROOT / "examples" / "github-actions" / "recoverykit.yml").read_bytes()
    assert 'href="../repo/examples/github-actions/recoverykit.yml"' in (site / "quickstart" / "index.html").read_text()
    assert not (ROOT / "site").exists()  # nothing written into the repository


def test_the_nav_lists_every_page_quickstart_first():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["nav"][0] == {"Quickstart": "quickstart.md"}
    assert [next(iter(entry)) for entry in config["nav"][1:]] == ["Guides", "Reference"]
    listed = {"index.md"} | {page for entry in config["nav"][1:] for group in entry.values()
                             for item in group for page in item.values()} | {"quickstart.md"}
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}


def _tiny_site(tmp_path: Path, page: str) -> Path:
    """mkdocs.yml's own hooks and validation, over two pages, in a repository holding README.md."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.pop("nav")
    config.pop("not_in_nav")
    (tmp_path / "docs" / "_hooks").mkdir(parents=True)
    shutil.copy(HOOKS, tmp_path / "docs" / "_hooks" / "site.py")
    (tmp_path / "README.md").write_text("# A repository file\n")
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n## A reused or shared `--out`\n\nText.\n")
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\n{page}\n")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    return tmp_path / "mkdocs.yml"


def test_github_anchors_and_repository_files_resolve(tmp_path):
    good = "[a](index.md#a-reused-or-shared---out) and [b](../README.md) and [c](#page)"
    done = build(_tiny_site(tmp_path, good), tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "repo" / "README.md").read_text() == "# A repository file\n"


def test_a_broken_link_fails_the_strict_build(tmp_path):
    for n, (bad, said) in enumerate([
        ("[a](missing.md)", "missing.md"),                         # a page that does not exist
        ("[a](index.md#a-reused-or-shared-out)", "anchor"),        # mkdocs' own slug, not GitHub's
        ("[a](#nowhere)", "nowhere"),                              # an anchor of this page
        ("[a](../examples/gone.py)", "not a file of the repository"),  # a repository file that does not exist
    ]):
        done = build(_tiny_site(tmp_path / str(n), bad), tmp_path / str(n) / "site")
        assert done.returncode != 0 and said in done.stderr, (bad, done.stderr)


def _prose(text: str) -> str:
    """Markdown without its fenced code blocks and code spans, where `](...)` is no link."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def test_no_link_points_to_a_missing_file():
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(_prose(doc.read_text(encoding="utf-8"))):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z][a-z0-9+.-]*:", path):  # an anchor of the page itself, or a URL
                continue
            resolved = (doc.parent / path).resolve()
            if not resolved.exists() or not resolved.is_relative_to(ROOT):
                missing.append(f"{doc.relative_to(ROOT)}: {target}")
    assert missing == []
