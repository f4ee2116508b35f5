"""JUnit XML for CI systems: one test case per scenario and one for the lockstep machine.

Mapping: valid passes; invalid is a ``<failure>`` (the clause's definition and the reproduction);
unknown is an ``<error>`` of type ``unknown`` (missing evidence is not a pass, and not a proven
failure either); not applicable is ``<skipped>`` with the reason "profile not declared" (or "capability not
declared": a storage scenario against an adapter without ``init_ok.storage``). A case invalid only through
accepted clauses (``--accept``, ``--baseline``) is ``<skipped type="accepted">`` naming them, as pytest
reports an xfail: a known finding, neither a pass nor a new failure.
Every value goes through ``safe_text.xml_text``: adapter text may hold characters XML 1.0 cannot carry.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from recoverykit.conformance.safe_text import xml_text as x
from recoverykit.model.catalogue import Verdict

if TYPE_CHECKING:
    from recoverykit.conformance.certify import Certification


def junit_tree(cert: Certification) -> ET.ElementTree:
    accepted = {c.name for c in cert.cases if c.accepted(cert.accepted)}
    counts = {v: sum(1 for c in cert.cases if c.verdict is v and c.name not in accepted) for v in Verdict}
    suite = ET.Element("testsuite", {
        "name": x(f"recoverykit certify: {cert.adapter_info.get('name', cert.adapter)}"),
        "tests": str(len(cert.cases)), "failures": str(counts[Verdict.INVALID]),
        "errors": str(counts[Verdict.UNKNOWN]), "skipped": str(counts[Verdict.NOT_APPLICABLE] + len(accepted)),
        "time": f"{cert.seconds:.3f}"})
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", cert.verdict.value), ("seed", str(cert.seed)), ("adapter", cert.adapter)):
        ET.SubElement(props, "property", {"name": name, "value": x(value)})
    for case in cert.cases:
        el = ET.SubElement(suite, "testcase", {"classname": x(f"recoverykit.{case.kind}"), "name": x(case.name),
                                               "time": f"{case.seconds:.3f}"})
        more = [line for f in case.findings[1:] for line in ("", f["message"], *f["program"])]  # lockstep: all
        body = x("\n".join([case.message, *case.program, *more, f"bundle: {case.bundle}" if case.bundle else "",
                            f"replay: {cert.replay_command(case.name)}"]).strip())
        if case.name in accepted:
            known = ", ".join(f"{c} ({cert.accepted[c]})" for c in sorted(case.broken()))
            ET.SubElement(el, "skipped", {"type": "accepted", "message": x(f"accepted finding: {known}")}).text = body
        elif case.verdict is Verdict.INVALID:
            ET.SubElement(el, "failure", {"message": x(case.message[:500]), "type": "invalid"}).text = body
        elif case.verdict is Verdict.UNKNOWN:
            ET.SubElement(el, "error", {"message": x(case.message[:500]), "type": "unknown"}).text = body
        elif case.verdict is Verdict.NOT_APPLICABLE:
            why = "capability not declared" if case.message.startswith("capability ") else "profile not declared"
            ET.SubElement(el, "skipped", {"message": why}).text = x(case.message)
    suites = ET.Element("testsuites")
    suites.append(suite)
    return ET.ElementTree(suites)


def write_junit(cert: Certification, path: Path) -> Path:
    tree = junit_tree(cert)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
