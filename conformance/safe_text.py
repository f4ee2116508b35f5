"""Text an adapter wrote, made safe for each place the kit shows it: terminal, Rich, XML, Markdown.

An adapter supplies names, versions, error texts and snapshot values, and the kit prints and stores
them. Any of them may hold Rich markup (``[/]`` crashes a Rich console, ``[[x]]`` loses text),
terminal escape sequences (which could clear a line and forge a "verdict: valid" the kit never
printed), or characters XML 1.0 cannot carry (junit.xml would not parse). One module defines what
"safe" means, so every command shows the same text the same way:

- ``visible(text)``: control, format and separator characters (ESC, CR, NUL, DEL, C1, bidi
  overrides, lone surrogates, ...) become visible escapes such as ``\\x1b`` and ``\\u202e``;
  everything else is kept literally.
- ``rich_text(text, style)``: a ``rich.text.Text`` of ``visible(text)``; a Text is never parsed for
  markup or emoji codes, so it shows exactly those characters.
- ``xml_text(text)``: ``visible`` but keeping tab and newline, for XML 1.0 and HTML text and for code
  blocks (a carriage return is shown as ``\\x0d``: a parser would silently turn it into a newline).
- ``markdown_text(text)``: ``visible`` plus HTML escaping and ``|`` escaped, for a Markdown table
  or list item that a renderer must not turn into markup.

It lives in conformance/ (the lowest layer that shows adapter text) so that conformance/, chaos/,
reports/ and the CLI can all use it; it does no I/O and imports Rich only when asked for a Text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# Unicode categories that are invisible or move the cursor: Cc control, Cf format (bidi overrides,
# zero-width characters), Cs lone surrogates (not encodable as UTF-8), Zl / Zp line and paragraph
# separators. Noncharacters (U+FFFE, U+FFFF, ...) are not XML characters either.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_XML_KEEP = frozenset("\t\n")
_ANY_SUSPECT = re.compile(r"[^\x20-\x7e]")  # fast path: printable ASCII needs no look-up


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    return (unicodedata.category(ch) in _UNSAFE_CATEGORIES or 0xFDD0 <= code <= 0xFDEF
            or (code & 0xFFFE) == 0xFFFE)


def visible(text: object) -> str:
    """``text`` (``str()`` of anything) with every control/format character shown as an escape."""
    s = text if isinstance(text, str) else str(text)
    if not _ANY_SUSPECT.search(s):
        return s
    return "".join(_escape(ch) if _unsafe(ch) else ch for ch in s)


def xml_text(text: object) -> str:
    """``visible(text)`` keeping tab and newline: every character left is a valid XML 1.0 Char."""
    s = text if isinstance(text, str) else str(text)
    if not _ANY_SUSPECT.search(s):
        return s
    return "".join(_escape(ch) if ch not in _XML_KEEP and _unsafe(ch) else ch for ch in s)


def rich_text(text: object, style: str = "") -> Text:
    """A Rich ``Text`` showing ``visible(text)`` literally: no markup, no emoji codes, no escapes."""
    from rich.text import Text

    return Text(visible(text), style=style)


_MD = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|"})


def markdown_text(text: object) -> str:
    """``visible(text)`` for Markdown: no raw HTML, and no ``|`` that would split a table cell."""
    return visible(text).translate(_MD)


def fence(text: object) -> list[str]:
    """``text`` as a fenced Markdown code block whose fence no line of the text can close."""
    body = xml_text(text)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [ticks, body, ticks]
