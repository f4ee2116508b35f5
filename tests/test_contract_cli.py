"""`recoverykit contract`: JSON and table output, filters, usage errors (exit 64), and the installed wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from recoverykit.cli import main
from recoverykit.model.contract import CLAUSES, SEEDS, by_method, by_profile, render_markdown


def run(capsysbinary, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsysbinary.readouterr()
    return info.value.code, out.decode("utf-8"), err.decode("utf-8")


def test_list_json_prints_every_clause_with_seed_and_section(capsysbinary):
    code, out, _ = run(capsysbinary, "contract", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data) == len(CLAUSES) >= 40
    for item in data:
        assert item["seed"] in SEEDS and item["section"]
        assert {"id", "statement", "kind", "quote", "profile", "methods"} <= item.keys()


@pytest.mark.parametrize(("option", "value", "select"), [
    ("--profile", "paperclip_retry", by_profile), ("--profile", "goals", by_profile),
    ("--method", "chaos", by_method), ("--method", "history", by_method),
])
def test_list_filters(capsysbinary, option, value, select):
    code, out, _ = run(capsysbinary, "contract", "list", "--json", option, value)
    assert code == 0
    assert [item["id"] for item in json.loads(out)] == [c.id for c in select(value)]


def test_filters_combine(capsysbinary):
    code, out, _ = run(capsysbinary, "contract", "list", "--json", "--profile", "goals", "--method", "chaos")
    expected = [c.id for c in by_profile("goals") if c in by_method("chaos")]
    assert code == 0 and [item["id"] for item in json.loads(out)] == expected and expected


@pytest.mark.parametrize(("option", "value", "choice"), [("--profile", "chat", "chat_core"),
                                                         ("--method", "fuzz", "lockstep")])
def test_unknown_filter_values_are_usage_errors_naming_the_choices(capsysbinary, option, value, choice):
    code, out, err = run(capsysbinary, "contract", "list", option, value)
    assert code == 64
    assert out == "" and value in err and choice in err


def test_table_output_names_clauses(capsysbinary):
    code, out, _ = run(capsysbinary, "contract", "list", "--profile", "jobs")
    assert code == 0
    for c in by_profile("jobs"):
        assert c.id in out


def test_show_one_clause_and_unknown_id_is_a_usage_error(capsysbinary):
    code, out, _ = run(capsysbinary, "contract", "show", "OWN-06", "--json")
    assert code == 0 and json.loads(out)["id"] == "OWN-06"
    code, out, _ = run(capsysbinary, "contract", "show", "fa-04")
    assert code == 0 and "provider 请求中" in out
    code, _, err = run(capsysbinary, "contract", "show", "OWN-6")
    assert code == 64 and "OWN-06" in err


def test_docs_prints_the_generated_markdown(capsysbinary):
    code, out, _ = run(capsysbinary, "contract", "docs")
    assert code == 0 and out == render_markdown()


def test_installed_wheel_lists_the_contract_without_the_checkout(unpacked_wheel, tmp_path):
    """What `pip install .` ships works on its own: run from outside the repository, wheel first on the path."""
    script = ("import sys, recoverykit; assert recoverykit.__file__.startswith(sys.argv[1]), recoverykit.__file__; "
              "from recoverykit.cli import main; main(['contract', 'list', '--json'])")
    env = {**os.environ, "PYTHONPATH": str(unpacked_wheel), "LC_ALL": "C", "LANG": "C"}
    done = subprocess.run([sys.executable, "-c", script, str(unpacked_wheel)], cwd=tmp_path, env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    data = json.loads(done.stdout.decode("utf-8"))
    assert len(data) >= 40
    assert all(item["seed"] in SEEDS and item["section"] for item in data)
