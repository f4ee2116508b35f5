"""Shared test settings: Hypothesis profiles and process hygiene helpers."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# `ci` is sized to keep the whole suite well under CI's budget; `thorough` is for nightly runs.
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=20, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """The project's wheel, built once per session (what ``pip install .`` would install)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = out.glob("recoverykit-*.whl")
    return wheel


@pytest.fixture(scope="session")
def unpacked_wheel(built_wheel, tmp_path_factory) -> Path:
    """The wheel unpacked: a real ``recoverykit/`` tree, whatever the install mode of this venv."""
    target = tmp_path_factory.mktemp("unpacked")
    zipfile.ZipFile(built_wheel).extractall(target)
    return target


# The requirement documents are not part of the checkout: CI keeps them beside it (../shared/seeds) and sets
# RECOVERYKIT_REQUIRE_SEEDS=1, so their absence fails there; on a fresh clone the citation tests skip, with
# the reason. One fixture for every test that reads them (test_contract, test_contract_statements).
SEEDS_DIR = Path(os.environ.get("RECOVERYKIT_SEEDS_DIR") or Path(__file__).resolve().parent.parent.parent / "shared"
                 / "seeds")


@pytest.fixture(scope="session")
def seeds() -> dict[str, str]:
    from recoverykit.model.contract import SEEDS

    if not SEEDS_DIR.is_dir():
        reason = (f"seed documents not found in {SEEDS_DIR} (set RECOVERYKIT_SEEDS_DIR); "
                  "the catalogue's citations are not checked")
        if os.environ.get("RECOVERYKIT_REQUIRE_SEEDS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    missing = [name for name in SEEDS if not (SEEDS_DIR / name).is_file()]
    assert not missing, f"seed files named by the catalogue are missing from {SEEDS_DIR}: {missing}"
    return {name: (SEEDS_DIR / name).read_text(encoding="utf-8") for name in SEEDS}
