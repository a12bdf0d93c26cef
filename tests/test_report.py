"""``cep report``: a self-contained HTML page with interactive Plotly charts. Checked for content here, and
in a real headless Chromium (Debian's ``chromium``, driven by Playwright's Python package, which never
downloads a browser here): the page draws every chart with no network, a click on a match in the table
zooms its partition's chart to it, a click on a matched point selects its row, zooming a partition chart
lists why attempts were dropped there, and the console stays silent. The browser tests skip, saying why,
when Chromium or Playwright is absent."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import cep
from cep.cli import main, read_pandas

pytest.importorskip("plotly", reason="cep report needs plotly: pip install 'cep-spark[report]'")

from cep.report import LABEL_COLUMN, MATCH_COLUMN, build_report, histogram_bins, label, labelled_query  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "patterns" / "data"
V_SHAPE = REPO / "patterns" / "v_shape.sql"
DATA_JSON = re.compile(r'<script type="application/json" id="cep-data">(.*?)</script>', re.S)


def _ticks() -> pd.DataFrame:
    return read_pandas([str(DATA / "ticks.csv")], "csv")


def _data(page: str) -> dict:
    return json.loads(DATA_JSON.search(page).group(1))


def test_labelled_query_labels_every_matched_row():
    q = cep.compile(V_SHAPE.read_text())
    rows = labelled_query(q).run(_ticks())
    first = rows[(rows.symbol == "ACME") & (rows[MATCH_COLUMN] == 1)]
    # The first ACME V-shape, checked by hand (tests/test_sample_data.py): 09:32..09:36, 5 rows.
    assert first[LABEL_COLUMN].tolist() == ["A", "B", "B", "C", "C"]
    assert first.ts.min() == pd.Timestamp("2024-01-02 09:32") and first.ts.max() == pd.Timestamp("2024-01-02 09:36")
    assert rows.groupby(["symbol", MATCH_COLUMN]).ngroups == 27  # as many matches as the query's own output


def test_report_content():
    q = cep.compile(V_SHAPE.read_text(), filename="patterns/v_shape.sql")
    report = build_report(q, _ticks(), sources=["patterns/data/ticks.csv"])
    page = report.text
    assert report.summary == "240 rows, 4 partitions, 27 matches, 27 output rows"
    assert "PATTERN (A B+ C+)" in page and "B.price &lt; PREV(B.price)" in page  # the query, escaped
    assert "<td>rows the query returns</td><td>27</td>" in page
    assert "<td>partitions with a match</td><td>4</td>" in page
    data = _data(page)
    assert [c["id"] for c in data["charts"]] == [
        "chart-per-partition",
        "chart-over-time",
        "chart-length",
        "chart-duration",
        "chart-dropped",
    ]
    assert [p["key"] for p in data["partitions"]] == ["symbol=ACME", "symbol=BOLT", "symbol=CRUX", "symbol=DYNA"]
    # The match explorer: one table row per match, and where each zooms to.
    assert len(data["matches"]) == 27 and len(re.findall(r'<tr data-match="\d+">', page)) == 27
    first = data["matches"][0]
    assert (first["partition"], first["number"]) == (0, 1)
    assert first["from"] < "2024-01-02 09:32:00" and first["to"] > "2024-01-02 09:36:00"
    # The first ACME chart: every row of the partition, and each match shaded.
    acme = data["partitions"][0]["figure"]
    assert len(acme["data"][0]["x"]) == 60 and len(acme["layout"]["shapes"]) == 7
    # Why not here: the first match is among the trace records, with the rows it matched.
    assert any(
        t["event"] == "match" and t["detail"].startswith("match 1: rows 2..6") for t in data["partitions"][0]["trace"]
    )
    # Self-contained: plotly.js is in the page; nothing is fetched from anywhere.
    assert "Plotly" in page and len(page) > 3_000_000
    assert "<link" not in page and not re.search(r"<script[^>]+src=", page) and not re.search(r"<img", page)


def test_histogram_bins_have_edges():
    edges, counts = histogram_bins([3, 3, 4, 6], integer=True)
    assert edges == [2.5, 3.5, 4.5, 5.5, 6.5] and counts == [2, 1, 0, 1]
    edges, counts = histogram_bins([0.5, 1.0, 2.5, 9.0], integer=False)
    assert edges[0] == 0.5 and edges[-1] == 9.0 and sum(counts) == 4
    page = build_report(cep.compile(V_SHAPE.read_text()), _ticks()).text
    length = next(c for c in _data(page)["charts"] if c["id"] == "chart-length")["figure"]
    assert length["data"][0]["customdata"] == ["3", "4", "5", "6", "7", "8"]  # one bar per length


def test_dropped_attempts_by_reason_against_within():
    q = cep.compile((REPO / "patterns" / "login_burst.sql").read_text())
    page = build_report(q, read_pandas([str(DATA / "logins.csv")], "csv"), max_partitions=30).text
    assert "<th>median / WITHIN</th>" in page and "<td>WITHIN expired</td>" in page  # user12's burst, for one
    assert "<td>WITHIN</td><td>00:05:00</td>" in page


def test_report_with_no_matches_and_event_lanes():
    q = cep.compile((REPO / "patterns" / "card_testing.sql").read_text())
    quiet = read_pandas([str(DATA / "card_charges.csv")], "csv")
    quiet = quiet[quiet.amount >= 5]  # no test charges: nothing can match
    page = build_report(q, quiet, max_partitions=2).text
    assert "No matches." in page and "why attempts were dropped" in page
    assert len(_data(page)["partitions"]) == 2 and _data(page)["matches"] == []

    funnel = cep.compile((REPO / "patterns" / "checkout_funnel.sql").read_text())
    page = build_report(funnel, read_pandas([str(DATA / "clickstream.csv")], "csv"), max_partitions=1).text
    assert "page per partition" in page  # a text column read by DEFINE is drawn as lanes of events
    lanes = _data(page)["partitions"][0]["figure"]["layout"]["yaxis"]
    assert "add_to_cart" in lanes["ticktext"]


def test_report_counts_timeouts():
    q = cep.compile((REPO / "patterns" / "order_payment_sla.sql").read_text())
    page = build_report(q, read_pandas([str(DATA / "orders.csv")], "csv")).text
    expected = q.run(read_pandas([str(DATA / "orders.csv")], "csv")).status.value_counts()
    assert f"<td>status = TIMEOUT</td><td>{expected['TIMEOUT']}</td>" in page
    assert f"<td>status = MATCHED</td><td>{expected['MATCHED']}</td>" in page


def test_odd_names_and_values_are_text_not_markup_or_latex():
    """Issue 16: a partition value or column name like '$\\foo{$' once killed the report (matplotlib's math
    text); in Plotly it must stay text (no LaTeX between '$'), and '<b>' must not become markup."""
    odd = "$\\foo{$"
    rows = pd.DataFrame(
        {
            "k": [odd, odd, odd, "<b>x</b>"],
            "ts": pd.date_range("2024-01-01", periods=4, freq="min"),
            odd: [3.0, 1.0, 2.0, 5.0],
        }
    )
    q = cep.compile(
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        f'PATTERN (A B+) DEFINE B AS B."{odd}" < A."{odd}")'
    )
    page = build_report(q, rows).text
    data = _data(page)
    keys = [p["title"] for p in data["partitions"]]
    assert keys[0] == "k=$\\foo{$" and any("&lt;b&gt;x&lt;/b&gt;" in k for k in keys)
    axis = data["partitions"][0]["figure"]["layout"]["yaxis"]["title"]["text"]
    assert axis == "\u200b$\\foo{$"  # not a LaTeX string for Plotly: it starts with a zero-width space
    assert "<b>x</b>" not in page  # nowhere as markup in the HTML either
    assert label(odd).startswith("\u200b") and label("a<b") == "a&lt;b"


def test_cli_report(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                str(V_SHAPE),
                "-i",
                str(DATA / "ticks.csv"),
                "--out",
                str(out),
                "--column",
                "volume",
                "--partitions",
                "1",
            ]
        )
        == 0
    )
    assert f"wrote {out} (240 rows, 4 partitions, 27 matches, 27 output rows)" in capsys.readouterr().out
    data = _data(out.read_text())
    assert [p["key"] for p in data["partitions"]] == ["symbol=ACME"]
    assert data["partitions"][0]["figure"]["layout"]["yaxis"]["title"]["text"] == "volume"


@pytest.mark.parametrize(
    "extra,code,message",
    [
        (["--column", "nope"], 2, "--column nope: no such column"),
        (["--out", "/no/such/dir/r.html"], 2, "no directory"),
    ],
)
def test_cli_report_errors(tmp_path, capsys, extra, code, message):
    args = ["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(tmp_path / "r.html"), *extra]
    assert main(args) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_plotly_from_a_file_beside_the_page_or_a_cdn_when_asked(tmp_path, capsys):
    args = ["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv")]
    assert main([*args, "--out", str(tmp_path / "small.html"), "--plotly", "file"]) == 0
    scripts = list(tmp_path.glob("plotly-*.min.js"))
    assert len(scripts) == 1 and f"and {scripts[0].name} beside it" in capsys.readouterr().out
    page = (tmp_path / "small.html").read_text(encoding="utf-8")
    assert len(page) < 300_000 and f'<script src="{scripts[0].name}"></script>' in page
    assert scripts[0].stat().st_size > 3_000_000 and "Plotly" in scripts[0].read_text(encoding="utf-8")[:2000]
    assert main([*args, "--out", str(tmp_path / "cdn.html"), "--plotly", "cdn"]) == 0
    page = (tmp_path / "cdn.html").read_text(encoding="utf-8")
    assert len(page) < 300_000 and re.search(r'<script src="https://cdn\.plot\.ly/plotly-[\d.]+\.min\.js"', page)
    assert len(list(tmp_path.glob("plotly-*.min.js"))) == 1  # the CDN page wrote nothing beside it


def test_daily_data_is_binned_by_days_and_dated_without_midnight(tmp_path):
    # Thirty days of one value; a fall then a rise is a match: 5 3 4 9 and 7 6 8 9, each from its first day
    # to its fourth, in each of the three runs of ten days: six matches of 3 days.
    values = [5, 3, 4, 9, 7, 6, 8, 9, 1, 2] * 3
    rows = pd.DataFrame({"d": pd.date_range("2020-10-01", periods=30, freq="D"), "v": values})
    q = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d MEASURES COUNT(*) AS n "
        "PATTERN (A B+ C+) DEFINE B AS v < PREV(v), C AS v > PREV(v))"
    )
    page = build_report(q, rows).text
    charts = {c["id"]: c["figure"] for c in _data(page)["charts"]}
    duration = charts["chart-duration"]
    assert duration["layout"]["xaxis"]["title"]["text"] == "last - first d (days)"
    assert duration["layout"]["xaxis"]["ticktext"] == ["3"] and duration["data"][0]["y"] == [6]  # whole days
    starts = charts["chart-over-time"]["data"][0]["customdata"]
    assert starts and all(len(edge) == 10 for pair in starts for edge in pair)  # bins on days, hovered as dates
    assert "<td>2020-10-01</td>" in page and "2020-10-01 00:00:00</td>" not in page
    assert "<td>d range</td><td>2020-10-01 to 2020-10-30</td>" in page
    # Durations in whole days, the dropped attempts' chart in days, the trace records ("why not here") dated.
    assert "<td>3 days</td>" in page and "days 00:00:00" not in page and "<td>00:00:00</td>" not in page
    dropped = charts["chart-dropped"]
    assert dropped["layout"]["xaxis"]["title"]["text"].endswith("(days)")
    assert {x for trace in dropped["data"] for x in trace["x"]} <= {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
    labels = [record["label"] for p in _data(page)["partitions"] for record in p["trace"]]
    assert labels and all(len(label) == 10 for label in labels)  # 2020-10-02, no 00:00:00
    # A DATE column (a CSV of ISO dates) gives the same charts.
    dated = rows.assign(d=[day.date() for day in rows["d"]])
    assert {c["id"]: c["figure"] for c in _data(build_report(q, dated).text)["charts"]}["chart-duration"] == duration


# ------------------------------------------------------------------------------------ in a browser


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the file's browser tests (a launch costs seconds); each test gets a page in
    a context of its own (its own cache and storage), as a fresh browser would show it."""
    binary = _chromium()
    if binary is None:
        pytest.skip("no Chromium to render the report in (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test drives Chromium with Playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=binary,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def browser_page(browser):
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    messages: list[str] = []
    page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: messages.append(f"error: {e}"))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    yield page, messages, requests
    context.close()


def test_report_in_headless_chromium(tmp_path, browser_page):
    page, messages, requests = browser_page
    out = tmp_path / "report.html"
    assert main(["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(out)]) == 0
    page.goto(out.resolve().as_uri())
    page.wait_for_selector("body[data-charts-drawn]", timeout=120_000)
    # 5 summary charts, the zoom chart and 4 partitions: all drawn by plotly.js.
    assert page.get_attribute("body", "data-charts-drawn") == "10"
    assert page.locator(".js-plotly-plot .main-svg").count() >= 10

    # A click on the third match (ACME #3, 09:55 to 09:59) zooms the explorer's chart to it.
    page.locator('#matches tbody tr[data-match="2"]').click()
    page.wait_for_function("document.getElementById('zoom').dataset.match === '2'")
    shown = page.evaluate("document.getElementById('zoom').layout")
    low, high = shown["xaxis"]["range"]
    assert low < "2024-01-02 09:55:00" and high > "2024-01-02 09:59:00" and high < "2024-01-02 10:10:00"
    assert shown["title"]["text"] == "symbol=ACME: match #3"
    assert page.get_attribute('#matches tbody tr[data-match="2"]', "class") == "selected"

    # Zooming a partition chart lists the trace records of that range only ("why not here").
    page.evaluate("Plotly.relayout('partition-1', {'xaxis.range': ['2024-01-02 09:40:00', '2024-01-02 09:45:00']})")
    page.wait_for_function("document.getElementById('partition-1-why').dataset.range !== 'all'")
    times = page.locator("#partition-1-why tbody tr td:first-child").all_inner_texts()
    assert times and all("2024-01-02 09:40:00" <= t <= "2024-01-02 09:45:00" for t in times)

    # A click on a matched point in a partition chart selects its match in the table (plotly_click).
    page.evaluate("""() => { var div = document.getElementById('partition-3');
        var trace = div.data.findIndex(t => t.name === 'A');
        div.emit('plotly_click', {points: [{customdata: div.data[trace].customdata[1], curveNumber: trace}]}); }""")
    page.wait_for_function("document.getElementById('zoom').layout.title.text === 'symbol=DYNA: match #2'")

    assert messages == [], messages
    assert all(url.startswith(("file:", "data:", "about:")) for url in requests), requests
    shot = tmp_path / "shot.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000  # charts and text, not a blank page


def test_a_page_whose_plotly_cannot_load_says_so_in_headless_chromium(tmp_path, browser_page):
    page, messages, _requests = browser_page
    out = tmp_path / "report.html"
    assert main(["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(out), "--plotly", "file"]) == 0
    next(tmp_path.glob("plotly-*.min.js")).unlink()  # the page moved without the library beside it
    page.goto(out.resolve().as_uri())
    page.wait_for_selector("body[data-charts-drawn]", timeout=120_000)
    assert page.get_attribute("body", "data-charts-drawn") == "0"
    note = page.locator(".missing-plotly").inner_text()
    assert "could not load (plotly-" in note and "--plotly embed" in note
    assert all("ERR_FILE_NOT_FOUND" in m for m in messages), messages  # the missing file, no script error


def test_a_small_report_with_plotly_beside_it_draws_in_headless_chromium(tmp_path, browser_page):
    page, messages, requests = browser_page
    out = tmp_path / "report.html"
    assert main(["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(out), "--plotly", "file"]) == 0
    page.goto(out.resolve().as_uri())
    page.wait_for_selector("body[data-charts-drawn]", timeout=120_000)
    assert page.get_attribute("body", "data-charts-drawn") == "10"
    assert messages == [], messages
    script = next(tmp_path.glob("plotly-*.min.js"))
    assert script.resolve().as_uri() in requests  # the library came from the file beside the page
    assert all(url.startswith(("file:", "data:", "about:")) for url in requests), requests


def test_hover_texts_of_daily_data_are_dates_without_midnight(tmp_path):
    # A CSV of ISO dates (DATE columns): what a hover shows (the partition chart's row values, the
    # over-time bars' edges) and the trace table are 2020-10-01, never 00:00:00.
    source = tmp_path / "ticker.csv"
    source.write_text(
        "symbol,day,booked,price\n"
        + "".join(f"A,2020-10-0{i},2020-09-2{i},{p}\n" for i, p in zip(range(1, 8), [10, 8, 9, 12, 11, 7, 13]))
    )
    query = tmp_path / "v.sql"
    query.write_text(
        "SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY day MEASURES COUNT(*) AS n "
        "PATTERN (STRT DOWN+ UP+) DEFINE DOWN AS price < PREV(price), UP AS price > PREV(price))"
    )
    out = tmp_path / "report.html"
    assert main(["report", str(query), "-i", f"Ticker={source}", "--out", str(out), "--plotly", "file"]) == 0
    page = out.read_text(encoding="utf-8")
    data = _data(page)
    hovered = [
        value
        for p in data["partitions"]
        for trace in p["figure"]["data"]
        for record in trace["customdata"]
        for value in record[1:]
    ]
    assert "2020-10-01" in hovered and "2020-10-07" in hovered  # the ORDER BY column's values, as dates
    over_time = {c["id"]: c["figure"] for c in data["charts"]}["chart-over-time"]["data"][0]["customdata"]
    assert over_time and all(len(edge) == 10 for pair in over_time for edge in pair)
    shown = [[record["label"], *record["values"]] for p in data["partitions"] for record in p["trace"]]
    assert "00:00:00" not in json.dumps([hovered, over_time, shown])  # axis positions ("x") stay times
