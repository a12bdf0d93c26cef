"""What putting Spark's Kafka connector on the classpath costs at session start, two ways, cold and warm.

    .venv/bin/python bench/kafka_connector_startup.py [--offline] [--json bench/results-kafka-connector.json]

Each variant runs in a fresh Python process (one SparkSession each, local[2]) and reports the seconds to
``getOrCreate()`` and to a Kafka DataFrame plan (``spark.read.format("kafka")...load()``, no broker needed:
it only proves the data source class loads):

- ``none``: no connector (the baseline; ``format("kafka")`` fails).
- The warm variants and ``none`` run ``--repeat`` times, interleaved; the median is reported too.
- ``jars-cold`` / ``jars-warm``: ``spark.jars`` from ``kafka_spark_conf()``, the Maven copy into an empty cache
  folder and an empty Maven repository (cold), then again (warm: no Maven at all).
- ``packages-cold`` / ``packages-warm``: ``spark.jars.packages`` resolved by Spark's Ivy into an empty Ivy
  folder, with ``user.home`` pointed at an empty folder so Ivy's local-m2 resolver finds nothing (cold),
  then again with the same folders (warm).
- ``packages-home-m2``: Ivy cold, but with the real ``~/.m2`` of this user visible (what a user here gets).
- ``--offline``: the warm variants again inside a network namespace without network (``unshare -n``, root).

The numbers go to stdout as a table and, with ``--json``, to a file. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
t0 = time.monotonic()
from pyspark.sql import SparkSession
conf = json.loads(sys.argv[1])
extra = conf.pop("__connector__", None)
if extra == "jars":
    sys.path.insert(0, os.environ["CEP_REPO"])
    from cep.spark_bridge.spark.kafka_connector import kafka_spark_conf
    conf.update(kafka_spark_conf())
t_conf = time.monotonic()
b = SparkSession.builder.master("local[2]").appName("kafka-connector-startup")
for k, v in {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
             "spark.driver.host": "127.0.0.1", **conf}.items():
    b = b.config(k, v)
spark = b.getOrCreate()
t_session = time.monotonic()
ok, error = True, ""
try:
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
          .option("subscribe", "t").load())
    df.schema
except Exception as exc:
    ok, error = False, str(exc).strip().splitlines()[0][:200]
t_plan = time.monotonic()
print(json.dumps({"conf_s": t_conf - t0, "session_s": t_session - t0, "plan_s": t_plan - t0, "kafka_ok": ok,
                  "error": error}))
spark.stop()
"""


def run_variant(name: str, conf: dict, env: dict, offline: bool = False) -> dict:
    cmd = [sys.executable, "-c", CHILD, json.dumps(conf)]
    if offline:
        # a new network namespace: only a loopback interface (brought up: Spark's driver listens on 127.0.0.1)
        cmd = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    wall = time.monotonic() - started
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        result = {"kafka_ok": False, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:300]}
    result.update(variant=name, wall_s=round(wall, 2), offline=offline)
    for key in ("conf_s", "session_s", "plan_s"):
        if key in result:
            result[key] = round(result[key], 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offline", action="store_true", help="also run the warm variants without network")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each warm variant (the median is reported)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="cep-kafka-connector-bench-"))
    base_env = {**os.environ, "CEP_REPO": str(REPO), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    base_env.pop("CEP_SPARK_KAFKA_JARS", None)
    # spark.jars: an empty cep cache and an empty Maven repository for the cold run
    jars_env = {
        **base_env,
        "XDG_CACHE_HOME": str(scratch / "xdg"),
        "MAVEN_OPTS": f"-Dmaven.repo.local={scratch / 'm2'}",
    }
    from importlib import metadata

    coords = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{metadata.version('pyspark')}"
    ivy_conf = {
        "spark.jars.packages": coords,
        "spark.jars.ivy": str(scratch / "ivy"),
        "spark.driver.extraJavaOptions": f"-Duser.home={scratch / 'home'}",
    }
    (scratch / "home").mkdir()
    home_m2_conf = {"spark.jars.packages": coords, "spark.jars.ivy": str(scratch / "ivy-home-m2")}

    plan = [
        ("jars-cold", {"__connector__": "jars"}, jars_env, False),
        ("packages-cold", ivy_conf, base_env, False),
    ]
    for _ in range(args.repeat):  # interleaved, so a burst of load from elsewhere hits every variant alike
        plan += [
            ("none", {}, base_env, False),
            ("jars-warm", {"__connector__": "jars"}, jars_env, False),
            ("packages-warm", ivy_conf, base_env, False),
        ]
    plan.append(("packages-home-m2", home_m2_conf, base_env, False))
    if args.offline:
        plan += [
            ("jars-warm", {"__connector__": "jars"}, jars_env, True),
            ("packages-warm", ivy_conf, base_env, True),
        ]
    results = []
    print(f"{'variant':18} {'offline':7} {'session s':>9} {'plan s':>7} {'wall s':>7}  kafka source")
    for name, conf, env, offline in plan:
        r = run_variant(name, dict(conf), env, offline)
        results.append(r)
        print(
            f"{name:18} {str(offline):7} {r.get('session_s', '-'):>9} {r.get('plan_s', '-'):>7} {r['wall_s']:>7}  "
            f"{'loads' if r['kafka_ok'] else 'FAILS: ' + r.get('error', '')}",
            flush=True,
        )
    sizes = {
        "jars_mb": round(sum(f.stat().st_size for f in (scratch / "xdg").rglob("*.jar")) / 1e6, 1),
        "ivy_jars_mb": round(sum(f.stat().st_size for f in (scratch / "ivy").rglob("*.jar")) / 1e6, 1),
    }
    import statistics

    medians = {}
    for name in ("none", "jars-warm", "packages-warm"):
        runs = [r for r in results if r["variant"] == name and not r["offline"] and "session_s" in r]
        if runs:
            medians[name] = {k: round(statistics.median(r[k] for r in runs), 2) for k in ("session_s", "plan_s")}
    print("medians (online):", json.dumps(medians))
    sizes["medians"] = medians
    print(f"downloaded jars: spark.jars copy {sizes['jars_mb']} MB, Ivy {sizes['ivy_jars_mb']} MB")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"results": results, **sizes, "nproc": os.cpu_count(), "load_avg_at_end": os.getloadavg()[0]}, indent=1
            )
            + "\n"
        )
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
