"""The pattern library (patterns/*.sql): each query, run with ``cep.compile(...).run(rows)`` on its shipped
data, gives exactly what an independent plain-Python implementation of that one pattern computes.

The references below do not share code with the matcher: each walks the rows of a partition the way a
person would read the pattern (maximal runs, first occurrences, time windows), relying on facts the
test data make true (e.g. "falling" and "rising" are exclusive conditions, so greedy quantifiers never
need to give rows back). A few hand-checked facts about the data are asserted as well, with a comment
saying how they were checked (by reading the CSV).
"""

from __future__ import annotations

import csv
import importlib.util
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import cep

REPO = Path(__file__).resolve().parent.parent
PATTERNS = REPO / "patterns"
DATA = PATTERNS / "data"

# How to type each CSV column (everything else stays text).
CONVERSIONS = {
    "ts": datetime.fromisoformat,
    "price": float,
    "amount": float,
    "temp": float,
    "booth": int,
    "volume": int,
}
# The partition column of each data file, to check that ORDER BY ts is a total order inside a partition.
PARTITION_OF = {
    "ticks.csv": "symbol",
    "crash_ticks.csv": "symbol",
    "card_charges.csv": "card_id",
    "logins.csv": "user",
    "clickstream.csv": "session_id",
    "orders.csv": "order_id",
    "sensor_readings.csv": "sensor",
    "tolls.csv": "plate",
}


def load(name: str) -> list[dict]:
    with open(DATA / name, newline="", encoding="ascii") as fh:
        return [{k: CONVERSIONS.get(k, str)(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def partitions(rows: list[dict], key: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    for group in groups.values():
        group.sort(key=lambda r: r["ts"])
    return groups


def run(query_file: str, data_file: str) -> list[dict]:
    query = cep.compile((PATTERNS / query_file).read_text(), filename=query_file)
    return query.run(load(data_file))


def canonical(rows: list[dict]) -> list[tuple]:
    """Order-free comparison; floats rounded so 0.1 + 0.2 and 0.3 compare equal."""

    def value(v):
        return round(v, 6) if isinstance(v, float) else v

    return sorted(tuple(sorted((k, value(v)) for k, v in row.items())) for row in rows)


# ------------------------------------------------------------------------------------- references


def monotone_runs(prices: list[float], start: int, signs: tuple[int, ...]) -> int | None:
    """From ``start`` (any row), one or more strict steps of each sign in turn, each run as long as it
    goes; the index of the last row, or None. (Strict < and > exclude each other, so taking each run to
    its end is the only way the whole pattern can match.)"""
    j = start
    for sign in signs:
        begin = j
        while j + 1 < len(prices) and (prices[j + 1] - prices[j]) * sign > 0:
            j += 1
        if j == begin:
            return None
    return j


def ref_shapes(rows, signs, measures):
    out = []
    for symbol, part in partitions(rows, "symbol").items():
        prices = [r["price"] for r in part]
        i = 0
        while i < len(part):
            end = monotone_runs(prices, i, signs)
            if end is None:
                i += 1
                continue
            out.append({"symbol": symbol, **measures(part, i, end)})
            i = end + 1  # SKIP PAST LAST ROW
    return out


def ref_w_shape(rows):
    def measures(part, i, end):
        prices = [r["price"] for r in part]
        turns = [k for k in range(i + 1, end) if (prices[k] - prices[k - 1]) * (prices[k + 1] - prices[k]) < 0]
        bottom1, peak, bottom2 = turns  # the three turning points of a W
        return {
            "start_ts": part[i]["ts"],
            "first_bottom": prices[bottom1],
            "middle_peak": prices[peak],
            "second_bottom": prices[bottom2],
            "end_ts": part[end]["ts"],
            "n": end - i + 1,
        }

    return ref_shapes(rows, (-1, 1, -1, 1), measures)


def ref_v_shape(rows):
    def measures(part, i, end):
        prices = [r["price"] for r in part]
        return {
            "start_ts": part[i]["ts"],
            "bottom": min(prices[i : end + 1]),
            "end_ts": part[end]["ts"],
            "n": end - i + 1,
        }

    return ref_shapes(rows, (-1, 1), measures)


def ref_falling_run(rows, skip_to_turn=True):
    out = []
    for symbol, part in partitions(rows, "symbol").items():
        p = [r["price"] for r in part]
        i = 0
        while i < len(part):
            j = i
            while j + 1 < len(p) and p[j + 1] < p[j]:
                j += 1
            if j - i >= 2 and j + 1 < len(p) and p[j + 1] > p[j]:
                out.append(
                    {
                        "symbol": symbol,
                        "top_ts": part[i]["ts"],
                        "top_price": p[i],
                        "bottom_price": p[j],
                        "falls": j - i,
                        "turn_ts": part[j + 1]["ts"],
                    }
                )
                i = j + 1 if skip_to_turn else j + 2
            else:
                i += 1
    return out


def ref_price_drop(rows):
    out = []
    for symbol, part in partitions(rows, "symbol").items():
        i = 0
        while i < len(part):
            a, hit = part[i], None
            for j in range(i + 1, len(part)):
                if part[j]["ts"] - a["ts"] >= timedelta(hours=1):
                    break
                if part[j]["price"] <= a["price"] * 0.9:
                    hit = j
                    break
            if hit is None:
                i += 1
                continue
            c = part[hit]
            out.append(
                {
                    "symbol": symbol,
                    "from_ts": a["ts"],
                    "from_price": a["price"],
                    "to_ts": c["ts"],
                    "to_price": c["price"],
                }
            )
            i = hit + 1
    return out


def ref_run_then_one(part, is_run, is_end, minimum, window):
    """(first, last) index pairs: ``minimum`` or more consecutive ``is_run`` rows (the whole run), then an
    ``is_end`` row, the last less than ``window`` after the first; SKIP PAST LAST ROW."""
    found, i = [], 0
    while i < len(part):
        j = i
        while j < len(part) and is_run(part[j]):
            j += 1
        if j - i >= minimum and j < len(part) and is_end(part[j]) and part[j]["ts"] - part[i]["ts"] < window:
            found.append((i, j))
            i = j + 1
        else:
            i += 1
    return found


def ref_card_testing(rows):
    out = []
    for card, part in partitions(rows, "card_id").items():
        for i, j in ref_run_then_one(
            part, lambda r: r["amount"] < 5, lambda r: r["amount"] >= 200, 3, timedelta(minutes=10)
        ):
            small = part[i:j]
            out.append(
                {
                    "card_id": card,
                    "first_test_ts": part[i]["ts"],
                    "tests": len(small),
                    "tested_total": round(sum(r["amount"] for r in small), 2),
                    "big_ts": part[j]["ts"],
                    "big_amount": part[j]["amount"],
                    "big_merchant": part[j]["merchant"],
                }
            )
    return out


def ref_login_burst(rows):
    out = []
    for user, part in partitions(rows, "user").items():
        for i, j in ref_run_then_one(
            part, lambda r: r["status"] == "fail", lambda r: r["status"] == "ok", 5, timedelta(minutes=5)
        ):
            out.append(
                {
                    "user": user,
                    "first_failure_ts": part[i]["ts"],
                    "failures": j - i,
                    "addresses": len({r["ip"] for r in part[i:j]}),
                    "success_ts": part[j]["ts"],
                    "success_ip": part[j]["ip"],
                }
            )
    return out


def ref_cart_abandoned(rows):
    clock = max(r["ts"] for r in rows)  # a replay's clock at the end: the latest event time of the input
    out = []
    for session, part in partitions(rows, "session_id").items():
        i = 0
        while i < len(part):
            if part[i]["page"] != "add_to_cart":
                i += 1
                continue
            deadline = part[i]["ts"] + timedelta(minutes=30)
            window = [j for j in range(i + 1, len(part)) if part[j]["ts"] < deadline]
            if any(part[j]["page"] == "purchase" for j in window) or clock < deadline:
                i += 1  # bought in time, or the 30 minutes have not passed yet
                continue
            out.append(
                {
                    "session_id": session,
                    "cart_ts": part[i]["ts"],
                    "user_id": part[i]["user_id"],
                    "clicks": 1 + len(window),
                    "status": "ABSENCE",
                }
            )
            i = (window[-1] if window else i) + 1
    return out


def ref_order_sla(rows):
    clock = max(r["ts"] for r in rows)
    out = []
    for order, part in partitions(rows, "order_id").items():
        for i, row in enumerate(part):
            if row["event"] != "created":
                continue
            deadline = row["ts"] + timedelta(hours=1)
            paid = next((r for r in part[i + 1 :] if r["event"] == "paid"), None)
            if paid is not None and paid["ts"] < deadline:
                out.append({"order_id": order, "created_ts": row["ts"], "paid_ts": paid["ts"], "status": "MATCHED"})
            elif clock >= deadline:
                out.append({"order_id": order, "created_ts": row["ts"], "paid_ts": None, "status": "TIMEOUT"})
    return out


def ref_temperature_rising(rows):
    out = []
    for sensor, part in partitions(rows, "sensor").items():
        t = [r["temp"] for r in part]
        i = 1
        while i < len(part):
            j = i
            while j < len(part) and t[j] > t[j - 1]:
                j += 1
            if j - i >= 5:
                out.append(
                    {
                        "sensor": sensor,
                        "from_ts": part[i]["ts"],
                        "to_ts": part[j - 1]["ts"],
                        "readings": j - i,
                        "rise": round(t[j - 1] - t[i - 1], 1),
                    }
                )
            i = max(j, i + 1)
    return out


def ref_sensor_silent(rows):
    clock = max(r["ts"] for r in rows)
    out = []
    for sensor, part in partitions(rows, "sensor").items():
        for i, row in enumerate(part):
            heard_next = part[i + 1]["ts"] if i + 1 < len(part) else None
            deadline = row["ts"] + timedelta(minutes=10)
            if (heard_next if heard_next is not None else clock) >= deadline:
                out.append({"sensor": sensor, "last_seen_ts": row["ts"], "last_temp": row["temp"], "status": "ABSENCE"})
    return out


def ref_sensor_gap(rows):
    out = []
    for sensor, part in partitions(rows, "sensor").items():
        for before, after in zip(part, part[1:]):
            if after["ts"] - before["ts"] >= timedelta(minutes=10):
                out.append(
                    {
                        "sensor": sensor,
                        "quiet_from_ts": before["ts"],
                        "back_ts": after["ts"],
                        "silence": after["ts"] - before["ts"],
                    }
                )
    return out


def ref_checkout_funnel(rows):
    out = []
    steps = ("add_to_cart", "checkout", "purchase")
    for session, part in partitions(rows, "session_id").items():
        i = 0
        while i < len(part):
            if part[i]["page"] != "view":
                i += 1
                continue
            at, found = i, [i]
            for step in steps:  # each step at its first occurrence after the one before
                at = next((k for k in range(at + 1, len(part)) if part[k]["page"] == step), None)
                if at is None:
                    break
                found.append(at)
            if len(found) == 4 and part[found[-1]]["ts"] - part[i]["ts"] < timedelta(minutes=30):
                v, c, k, p = (part[x]["ts"] for x in found)
                out.append(
                    {
                        "session_id": session,
                        "view_ts": v,
                        "cart_ts": c,
                        "checkout_ts": k,
                        "paid_ts": p,
                        "detours": found[-1] - i + 1 - 4,
                    }
                )
                i = found[-1] + 1
            else:
                i += 1
    return out


def ref_toll_speeding(rows):
    out = []
    for plate, part in partitions(rows, "plate").items():
        i = 0
        while i + 2 < len(part):
            a, b, c = part[i : i + 3]
            if (a["booth"], b["booth"], c["booth"]) == (1, 2, 3) and c["ts"] - a["ts"] < timedelta(minutes=12):
                out.append({"plate": plate, "booth1_ts": a["ts"], "booth3_ts": c["ts"], "took": c["ts"] - a["ts"]})
                i += 3
            else:
                i += 1
    return out


CASES = [
    ("v_shape.sql", "ticks.csv", ref_v_shape),
    ("w_shape.sql", "ticks.csv", ref_w_shape),
    ("falling_run.sql", "ticks.csv", ref_falling_run),
    ("price_drop.sql", "crash_ticks.csv", ref_price_drop),
    ("card_testing.sql", "card_charges.csv", ref_card_testing),
    ("login_burst.sql", "logins.csv", ref_login_burst),
    ("cart_abandoned.sql", "clickstream.csv", ref_cart_abandoned),
    ("order_payment_sla.sql", "orders.csv", ref_order_sla),
    ("temperature_rising.sql", "sensor_readings.csv", ref_temperature_rising),
    ("sensor_silent.sql", "sensor_readings.csv", ref_sensor_silent),
    ("sensor_gap.sql", "sensor_readings.csv", ref_sensor_gap),
    ("checkout_funnel.sql", "clickstream.csv", ref_checkout_funnel),
    ("toll_speeding.sql", "tolls.csv", ref_toll_speeding),
]


# ------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("query_file,data_file,reference", CASES, ids=[c[0].removesuffix(".sql") for c in CASES])
def test_pattern_matches_its_reference(query_file, data_file, reference):
    got = run(query_file, data_file)
    expected = reference(load(data_file))
    assert expected, f"the data for {query_file} should hold at least one match"
    assert canonical(got) == canonical(expected)


def test_every_pattern_file_is_covered_and_documented():
    files = sorted(p.name for p in PATTERNS.glob("*.sql"))
    assert sorted(c[0] for c in CASES) == files
    assert len(files) >= 12
    for name in files:
        text = (PATTERNS / name).read_text()
        header = [line for line in text.splitlines() if line.startswith("--")]
        assert any("Source of the idea" in line for line in header), f"{name}: say where the idea comes from"
        assert any(line.startswith("-- Run it: cep run patterns/" + name) for line in header), name


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_datasets", DATA / "make_datasets.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_regenerating_the_data_gives_the_same_files(tmp_path):
    module = _load_generator()
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in module.DATASETS:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(PARTITION_OF))
def test_order_is_total_within_each_partition(name):
    """No two rows of a partition share a timestamp, so ORDER BY ts leaves no tie for engines to break."""
    for key, part in partitions(load(name), PARTITION_OF[name]).items():
        stamps = [r["ts"] for r in part]
        assert len(stamps) == len(set(stamps)), (name, key)


# Hand-checked facts: the episodes make_datasets.py plants, read back in the CSVs.


def test_card_testing_finds_the_planted_attacks_and_no_near_miss():
    cards = sorted(r["card_id"] for r in run("card_testing.sql", "card_charges.csv"))
    # C003, C017, C024, C029: planted attacks. C011's attack has an ordinary 148.06 fuel charge between the
    # test charges and the big one (14:09:27), which breaks it; C006 has two test charges only; C008's big
    # charge comes 40 minutes later; C020's "big" charge is 35.00.
    assert cards == ["C003", "C017", "C024", "C029"]


def test_price_drop_ignores_slow_and_shallow_falls():
    alerts = run("price_drop.sql", "crash_ticks.csv")
    # ACME's 12% fall (from 10:00) alerts, its 8% dip (13:40) does not; BOLT falls 13% over two hours and
    # never 10% within one; CRUX falls 11% (09:40-10:25) and 15% (13:20-13:28).
    assert sorted((a["symbol"], a["to_ts"].hour) for a in alerts) == [("ACME", 10), ("CRUX", 10), ("CRUX", 13)]


def test_sensor_silent_alerts_while_silent_and_for_a_dead_sensor():
    silent = {r["sensor"]: r["last_seen_ts"] for r in run("sensor_silent.sql", "sensor_readings.csv")}
    gaps = {r["sensor"] for r in run("sensor_gap.sql", "sensor_readings.csv")}
    # T08 stops at 03:14:48 and never reads again: only the absence pattern can say so. T05's and T06's
    # 8- and 9-minute gaps are too short for either.
    assert silent["T08"] == datetime(2024, 3, 4, 3, 14, 48)
    assert set(silent) == gaps | {"T08"} == {"T02", "T05", "T07", "T08"}


def test_order_sla_reports_timeouts_and_leaves_recent_orders_pending():
    rows = run("order_payment_sla.sql", "orders.csv")
    statuses = {r["order_id"]: r["status"] for r in rows}
    # The data end at 20:17:04 (O0038's reminder). O0036 (created 18:46:36) was never paid: TIMEOUT.
    # O0037 (19:11:29) was paid at 20:02:01, inside its hour. O0038, O0039 and O0040 were created after
    # 19:17:04, so their hour has not passed: pending, no row.
    assert statuses["O0036"] == "TIMEOUT" and statuses["O0037"] == "MATCHED"
    assert len(statuses) == 37 and not {"O0038", "O0039", "O0040"} & set(statuses)
    assert all(r["paid_ts"] is None for r in rows if r["status"] == "TIMEOUT")


def test_skip_to_last_turn_finds_runs_that_skip_past_last_row_loses():
    text = (PATTERNS / "falling_run.sql").read_text()
    past = cep.compile(text.replace("SKIP TO LAST TURN", "SKIP PAST LAST ROW")).run(load("ticks.csv"))
    to_turn = run("falling_run.sql", "ticks.csv")
    assert canonical(past) == canonical(ref_falling_run(load("ticks.csv"), skip_to_turn=False))
    shared = {(r["symbol"], r["turn_ts"]) for r in to_turn} & {(r["symbol"], r["top_ts"]) for r in to_turn}
    assert shared, "some run should start at the previous run's turning point"
    # SKIP PAST LAST ROW can only start the next run one row later, at the first falling tick: that run
    # loses its top and a fall, and a run of exactly two falls is lost altogether.
    assert canonical(past) != canonical(to_turn)


# On Spark: the same matches. Known engine differences are marked xfail (strict, so a fix shows up).
SPARK_KNOWN: dict[str, str] = {}  # none today: every pattern gives the same matches on Spark


def _plain(value):
    import math

    import pandas as pd

    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if isinstance(value, pd.Timedelta):
        return value.to_pytimedelta()
    return value.item() if hasattr(value, "item") else value


@pytest.mark.spark
@pytest.mark.parametrize(
    "query_file,data_file,reference",
    [
        pytest.param(*case, marks=pytest.mark.xfail(reason=SPARK_KNOWN[case[0]], strict=True))
        if case[0] in SPARK_KNOWN
        else case
        for case in CASES
    ],
    ids=[c[0].removesuffix(".sql") for c in CASES],
)
def test_pattern_on_spark_matches_python(spark, query_file, data_file, reference):
    import pandas as pd

    rows = load(data_file)
    query = cep.compile((PATTERNS / query_file).read_text())
    got = query.on_spark(spark.createDataFrame(pd.DataFrame(rows))).toPandas()
    got = [{k: _plain(v) for k, v in record.items()} for record in got.to_dict("records")]
    assert canonical(got) == canonical(query.run(rows))
