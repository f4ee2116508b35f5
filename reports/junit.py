"""JUnit XML for CI systems: one testcase per chaos case, failures carrying the broken clauses.

``passed`` is a pass; ``failed`` a failure (the violations as its message, the replay command in the
body); ``error`` an error; ``not_reached`` and ``not_implemented`` are skipped with the reason: a
CI dashboard must never show them as passes (missing evidence is unknown). A failed case that broke only
accepted clauses (``--accept``, ``--baseline``) is skipped with type ``accepted``, as pytest reports an xfail.
Every value goes through ``safe_text.xml_text``: adapter text may hold characters XML 1.0 cannot carry.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from recoverykit.chaos.findings import accepted_case, broken
from recoverykit.conformance.safe_text import xml_text as x


def junit_xml(results: dict[str, Any]) -> str:
    cases = results.get("cases", [])
    accepted = (results.get("acceptance") or {}).get("accepted") or {}
    known = {c["id"] for c in cases if accepted_case(c, accepted)}
    suite = ET.Element("testsuite", name=x(f"recoverykit-chaos[{(results.get('adapter') or {}).get('name')}]"),
                       tests=str(len(cases)), failures=str(sum(c["status"] == "failed" for c in cases) - len(known)),
                       errors=str(sum(c["status"] == "error" for c in cases)),
                       skipped=str(sum(c["status"] in ("not_reached", "not_implemented") for c in cases) + len(known)),
                       time=x(results.get("wall_s", 0)))
    for case in cases:
        scenario, _, rest = case["id"].partition("/")
        node = ET.SubElement(suite, "testcase", classname=x(f"chaos.{scenario}"), name=x(rest),
                             time=x((case.get("timings") or {}).get("total", 0)))
        violations = [str(v) for v in case.get("violations", [])]
        if case["id"] in known:
            why = ", ".join(f"{c} ({accepted[c]})" for c in sorted(broken(case)))
            ET.SubElement(node, "skipped", type="accepted", message=x(f"accepted finding: {why}"[:2000])).text = x(
                "\n".join([*violations, "", f"reproduce: {case.get('replay')}"]))
        elif case["status"] == "failed":
            failure = ET.SubElement(node, "failure", message=x("; ".join(violations)[:2000]))
            failure.text = x("\n".join([*violations, "", f"reproduce: {case.get('replay')}",
                                        f"bundle: {case.get('bundle')}"]))
        elif case["status"] == "error":
            error = ET.SubElement(node, "error", message=x(str(case.get("why", "error"))[:2000]))
            error.text = x(case.get("replay")) if case.get("replay") is not None else None
        elif case["status"] in ("not_reached", "not_implemented"):
            ET.SubElement(node, "skipped", message=x(f"{case['status']}: {case.get('why', '')}"[:2000]))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
