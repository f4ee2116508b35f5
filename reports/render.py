"""Rendering the failure-acceptance report: Markdown for a PR, self-contained HTML for a browser.

The HTML is one file (inline CSS, no scripts, no external assets) made with jinja2 with autoescape on,
so a report can be attached to a CI run and opened anywhere. Both renderings come from the same
report dict (``failure_acceptance.build``); neither adds facts of its own.
"""

from __future__ import annotations

from typing import Any

import jinja2

MARK = {"exercised": "✔", "not_implemented": "·", "not_reachable": "–", "unknown": "?", "not_selected": " "}
VERDICT_MARK = {"valid": "valid", "invalid": "**INVALID**", "unknown": "unknown"}


def _matrix(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(c["point"], c["kind"]): c["status"] for c in report["coverage_cells"]}


def markdown(report: dict[str, Any]) -> str:
    adapter, cov = report["adapter"], report["coverage"]
    out = [
        f"# Failure-acceptance report: {adapter.get('name')} {adapter.get('version')}",
        "",
        f"Verdict: **{report['verdict']}**. Mode {report['mode']}, shard {report['shard']}. Cases: "
        + ", ".join(f"{k} {v}" for k, v in sorted(report["statuses"].items())) + ".",
        "",
        f"Coverage: {cov.get('exercised_cells')} of {cov.get('declared_cells')} declared (point, restart kind) cells "
        f"exercised ({cov.get('percent')} %). Declared points never hit: "
        + (", ".join(f"`{p}`" for p in cov.get("declared_never_hit") or []) or "none") + ".",
    ]
    if report["reasons"]:
        out += ["", "Why not valid:", ""] + [f"- {r}" for r in report["reasons"]]
    matrix = _matrix(report)
    out += ["", "## Coverage: interruption point x restart kind", "",
            "✔ exercised, · not implemented by the adapter, – not reachable by any scenario, ? declared but never "
            "exercised (unknown), blank: not selected in this run.", "",
            "| point | " + " | ".join(report["kinds"]) + " |",
            "| --- | " + " | ".join(":-:" for _ in report["kinds"]) + " |"]
    for point in report["points"]:
        out.append(f"| `{point}` | " + " | ".join(MARK.get(matrix.get((point, k), ""), "") for k in report["kinds"])
                   + " |")
    out += ["", "## Failing cells", ""]
    if not report["failing"]:
        out.append("None.")
    for cell in report["failing"]:
        out += [f"### {cell['clause']} at `{cell['point']}` under `{cell['kind']}`", ""]
        out += [f"- {e}" for e in cell["evidence"]]
        out += ["", "Reproduce:", "", "```", str(cell["reproduce"]), "```", ""]
    out += ["", "## Clauses", "", "Cells judged per clause (clause x point x restart kind).", "",
            "| clause | verdict | valid | invalid | unknown | statement |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for c in report["clauses"]:
        out.append(f"| {c['clause']} | {VERDICT_MARK[c['verdict']]} | {c['valid']} | {c['invalid']} | {c['unknown']} | "
                   f"{c['statement'].replace('|', '/')} |")
    if report.get("unjudged_chaos_clauses"):
        out += ["", "Clauses checkable by chaos that no case here judged (unknown, not passed): "
                + ", ".join(report["unjudged_chaos_clauses"]) + "."]
    out += ["", f"Built from results sha256 `{report['results_sha256']}`; re-check with "
            "`recoverykit merge --check-report report.json results.json`.", ""]
    return "\n".join(out)


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Failure-acceptance report: {{ r.adapter.name }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f3f3f3;font-weight:600}.exercised{background:#cfeccf}.not_implemented{background:#eee;color:#888}
.not_reachable{background:#fafafa;color:#bbb}.unknown{background:#ffe9a8}.not_selected{background:#fff}
.invalid{background:#f7c2c2;font-weight:600}.valid{color:#176317}code,pre{background:#f6f6f6;padding:1px 3px}
th.k{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:500}
</style></head><body>
<h1>Failure-acceptance report: {{ r.adapter.name }} {{ r.adapter.version }}</h1>
<p>Verdict: <b class="{{ r.verdict }}">{{ r.verdict }}</b>. Mode {{ r.mode }}, shard {{ r.shard }}.
Cases: {% for k, v in r.statuses|dictsort %}{{ k }} {{ v }}{% if not loop.last %}, {% endif %}{% endfor %}.</p>
<p>Coverage: {{ r.coverage.exercised_cells }} of {{ r.coverage.declared_cells }} declared cells exercised
({{ r.coverage.percent }} %). Declared points never hit:
{% for p in r.coverage.declared_never_hit or [] %}<code>{{ p }}</code> {% else %}none{% endfor %}.</p>
{% if r.reasons %}<ul>{% for x in r.reasons %}<li>{{ x }}</li>{% endfor %}</ul>{% endif %}
<h2>Coverage: interruption point x restart kind</h2>
<table><tr><th>point</th>{% for k in r.kinds %}<th class="k">{{ k }}</th>{% endfor %}</tr>
{% for p in r.points %}<tr><td><code>{{ p }}</code></td>{% for k in r.kinds %}{% set s = matrix.get((p, k), '') %}
<td class="{{ s }}" title="{{ s }}">{{ marks.get(s, '') }}</td>{% endfor %}</tr>{% endfor %}</table>
<p>✔ exercised · not implemented – not reachable ? unknown (declared, never exercised)</p>
<h2>Failing cells</h2>
{% for c in r.failing %}<h3>{{ c.clause }} at <code>{{ c.point }}</code> under <code>{{ c.kind }}</code></h3>
<ul>{% for e in c.evidence %}<li>{{ e }}</li>{% endfor %}</ul><pre>{{ c.reproduce }}</pre>
{% else %}<p>None.</p>{% endfor %}
<h2>Clauses</h2>
<table><tr><th>clause</th><th>verdict</th><th>valid</th><th>invalid</th><th>unknown</th><th>statement</th></tr>
{% for c in r.clauses %}<tr><td>{{ c.clause }}</td><td class="{{ c.verdict }}">{{ c.verdict }}</td>
<td>{{ c.valid }}</td><td>{{ c.invalid }}</td><td>{{ c.unknown }}</td><td>{{ c.statement }}</td></tr>
{% endfor %}</table>
{% if r.unjudged_chaos_clauses %}<p>Clauses checkable by chaos that no case here judged (unknown, not passed):
{{ r.unjudged_chaos_clauses|join(", ") }}.</p>{% endif %}
<p>Built from results sha256 <code>{{ r.results_sha256 }}</code>.</p>
</body></html>
"""


def html(report: dict[str, Any]) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_TEMPLATE).render(r=report, matrix=_matrix(report), marks=MARK)
