"""Prints how many lines of code the real-runtime adapters (LangGraph, DBOS, llama-index-workflows) are on the SDK,
and what they would be without it.

Lines of code: physical lines that are not blank, not comments and not docstrings. "Without the SDK" is the
adapter plus every SDK module it relies on (the dispatch loop, reply checks, process supervision, quiesce,
observe builders, runtime environment, the failpoint client it would otherwise copy, the run-intent store and
retry policy where it uses them): what its author would have written, or copied, instead. The reply checks are
shown apart, since a hand-written adapter usually goes without them. Stand-alone reproductions (``repro_*``) are
not counted. Run: ``python benchmarks/adapter_lines.py [--root TREE] [langgraph|dbos|llamaindex ...]``
(``--root``: measure another checkout, e.g. a worktree of an older commit, for a before/after figure).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK_BASE = ("wire", "processes", "quiescence", "runtime_env", "observe", "failpoints")


def adapter_files(root: Path, runtime: str) -> list[Path]:
    return sorted(p for p in (root / "adapters" / "recoverykit_adapters" / runtime).glob("*.py")
                  if not p.name.startswith("repro_"))


def sdk_files(root: Path, adapter: list[Path]) -> list[Path]:
    """The SDK's base, and its run-intent store (which uses the retry policy) or retry policy if imported."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in adapter)
    names = [*SDK_BASE, *(["intent", "retry"] if "RunIntentStore" in text else ["retry"] if "RetryPolicy" in text
                          else [])]
    return [root / "kit" / "adapter" / f"{name}.py" for name in names] + [root / "conformance" / "failpoint_client.py"]


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


def report(root: Path, runtime: str) -> None:
    adapter = adapter_files(root, runtime)
    on_sdk, sdk, checks = total(adapter), total(sdk_files(root, adapter)), total([root / "kit/adapter/checks.py"])
    for path in adapter:
        print(f"  {path.relative_to(root)}: {code_lines(path)}")
    print(f"{runtime} adapter on the SDK: {on_sdk} lines of code")
    print(f"SDK parts it relies on: {sdk} (+ {checks} of reply checks)")
    print(f"without the SDK: {on_sdk + sdk} lines ({on_sdk + sdk + checks} with the reply checks)")
    print(f"ratio on SDK / without: {on_sdk / (on_sdk + sdk):.2f} ({on_sdk / (on_sdk + sdk + checks):.2f})")


def main(argv: list[str]) -> None:
    root = ROOT
    if argv[:1] == ["--root"]:
        root, argv = Path(argv[1]).resolve(), argv[2:]
    for runtime in argv or ["langgraph", "dbos", "llamaindex"]:
        report(root, runtime)


if __name__ == "__main__":
    main(sys.argv[1:])
