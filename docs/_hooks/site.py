"""mkdocs hooks that let the docs read the same on GitHub and on the built site.

The pages are written for GitHub first: they link to files outside docs/ (`../examples/...`) and to
headings by GitHub's anchors (`#a-reused-or-shared---out`). mkdocs alone calls the first a missing
page and slugs headings differently, so `mkdocs build --strict` would fail on links that work. These
hooks (a built-in mkdocs feature, no plugin, no network) close both gaps and keep real breakage fatal:

- headings get GitHub's anchors, so an anchor that works on GitHub works on the site and a broken
  one fails the strict build (validation.links.anchors is `warn` in mkdocs.yml);
- a link to a file of the repository outside docs/ is rewritten to a copy of that file shipped in
  the site under `repo/`; a link to a file that does not exist is a warning, so `--strict` fails.
"""

from __future__ import annotations

import logging
import posixpath
import re
import unicodedata
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.site")

# An inline Markdown link's target: ](target) or ](target "title").
LINK = re.compile(r"\]\((?P<target>[^)\s#]*)(?P<rest>[^)]*)\)")
PREFIX = "repo"


def github_slug(value: str, separator: str = "-") -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, each space a hyphen (never collapsed)."""
    value = unicodedata.normalize("NFKC", value).strip().lower()
    value = "".join(c for c in value if c.isalnum() or c in "-_ ")
    return value.replace(" ", separator)


def on_config(config: Any) -> Any:
    config["mdx_configs"].setdefault("toc", {})["slugify"] = github_slug
    return config


class _SourceFile(File):
    """A repository file copied into the site as it is: never rendered, even when it is Markdown."""

    def is_documentation_page(self) -> bool:
        return False


def _outside_target(page_uri: str, target: str, docs_dir: Path) -> str | None:
    """The repository path a relative link leaves docs/ for, or None when it stays inside docs/."""
    if not target or "://" in target or target.startswith(("/", "mailto:")):
        return None
    resolved = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_uri), target))
    return None if resolved.startswith("docs/") else resolved


def on_files(files: Files, config: Any) -> Files:
    docs_dir = Path(config["docs_dir"])
    root = docs_dir.parent
    wanted: set[str] = set()
    for file in files.documentation_pages():
        for match in LINK.finditer(Path(file.abs_src_path).read_text(encoding="utf-8")):
            path = _outside_target(file.src_uri, match["target"], docs_dir)
            if path is None:
                continue
            if path.startswith("../") or not (root / path).is_file():
                log.warning(
                    f"Doc file '{file.src_uri}' links to '{match['target']}', which is not a file of the repository."
                )
                continue
            wanted.add(path)
    for path in sorted(wanted):
        files.append(_SourceFile.generated(config, f"{PREFIX}/{path}", abs_src_path=str(root / path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    docs_dir = Path(config["docs_dir"])

    def rewrite(match: re.Match[str]) -> str:
        path = _outside_target(page.file.src_uri, match["target"], docs_dir)
        if path is None or files.get_file_from_path(f"{PREFIX}/{path}") is None:
            return match[0]
        here = posixpath.dirname(page.file.src_uri) or "."
        return f"]({posixpath.relpath(f'{PREFIX}/{path}', here)}{match['rest']})"

    return LINK.sub(rewrite, markdown)
