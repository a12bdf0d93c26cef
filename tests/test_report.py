"""``cep report``: a self-contained HTML page. Checked for content here, and in a real headless Chromium
(Debian's ``chromium``) for rendering: the page loads from a file with no network, every embedded image
decodes, and the console stays silent. The browser test skips, saying why, when Chromium is absent."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import cep
from cep.cli import main, read_pandas

pytest.importorskip("matplotlib", reason="cep report needs matplotlib: pip install 'cep-spark[report]'")

from cep.report import LABEL_COLUMN, MATCH_COLUMN, build_report, labelled_query  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "patterns" / "data"
V_SHAPE = REPO / "patterns" / "v_shape.sql"
IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">')


def _ticks() -> pd.DataFrame:
    return read_pandas([str(DATA / "ticks.csv")], "csv")


def _decode_pngs(page: str) -> list[tuple[str, tuple[int, int]]]:
    from PIL import Image  # matplotlib's own dependency

    out = []
    for data, alt in IMG.findall(page):
        raw = base64.b64decode(data, validate=True)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n", alt
        with Image.open(io.BytesIO(raw)) as image:
            image.load()  # decodes every pixel: a truncated PNG fails here
            out.append((alt, image.size))
    return out


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
    images = _decode_pngs(page)
    assert [alt for alt, _ in images] == [
        "matches per partition", "matches over time", "match length histogram", "match duration histogram",
        "price for symbol=ACME", "price for symbol=BOLT", "price for symbol=CRUX", "price for symbol=DYNA",
    ]
    assert all(w > 200 and h > 150 for _, (w, h) in images)
    # Self-contained: nothing is fetched from anywhere.
    assert not re.search(r"(?:src|href)=\"(?!data:)", page)
    assert "http://" not in page and "https://" not in page and "<link" not in page


def test_report_with_no_matches_and_event_lanes(tmp_path):
    q = cep.compile((REPO / "patterns" / "card_testing.sql").read_text())
    quiet = read_pandas([str(DATA / "card_charges.csv")], "csv")
    quiet = quiet[quiet.amount >= 5]  # no test charges: nothing can match
    page = build_report(q, quiet, max_partitions=2).text
    assert "No matches." in page and "cep trace" in page
    assert len(_decode_pngs(page)) == 2  # the two partitions' charts only

    funnel = cep.compile((REPO / "patterns" / "checkout_funnel.sql").read_text())
    page = build_report(funnel, read_pandas([str(DATA / "clickstream.csv")], "csv"), max_partitions=1).text
    assert "page per partition" in page  # a text column read by DEFINE is drawn as lanes of events
    assert len(_decode_pngs(page)) == 5


def test_report_counts_timeouts():
    q = cep.compile((REPO / "patterns" / "order_payment_sla.sql").read_text())
    page = build_report(q, read_pandas([str(DATA / "orders.csv")], "csv")).text
    expected = q.run(read_pandas([str(DATA / "orders.csv")], "csv")).status.value_counts()
    assert f"<td>status = TIMEOUT</td><td>{expected['TIMEOUT']}</td>" in page
    assert f"<td>status = MATCHED</td><td>{expected['MATCHED']}</td>" in page


def test_cli_report(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(out), "--column", "volume",
                 "--partitions", "1"]) == 0
    assert f"wrote {out} (240 rows, 4 partitions, 27 matches, 27 output rows)" in capsys.readouterr().out
    alts = [alt for alt, _ in _decode_pngs(out.read_text())]
    assert alts[-1] == "volume for symbol=ACME" and len(alts) == 5


@pytest.mark.parametrize("extra,code,message", [
    (["--column", "nope"], 2, "--column nope: no such column"),
    (["--out", "/no/such/dir/r.html"], 2, "no directory"),
])
def test_cli_report_errors(tmp_path, capsys, extra, code, message):
    args = ["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(tmp_path / "r.html"), *extra]
    assert main(args) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ------------------------------------------------------------------------------------ in a browser


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browse(binary: str, profile: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(_chromium() is None, reason="no Chromium to render the report in (Debian: apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    from PIL import Image

    out = tmp_path / "report.html"
    assert main(["report", str(V_SHAPE), "-i", str(DATA / "ticks.csv"), "--out", str(out)]) == 0
    url = out.resolve().as_uri()
    binary = _chromium()

    dom = _browse(binary, tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The page's own load handler counts the images that decoded (naturalWidth > 0).
    assert 'data-images-decoded="8/8"' in dom.stdout, re.findall(r"<body[^>]*>", dom.stdout)
    assert "<h1>cep report: " in dom.stdout
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console

    shot = tmp_path / "shot.png"
    taken = _browse(binary, tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2000", url)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 50  # charts and text, not a blank page
