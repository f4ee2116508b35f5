"""Materialize one mutant of the reference runtime: a copy of impl/ with one realistic recovery bug.

Mutants live outside the product path, as data (``tests/mutants/*.toml``): a name, the clause its kill must
name, the case that should kill it, and one exact text replacement in one file of impl/. ``materialize``
copies impl/ into a private directory under a package name of its own (``rkmut_<name>``, so nothing of the
installed ``recoverykit.impl`` is touched or shadowed), applies the replacement, and puts one hit probe
before the changed statement: when that statement runs, a file named after the mutant appears in
``RK_MUTANT_HITS``. A mutant whose probe never fires is dead code and proves nothing.

The adapter command it returns is an ordinary ``--adapter`` value: the kit reaches the mutant exactly as it
reaches any third-party runtime.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPL = HERE.parent.parent / "impl"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{2,60}$")
PROBE = "_rk_mutant_hit"
PROBE_SOURCE = '''"""Hit probe of a mutant: records that the mutated statement ran (tests/mutants/mutate.py)."""
import os


def hit(name):
    where = os.environ.get("RK_MUTANT_HITS")
    if where:
        try:
            os.close(os.open(os.path.join(where, name), os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass
'''


class MutantError(ValueError):
    """A mutant definition that cannot be applied (its text is not found exactly once, or breaks syntax)."""


@dataclass(frozen=True)
class Mutant:
    name: str
    clause: str  # the clause an invalid verdict must name to count as a kill
    case: str  # "certify:<scenario id>" or "chaos:<scenario>/<point>/<hit>/<kind>" (the bounded CI form)
    file: str  # path under impl/
    old: str  # exact text, found exactly once in that file, starting at a statement
    new: str
    why: str  # the realistic bug, and where the seeds (or a real runtime) describe it
    source: str = ""  # the .toml file it came from

    @property
    def package(self) -> str:
        return f"rkmut_{self.name}"


def load(directory: Path = HERE) -> list[Mutant]:
    """Every mutant of every ``*.toml`` in ``directory``, in file then definition order; names unique."""
    out: list[Mutant] = []
    for path in sorted(directory.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for entry in data.get("mutant", []):
            missing = {"name", "clause", "case", "file", "old", "new", "why"} - set(entry)
            if missing:
                raise MutantError(f"{path.name}: mutant {entry.get('name', '?')!r} lacks {sorted(missing)}")
            m = Mutant(**{k: entry[k] for k in ("name", "clause", "case", "file", "old", "new", "why")},
                       source=path.name)
            if not NAME_RE.match(m.name):
                raise MutantError(f"{path.name}: mutant name {m.name!r} must be snake_case")
            if not (m.case.startswith("certify:") or m.case.startswith("chaos:")):
                raise MutantError(f"{path.name}: {m.name}: case {m.case!r} is not certify:<id> or chaos:<case id>")
            out.append(m)
    names = [m.name for m in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise MutantError(f"mutant names used twice: {dup}")
    return out


def by_name(name: str, directory: Path = HERE) -> Mutant:
    for m in load(directory):
        if m.name == name:
            return m
    raise MutantError(f"no mutant named {name!r}")


def mutated_source(m: Mutant, text: str) -> str:
    """``text`` with the replacement applied and the hit probe put before the changed statement."""
    count = text.count(m.old)
    if count != 1:
        raise MutantError(f"{m.name}: the text to replace occurs {count} times in impl/{m.file} (must be once)")
    start = text.index(m.old)
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip():
        raise MutantError(f"{m.name}: the text to replace must start at the beginning of a statement")
    indent = re.match(r"[ \t]*", text[line_start:]).group(0)
    probe = f"{indent}__import__({m.package + '.' + PROBE!r}, fromlist=['hit']).hit({m.name!r})\n"
    out = text[:line_start] + probe + text[line_start:start] + m.new + text[start + len(m.old):]
    try:
        tree = ast.parse(out, f"impl/{m.file}")
    except SyntaxError as exc:
        raise MutantError(f"{m.name}: the mutated impl/{m.file} does not compile: {exc}") from None
    probe_line = out.count("\n", 0, line_start) + 1
    if not any(isinstance(node, ast.Expr) and node.lineno == probe_line == node.end_lineno
               for node in ast.walk(tree)):  # a continuation line would make the probe part of an expression
        raise MutantError(f"{m.name}: the text to replace must start a statement (line {probe_line} of "
                          f"impl/{m.file} continues an expression)")
    return out


def materialize(m: Mutant, dest: Path) -> Path:
    """Write the mutant package into ``dest`` (created private); return ``dest``."""
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    pkg = dest / m.package
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(IMPL, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in pkg.glob("*.py"):
        text = path.read_text()
        renamed = text.replace("recoverykit.impl", m.package)
        if path.name == m.file:
            renamed = mutated_source(m, renamed)
        path.write_text(renamed)
    if not (pkg / m.file).exists():
        raise MutantError(f"{m.name}: impl/{m.file} does not exist")
    (pkg / f"{PROBE}.py").write_text(PROBE_SOURCE)
    (dest / "hits").mkdir(exist_ok=True, mode=0o700)
    return dest


def adapter_command(m: Mutant, dest: Path, python: str = sys.executable) -> str:
    """The ``--adapter`` value that starts the materialized mutant (``env`` sets its import path)."""
    env = shutil.which("env") or "/usr/bin/env"
    return shlex.join([env, f"PYTHONPATH={dest}", f"RK_MUTANT_HITS={dest / 'hits'}", python, "-m", m.package])


def ran(m: Mutant, dest: Path) -> bool:
    """Whether the mutated statement ran at least once since materializing."""
    return (dest / "hits" / m.name).exists()


if __name__ == "__main__":  # python tests/mutants/mutate.py NAME DEST: print the adapter command
    if len(sys.argv) != 3:
        sys.exit("usage: python tests/mutants/mutate.py NAME DEST")
    try:
        mutant = by_name(sys.argv[1])
        print(adapter_command(mutant, materialize(mutant, Path(sys.argv[2]).resolve())))
    except MutantError as exc:
        sys.exit(f"mutate: {exc}")
