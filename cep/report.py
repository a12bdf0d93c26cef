"""``cep report``: one self-contained HTML page an analyst keeps open while working on a query.

The page: the query; summary counts; matches per partition, over time, match length and duration (histogram
bins with their edges); a match explorer (the table of matches; a click on a row zooms the partition's
chart to that match, and a click on a matched row in a chart selects its match in the table); for the
partitions with the most matches, a chart of one column with each match shaded and every matched row
coloured by CLASSIFIER(), and under it "why not here": the trace of the rows the chart shows (zoom or pan
to choose the time range); the attempts that were dropped, counted by reason, with how long they had run
against the WITHIN limit; and the first output rows.

Charts are Plotly figures (zoom, pan, hover with the row's values), drawn by plotly.js, which is embedded
once in the page from the ``plotly`` package: the file opens anywhere with no network. The figures are
plain Plotly JSON built here; the few lines of script in ``_GLUE`` only connect the table, the charts and
the trace. Every value from the data reaches the page escaped (HTML, and Plotly's own text markup).

Where the labels come from: the query is compiled a second time with ALL ROWS PER MATCH and two
measures, MATCH_NUMBER() and CLASSIFIER() (``labelled_query``), so every matched row comes back with its
match and variable. That derived query drops the outer WHERE, ORDER BY and LIMIT: the charts show every
non-empty match; the summary also counts the rows the query itself returns.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.matcher.vector.arrays import groupers
from cep.query import Query
from cep.report_charts import (  # noqa: F401 - histogram_bins, label and plain are part of the report's surface
    LABEL_COLUMN,
    MATCH_COLUMN,
    PALETTE,
    UNIT_SECONDS,
    chart_dropped,
    chart_histogram,
    chart_partition,
    chart_per_partition,
    daily,
    histogram_bins,
    is_numeric,
    is_time,
    label,
    plain,
)
from cep.table_text import cell

# Imported inside functions: plotly (optional: the "report" extra; only its plotly.js bundle is used) and
# pandas (heavy).

STATUSES = {"MATCHED", "TIMEOUT", "ABSENCE"}
OUTPUT_ROWS_SHOWN = 100
MATCH_ROWS_SHOWN = 500  # rows of the match explorer's table
TRACE_RECORDS_KEPT = 20_000  # per charted partition: the "why not here" records embedded in the page


class ReportError(Exception):
    """The report cannot be made as asked (e.g. ``--column`` names no column)."""


@dataclass
class Report:
    text: str  # the HTML page
    summary: str  # one line for the terminal
    assets: dict[str, str] = field(default_factory=dict)  # files to write beside the page (--plotly file)


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
        where=None,
        order_by=(),
        limit=None,
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
    for _, group in labelled.groupby(groupers(labelled, keys), sort=False, dropna=False):
        key = tuple(group[keys].iloc[0])
        position = group[order] if order else group["__row"]
        records.append(
            {
                "partition": partition_label(key[:-1], partition),
                "match": key[-1],
                "first": position.iloc[0],
                "last": position.iloc[-1],
                "rows": len(group),
                "labels": " ".join(group[LABEL_COLUMN].astype(str)),
            }
        )
    return pd.DataFrame.from_records(records)


def durations(summary: Any) -> tuple[Any, str]:
    """Match durations (last - first ORDER BY value) in the data's own unit (``duration_unit``)."""
    span = summary["last"] - summary["first"]
    if hasattr(span, "dt"):
        seconds = span.dt.total_seconds()
        unit = duration_unit(seconds.tolist())
        return seconds / UNIT_SECONDS[unit], unit
    return span.astype(float), "ORDER BY units"


def duration_unit(seconds: Sequence[float]) -> str:
    """The unit to show durations in: the largest that the median reaches, or that every duration is a
    whole number of (a match of daily rows lasts whole days)."""
    median = float(np.median(seconds)) if len(seconds) else 0.0
    for unit, size in UNIT_SECONDS.items():
        if median >= size or (median > 0 and all(s % size == 0 for s in seconds)):
            return unit
    return "seconds"


def day_or_time(value: Any, column: Any) -> str:
    """``value`` as text: a date alone when every time of ``column`` is a midnight (daily data), else ``cell``."""
    return cell(value)[:10] if value is not None and value == value and daily(column) else cell(value)


# ---------------------------------------------------------------------------------- why not here


def _reason(detail: str) -> str:
    """A dropped attempt's reason, without the condition's text: 'B: condition false', 'WITHIN expired'..."""
    where, _, why = detail.partition(": ")
    if detail.endswith(("was false", "was NULL (counts as false)")):
        return f"{where}: condition false" + (" (NULL)" if "NULL" in detail else "")
    return why or detail


def partition_trace(query: Any, rows: Any, order: str | None, show: Sequence[str]) -> list[dict]:
    """The dropped and match records of one partition (rows in ORDER BY order), for "why not here"."""
    trace = query.trace(rows)
    trace = trace[trace["event"].isin(["dropped", "match"])].head(TRACE_RECORDS_KEPT)
    x = rows[order].tolist() if order else list(range(len(rows)))
    by_day = bool(order) and daily(rows[order])
    values = rows[list(show)].itertuples(index=False, name=None) if show else iter(())
    dated = [daily(rows[c]) for c in show]
    shown = (
        [[cell(v)[:10] if day and v == v else cell(v) for v, day in zip(record, dated)] for record in values]
        if show
        else [[] for _ in range(len(rows))]
    )
    records = []
    for row, event, start, detail in trace[["row", "event", "match_start", "detail"]].itertuples(
        index=False, name=None
    ):
        if not 0 <= row < len(x):
            continue
        begun = x[int(start)] if start is not None and 0 <= int(start) < len(x) else None
        elapsed = x[row] - begun if begun is not None and order else None
        records.append(
            {
                "x": plain(x[row]),
                "label": cell(x[row])[:10] if by_day else cell(x[row]),
                "row": int(row),
                "event": event,
                "start": None if start is None else int(start),
                "detail": detail,
                "reason": _reason(detail) if event == "dropped" else "match",
                "elapsed": plain(elapsed) if elapsed is not None else None,
                "values": shown[row],
            }
        )
    return records


def dropped_by_reason(traces: Sequence[list[dict]], within: timedelta | None) -> list[dict]:
    """Per reason: attempts dropped, and how long they had run (last row - first row) against WITHIN."""
    groups: dict[str, list] = {}
    for records in traces:
        for record in records:
            if record["event"] == "dropped":
                groups.setdefault(record["reason"], []).append(record["elapsed"])
    out = []
    for reason, elapsed in sorted(groups.items(), key=lambda item: -len(item[1])):
        numbers = [e for e in elapsed if isinstance(e, (int, float))]
        entry = {"reason": reason, "count": len(elapsed), "elapsed": numbers}
        if numbers:
            entry["median"], entry["max"] = float(np.median(numbers)), float(max(numbers))
            if within is not None:
                entry["share"] = entry["median"] / within.total_seconds()
        out.append(entry)
    return out


# ---------------------------------------------------------------------------------------------- page


def chart_column(query: Any, pdf: Any, wanted: str | None, skip: Sequence[str]) -> str | None:
    """The column to chart: ``wanted``, else the first numeric column a DEFINE reads, else any numeric
    one, else the first text column a DEFINE reads (drawn as lanes of events)."""
    if wanted is not None:
        found = ColumnNames(pdf.columns).find_name(wanted)
        if found is None:
            raise ReportError(f"--column {wanted}: no such column (columns: {', '.join(map(str, pdf.columns))})")
        return found
    read = query.plan.condition_columns(pdf.columns)
    candidates = [c for c in pdf.columns if c not in skip and is_numeric(pdf, c)]
    preferred = [c for c in candidates if c in read]
    events = [c for c in pdf.columns if c not in skip and not is_numeric(pdf, c) and c in read]
    return (preferred or candidates or events or [None])[0]


def _table(pdf: Any, *, table_id: str | None = None, row_attrs: Sequence[str] | None = None) -> str:
    """An HTML table; the times of a column of midnights (daily data) as dates, without 00:00:00."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in pdf.columns)
    by_day = [daily(pdf.iloc[:, i]) for i in range(pdf.shape[1])]
    body = "".join(
        f"<tr{row_attrs[i] if row_attrs else ''}>"
        + "".join(
            f"<td>{html.escape(cell(v)[:10] if day and v == v and v is not None else cell(v))}</td>"
            for v, day in zip(row, by_day)
        )
        + "</tr>"
        for i, row in enumerate(pdf.itertuples(index=False, name=None))
    )
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _json(value: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' that HTML could read."""
    text = json.dumps(value, default=plain, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _duration_text(seconds: float | None, time_axis: bool, unit: str = "seconds") -> str:
    """A duration as text: in days where the data is daily (``unit``: ``duration_unit``), no 00:00:00."""
    if seconds is None:
        return ""
    if not time_axis:
        return f"{seconds:g}"
    if unit == "days" and seconds % UNIT_SECONDS["days"] == 0:
        days = int(seconds // UNIT_SECONDS["days"])
        return f"{days} day" if days == 1 else f"{days} days"
    return cell(timedelta(seconds=seconds))


_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
pre { background: #f6f8fa; padding: 1em; overflow-x: auto; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
th { background: #f0f0f0; position: sticky; top: 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 1em; }
.note { color: #666; font-size: 0.9em; } .chart { min-height: 220px; }
.scroll { max-height: 22em; overflow-y: auto; border: 1px solid #eee; }
#matches tbody tr { cursor: pointer; } #matches tbody tr:hover { background: #fdf6d8; }
#matches tbody tr.selected { background: #f9e79f; }
.why { margin: 0.2em 0 2em 0; } .why table { width: 100%; }
.missing-plotly { background: #fdecea; border: 1px solid #e6a5a0; padding: 0.6em 1em; }
"""

# Glue between the page and plotly.js: draw the figures, zoom to a match from the table, select a match
# from a chart, and list the trace records of the range a partition chart shows. Nothing else.
_GLUE = """
(function () {
  var D = JSON.parse(document.getElementById('cep-data').textContent);
  if (typeof Plotly === 'undefined') {  // --plotly cdn offline, or file without its plotly-*.min.js
    var missing = document.createElement('p');
    missing.className = 'missing-plotly';
    missing.textContent = 'The charts need plotly.js, which this page could not load (' +
      document.querySelector('script[src]').getAttribute('src') + '): keep that file beside the page, open it ' +
      'online, or make the report with --plotly embed (the default), which opens anywhere.';
    document.querySelector('h1').after(missing);
    document.body.setAttribute('data-charts-drawn', '0');
    return;
  }
  var config = {responsive: true, displaylogo: false};
  function num(v) { return typeof v === 'number' ? v : Date.parse(String(v).replace(' ', 'T') + 'Z'); }
  function draw(id, fig) { return Plotly.newPlot(id, fig.data, fig.layout, config); }
  D.charts.forEach(function (c) { draw(c.id, c.figure); });
  var rows = document.querySelectorAll('#matches tbody tr');
  function select(i, scroll) {
    var m = D.matches[i], p = D.partitions[m.partition];
    rows.forEach(function (r) { r.classList.toggle('selected', +r.dataset.match === i); });
    if (scroll && rows[i]) rows[i].scrollIntoView({block: 'nearest'});
    var layout = JSON.parse(JSON.stringify(p.figure.layout));
    layout.xaxis.range = [m.from, m.to]; layout.xaxis.autorange = false;
    layout.title.text = p.title + ': match #' + m.number;
    var zoom = document.getElementById('zoom');
    zoom.dataset.match = String(i);
    Plotly.react(zoom, p.figure.data, layout, config);
  }
  rows.forEach(function (r) { r.addEventListener('click', function () { select(+r.dataset.match, false); }); });
  function why(p, box, lo, hi) {
    var kept = p.trace.filter(function (t) {
      var x = num(t.x); return (lo === null || x >= lo) && (hi === null || x <= hi);
    });
    var head = '<tr><th>' + [D.order, 'row', 'event', 'started at row', 'why'].concat(D.shown).map(esc)
      .join('</th><th>') + '</th></tr>';
    var body = kept.slice(0, 300).map(function (t) {
      return '<tr><td>' + [t.label, t.row, t.event, t.start, t.detail].concat(t.values).map(esc)
        .join('</td><td>') + '</td></tr>';
    }).join('');
    box.dataset.range = lo === null ? 'all' : String(lo) + ',' + String(hi);
    box.innerHTML = '<p class="note">' + kept.length + ' dropped attempts and matches in this range' +
      (kept.length > 300 ? ' (the first 300 shown)' : '') + '</p><div class="scroll"><table><thead>' + head +
      '</thead><tbody>' + body + '</tbody></table></div>';
  }
  function esc(v) { return String(v === null || v === undefined ? '' : v).replace(/[&<>"]/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }
  D.partitions.forEach(function (p) {
    var div = document.getElementById(p.id), box = document.getElementById(p.id + '-why');
    draw(p.id, p.figure).then(function () {
      div.on('plotly_click', function (e) {
        var cd = e.points[0] && e.points[0].customdata;
        if (cd && cd[0] !== null && cd[0] !== undefined) {
          var i = D.matches.findIndex(function (m) { return m.partition === p.index && m.number === cd[0]; });
          if (i >= 0) select(i, true);
        }
      });
      div.on('plotly_relayout', function (e) {
        if (e['xaxis.autorange']) { why(p, box, null, null); return; }
        var range = e['xaxis.range'] ||
          (e['xaxis.range[0]'] !== undefined ? [e['xaxis.range[0]'], e['xaxis.range[1]']] : null);
        if (range) why(p, box, num(range[0]), num(range[1]));
      });
    });
    why(p, box, null, null);
  });
  if (D.matches.length) select(0, false);
  document.body.setAttribute('data-charts-drawn', String(document.querySelectorAll('.js-plotly-plot').length));
})();
"""


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:
        raise ImportError(f"cep report draws its charts with plotly ({exc})") from None
    return get_plotlyjs()


PLOTLY_MODES = ("embed", "file", "cdn")


@dataclass(frozen=True)
class _Analysis:
    """What the page shows, computed once: the query's output, every matched row with its match and label
    (``labelled``), one row per match (``summary``), the partitions and the column to chart."""

    query: Any
    pdf: Any  # the input; a DATE ORDER BY column as datetime64 (charts need one time axis)
    output: Any
    labelled: Any
    summary: Any
    partition: list
    order: str | None
    partition_rows: dict
    counts: Any
    column: str | None
    time_axis: bool
    within: timedelta | None


def _analyse(query: Any, pdf: Any, column: str | None) -> _Analysis:
    import pandas as pd

    partition = list(query.plan.partition_names(pdf.columns))
    order = next(iter(query.plan.order_names(pdf.columns)), None)
    output = query.run(pdf)
    if order is None:  # PROCTIME() or no ORDER BY column: rows are placed by their position in the input
        pdf = pdf.assign(__row=range(len(pdf)))
    labelled = labelled_query(query).run(pdf)  # ALL ROWS PER MATCH keeps every input column, __row too
    if order is not None and _holds_dates(pdf[order]):
        pdf = pdf.assign(**{order: _midnights(pdf[order])})
        labelled = labelled.assign(**{order: _midnights(labelled[order])})
    keys = labelled[partition].itertuples(index=False, name=None) if partition else [() for _ in range(len(labelled))]
    labelled["__partition"] = [partition_label(tuple(key), partition) for key in keys]
    summary = match_summary(labelled, partition, order)
    if partition:
        groups = pdf.groupby(groupers(pdf, partition), sort=False, dropna=False)
        partition_rows = {partition_label(tuple(g[partition].iloc[0]), partition): g for _, g in groups}
    else:
        partition_rows = {partition_label((), partition): pdf}
    within = query.statement.match.within
    return _Analysis(
        query,
        pdf,
        output,
        labelled,
        summary,
        partition,
        order,
        partition_rows,
        summary["partition"].value_counts() if len(summary) else pd.Series(dtype=int),
        chart_column(query, pdf, column, skip=list(partition) + ([order] if order else [])),
        bool(order and is_time(pdf[order])),
        interval_to_timedelta(within) if within is not None else None,
    )


def _holds_dates(values: Any) -> bool:
    present = values.dropna()
    return values.dtype == object and len(present) > 0 and all(isinstance(v, date) for v in present)


def _midnights(values: Any) -> Any:
    import pandas as pd

    return pd.to_datetime(values)


def _summary_section(a: _Analysis, sources: Sequence[str]) -> list[str]:
    import pandas as pd

    pdf, summary, order = a.pdf, a.summary, a.order
    facts = [
        ("input", ", ".join(sources) or "(data frame)"),
        ("input rows", f"{len(pdf)}"),
        ("partitions", f"{len(a.partition_rows)}" + (f" (by {', '.join(a.partition)})" if a.partition else "")),
        ("rows the query returns", f"{len(a.output)}"),
        ("matches (non-empty, before the outer WHERE/LIMIT)", f"{len(summary)}"),
        ("rows in matches", f"{int(summary['rows'].sum()) if len(summary) else 0}"),
        ("partitions with a match", f"{len(a.counts)}"),
    ]
    if order and len(pdf):
        low, high = (day_or_time(v, pdf[order]) for v in (pdf[order].min(), pdf[order].max()))
        facts.append((f"{order} range", f"{low} to {high}"))
    if a.within is not None:
        facts.append(("WITHIN", cell(a.within)))
    for col in a.output.columns:
        values = set(a.output[col].dropna().astype(str)) if a.output[col].dtype == object else set()
        if values and values <= STATUSES:
            for status, count in a.output[col].value_counts().items():
                facts.append((f"{col} = {status}", str(count)))
    return ["<h2>Summary</h2>", _table(pd.DataFrame(facts, columns=["what", "value"]))]


def _matches_section(a: _Analysis) -> tuple[list[str], list[dict]]:
    summary, order = a.summary, a.order
    if not len(summary):
        return [
            "<h2>Matches</h2>",
            "<p>No matches. The partitions below show, under each chart, why attempts were "
            "dropped (<code>cep trace</code> gives the same row by row).</p>",
        ], []
    figures = [("per-partition", chart_per_partition(a.counts))]
    if order:
        figures.append(
            (
                "over-time",
                chart_histogram(
                    summary["first"],
                    "Matches over time",
                    f"match start ({order})",
                    color=PALETTE[0],
                    time_axis=a.time_axis,
                ),
            )
        )
    figures.append(("length", chart_histogram(summary["rows"], "Match length", "rows per match", integer=True)))
    if order:
        values, unit = durations(summary)
        whole = bool(len(values)) and bool((values == values.round()).all())
        figures.append(
            ("duration", chart_histogram(values, "Match duration", f"last - first {order} ({unit})", integer=whole))
        )
    cells = "".join(f'<div class="chart" id="chart-{key}"></div>' for key, _ in figures)
    charts = [{"id": f"chart-{key}", "figure": figure} for key, figure in figures]
    return ["<h2>Matches</h2>", f'<div class="grid">{cells}</div>'], charts


def _charted_partitions(a: _Analysis, max_partitions: int, show: list) -> list[dict]:
    """The partitions with the most matches (at most ``max_partitions``): each one's chart and trace."""
    if a.column is None:
        return []
    order, labelled = a.order, a.labelled
    ranked = list(a.counts.index) + [k for k in a.partition_rows if k not in a.counts.index]
    labels = sorted(set(labelled[LABEL_COLUMN].astype(str))) if len(labelled) else []
    colours = {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(labels)}
    charted = []
    for index, key in enumerate(ranked[:max_partitions]):
        rows = a.partition_rows[key]
        rows = rows.sort_values(order, kind="mergesort") if order else rows
        found = int(a.counts.get(key, 0))
        title_text = f"{key}: {found} match{'' if found == 1 else 'es'}"
        figure = chart_partition(
            rows,
            labelled[labelled["__partition"] == key],
            a.column,
            order,
            label(title_text),
            colours,
            [c for c in [order, *a.partition, *show, a.column] if c],
        )
        charted.append(
            {
                "id": f"partition-{index}",
                "index": index,
                "key": key,
                "title": label(key),
                "figure": figure,
                "trace": partition_trace(a.query, rows, order, show),
            }
        )
    return charted


def _explorer_section(a: _Analysis, charted: list[dict]) -> tuple[list[str], list[dict]]:
    """The match explorer: the table of the charted partitions' matches, and each match's zoom range."""
    summary, order = a.summary, a.order
    matches = []
    axis = {p["key"]: p["figure"]["data"][0]["x"] for p in charted}  # each charted partition's x values
    for record in summary.head(MATCH_ROWS_SHOWN).itertuples(index=False):
        owner = next((p for p in charted if p["key"] == record.partition), None)
        matches.append(
            {
                "partition": owner["index"] if owner else None,
                "number": int(record.match),
                **_zoom_range(record.first, record.last, axis.get(record.partition, [])),
            }
        )
    explorable = [i for i, m in enumerate(matches) if m["partition"] is not None]
    if not explorable:
        return ["<h2>Match explorer</h2>", '<p class="note">No match in the charted partitions.</p>'], matches
    parts = [
        "<h2>Match explorer</h2>",
        '<p class="note">Click a match to see its partition\'s chart around it; click a coloured point '
        "in a partition chart below to find its match here.</p>",
        '<div class="chart" id="zoom"></div>',
    ]
    table = summary.head(MATCH_ROWS_SHOWN).iloc[explorable].copy()
    table.insert(0, "#", [i + 1 for i in explorable])
    if order:
        values, unit = durations(table)
        table["duration"] = [
            _duration_text(v * UNIT_SECONDS.get(unit, 1), a.time_axis, unit) if unit != "ORDER BY units" else f"{v:g}"
            for v in values
        ]
    attrs = [f' data-match="{i}"' for i in explorable]
    parts.append('<div class="scroll">' + _table(table, table_id="matches", row_attrs=attrs) + "</div>")
    if len(summary) > len(table):
        parts.append(
            f'<p class="note">{len(table)} of {len(summary)} matches: those of the charted partitions '
            f"(--partitions), at most {MATCH_ROWS_SHOWN}</p>"
        )
    return parts, matches


def _partitions_section(a: _Analysis, charted: list[dict]) -> list[str]:
    if a.column is None:
        return ["<h2>Partitions</h2>", '<p class="note">No column to chart: name one with --column.</p>']
    parts = [
        "<h2>Partitions</h2>",
        f'<p class="note">{html.escape(a.column)} per partition, the {len(charted)} with the most '
        "matches; shaded: a match (numbered by MATCH_NUMBER()); dots: its rows, coloured by CLASSIFIER(). "
        "Under each chart, <strong>why not here</strong>: the attempts dropped (and why) and the matches "
        "in the range the chart shows; zoom or pan to choose the range.</p>",
    ]
    parts += [f'<div class="chart" id="{p["id"]}"></div><div class="why" id="{p["id"]}-why"></div>' for p in charted]
    return parts


def _dropped_section(a: _Analysis, charted: list[dict]) -> tuple[list[str], list[dict]]:
    import pandas as pd

    reasons = dropped_by_reason([p["trace"] for p in charted], a.within)
    unit = duration_unit([e for r in reasons for e in r["elapsed"]]) if a.time_axis else "ORDER BY units"
    if not reasons:
        return [
            "<h2>Dropped attempts</h2>",
            '<p class="note">No attempt was dropped in the charted partitions.</p>',
        ], []
    rows_table = pd.DataFrame(
        [
            {
                "reason": r["reason"],
                "attempts": r["count"],
                "median run": _duration_text(r.get("median"), a.time_axis, unit),
                "longest run": _duration_text(r.get("max"), a.time_axis, unit),
                **({"median / WITHIN": f"{r['share']:.0%}" if "share" in r else ""} if a.within is not None else {}),
            }
            for r in reasons
        ]
    )
    parts = [
        "<h2>Dropped attempts</h2>",
        f'<p class="note">In the {len(charted)} charted partitions: every partial match that '
        "ended without a match, by reason, and how long it had run (its last row minus its first)"
        + (f" against the WITHIN limit of {html.escape(cell(a.within))}" if a.within else "")
        + ".</p>",
        _table(rows_table),
    ]
    if not any(r["elapsed"] for r in reasons):
        return parts, []
    parts.append('<div class="chart" id="chart-dropped"></div>')
    return parts, [{"id": "chart-dropped", "figure": chart_dropped(reasons, a.within, unit)}]


def _output_section(output: Any) -> list[str]:
    if not len(output):
        return ["<h2>Output</h2>", "<p>(no rows)</p>"]
    parts = ["<h2>Output</h2>", _table(output.head(OUTPUT_ROWS_SHOWN))]
    if len(output) > OUTPUT_ROWS_SHOWN:
        parts.append(f'<p class="note">the first {OUTPUT_ROWS_SHOWN} of {len(output)} rows</p>')
    return parts


def plotly_script(mode: str) -> tuple[str, dict[str, str]]:
    """The page's ``<script>`` for plotly.js and the files to write beside the page: ``embed`` (the default:
    the whole library inside the page, which then opens anywhere, offline), ``file`` (a small page and
    plotly-VERSION.min.js next to it, shared by the reports of a folder) or ``cdn`` (a small page that
    fetches the library from cdn.plot.ly when opened: online only, and only when the user asks)."""
    if mode not in PLOTLY_MODES:
        raise ReportError(f"--plotly {mode}: one of {', '.join(PLOTLY_MODES)}")
    library = _plotly_js()
    if mode == "embed":
        return f"<script>{library}</script>", {}
    from plotly import __version__ as version

    name = f"plotly-{version}.min.js"
    if mode == "file":
        return f'<script src="{name}"></script>', {name: library}
    return f'<script src="https://cdn.plot.ly/{name}" charset="utf-8"></script>', {}


def build_report(
    query: Any,
    pdf: Any,
    *,
    column: str | None = None,
    max_partitions: int = 4,
    sources: Sequence[str] = (),
    title: str | None = None,
    plotly: str = "embed",
) -> Report:
    """The HTML report of ``query`` over the pandas DataFrame ``pdf``; ``plotly``: how the page gets
    plotly.js (``plotly_script``)."""
    script, assets = plotly_script(plotly)
    a = _analyse(query, pdf, column)
    name = title or query.filename or query.name or "query"
    show = [c for c in query.plan.condition_columns(a.pdf.columns) if c != a.order]
    charted = _charted_partitions(a, max_partitions, show)
    matches_parts, charts = _matches_section(a)
    explorer_parts, matches = _explorer_section(a, charted)
    dropped_parts, dropped_charts = _dropped_section(a, charted)
    parts = [
        f"<h1>cep report: {html.escape(str(name))}</h1>",
        f'<p class="note">made {html.escape(datetime.now().strftime("%Y-%m-%d %H:%M"))} by cep report; '
        "charts: drag to zoom, double-click to reset, hover for values</p>",
        "<h2>Query</h2>",
        f"<pre>{html.escape(query.text.strip())}</pre>",
        *_summary_section(a, sources),
        *matches_parts,
        *explorer_parts,
        *_partitions_section(a, charted),
        *dropped_parts,
        *_output_section(a.output),
    ]
    data = {
        "charts": charts + dropped_charts,
        "partitions": charted,
        "matches": matches,
        "order": a.order or "row",
        "shown": [str(c) for c in show],
    }
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>cep report: {html.escape(str(name))}</title><style>{_STYLE}</style>"
        f"{script}</head>\n<body>\n"
        + "\n".join(parts)
        + f'\n<script type="application/json" id="cep-data">{_json(data)}</script>'
        + f"\n<script>{_GLUE}</script>\n</body></html>\n"
    )
    line = (
        f"{len(a.pdf)} rows, {len(a.partition_rows)} partitions, {len(a.summary)} matches, {len(a.output)} output rows"
    )
    return Report(page, line, assets)


def _zoom_range(first: Any, last: Any, xs: list) -> dict:
    """The x range around one match: the match, and half its length (at least two typical gaps between
    rows) on each side."""
    import pandas as pd

    low, high = (
        pd.Timestamp(first) if isinstance(plain(first), str) else first,
        pd.Timestamp(last) if isinstance(plain(last), str) else last,
    )
    values = sorted(pd.Timestamp(x) if isinstance(x, str) else x for x in xs if x is not None)
    gaps = sorted(b - a for a, b in zip(values, values[1:]) if b != a)
    typical = gaps[len(gaps) // 2] if gaps else None
    pad = (high - low) / 2
    if typical is not None and pad < typical * 2:
        pad = typical * 2
    try:
        return {"from": plain(low - pad), "to": plain(high + pad)}
    except TypeError:
        return {"from": plain(first), "to": plain(last)}
