"""The Plotly figures of ``cep report`` (``cep.report``): plain Plotly JSON, every value from the data
escaped for Plotly's text markup (``label``), times as ISO text (``plain``), histogram bins on the data's
own scale (``histogram_bins``, ``time_step``)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from cep.table_text import cell

# Imported inside functions: pandas (heavy).

MATCH_COLUMN = "__cep_match"
LABEL_COLUMN = "__cep_label"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]

# The units a duration is shown in, largest first: the data's own scale (daily data in days, not hours).
UNIT_SECONDS = {"days": 86_400.0, "hours": 3_600.0, "minutes": 60.0, "seconds": 1.0}


def time_step(seconds: Sequence[float]) -> float:
    """The data's own time step: the largest of a day, an hour, a minute and a second that every time
    (seconds since the epoch) is a whole number of; 0 when none is."""
    return next((size for size in UNIT_SECONDS.values() if all(s % size == 0 for s in seconds)), 0.0)


# ---------------------------------------------------------------------------------- values for the page


def daily(column: Any) -> bool:
    """Whether ``column`` holds times that are all midnights (daily data): shown as dates, without 00:00:00."""
    import pandas as pd

    if not pd.api.types.is_datetime64_any_dtype(column):
        return False
    present = column.dropna()
    return bool(len(present)) and bool((present == present.dt.normalize()).all())


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


def is_time(values: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_datetime64_any_dtype(values))


def is_numeric(pdf: Any, name: str) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(pdf[name]) and not pd.api.types.is_bool_dtype(pdf[name]))


def _layout(title: str, xtitle: str, ytitle: str, *, height: int = 320, **extra: Any) -> dict:
    layout = {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 44, "b": 50},
        "template": "plotly_white",
        "xaxis": {"title": {"text": xtitle}, "automargin": True},
        "yaxis": {"title": {"text": ytitle}, "automargin": True},
        "hoverlabel": {"align": "left"},
        "showlegend": False,
        "plot_bgcolor": "#ffffff",
    }
    layout.update(extra)
    return layout


# --------------------------------------------------------------------------------------------- charts


def chart_per_partition(counts: Any) -> dict:
    top = counts.head(20).iloc[::-1]
    bars = {
        "type": "bar",
        "orientation": "h",
        "x": [int(v) for v in top.values],
        "y": [label(k) for k in top.index],
        "marker": {"color": PALETTE[0]},
        "hovertemplate": "%{y}: %{x} matches<extra></extra>",
    }
    title = "Matches per partition" + (" (top 20)" if len(counts) > 20 else "")
    return {"data": [bars], "layout": _layout(title, "matches", "", height=max(220, 26 * len(top) + 90))}


def histogram_bins(values: Any, *, integer: bool, step: float = 0.0) -> tuple[list[float], list[int]]:
    """Bin edges and counts: one bin per whole number when ``integer`` and few, else numpy's 'auto' bins;
    with a ``step`` (the data's time step, ``time_step``), edges on whole steps and bins whole steps wide."""
    data = np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))])
    if not len(data):
        return [], []
    low, high = float(data.min()), float(data.max())
    if step and high > low:
        auto = np.histogram_bin_edges(data, bins="auto")
        width = max(step, math.ceil((auto[1] - auto[0]) / step) * step, (high - low + step) / 40)
        width = math.ceil(width / step) * step
        first = math.floor(low / step) * step
        edges = [first + i * width for i in range(int((high - first) // width) + 2)]
        counts, edges = np.histogram(data, bins=edges)
        return [float(e) for e in edges], [int(c) for c in counts]
    if integer and high - low <= 60:
        edges = [low - 0.5 + i for i in range(int(high - low) + 2)]
    elif low == high:
        edges = [low - 0.5, high + 0.5]
    else:
        edges = list(np.histogram_bin_edges(data, bins="auto"))[:41] if len(data) > 1 else [low, high]
    counts, edges = np.histogram(data, bins=edges)
    return [float(e) for e in edges], [int(c) for c in counts]


def chart_histogram(
    values: Any, title: str, xtitle: str, *, integer: bool = False, color: str = PALETTE[2], time_axis: bool = False
) -> dict:
    """Bars between bin edges; hover names each bin's edges and count; the axis ticks are the edges."""
    if time_axis:
        stamps = [v for v in values if v is not None]
        epoch = datetime(1970, 1, 1)
        seconds = [(v.to_pydatetime() if hasattr(v, "to_pydatetime") else v).replace(tzinfo=None) for v in stamps]
        offsets = [(s - epoch).total_seconds() for s in seconds]
        step = time_step(offsets)
        edges, counts = histogram_bins(offsets, integer=False, step=step)
        to_axis = [plain(epoch + timedelta(seconds=e)) for e in edges]
        shown = [edge[:10] for edge in to_axis] if step == UNIT_SECONDS["days"] else to_axis  # dates, no 00:00:00
        bars = {
            "type": "bar",
            "x": [plain(epoch + timedelta(seconds=(a + b) / 2)) for a, b in zip(edges, edges[1:])],
            "y": counts,
            "width": [(b - a) * 1000 for a, b in zip(edges, edges[1:])],
            "customdata": [[shown[i], shown[i + 1]] for i in range(len(counts))],
            "hovertemplate": "from %{customdata[0]}<br>to %{customdata[1]}<br>%{y} matches<extra></extra>",
            "marker": {"color": color, "line": {"color": "#ffffff", "width": 1}},
        }
        layout = _layout(title, xtitle, "matches")
        layout["xaxis"]["type"] = "date"
        return {"data": [bars], "layout": layout}
    edges, counts = histogram_bins(values, integer=integer)
    shown = [int(e + 0.5) if integer else e for e in edges]
    text = [f"{shown[i]:g} to {shown[i + 1]:g}" if not integer else f"{shown[i]:g}" for i in range(len(counts))]
    bars = {
        "type": "bar",
        "x": [(a + b) / 2 for a, b in zip(edges, edges[1:])],
        "y": counts,
        "width": [b - a for a, b in zip(edges, edges[1:])],
        "customdata": text,
        "hovertemplate": ("%{customdata}" if integer else "[%{customdata})") + ": %{y} matches<extra></extra>",
        "marker": {"color": color, "line": {"color": "#ffffff", "width": 1}},
    }
    layout = _layout(title, xtitle, "matches")
    if integer:
        layout["xaxis"].update(
            tickmode="array", tickvals=[(a + b) / 2 for a, b in zip(edges, edges[1:])], ticktext=[f"{t}" for t in text]
        )
    else:
        layout["xaxis"].update(tickmode="array", tickvals=edges, ticktext=[f"{e:.3g}" for e in edges])
    return {"data": [bars], "layout": layout}


def chart_partition(
    rows: Any, matched: Any, column: str, order: str | None, title: str, colours: dict[str, str], show: Sequence[str]
) -> dict:
    """``column`` along the ORDER BY axis for one partition: each match shaded, its rows coloured by label;
    hover shows the row's values. A matched point carries its match number (``customdata[0]``)."""
    x_name = order or "__row"
    hover_columns = [c for c in show if c in rows.columns][:8]

    dated = [daily(rows[c]) for c in hover_columns]  # decided on the partition's rows, a match's rows follow

    def hover(frame) -> tuple[list, str]:
        data = [
            [None] + [label(v)[:10] if day and v == v else label(v) for v, day in zip(record, dated)]
            for record in frame[hover_columns].itertuples(index=False, name=None)
        ]
        lines = "<br>".join(f"{label(c)}: %{{customdata[{i + 1}]}}" for i, c in enumerate(hover_columns))
        return data, lines

    numeric = is_numeric(rows, column)
    lanes: dict[str, int] = {}
    if not numeric:
        lanes = {
            value: i for i, value in enumerate(sorted(set(rows[column].astype(str)) | set(matched[column].astype(str))))
        }

    def y_of(frame) -> list:
        return [plain(v) for v in frame[column]] if numeric else [lanes[str(v)] for v in frame[column]]

    data, lines = hover(rows)
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers" if numeric else "markers",
            "x": [plain(v) for v in rows[x_name]],
            "y": y_of(rows),
            "line": {"color": "#aaaaaa", "width": 1},
            "marker": {"color": "#bbbbbb", "size": 5},
            "customdata": data,
            "hovertemplate": lines + "<extra>row</extra>",
            "name": "rows",
        }
    ]
    shapes, notes = [], []
    for number, group in matched.groupby(MATCH_COLUMN, sort=False):
        gx = group[x_name]
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": plain(gx.iloc[0]),
                "x1": plain(gx.iloc[-1]),
                "y0": 0,
                "y1": 1,
                "fillcolor": "#f4d03f",
                "opacity": 0.25,
                "line": {"width": 0},
                "layer": "below",
            }
        )
        notes.append(
            {
                "x": plain(gx.iloc[0]),
                "y": 1.0,
                "xref": "x",
                "yref": "paper",
                "text": f"#{int(number)}",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"size": 10, "color": "#7d6608"},
            }
        )
    for name, group in matched.groupby(LABEL_COLUMN, sort=False):
        data, lines = hover(group)
        for record, number in zip(data, group[MATCH_COLUMN]):
            record[0] = int(number)
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [plain(v) for v in group[x_name]],
                "y": y_of(group),
                "marker": {"color": colours[str(name)], "size": 9},
                "name": label(name),
                "customdata": data,
                "hovertemplate": f"match #%{{customdata[0]}} as {label(name)}<br>" + lines + "<extra></extra>",
            }
        )
    layout = _layout(
        title,
        label(order or "row"),
        label(column),
        height=360,
        shapes=shapes,
        annotations=notes,
        showlegend=True,
        legend={"title": {"text": "CLASSIFIER()"}},
        dragmode="zoom",
    )
    if order and is_time(rows[order]):
        layout["xaxis"]["type"] = "date"
    if not numeric:
        layout["yaxis"].update(tickmode="array", tickvals=list(lanes.values()), ticktext=[label(k) for k in lanes])
    return {"data": traces, "layout": layout}


def chart_dropped(reasons: list[dict], within: timedelta | None, unit: str) -> dict:
    """How long the dropped attempts had run, per reason, in ``unit`` (one of ``UNIT_SECONDS``, the data's
    own scale, or "ORDER BY units")."""
    size = UNIT_SECONDS.get(unit, 1.0)
    traces = [
        {
            "type": "box",
            "name": label(r["reason"]),
            "x": [e / size for e in r["elapsed"]],
            "orientation": "h",
            "boxpoints": "outliers",
            "marker": {"color": PALETTE[i % len(PALETTE)]},
            "hoverinfo": "x",
        }
        for i, r in enumerate(reasons)
        if r["elapsed"]
    ]
    shapes = []
    if within is not None:
        limit = within.total_seconds() / size
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": limit,
                "x1": limit,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#c0392b", "dash": "dash", "width": 2},
            }
        )
    layout = _layout(
        "How long dropped attempts had run" + (" (dashed: the WITHIN limit)" if within else ""),
        f"last row - first row of the attempt ({unit})",
        "",
        height=max(240, 40 * len(traces) + 120),
        shapes=shapes,
    )
    return {"data": traces, "layout": layout}
