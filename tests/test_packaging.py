"""The wheel must carry every layer: the package-dir mapping is easy to get subtly wrong."""

import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"kit": "recoverykit", "model": "recoverykit.model", "impl": "recoverykit.impl",
           "conformance": "recoverykit.conformance", "chaos": "recoverykit.chaos",
           "reports": "recoverykit.reports"}


def _declared_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def _source_packages() -> set[str]:
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    return found


def test_every_source_package_is_declared():
    missing = _source_packages() - _declared_packages()
    assert not missing, f"add these to [tool.setuptools].packages in pyproject.toml: {sorted(missing)}"


def test_wheel_contains_every_module(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    for folder, package in FOLDERS.items():
        for source in (ROOT / folder).rglob("*.py"):
            rel = source.relative_to(ROOT / folder)
            expected = "/".join([*package.split("."), *rel.parts])
            assert expected in names, f"{source.relative_to(ROOT)} is missing from the wheel as {expected}"
