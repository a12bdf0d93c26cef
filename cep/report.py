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
import math
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any, Sequence

import numpy as np

from cep.cli_io import cell
from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.matcher.sql.intervals import interval_to_timedelta
from cep.query import Query

# Imported inside functions: plotly (optional: the "report" extra; only its plotly.js bundle is used) and
# pandas (heavy).

MATCH_COLUMN = "__cep_match"
LABEL_COLUMN = "__cep_label"
STATUSES = {"MATCHED", "TIMEOUT", "ABSENCE"}
OUTPUT_ROWS_SHOWN = 100
MATCH_ROWS_SHOWN = 500  # rows of the match explorer's table
TRACE_RECORDS_KEPT = 20_000  # per charted partition: the "why not here" records embedded in the page
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


class ReportError(Exception):
    """The report cannot be made as asked (e.g. ``--column`` names no column)."""


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


# ---------------------------------------------------------------------------------- values for the page


def label(value: Any) -> str:
    """Text from the data for a Plotly label: HTML-escaped (Plotly reads tags and entities in labels) and
    never read as LaTeX (Plotly typesets text between '$' signs)."""
    text = html.escape(value if isinstance(value, str) else cell(value), quote=False)
    return "\u200b" + text if text.startswith("$") else text


def plain(value: Any) -> Any:
    """A JSON value for a Plotly axis: numbers as numbers, times as 'YYYY-MM-DD HH:MM:SS.ffffff'."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat(" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float, str, bool)):
        return value
    return cell(value)


def _is_time(values: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_datetime64_any_dtype(values))


def _numeric(pdf: Any, name: str) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(pdf[name]) and not pd.api.types.is_bool_dtype(pdf[name]))


def _layout(title: str, xtitle: str, ytitle: str, *, height: int = 320, **extra: Any) -> dict:
    layout = {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}}, "height": height,
        "margin": {"l": 60, "r": 20, "t": 44, "b": 50}, "template": "plotly_white",
        "xaxis": {"title": {"text": xtitle}, "automargin": True}, "yaxis": {"title": {"text": ytitle}, "automargin": True},
        "hoverlabel": {"align": "left"}, "showlegend": False, "plot_bgcolor": "#ffffff",
    }
    layout.update(extra)
    return layout


# --------------------------------------------------------------------------------------------- charts


def chart_per_partition(counts: Any) -> dict:
    top = counts.head(20).iloc[::-1]
    bars = {"type": "bar", "orientation": "h", "x": [int(v) for v in top.values], "y": [label(k) for k in top.index],
            "marker": {"color": PALETTE[0]}, "hovertemplate": "%{y}: %{x} matches<extra></extra>"}
    title = "Matches per partition" + (" (top 20)" if len(counts) > 20 else "")
    return {"data": [bars], "layout": _layout(title, "matches", "", height=max(220, 26 * len(top) + 90))}


def histogram_bins(values: Any, *, integer: bool) -> tuple[list[float], list[int]]:
    """Bin edges and counts: one bin per whole number when ``integer`` and few, else numpy's 'auto' bins."""
    data = np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))])
    if not len(data):
        return [], []
    low, high = float(data.min()), float(data.max())
    if integer and high - low <= 60:
        edges = [low - 0.5 + i for i in range(int(high - low) + 2)]
    elif low == high:
        edges = [low - 0.5, high + 0.5]
    else:
        edges = list(np.histogram_bin_edges(data, bins="auto"))[:41] if len(data) > 1 else [low, high]
    counts, edges = np.histogram(data, bins=edges)
    return [float(e) for e in edges], [int(c) for c in counts]


def chart_histogram(values: Any, title: str, xtitle: str, *, integer: bool = False, color: str = PALETTE[2],
                    time_axis: bool = False) -> dict:
    """Bars between bin edges; hover names each bin's edges and count; the axis ticks are the edges."""
    if time_axis:
        stamps = [v for v in values if v is not None]
        epoch = datetime(1970, 1, 1)
        seconds = [(v.to_pydatetime() if hasattr(v, "to_pydatetime") else v).replace(tzinfo=None) for v in stamps]
        edges, counts = histogram_bins([(s - epoch).total_seconds() for s in seconds], integer=False)
        to_axis = [plain(epoch + timedelta(seconds=e)) for e in edges]
        bars = {"type": "bar", "x": [plain(epoch + timedelta(seconds=(a + b) / 2)) for a, b in zip(edges, edges[1:])],
                "y": counts, "width": [(b - a) * 1000 for a, b in zip(edges, edges[1:])],
                "customdata": [[to_axis[i], to_axis[i + 1]] for i in range(len(counts))],
                "hovertemplate": "from %{customdata[0]}<br>to %{customdata[1]}<br>%{y} matches<extra></extra>",
                "marker": {"color": color, "line": {"color": "#ffffff", "width": 1}}}
        layout = _layout(title, xtitle, "matches")
        layout["xaxis"]["type"] = "date"
        return {"data": [bars], "layout": layout}
    edges, counts = histogram_bins(values, integer=integer)
    shown = [int(e + 0.5) if integer else e for e in edges]
    text = [f"{shown[i]:g} to {shown[i + 1]:g}" if not integer else f"{shown[i]:g}" for i in range(len(counts))]
    bars = {"type": "bar", "x": [(a + b) / 2 for a, b in zip(edges, edges[1:])], "y": counts,
            "width": [b - a for a, b in zip(edges, edges[1:])], "customdata": text,
            "hovertemplate": ("%{customdata}" if integer else "[%{customdata})") + ": %{y} matches<extra></extra>",
            "marker": {"color": color, "line": {"color": "#ffffff", "width": 1}}}
    layout = _layout(title, xtitle, "matches")
    if integer:
        layout["xaxis"].update(tickmode="array", tickvals=[(a + b) / 2 for a, b in zip(edges, edges[1:])],
                               ticktext=[f"{t}" for t in text])
    else:
        layout["xaxis"].update(tickmode="array", tickvals=edges, ticktext=[f"{e:.3g}" for e in edges])
    return {"data": [bars], "layout": layout}


def chart_partition(rows: Any, matched: Any, column: str, order: str | None, title: str,
                    colours: dict[str, str], show: Sequence[str]) -> dict:
    """``column`` along the ORDER BY axis for one partition: each match shaded, its rows coloured by label;
    hover shows the row's values. A matched point carries its match number (``customdata[0]``)."""
    x_name = order or "__row"
    hover_columns = [c for c in show if c in rows.columns][:8]

    def hover(frame) -> tuple[list, str]:
        data = [[None] + [label(v) for v in record] for record in frame[hover_columns].itertuples(index=False, name=None)]
        lines = "<br>".join(f"{label(c)}: %{{customdata[{i + 1}]}}" for i, c in enumerate(hover_columns))
        return data, lines

    numeric = _numeric(rows, column)
    lanes: dict[str, int] = {}
    if not numeric:
        lanes = {value: i for i, value in enumerate(sorted(set(rows[column].astype(str)) | set(matched[column].astype(str))))}

    def y_of(frame) -> list:
        return [plain(v) for v in frame[column]] if numeric else [lanes[str(v)] for v in frame[column]]

    data, lines = hover(rows)
    traces = [{"type": "scatter", "mode": "lines+markers" if numeric else "markers", "x": [plain(v) for v in rows[x_name]],
               "y": y_of(rows), "line": {"color": "#aaaaaa", "width": 1}, "marker": {"color": "#bbbbbb", "size": 5},
               "customdata": data, "hovertemplate": lines + "<extra>row</extra>", "name": "rows"}]
    shapes, notes = [], []
    for number, group in matched.groupby(MATCH_COLUMN, sort=False):
        gx = group[x_name]
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": plain(gx.iloc[0]), "x1": plain(gx.iloc[-1]),
                       "y0": 0, "y1": 1, "fillcolor": "#f4d03f", "opacity": 0.25, "line": {"width": 0}, "layer": "below"})
        notes.append({"x": plain(gx.iloc[0]), "y": 1.0, "xref": "x", "yref": "paper", "text": f"#{int(number)}",
                      "showarrow": False, "xanchor": "left", "yanchor": "bottom", "font": {"size": 10, "color": "#7d6608"}})
    for name, group in matched.groupby(LABEL_COLUMN, sort=False):
        data, lines = hover(group)
        for record, number in zip(data, group[MATCH_COLUMN]):
            record[0] = int(number)
        traces.append({"type": "scatter", "mode": "markers", "x": [plain(v) for v in group[x_name]], "y": y_of(group),
                       "marker": {"color": colours[str(name)], "size": 9}, "name": label(name), "customdata": data,
                       "hovertemplate": f"match #%{{customdata[0]}} as {label(name)}<br>" + lines + "<extra></extra>"})
    layout = _layout(title, label(order or "row"), label(column), height=360, shapes=shapes, annotations=notes, showlegend=True,
                     legend={"title": {"text": "CLASSIFIER()"}}, dragmode="zoom")
    if order and _is_time(rows[order]):
        layout["xaxis"]["type"] = "date"
    if not numeric:
        layout["yaxis"].update(tickmode="array", tickvals=list(lanes.values()), ticktext=[label(k) for k in lanes])
    return {"data": traces, "layout": layout}


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
    values = rows[list(show)].itertuples(index=False, name=None) if show else iter(())
    shown = [[cell(v) for v in record] for record in values] if show else [[] for _ in range(len(rows))]
    records = []
    for row, event, start, detail in trace[["row", "event", "match_start", "detail"]].itertuples(index=False, name=None):
        if not 0 <= row < len(x):
            continue
        begun = x[int(start)] if start is not None and 0 <= int(start) < len(x) else None
        elapsed = x[row] - begun if begun is not None and order else None
        records.append({"x": plain(x[row]), "row": int(row), "event": event, "start": None if start is None else int(start),
                        "detail": detail, "reason": _reason(detail) if event == "dropped" else "match",
                        "elapsed": plain(elapsed) if elapsed is not None else None, "values": shown[row]})
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


def chart_dropped(reasons: list[dict], within: timedelta | None, time_axis: bool) -> dict:
    unit = "seconds" if time_axis else "ORDER BY units"
    traces = [{"type": "box", "name": label(r["reason"]), "x": r["elapsed"], "orientation": "h", "boxpoints": "outliers",
               "marker": {"color": PALETTE[i % len(PALETTE)]}, "hoverinfo": "x"}
              for i, r in enumerate(reasons) if r["elapsed"]]
    shapes = []
    if within is not None:
        limit = within.total_seconds()
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": limit, "x1": limit, "y0": 0, "y1": 1,
                       "line": {"color": "#c0392b", "dash": "dash", "width": 2}})
    layout = _layout("How long dropped attempts had run" + (" (dashed: the WITHIN limit)" if within else ""),
                     f"last row - first row of the attempt ({unit})", "", height=max(240, 40 * len(traces) + 120),
                     shapes=shapes)
    return {"data": traces, "layout": layout}


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
    candidates = [c for c in pdf.columns if c not in skip and _numeric(pdf, c)]
    preferred = [c for c in candidates if c in read]
    events = [c for c in pdf.columns if c not in skip and not _numeric(pdf, c) and c in read]
    return (preferred or candidates or events or [None])[0]


def _table(pdf: Any, *, table_id: str | None = None, row_attrs: Sequence[str] | None = None) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in pdf.columns)
    body = "".join(
        f"<tr{row_attrs[i] if row_attrs else ''}>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row) + "</tr>"
        for i, row in enumerate(pdf.itertuples(index=False, name=None))
    )
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _json(value: Any) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' that HTML could read."""
    text = json.dumps(value, default=plain, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _duration_text(seconds: float | None, time_axis: bool) -> str:
    if seconds is None:
        return ""
    return cell(timedelta(seconds=seconds)) if time_axis else f"{seconds:g}"


_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
pre { background: #f6f8fa; padding: 1em; overflow-x: auto; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; } th { background: #f0f0f0; position: sticky; top: 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 1em; }
.note { color: #666; font-size: 0.9em; } .chart { min-height: 220px; }
.scroll { max-height: 22em; overflow-y: auto; border: 1px solid #eee; }
#matches tbody tr { cursor: pointer; } #matches tbody tr:hover { background: #fdf6d8; }
#matches tbody tr.selected { background: #f9e79f; }
.why { margin: 0.2em 0 2em 0; } .why table { width: 100%; }
"""

# Glue between the page and plotly.js: draw the figures, zoom to a match from the table, select a match
# from a chart, and list the trace records of the range a partition chart shows. Nothing else.
_GLUE = """
(function () {
  var D = JSON.parse(document.getElementById('cep-data').textContent);
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
    var kept = p.trace.filter(function (t) { var x = num(t.x); return (lo === null || x >= lo) && (hi === null || x <= hi); });
    var head = '<tr><th>' + [D.order, 'row', 'event', 'started at row', 'why'].concat(D.shown).map(esc).join('</th><th>') + '</th></tr>';
    var body = kept.slice(0, 300).map(function (t) {
      return '<tr><td>' + [t.x, t.row, t.event, t.start, t.detail].concat(t.values).map(esc).join('</td><td>') + '</td></tr>';
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
        var range = e['xaxis.range'] || (e['xaxis.range[0]'] !== undefined ? [e['xaxis.range[0]'], e['xaxis.range[1]']] : null);
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


def build_report(query: Any, pdf: Any, *, column: str | None = None, max_partitions: int = 4,
                 sources: Sequence[str] = (), title: str | None = None) -> Report:
    """The HTML report of ``query`` over the pandas DataFrame ``pdf``."""
    import pandas as pd

    plotly_js = _plotly_js()
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
    time_axis = bool(order and _is_time(pdf[order]))
    within = query.statement.match.within
    within_limit = interval_to_timedelta(within) if within is not None else None

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
    if within_limit is not None:
        facts.append(("WITHIN", cell(within_limit)))
    for col in output.columns:
        values = set(output[col].dropna().astype(str)) if output[col].dtype == object else set()
        if values and values <= STATUSES:
            for status, count in output[col].value_counts().items():
                facts.append((f"{col} = {status}", str(count)))

    charts: list[dict] = []
    parts = [f"<h1>cep report: {html.escape(str(name))}</h1>",
             f'<p class="note">made {html.escape(datetime.now().strftime("%Y-%m-%d %H:%M"))} by cep report; '
             "charts: drag to zoom, double-click to reset, hover for values</p>",
             "<h2>Query</h2>", f"<pre>{html.escape(query.text.strip())}</pre>",
             "<h2>Summary</h2>", _table(pd.DataFrame(facts, columns=["what", "value"]))]

    parts.append("<h2>Matches</h2>")
    if len(summary):
        figures = [("per-partition", chart_per_partition(counts))]
        if order:
            starts = summary["first"]
            figures.append(("over-time", chart_histogram(starts, "Matches over time", f"match start ({order})",
                                                         color=PALETTE[0], time_axis=time_axis)
                            if time_axis else chart_histogram(starts, "Matches over time", f"match start ({order})",
                                                              color=PALETTE[0])))
        figures.append(("length", chart_histogram(summary["rows"], "Match length", "rows per match", integer=True)))
        if order:
            values, unit = durations(summary)
            whole = bool(len(values)) and bool((values == values.round()).all())
            figures.append(("duration", chart_histogram(values, "Match duration", f"last - first {order} ({unit})",
                                                        integer=whole)))
        parts.append('<div class="grid">' + "".join(f'<div class="chart" id="chart-{key}"></div>' for key, _ in figures) + "</div>")
        charts += [{"id": f"chart-{key}", "figure": figure} for key, figure in figures]
    else:
        parts.append("<p>No matches. The partitions below show, under each chart, why attempts were dropped "
                     "(<code>cep trace</code> gives the same row by row).</p>")

    ranked = list(counts.index) + [k for k in partition_rows if k not in counts.index]
    shown_keys = ranked[:max_partitions]
    show = [c for c in query.plan.condition_columns(pdf.columns) if c != order]
    page_partitions, traces = [], []
    if chosen_column is not None:
        labels = sorted(set(labelled[LABEL_COLUMN].astype(str))) if len(labelled) else []
        colours = {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(labels)}
        for index, key in enumerate(shown_keys):
            rows = partition_rows[key]
            rows = rows.sort_values(order, kind="mergesort") if order else rows
            matched = labelled[labelled["__partition"] == key]
            found = int(counts.get(key, 0))
            title_text = f"{key}: {found} match{'' if found == 1 else 'es'}"
            figure = chart_partition(rows, matched, chosen_column, order,
                                     label(title_text), colours, [c for c in [order, *partition, *show, chosen_column] if c])
            trace = partition_trace(query, rows, order, show)
            traces.append(trace)
            page_partitions.append({"id": f"partition-{index}", "index": index, "key": key, "title": label(key),
                                    "figure": figure, "trace": trace})

    matches = []
    axis = {p["key"]: p["figure"]["data"][0]["x"] for p in page_partitions}  # each charted partition's x values
    for record in summary.head(MATCH_ROWS_SHOWN).itertuples(index=False):
        owner = next((p for p in page_partitions if p["key"] == record.partition), None)
        matches.append({"partition": owner["index"] if owner else None, "number": int(record.match),
                        **_zoom_range(record.first, record.last, axis.get(record.partition, []))})
    explorable = [i for i, m in enumerate(matches) if m["partition"] is not None]

    parts.append("<h2>Match explorer</h2>")
    if explorable:
        parts.append('<p class="note">Click a match to see its partition\'s chart around it; click a coloured point '
                     "in a partition chart below to find its match here.</p>")
        parts.append('<div class="chart" id="zoom"></div>')
        table = summary.head(MATCH_ROWS_SHOWN).iloc[explorable].copy()
        table.insert(0, "#", [i + 1 for i in explorable])
        if order:
            values, unit = durations(table)
            table["duration"] = [_duration_text(v * {"hours": 3600, "minutes": 60}.get(unit, 1), time_axis)
                                 if unit != "ORDER BY units" else f"{v:g}" for v in values]
        attrs = [f' data-match="{i}"' for i in explorable]
        parts.append('<div class="scroll">' + _table(table, table_id="matches", row_attrs=attrs) + "</div>")
        if len(summary) > len(table):
            parts.append(f'<p class="note">{len(table)} of {len(summary)} matches: those of the charted partitions '
                         f"(--partitions), at most {MATCH_ROWS_SHOWN}</p>")
    else:
        parts.append('<p class="note">No match in the charted partitions.</p>')

    parts.append("<h2>Partitions</h2>")
    if chosen_column is None:
        parts.append('<p class="note">No column to chart: name one with --column.</p>')
    else:
        parts.append(f'<p class="note">{html.escape(chosen_column)} per partition, the {len(shown_keys)} with the most '
                     "matches; shaded: a match (numbered by MATCH_NUMBER()); dots: its rows, coloured by CLASSIFIER(). "
                     "Under each chart, <strong>why not here</strong>: the attempts dropped (and why) and the matches "
                     "in the range the chart shows; zoom or pan to choose the range.</p>")
        for p in page_partitions:
            parts.append(f'<div class="chart" id="{p["id"]}"></div><div class="why" id="{p["id"]}-why"></div>')

    parts.append("<h2>Dropped attempts</h2>")
    reasons = dropped_by_reason(traces, within_limit)
    if reasons:
        rows_table = pd.DataFrame([
            {"reason": r["reason"], "attempts": r["count"],
             "median run": _duration_text(r.get("median"), time_axis), "longest run": _duration_text(r.get("max"), time_axis),
             **({"median / WITHIN": f"{r['share']:.0%}" if "share" in r else ""} if within_limit is not None else {})}
            for r in reasons])
        parts.append(f'<p class="note">In the {len(page_partitions)} charted partitions: every partial match that '
                     "ended without a match, by reason, and how long it had run (its last row minus its first)"
                     + (f" against the WITHIN limit of {html.escape(cell(within_limit))}" if within_limit else "") + ".</p>")
        parts.append(_table(rows_table))
        if any(r["elapsed"] for r in reasons):
            parts.append('<div class="chart" id="chart-dropped"></div>')
            charts.append({"id": "chart-dropped", "figure": chart_dropped(reasons, within_limit, time_axis)})
    else:
        parts.append('<p class="note">No attempt was dropped in the charted partitions.</p>')

    parts.append("<h2>Output</h2>")
    if len(output):
        parts.append(_table(output.head(OUTPUT_ROWS_SHOWN)))
        if len(output) > OUTPUT_ROWS_SHOWN:
            parts.append(f'<p class="note">the first {OUTPUT_ROWS_SHOWN} of {len(output)} rows</p>')
    else:
        parts.append("<p>(no rows)</p>")

    data = {"charts": charts, "partitions": page_partitions, "matches": matches, "order": order or "row",
            "shown": [str(c) for c in show]}
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>cep report: {html.escape(str(name))}</title><style>{_STYLE}</style>"
            f"<script>{plotly_js}</script></head>\n<body>\n" + "\n".join(parts)
            + f'\n<script type="application/json" id="cep-data">{_json(data)}</script>'
            + f"\n<script>{_GLUE}</script>\n</body></html>\n")
    line = f"{len(pdf)} rows, {len(partition_rows)} partitions, {len(summary)} matches, {len(output)} output rows"
    return Report(page, line)


def _zoom_range(first: Any, last: Any, xs: list) -> dict:
    """The x range around one match: the match, and half its length (at least two typical gaps between
    rows) on each side."""
    import pandas as pd

    low, high = pd.Timestamp(first) if isinstance(plain(first), str) else first, \
        pd.Timestamp(last) if isinstance(plain(last), str) else last
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
