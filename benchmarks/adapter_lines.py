"""Prints how many lines of code the LangGraph adapter is on the SDK, and what it would be without it.

Lines of code: physical lines that are not blank, not comments and not docstrings. "Without the SDK" is the
adapter plus every SDK module it relies on (the dispatch loop, reply checks, process supervision, quiesce,
observe builders, runtime environment, the failpoint client it would otherwise copy): what its author
would have written, or copied, instead. The reply checks are shown apart, since a hand-written adapter
usually goes without them. Run: ``python benchmarks/adapter_lines.py``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = sorted(p for p in (ROOT / "adapters" / "recoverykit_adapters" / "langgraph").glob("*.py")
                 if not p.name.startswith("repro_"))
SDK = [ROOT / "kit" / "adapter" / f"{name}.py" for name in
       ("wire", "processes", "quiescence", "runtime_env", "observe", "failpoints")]
SDK += [ROOT / "conformance" / "failpoint_client.py"]
CHECKS = [ROOT / "kit" / "adapter" / "checks.py"]


def code_lines(path: Path) -> int:
    source = path.read_text(encoding="utf-8")
    doc_lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - doc_lines)


def total(paths: list[Path]) -> int:
    return sum(code_lines(p) for p in paths)


def main() -> None:
    on_sdk, sdk, checks = total(ADAPTER), total(SDK), total(CHECKS)
    for path in ADAPTER:
        print(f"  {path.relative_to(ROOT)}: {code_lines(path)}")
    print(f"LangGraph adapter on the SDK: {on_sdk} lines of code")
    print(f"SDK parts it relies on: {sdk} (+ {checks} of reply checks)")
    print(f"without the SDK: {on_sdk + sdk} lines ({on_sdk + sdk + checks} with the reply checks)")
    print(f"ratio on SDK / without: {on_sdk / (on_sdk + sdk):.2f} ({on_sdk / (on_sdk + sdk + checks):.2f})")


if __name__ == "__main__":
    main()
