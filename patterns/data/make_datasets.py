"""Generate the small, deterministic data files of the pattern library (patterns/*.sql).

Each file is made by one function with its own ``random.Random(seed)`` (standard library only), so the
output is the same byte for byte on every machine and one data set can change without disturbing the
others; tests/test_patterns.py regenerates every file and compares. The data are made up but shaped like
the real thing: normal traffic, a few episodes the pattern is meant to find, and near misses it must not
(too few events, too slow, interrupted), so the expected output says something.

    python patterns/data/make_datasets.py              # rewrites every file below, next to this script
    python patterns/data/make_datasets.py --out DIR    # writes them into DIR instead

patterns/data/ticks.csv (the V-shape sample) has its own script, make_ticks.py.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

DAY = datetime(2024, 3, 4)  # a Monday


def _ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _csv(header: str, rows: list[tuple]) -> str:
    """Rows sorted by their time column (the second field), as a feed would deliver them."""
    rows = sorted(rows, key=lambda row: (row[1], row))
    lines = [header] + [",".join(_ts(v) if isinstance(v, datetime) else str(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def _cents(value: int) -> str:
    return f"{value // 100}.{value % 100:02d}"


# ------------------------------------------------------------------------------------------ markets


def crash_ticks() -> str:
    """symbol, ts, price: one tick a minute for six hours; some symbols crash (a 10%-in-an-hour alert).

    Episodes are (start minute, minutes, total drop): a fast 12% fall, a slow 13% one spread over two
    hours (never 10% inside one hour), an 8% dip (too shallow) and a sharp 15% fall.
    """
    rng = random.Random(20240304)
    episodes = {
        "ACME": [(60, 20, 0.12), (220, 30, 0.08)],
        "BOLT": [(90, 120, 0.13)],
        "CRUX": [(40, 45, 0.11), (260, 8, 0.15)],
    }
    start_prices = {"ACME": 5_000, "BOLT": 12_000, "CRUX": 2_500}
    rows = []
    for symbol, price in start_prices.items():
        falls = {}
        for begin, length, drop in episodes[symbol]:
            per_minute = (1 - drop) ** (1 / length)
            for minute in range(begin, begin + length):
                falls[minute] = per_minute
        level = float(price)
        for minute in range(360):
            if minute:
                level *= falls.get(minute, 1.0)
                level *= 1 + rng.uniform(-0.002, 0.002)  # noise far below the alert threshold
            rows.append((symbol, DAY + timedelta(hours=9, minutes=minute), _cents(round(level))))
    return _csv("symbol,ts,price", rows)


# ------------------------------------------------------------------------------------------ payments


def card_charges() -> str:
    """card_id, ts, merchant, amount: a day of card payments, with card-testing fraud on some cards.

    Fraud: 3-6 charges under 5.00 a minute or so apart, then one of 250-900 within minutes. Near misses:
    two small charges then a large one (too few), small charges then a large one 40 minutes later (too
    slow), and small charges followed by an ordinary purchase.
    """
    rng = random.Random(4242)
    merchants = ["grocer", "fuel", "books", "cafe", "pharmacy", "online-games", "electronics"]
    rows = []
    cards = [f"C{n:03d}" for n in range(1, 31)]
    for card in cards:
        t = DAY + timedelta(hours=7, minutes=rng.randint(0, 120))
        for _ in range(rng.randint(3, 8)):  # ordinary spending: 5.00 to 150.00, hours apart
            t += timedelta(minutes=rng.randint(30, 180), seconds=rng.randint(0, 59))
            rows.append((card, t, rng.choice(merchants), _cents(rng.randint(500, 15_000))))

    def burst(card: str, at: datetime, small: int, large_after: timedelta | None, large: int) -> None:
        t = at
        for _ in range(small):
            rows.append((card, t, "online-games", _cents(rng.randint(50, 499))))
            t += timedelta(seconds=rng.randint(20, 90))
        if large_after is not None:
            rows.append((card, t - timedelta(seconds=20) + large_after, "electronics", _cents(large)))

    for index, card in enumerate(["C003", "C011", "C017", "C024", "C029"]):  # the frauds
        burst(
            card,
            DAY + timedelta(hours=13 + index, minutes=rng.randint(0, 50), seconds=7),
            rng.randint(3, 6),
            timedelta(minutes=rng.randint(1, 3)),
            rng.randint(25_000, 90_000),
        )
    burst("C006", DAY + timedelta(hours=12, minutes=5, seconds=3), 2, timedelta(minutes=2), 60_000)  # too few
    burst("C008", DAY + timedelta(hours=15, minutes=9, seconds=4), 4, timedelta(minutes=40), 45_000)  # too slow
    burst("C020", DAY + timedelta(hours=16, minutes=2, seconds=8), 5, timedelta(minutes=2), 3_500)  # not large
    return _csv("card_id,ts,merchant,amount", rows)


def logins() -> str:
    """user, ts, ip, status: sign-in attempts; brute force (5+ failures, then a success) on some users.

    Ordinary users mistype now and then (one or two failures, then ok). Attacks: 5-12 failures from a
    few addresses within two minutes, then a success. Near misses: an attack that never succeeds, and
    six failures spread over an hour before a success.
    """
    rng = random.Random(777)
    rows = []
    users = [f"user{n:02d}" for n in range(1, 26)]
    for user in users:
        home = f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        t = DAY + timedelta(hours=6, minutes=rng.randint(0, 59))
        for _ in range(rng.randint(2, 6)):
            t += timedelta(hours=rng.randint(1, 3), minutes=rng.randint(0, 59), seconds=rng.randint(0, 59))
            for _ in range(rng.choice([0, 0, 0, 1, 2])):
                rows.append((user, t, home, "fail"))
                t += timedelta(seconds=rng.randint(5, 40))
            rows.append((user, t, home, "ok"))

    def attack(user: str, at: datetime, failures: int, gap: tuple[int, int], succeed: bool) -> None:
        t = at
        addresses = [f"203.0.113.{rng.randint(1, 254)}" for _ in range(3)]
        for _ in range(failures):
            rows.append((user, t, rng.choice(addresses), "fail"))
            t += timedelta(seconds=rng.randint(*gap))
        if succeed:
            rows.append((user, t, rng.choice(addresses), "ok"))

    for index, user in enumerate(["user04", "user09", "user15", "user22"]):
        attack(
            user,
            DAY + timedelta(hours=2 + index, minutes=rng.randint(0, 59), seconds=11),
            rng.randint(5, 12),
            (3, 12),
            True,
        )
    attack("user12", DAY + timedelta(hours=3, minutes=17, seconds=5), 9, (3, 12), False)  # never gets in
    attack("user18", DAY + timedelta(hours=1, minutes=2, seconds=9), 6, (540, 660), True)  # an hour of failures
    return _csv("user,ts,ip,status", rows)


# --------------------------------------------------------------------------------------------- shops


def clickstream() -> str:
    """session_id, ts, user_id, page: web sessions walking home/search/view/add_to_cart/checkout/purchase.

    Each session is a random walk over the pages (the next page depends on the current one), with
    5 seconds to 25 minutes between clicks, so carts are sometimes bought, sometimes abandoned, and
    a funnel is sometimes completed, sometimes left halfway.
    """
    rng = random.Random(31337)
    moves = {
        "home": ["search", "view", "view", "home"],
        "search": ["view", "view", "search", "home"],
        "view": ["view", "add_to_cart", "search", "home", "add_to_cart"],
        "add_to_cart": ["view", "checkout", "checkout", "search"],
        "checkout": ["purchase", "purchase", "view", "home"],
        "purchase": ["home", "view", "search"],
    }
    rows = []
    for n in range(1, 61):
        session, user = f"S{n:03d}", f"U{rng.randint(1, 40):02d}"
        t = DAY + timedelta(hours=8, minutes=rng.randint(0, 600), seconds=rng.randint(0, 59))
        page = "home"
        for _ in range(rng.randint(4, 22)):
            rows.append((session, t, user, page))
            page = rng.choice(moves[page])
            slow = rng.random() < 0.15
            t += timedelta(seconds=rng.randint(300, 1500) if slow else rng.randint(5, 120))
    return _csv("session_id,ts,user_id,page", rows)


def orders() -> str:
    """order_id, ts, event: orders created, reminded, paid and shipped; payment is due within an hour.

    Most orders are paid within the hour; some late (a reminder first), some never; the last few are
    created so close to the end of the data that their hour has not passed yet (still pending).
    """
    rng = random.Random(9001)
    rows = []
    t = DAY + timedelta(hours=8)
    for n in range(1, 41):
        order = f"O{n:04d}"
        t += timedelta(minutes=rng.randint(3, 25), seconds=rng.randint(0, 59))
        rows.append((order, t, "created"))
        fate = rng.random()
        if fate < 0.6:
            paid = t + timedelta(minutes=rng.randint(1, 55), seconds=rng.randint(0, 59))
        elif fate < 0.85:
            rows.append((order, t + timedelta(minutes=45), "reminder"))
            paid = t + timedelta(minutes=rng.randint(62, 180), seconds=rng.randint(0, 59))
        else:
            rows.append((order, t + timedelta(minutes=45), "reminder"))
            paid = None
        if paid is not None:
            rows.append((order, paid, "paid"))
            if rng.random() < 0.7:
                rows.append((order, paid + timedelta(hours=rng.randint(1, 5)), "shipped"))
    # The feed as seen 20 minutes after the last order: later events have not happened yet.
    cutoff = t + timedelta(minutes=20)
    return _csv("order_id,ts,event", [row for row in rows if row[1] <= cutoff])


# ------------------------------------------------------------------------------------------------ IoT


def sensor_readings() -> str:
    """sensor, ts, temp: eight sensors reading about once a minute for four hours.

    Temperatures are random walks in tenths of a degree (so a reading can equal the one before); some
    sensors heat up for 6-8 readings in a row; some fall silent for 12-25 minutes; one dies 45 minutes
    before the end; near misses are gaps of 8-9 minutes.
    """
    rng = random.Random(271828)
    silences = {"T02": [(60, 14)], "T05": [(100, 25), (180, 9)], "T06": [(30, 8)], "T07": [(150, 12)]}
    heating = {"T01": [90], "T03": [40, 160], "T06": [200]}
    rows = []
    end = DAY + timedelta(hours=4)
    for n in range(1, 9):
        sensor = f"T{n:02d}"
        tenths = rng.randint(180, 240)
        t = DAY + timedelta(seconds=rng.randint(0, 59))
        dies_at = DAY + timedelta(hours=3, minutes=15) if sensor == "T08" else end
        rising = 0
        while t < dies_at:
            minute = int((t - DAY).total_seconds() // 60)
            if minute in heating.get(sensor, []):
                rising = rng.randint(6, 8)
            if rising:
                tenths += rng.randint(2, 6)
                rising -= 1
            else:
                tenths += rng.choice([-3, -2, -1, 0, 0, 1, 2, 3])
            rows.append((sensor, t, f"{tenths / 10:.1f}"))
            gap = next((length for at, length in silences.get(sensor, []) if at == minute), None)
            t += timedelta(minutes=gap) if gap else timedelta(seconds=rng.randint(50, 70))
    return _csv("sensor,ts,temp", rows)


def tolls() -> str:
    """plate, ts, booth: cars passing three toll booths 10 km apart on one road (booth 1, then 2, then 3).

    Most trips take 6-10 minutes per stretch; some cars speed (under 12 minutes from booth 1 to 3, i.e.
    over 100 km/h on average); some join at booth 2 or leave after it.
    """
    rng = random.Random(1701)
    rows = []
    for n in range(1, 41):
        plate = f"KA-{rng.randint(100, 999)}-{chr(65 + n % 26)}{chr(65 + (n * 7) % 26)}"
        t = DAY + timedelta(hours=6, minutes=rng.randint(0, 240), seconds=rng.randint(0, 59))
        for _ in range(rng.randint(1, 3)):
            speeder = rng.random() < 0.25
            booths = rng.choice([[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2], [2, 3]])
            for booth in booths:
                rows.append((plate, t, booth))
                low, high = (240, 380) if speeder else (360, 600)
                t += timedelta(seconds=rng.randint(low, high))
            t += timedelta(hours=rng.randint(1, 4), minutes=rng.randint(0, 59))
    return _csv("plate,ts,booth", rows)


DATASETS: dict[str, Callable[[], str]] = {
    "crash_ticks.csv": crash_ticks,
    "card_charges.csv": card_charges,
    "logins.csv": logins,
    "clickstream.csv": clickstream,
    "orders.csv": orders,
    "sensor_readings.csv": sensor_readings,
    "tolls.csv": tolls,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent, help="directory to write into (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in DATASETS.items():
        (args.out / name).write_bytes(make().encode("ascii"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
