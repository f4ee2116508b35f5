"""JUnit XML for CI systems: one testcase per chaos case, failures carrying the broken clauses.

``passed`` is a pass; ``failed`` a failure (the violations as its message, the replay command in the
body); ``error`` an error; ``not_reached`` and ``not_implemented`` are skipped with the reason: a
CI dashboard must never show them as passes (missing evidence is unknown).
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET


def junit_xml(results: dict[str, Any]) -> str:
    cases = results.get("cases", [])
    suite = ET.Element("testsuite", name=f"recoverykit-chaos[{(results.get('adapter') or {}).get('name')}]",
                       tests=str(len(cases)), failures=str(sum(c["status"] == "failed" for c in cases)),
                       errors=str(sum(c["status"] == "error" for c in cases)),
                       skipped=str(sum(c["status"] in ("not_reached", "not_implemented") for c in cases)),
                       time=str(results.get("wall_s", 0)))
    for case in cases:
        scenario, _, rest = case["id"].partition("/")
        node = ET.SubElement(suite, "testcase", classname=f"chaos.{scenario}", name=rest,
                             time=str((case.get("timings") or {}).get("total", 0)))
        if case["status"] == "failed":
            failure = ET.SubElement(node, "failure", message="; ".join(case.get("violations", []))[:2000])
            failure.text = "\n".join([*case.get("violations", []), "", f"reproduce: {case.get('replay')}",
                                      f"bundle: {case.get('bundle')}"])
        elif case["status"] == "error":
            ET.SubElement(node, "error", message=str(case.get("why", "error"))[:2000]).text = case.get("replay")
        elif case["status"] in ("not_reached", "not_implemented"):
            ET.SubElement(node, "skipped", message=f"{case['status']}: {case.get('why', '')}"[:2000])
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
