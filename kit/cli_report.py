"""``recoverykit report``: the readable report (Markdown, self-contained HTML) of certify and chaos results.

A thin skin over ``recoverykit.reports``: the results are read (a file or a run's ``--out`` directory;
chaos shards are merged as ``recoverykit merge`` merges them, certify runs sit beside them) and the
report is written where asked, Markdown on stdout when no path is given. Exits with the verdict of the
results recomputed from their cases, never the stored one (0 valid, 1 invalid, 2 unknown; an incomplete run
or shard set is never 0); 64 for bad input (a path that is no results document or a malformed one, results
of two different adapters, chaos shards of different runs).
"""

from __future__ import annotations

from pathlib import Path

import click
from recoverykit.conformance.safe_text import visible
from recoverykit.errors import UsageError
from recoverykit.model.catalogue import Verdict
from recoverykit.model.errors import InvalidArgument


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None, help="Write the HTML page here.")
@click.option("--md", "md_path", type=click.Path(dir_okay=False), default=None, help="Write the Markdown here.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write report.html and report.md into this directory (created if missing).")
def report(results, html_path, md_path, out_dir) -> int:
    """Write the report of certify and chaos RESULTS (results.json files or their --out directories).

    Chaos shards are merged; certify runs are shown beside them. Without --html, --md or --out the Markdown
    goes to stdout. Exit: the results' verdict (0 valid, 1 invalid, 2 unknown); 64 bad input.
    """
    from recoverykit.reports import merge as merging
    from recoverykit.reports import render

    if out_dir is not None:
        html_path = html_path or str(Path(out_dir) / merging.REPORT_HTML)
        md_path = md_path or str(Path(out_dir) / merging.REPORT_MD)
    try:
        chaos, certify = merging.report_pages(results)
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
        page = merging.write_report(chaos, certify, html=html_path, md=md_path)
    except InvalidArgument as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a directory where the report belongs: the user's path, not a kit defect
        raise UsageError(f"cannot write the report: {exc}") from None
    for i, doc in enumerate(certify, start=1):  # the verdict is recomputed from the cases: say when it differs
        again = doc.get("recomputed") or {}
        if again.get("reasons") and doc["verdict"] != Verdict.VALID.value:
            click.echo(visible(f"certify run {i}: {doc['verdict']}: {'; '.join(again['reasons'][:5])}"), err=True)
    if chaos is not None and chaos.get("missing"):
        click.echo(visible(f"chaos results: {chaos['verdict']}: {'; '.join(chaos['missing'][:5])}"), err=True)
    if html_path is None and md_path is None:
        click.echo(render.markdown(page), nl=False)
    for path in (html_path, md_path):
        if path is not None:
            click.echo(f"report: {visible(path)}", err=True)
    return Verdict(page["verdict"]).exit_code if page["verdict"] in {v.value for v in Verdict} else 2
