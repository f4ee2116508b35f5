"""The jinja2 template of report.html: one page, inline CSS and SVG, no script, no external asset.

Kept apart from ``render`` so the page's markup can be read as a whole. Every value it shows is
escaped by jinja2's autoescape and passed through ``safe_text.xml_text`` (``render.html``); ids and
hrefs are built by ``readable.slug`` from sanitized names only.
"""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em 2em;color:#1d1d1d;max-width:82em}
h1{font-size:1.5em;margin:0 0 .3em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}h3{margin:1em 0 .3em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #d4d4d4;padding:3px 6px;vertical-align:top}
th{background:#f3f3f3;font-weight:600;text-align:left}td.n{text-align:right}td.id{white-space:nowrap}
code,pre{font:12px/1.35 ui-monospace,monospace;background:#f5f5f5}code{padding:0 2px}
pre{padding:4px 6px;margin:.3em 0;white-space:pre-wrap;word-break:break-all}
.badge{display:inline-block;padding:1px 8px;border-radius:3px;font-weight:600}
.v-valid,.v-passed{background:#cdeccd;color:#0f4d0f}.v-invalid,.v-failed{background:#f4c0c0;color:#7a0c0c}
.v-accepted{background:#e6d3f5;color:#4b1d6e}.v-unknown,.v-not_reached{background:#ffeaa6;color:#5c4500}
.v-error{background:#fbd3a5;color:#6b3800}.v-not_applicable,.v-not_implemented{background:#eee;color:#666}
svg text{font:12px ui-monospace,monospace;fill:#222}svg text.c{font-size:10px;text-anchor:middle;fill:#111}
svg rect{stroke:#fff;stroke-width:1}svg a:hover rect,svg a:focus rect{stroke:#000;stroke-width:2}
.s-invalid{fill:#d9534f}.s-accepted{fill:#a67fd0}.s-error{fill:#f0a040}.s-unknown{fill:#ffd966}
.s-passed{fill:#7cc47c}.s-not_implemented{fill:#d9d9d9}.s-not_reachable{fill:#f0f0f0}
.s-not_selected{fill:#fff;stroke:#e4e4e4}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px;border:1px solid #ccc}
.legend .s-invalid{background:#d9534f}.legend .s-accepted{background:#a67fd0}.legend .s-error{background:#f0a040}
.legend .s-unknown{background:#ffd966}.legend .s-passed{background:#7cc47c}
.legend .s-not_implemented{background:#d9d9d9}
.legend .s-not_reachable{background:#f0f0f0}.legend .s-not_selected{background:#fff}
section.cell{border-left:4px solid #ddd;padding-left:.8em;margin:1em 0}section.cell:target{background:#fffbe6}
section.finding:target,tr:target,li:target{background:#fffbe6}
.muted{color:#666}table.why td{font-size:13px}table.why code{font-size:11px}
table.why details ul{margin:.2em 0;padding-left:1.2em}
details summary{cursor:pointer;color:#245}
</style></head><body>
<h1>{{ title }}</h1>
<p>Verdict: <span class="badge v-{{ v.verdict }}">{{ v.verdict }}</span></p>
<ul>
{% if v.chaos %}{% set c = v.chaos %}<li>Chaos run ({{ c.mode }}, shard {{ c.shard }}): {{ c.cases }} cases
({% for k, n in c.statuses|dictsort %}{{ k }} {{ n }}{% if not loop.last %}, {% endif %}{% endfor %});
{{ c.coverage.exercised_cells }} of {{ c.coverage.declared_cells }} declared cells exercised
({{ c.coverage.percent }} %). Declared points never hit:
{% for p in c.coverage.declared_never_hit or [] %}<code>{{ p }}</code> {% else %}none{% endfor %}.</li>
{% endif %}{% for run in v.certify %}<li>Certify run {{ run.index + 1 }}:
<span class="badge v-{{ run.verdict }}">{{ run.verdict }}</span>,
{{ run.cases|length }} cases, seed {{ run.seed }}, {{ run.seconds }} s{% if run.incomplete %}, incomplete{% endif %};
replay: <code>{{ run.replay }}</code></li>
{% endfor %}</ul>
{% set all = v.clauses + v.accepted_clauses %}<p>Clauses in this report:
{% for k in ["invalid", "accepted", "valid", "unknown"] %}
{% set n = all|selectattr("verdict", "equalto", k)|list|length %}
{% if n %}<span class="badge v-{{ k }}">{{ n }} {{ k }}</span>{% endif %}{% endfor %}</p>
<p>Contents: <a href="#clauses">clauses</a>
{% if v.accepted_clauses %}· <a href="#accepted-clauses">accepted clauses</a>{% endif %}
{% if svg %}· <a href="#matrix">point x restart kind</a> · <a href="#evidence">evidence per cell</a>{% endif %}
{% if v.findings %}· <a href="#findings">findings</a>{% endif %}
{% if v.accepted %}· <a href="#accepted">accepted findings</a>{% endif %}
{% for run in v.certify %}· <a href="#certify-{{ run.index + 1 }}">certify run {{ run.index + 1 }}</a>{% endfor %}</p>
{% if v.why %}<h2 id="why">Why not valid: {{ v.why|length }} broken clause{% if v.why|length != 1 %}s{% endif %}</h2>
<p class="muted">One row per broken clause, most failing cases first: its most frequent failure message (cases whose
messages differ only in ids and counts count as one) and its shortest replay. Open a row's cases for every
distinct message and every failing case, each linked to its evidence.</p>
<table class="why"><tr><th>clause</th><th>failing cases</th><th>distinct failure messages</th><th>shortest replay</th>
</tr>{% for g in v.why %}{% set top = g.messages[0] %}{% set more = g.messages|length - 1 + g.more_messages %}
<tr id="why-{{ g.anchor }}"><td class="id"><a href="#{{ g.anchor }}" title="{{ g.statement }}">{{ g.clause }}</a></td>
<td class="n"><span class="badge v-invalid">{{ g.count }}</span></td>
<td>{{ top.count }}&times; {{ short(top.text) }}{% if more %} <span class="muted">(+{{ more }} more distinct)</span>
{% endif %}{% if g.cases %}<details><summary>{{ g.cases|length }} case{% if g.cases|length != 1 %}s{% endif %}</summary>
<ul>{% for m in g.messages %}<li>{{ m.count }}&times; {{ m.text }}</li>{% endfor %}</ul><ul>
{% for c in g.cases %}<li>{% if c.anchor %}<a href="#{{ c.anchor }}"><code>{{ c.id }}</code></a>{% else %}<code>{{ c.id
}}</code>{% endif %}: {{ c.message }}</li>{% endfor %}</ul></details>{% endif %}</td>
<td>{% if g.replay %}<code>{{ g.replay }}</code>{% endif %}</td></tr>
{% endfor %}</table>
{% if v.reasons %}<details><summary>Every reason the results give ({{ v.reasons|length }})</summary><ul>
{% for x in v.reasons %}<li>{{ x }}</li>{% endfor %}</ul></details>{% endif %}
{% elif v.reasons %}<p>Why not valid:</p><ul>{% for x in v.reasons %}<li>{{ x }}</li>{% endfor %}</ul>{% endif %}

<h2 id="clauses">Clauses</h2>
<p class="muted">Each clause some result judged: its verdict, how many chaos cells (point x restart kind) and certify
cases judged it, and the shortest command that replays its failure; broken clauses first, then those never judged,
then those that held.</p>
{% macro clause_table(rows) %}{% set replays = rows|selectattr("replay")|list %}
<table><tr><th>clause</th><th>verdict</th>{% if v.chaos %}<th>chaos cells</th>{% endif %}
{% if v.certify %}<th>certify cases</th>{% endif %}{% if replays %}<th>shortest replay</th>{% endif %}
<th>statement</th></tr>
{% for r in rows %}<tr id="row-{{ r.anchor }}">
<td class="id">{% if r.finding %}<a href="#{{ r.anchor }}">{{ r.clause }}</a>{% else %}{{ r.clause }}{% endif %}
{% if r.required %}<br><span class="muted">required</span>{% endif %}</td>
<td><span class="badge v-{{ r.verdict }}">{{ r.verdict }}</span></td>
{% if v.chaos %}{% set shown = r.cell_counts|dictsort|rejectattr(0, "equalto", "valid")|list %}
<td class="n">{% if shown|length == 1 and shown[0][1] == r.cells %}
{{ r.cells }} <span class="muted">{{ shown[0][0] }}</span>{% else %}{{ r.cells }}{% if shown %}
<span class="muted">({% for k, n in shown %}{{ n }} {{ k }}{% if not loop.last %}, {% endif %}{% endfor %})</span>
{% endif %}{% endif %}</td>{% endif %}
{% if v.certify %}<td class="n">{{ r.cases }}</td>{% endif %}
{% if replays %}<td>{% if r.replay %}<code>{{ r.replay }}</code>{% endif %}</td>{% endif %}
<td>{{ r.statement }}</td></tr>
{% endfor %}</table>{% endmacro %}
{{ clause_table(v.clauses) }}
{% if v.more_clauses.unknown or v.more_clauses.not_applicable %}
<p class="muted">{{ v.more_clauses.unknown }} more clauses
were never exercised (unknown) and {{ v.more_clauses.not_applicable }} belong to undeclared profiles (not applicable);
every clause is in results.json.</p>{% endif %}
{% if v.accepted_clauses %}<h2 id="accepted-clauses">Accepted clauses (known findings, not passed)</h2>
{{ clause_table(v.accepted_clauses) }}{% endif %}
{% if v.unknowns and v.unknowns.clauses %}{% set u = v.unknowns %}
<h2 id="unknown-reasons">Unknown clauses by reason</h2>
<p>{{ u.clauses|length }} of {{ u.applicable }} applicable clauses are unknown (never valid). Why, per class
(docs/adapter-guide.md section 20 says how to supply what the adapter could):</p>
<table><tr><th>reason</th><th>clauses</th><th>count</th></tr>
{% for kind, n in u.classes.items() %}<tr><td><code>{{ kind }}</code></td><td>{% for c, w in u.clauses.items()
%}{% if w["class"] == kind %}<span title="{{ w.why }}">{{ c }}</span> {% endif %}{% endfor %}</td><td>{{ n }}</td></tr>
{% endfor %}</table>{% endif %}

{% if svg %}{% set m = v.matrix %}
<h2 id="matrix">Interruption point x restart kind</h2>
<p class="muted">Each cell is the cases that stopped the runtime at that point and restarted it that way; the number
is its cases (failed/total when some failed). Every cell links to its evidence below.</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{{ svg.width }}" height="{{ svg.height }}"
 viewBox="0 0 {{ svg.width }} {{ svg.height }}" role="img" aria-label="heatmap of interruption points by restart kinds">
{% for col in svg.cols %}
<text x="{{ col.x }}" y="{{ svg.top - 6 }}" transform="rotate(-90 {{ col.x }} {{ svg.top - 6 }})">{{ col.kind }}</text>
{% endfor %}{% for row in svg.rows %}
<text x="{{ svg.left - 6 }}" y="{{ row.y }}" text-anchor="end">{{ row.point }}</text>
{% endfor %}{% for c in svg.cells %}
<a href="#{{ c.anchor }}"><title>{{ c.title }}</title>
<rect class="s-{{ c.shade }}" x="{{ c.x }}" y="{{ c.y }}" width="{{ svg.w }}" height="{{ svg.h }}"/>
{% if c.label %}<text class="c" x="{{ c.cx }}" y="{{ c.cy }}">{{ c.label }}</text>{% endif %}</a>
{% endfor %}</svg>
<p class="legend">{% for s, what in legend.items() %}<span class="s-{{ s }}"></span>{{ what }}
{% if m.counts.get(s) %}({{ m.counts[s] }}){% endif %} {% endfor %}</p>

<h2 id="evidence">Evidence per cell</h2>
{% for e in m.evidence %}<section class="cell" id="{{ e.anchor }}">
<h3><code>{{ e.point }}</code> under <code>{{ e.kind }}</code>:
<span class="badge v-{{ e.shade }}">{{ e.shade }}</span></h3>
{% if e.why %}<p class="muted">{{ e.why }}</p>{% endif %}
<table><tr><th>case</th><th>status</th><th>reasons</th><th>bundle</th><th>replay</th></tr>
{% for c in e.list %}<tr><td><code>{{ c.id }}</code></td>
<td><span class="badge v-{{ c.status }}">{{ c.status }}</span></td>
<td>{% for r in c.reasons %}<div>{{ r }}</div>{% endfor %}</td>
<td>{% if c.bundle %}<code>{{ c.bundle }}</code>{% endif %}</td>
<td>{% if c.replay %}<code>{{ c.replay }}</code>{% endif %}</td></tr>
{% endfor %}</table></section>
{% endfor %}
{% if m.quiet %}<h3 id="no-case">Cells no case ran</h3><ul>
{% for e in m.quiet %}<li id="{{ e.anchor }}"><code>{{ e.point }}</code> under <code>{{ e.kind }}</code>:
{{ e.status }}{% if e.why %}: {{ e.why }}{% endif %}</li>
{% endfor %}</ul>{% endif %}
<p id="not-selected" class="muted">A white cell has no entry in these results: it was not selected in this run
(<code>--points</code>, <code>--kinds</code>, <code>--scenarios</code>, <code>--shard</code>).</p>
{% if m.other_cases %}<h3>Cases without a cell</h3><ul>{% for c in m.other_cases %}<li><code>{{ c.id }}</code>
{{ c.status }}{% for r in c.reasons %}: {{ r }}{% endfor %}</li>{% endfor %}</ul>{% endif %}
{% elif not v.chaos %}<p class="muted">No chaos results in this report: the point x restart kind matrix comes from
<code>recoverykit chaos</code> (pass its results.json to <code>recoverykit report</code>).</p>{% endif %}

{% macro findings(list) %}{% for f in list %}<section class="finding" id="{{ f.anchor }}">
<h3>{{ f.clause }}: <span class="badge v-{{ f.status }}">{{ f.status }}</span>{% if f.accepted_by %}
<span class="muted">accepted by {{ f.accepted_by }}</span>{% endif %}</h3>
<p>{{ f.statement }}</p><p>{% if f.count %}{{ f.count }} failing case(s). {% endif %}{{ f.message }}</p>
{% if f.cells %}<p>Cells:
{% for c in f.cells %}<a href="#{{ c.anchor }}"><code>{{ c.label }}</code></a> {% endfor %}</p>{% endif %}
{% if f.cases %}<p>Certify cases: {% for c in f.cases %}
{% if c.anchor %}<a href="#{{ c.anchor }}">{{ c.label }}</a>{% else %}{{ c.label }}{% endif %}
{% endfor %}</p>{% endif %}
{% if f.replay %}<p>Shortest replay:</p><pre>{{ f.replay }}</pre>{% endif %}
{% if f.bundle %}<p>Bundle: <code>{{ f.bundle }}</code></p>{% endif %}</section>
{% endfor %}{% endmacro %}
{% if v.findings %}<h2 id="findings">Findings per clause</h2>{{ findings(v.findings) }}{% endif %}
{% if v.accepted %}<h2 id="accepted">Accepted findings (known, not passed)</h2>
<p class="muted">Broken again, and accepted (<code>--accept</code>, <code>--baseline</code>): they do not decide the
verdict, and they are never shown as passed.</p>{{ findings(v.accepted) }}{% endif %}
{% for key, what in [("stale", "Stale acceptances (accepted, yet they held in this run; drop them)"),
 ("not_exercised", "Accepted but not exercised in this run"),
 ("changed", "Baseline entries not applied (the clause's statement changed since)")] %}{% if v.acceptance[key] %}
<p>{{ what }}: {{ v.acceptance[key]|join(", ") }}.</p>{% endif %}{% endfor %}

{% for run in v.certify %}<h2 id="certify-{{ run.index + 1 }}">Certify run {{ run.index + 1 }}: cases</h2>
<table><tr><th>case</th><th>status</th><th>message</th><th>bundle</th><th>replay</th></tr>
{% for c in run.cases %}<tr id="{{ c.anchor }}">
<td><code>{{ c.name }}</code> <span class="muted">{{ c.kind }}</span></td>
<td><span class="badge v-{{ c.status }}">{{ c.status }}</span></td>
<td>{{ c.message }}{% if c.program %}<pre>{{ c.program|join("\\n") }}</pre>{% endif %}</td>
<td>{% if c.bundle %}<code>{{ c.bundle }}</code>{% endif %}</td>
<td>{% if c.replay %}<code>{{ c.replay }}</code>{% endif %}</td></tr>
{% endfor %}</table>{% endfor %}

{% if v.unjudged_chaos_clauses %}<p class="muted">Clauses checkable by chaos that no case here judged (unknown, not
passed): {{ v.unjudged_chaos_clauses|join(", ") }}.</p>{% endif %}
{% if v.results_sha256 %}
<p class="muted">Built from chaos results sha256 <code>{{ v.results_sha256 }}</code>.</p>{% endif %}
</body></html>
"""
