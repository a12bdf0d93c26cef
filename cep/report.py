"""``cep report``: one self-contained HTML page about a query's matches on some history.

The page holds the query, summary counts, matches per partition and over time, histograms of match
length and duration, and, for the partitions with the most matches, a chart of one column with each
match's rows shaded and coloured by CLASSIFIER(). Charts are PNGs made with matplotlib and embedded as
base64 ``data:`` URIs, so the file opens anywhere with no network and nothing beside it.

Where the labels come from: the query is compiled a second time with ALL ROWS PER MATCH and two
measures, MATCH_NUMBER() and CLASSIFIER() (``labelled_query``), so every matched row comes back with its
match and variable. That derived query drops the outer WHERE, ORDER BY and LIMIT: the charts show every
non-empty match; the summary also counts the rows the query itself returns.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Sequence

from cep.cli_io import cell
from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.query import Query

# Imported inside functions: matplotlib (optional: the "report" extra) and pandas (heavy).

MATCH_COLUMN = "__cep_match"
LABEL_COLUMN = "__cep_label"
STATUSES = {"MATCHED", "TIMEOUT", "ABSENCE"}
OUTPUT_ROWS_SHOWN = 100
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


class ReportError(Exception):
    """The report cannot be made as asked (e.g. ``--column`` names no numeric column)."""


@dataclass
class Report:
    text: str  # the HTML page
    summary: str  # one line for the terminal


# ------------------------------------------------------------------------------------------ matching


def labelled_query(query: Any) -> Any:
    """``query`` as ALL ROWS PER MATCH (empty matches omitted) with MATCH_NUMBER() and CLASSIFIER()
    measures, same partitioning, order, pattern, DEFINE, SKIP and WITHIN; no outer WHERE/ORDER/LIMIT."""
    statement = query.statement
    mr = statement.match
    span = mr.span
    measures = (
        ast.Measure(span, ast.MatchNumber(span), ast.Identifier(span, MATCH_COLUMN, quoted=True)),
        ast.Measure(span, ast.Classifier(span), ast.Identifier(span, LABEL_COLUMN, quoted=True)),
    )
    rows = replace(mr.rows_per_match, mode="ALL_OMIT_EMPTY", show_timeout=False, explicit=True)
    derived = replace(
        statement,
        select=(ast.SelectItem(span, ast.Star(span)),),
        match=replace(mr, measures=measures, rows_per_match=rows),
        where=None, order_by=(), limit=None,
    )
    return Query(derived, query.text, query.filename)


def partition_label(key: tuple, columns: Sequence[str]) -> str:
    return ", ".join(f"{c}={cell(v)}" for c, v in zip(columns, key)) or "(all rows)"


def match_summary(labelled: Any, partition: list[str], order: str | None) -> Any:
    """One row per match: partition, match number, first/last ORDER BY value, rows, labels in order."""
    import pandas as pd

    if labelled.empty:
        return pd.DataFrame(columns=["partition", "match", "first", "last", "rows", "labels"])
    keys = partition + [MATCH_COLUMN]
    records = []
    for key, group in labelled.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        position = group[order] if order else group["__row"]
        records.append({
            "partition": partition_label(key[:-1], partition), "match": key[-1], "first": position.iloc[0],
            "last": position.iloc[-1], "rows": len(group), "labels": " ".join(group[LABEL_COLUMN].astype(str)),
        })
    return pd.DataFrame.from_records(records)


# -------------------------------------------------------------------------------------------- charts


def _figure(width: float = 7.5, height: float = 3.0):
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return figure, figure.add_subplot()


def _counts_axis(axis) -> None:
    """Counts are whole numbers: no 0.5 ticks."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _is_time(values: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_datetime64_any_dtype(values))


def chart_per_partition(counts: Any) -> str:
    top = counts.head(20).iloc[::-1]
    figure, ax = _figure(7.5, max(2.0, 0.3 * len(top) + 0.8))
    ax.barh([str(k) for k in top.index], top.values, color=PALETTE[0])
    ax.set_xlabel("matches")
    _counts_axis(ax.xaxis)
    ax.set_title("Matches per partition" + (" (top 20)" if len(counts) > 20 else ""))
    return _png(figure)


def chart_over_time(starts: Any, order: str) -> str:
    figure, ax = _figure()
    ax.hist(starts, bins=min(40, max(5, len(starts))), color=PALETTE[0])
    ax.set_xlabel(f"match start ({order})")
    ax.set_ylabel("matches")
    _counts_axis(ax.yaxis)
    ax.set_title("Matches over time")
    if _is_time(starts):
        figure.autofmt_xdate()
    return _png(figure)


def chart_histogram(values: Any, title: str, xlabel: str, integer: bool = False) -> str:
    figure, ax = _figure(5.0, 3.0)
    integer = integer or bool(len(values) and (values == values.round()).all() and values.max() - values.min() <= 60)
    if integer:
        _counts_axis(ax.xaxis)
        low, high = int(values.min()), int(values.max())
        ax.hist(values, bins=[b - 0.5 for b in range(low, high + 2)], color=PALETTE[2], rwidth=0.9)
    else:
        ax.hist(values, bins=min(30, max(5, len(values))), color=PALETTE[2])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("matches")
    _counts_axis(ax.yaxis)
    ax.set_title(title)
    return _png(figure)


def durations(summary: Any) -> tuple[Any, str]:
    """Match durations (last - first ORDER BY value) in a readable unit."""
    span = summary["last"] - summary["first"]
    if hasattr(span, "dt"):
        seconds = span.dt.total_seconds()
        median = float(seconds.median()) if len(seconds) else 0.0
        for unit, size in (("hours", 3600.0), ("minutes", 60.0)):
            if median >= size:
                return seconds / size, unit
        return seconds, "seconds"
    return span.astype(float), "ORDER BY units"


def chart_partition(rows: Any, matched: Any, column: str, order: str | None, title: str, colours: dict[str, str]) -> str:
    """``column`` over time for one partition; each match's span shaded, its rows coloured by label."""
    figure, ax = _figure(9.0, 3.4)
    x = rows[order] if order else rows["__row"]
    if _numeric(rows, column):
        ax.plot(x, rows[column], color="#999999", linewidth=1.0, zorder=1, label="_nolegend_")
        y_of = lambda frame: frame[column]  # noqa: E731
    else:  # an event type (page, status): one lane per value, events as dots
        lanes = sorted(set(rows[column].astype(str)) | set(matched[column].astype(str)))
        lane = {value: index for index, value in enumerate(lanes)}
        y_of = lambda frame: frame[column].astype(str).map(lane)  # noqa: E731
        ax.scatter(x, y_of(rows), s=10, color="#bbbbbb", zorder=1, label="_nolegend_")
        ax.set_yticks(range(len(lanes)), lanes)
        ax.set_ylim(-0.7, len(lanes) - 0.3)
    for number, group in matched.groupby(MATCH_COLUMN, sort=False):
        gx = group[order] if order else group["__row"]
        ax.axvspan(gx.iloc[0], gx.iloc[-1], color="#f4d03f", alpha=0.25, zorder=0)
        ax.annotate(f"#{number}", (gx.iloc[0], 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    va="bottom", ha="left", color="#7d6608", annotation_clip=False)
    for label, group in matched.groupby(LABEL_COLUMN, sort=False):
        gx = group[order] if order else group["__row"]
        ax.scatter(gx, y_of(group), s=18, color=colours[label], label=str(label), zorder=2)
    if len(matched):
        ax.legend(title="CLASSIFIER()", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_ylabel(column)
    ax.set_xlabel(order or "row")
    ax.set_title(title, pad=12)
    if order and _is_time(x):
        figure.autofmt_xdate()
    return _png(figure)


# ---------------------------------------------------------------------------------------------- page


def _numeric(pdf: Any, name: str) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(pdf[name]) and not pd.api.types.is_bool_dtype(pdf[name]))


def chart_column(query: Any, pdf: Any, wanted: str | None, skip: Sequence[str]) -> str | None:
    """The column to chart: ``wanted``, else the first numeric column a DEFINE reads, else any numeric
    one, else the first text column a DEFINE reads (drawn as lanes of events)."""
    
    if wanted is not None:
        found = ColumnNames(pdf.columns).find_name(wanted)
        if found is None:
            raise ReportError(f"--column {wanted}: no such column (columns: {', '.join(map(str, pdf.columns))})")
        return found
    read = query.plan.condition_columns(pdf.columns)
    candidates = [c for c in pdf.columns if c not in skip and _numeric(pdf, c)]
    preferred = [c for c in candidates if c in read]
    events = [c for c in pdf.columns if c not in skip and not _numeric(pdf, c) and c in read]
    return (preferred or candidates or events or [None])[0]


def _img(data: str, alt: str) -> str:
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _table(pdf: Any) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in pdf.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row) + "</tr>"
        for row in pdf.itertuples(index=False, name=None)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
pre { background: #f6f8fa; padding: 1em; overflow-x: auto; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; } th { background: #f0f0f0; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
.grid { display: flex; flex-wrap: wrap; gap: 1em; } .note { color: #666; font-size: 0.9em; }
"""

# Records, once the page has loaded, how many images decoded: a browser test reads it back from the DOM.
_SCRIPT = """
window.addEventListener('load', function () {
  var images = document.images, decoded = 0;
  for (var i = 0; i < images.length; i++) { if (images[i].complete && images[i].naturalWidth > 0) decoded++; }
  document.body.setAttribute('data-images-decoded', decoded + '/' + images.length);
});
"""


def build_report(query: Any, pdf: Any, *, column: str | None = None, max_partitions: int = 4,
                 sources: Sequence[str] = (), title: str | None = None) -> Report:
    """The HTML report of ``query`` over the pandas DataFrame ``pdf``."""
    import pandas as pd

    partition = list(query.plan.partition_names(pdf.columns))
    order = next(iter(query.plan.order_names(pdf.columns)), None)
    output = query.run(pdf)
    if order is None:  # PROCTIME() or no ORDER BY column: rows are placed by their position in the input
        pdf = pdf.assign(__row=range(len(pdf)))
    labelled = labelled_query(query).run(pdf)  # ALL ROWS PER MATCH keeps every input column, __row too
    labelled["__partition"] = (
        [partition_label(tuple(r), partition) for r in labelled[partition].itertuples(index=False, name=None)]
        if len(labelled) else []
    )
    summary = match_summary(labelled, partition, order)
    partitions = pdf.groupby(partition, sort=False, dropna=False) if partition else [((), pdf)]
    partition_rows = {partition_label(k if isinstance(k, tuple) else (k,), partition): g for k, g in partitions}
    counts = summary["partition"].value_counts() if len(summary) else pd.Series(dtype=int)
    chosen_column = chart_column(query, pdf, column, skip=list(partition) + ([order] if order else []))

    name = title or query.filename or query.name or "query"
    facts = [
        ("input", ", ".join(sources) or "(data frame)"),
        ("input rows", f"{len(pdf)}"),
        ("partitions", f"{len(partition_rows)}" + (f" (by {', '.join(partition)})" if partition else "")),
        ("rows the query returns", f"{len(output)}"),
        ("matches (non-empty, before the outer WHERE/LIMIT)", f"{len(summary)}"),
        ("rows in matches", f"{int(summary['rows'].sum()) if len(summary) else 0}"),
        ("partitions with a match", f"{len(counts)}"),
    ]
    if order and len(pdf):
            facts.append((f"{order} range", f"{cell(pdf[order].min())} to {cell(pdf[order].max())}"))
    for col in output.columns:
        values = set(output[col].dropna().astype(str)) if output[col].dtype == object else set()
        if values and values <= STATUSES:
            for status, count in output[col].value_counts().items():
                facts.append((f"{col} = {status}", str(count)))

    parts = [f"<h1>cep report: {html.escape(str(name))}</h1>",
             f'<p class="note">made {html.escape(datetime.now().strftime("%Y-%m-%d %H:%M"))} by cep report</p>',
             "<h2>Query</h2>", f"<pre>{html.escape(query.text.strip())}</pre>",
             "<h2>Summary</h2>", _table(pd.DataFrame(facts, columns=["what", "value"]))]

    parts.append("<h2>Matches</h2>")
    if len(summary):
        parts.append(_img(chart_per_partition(counts), "matches per partition"))
        charts = []
        if order:
            charts.append(_img(chart_over_time(summary["first"], order), "matches over time"))
        charts.append(_img(chart_histogram(summary["rows"], "Match length", "rows per match", integer=True), "match length histogram"))
        if order:
            values, unit = durations(summary)
            charts.append(_img(chart_histogram(values, "Match duration", f"last - first {order} ({unit})"), "match duration histogram"))
        parts.append('<div class="grid">' + "".join(charts) + "</div>")
    else:
        parts.append("<p>No matches. <code>cep trace</code> shows, row by row, why a partition did not match.</p>")

    parts.append("<h2>Partitions</h2>")
    if chosen_column is None:
        parts.append('<p class="note">No column to chart: name one with --column.</p>')
    else:
        ranked = list(counts.index) + [k for k in partition_rows if k not in counts.index]
        labels = sorted(set(labelled[LABEL_COLUMN].astype(str))) if len(labelled) else []
        colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}
        shown = ranked[:max_partitions]
        parts.append(f'<p class="note">{html.escape(chosen_column)} per partition, the {len(shown)} with the most '
                     "matches; shaded: a match (numbered by MATCH_NUMBER()); dots: its rows, coloured by CLASSIFIER().</p>")
        for key in shown:
            rows = partition_rows[key]
            rows = rows.sort_values(order, kind="mergesort") if order else rows
            matched = labelled[labelled["__partition"] == key]
            title_text = f"{key}: {int(counts.get(key, 0))} matches"
            parts.append(_img(chart_partition(rows, matched, chosen_column, order, title_text, colours), f"{chosen_column} for {key}"))

    parts.append("<h2>Output</h2>")
    if len(output):
        shown_rows = output.head(OUTPUT_ROWS_SHOWN)
        parts.append(_table(shown_rows))
        if len(output) > OUTPUT_ROWS_SHOWN:
            parts.append(f'<p class="note">the first {OUTPUT_ROWS_SHOWN} of {len(output)} rows</p>')
    else:
        parts.append("<p>(no rows)</p>")

    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>cep report: {html.escape(str(name))}</title><style>{_STYLE}</style>"
            f"<script>{_SCRIPT}</script></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n")
    line = f"{len(pdf)} rows, {len(partition_rows)} partitions, {len(summary)} matches, {len(output)} output rows"
    return Report(page, line)
