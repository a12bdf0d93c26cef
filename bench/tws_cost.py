"""What one state row per key would cost through ``transformWithStateInPandas`` (Spark 4's state API v2), measured
before building on it: a bucket's keys kept in a ``MapState`` keyed by the partition key, so that a micro-batch
reads and writes only the keys it has rows for, instead of the bucket's whole value (spark/buckets.py).

    .venv/bin/python bench/tws_cost.py                  # 20,000 keys in 16 buckets, 3 micro-batches of 2,000 keys

Each ``MapState`` get and update is a request from the Python worker to the JVM over a socket (protobuf), one per
key. Timed inside the worker around those calls (``perf_counter``, summed per bucket call): seconds per get and
per update, on RocksDB, ``local[2]``. The same run with ``--no-state`` makes no state call (what the rest of the
micro-batch costs). Prints one JSON line per micro-batch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

STATE_BYTES = 120  # about what cep keeps per open key in this bench's rule (bench/state_scale.py)


def write_inputs(directory: Path, keys: int, buckets: int, touched: int, batches: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    rng = np.random.default_rng(3)
    slices = [np.arange(keys)] + [rng.choice(keys, touched, replace=False) for _ in range(batches)]
    for index, users in enumerate(slices):
        table = pa.table({"user": pa.array([f"u{u:08d}" for u in users]), "bucket": pa.array(users % buckets)})
        path = directory / f"part-{index:04d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def processor_class(with_state: bool):
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class KeysInMapState(StatefulProcessor):
        def init(self, handle) -> None:
            self.keys = handle.getMapState("keys", "user string", "blob binary")

        def handleInputRows(self, key, rows, timerValues):  # noqa: N802 (pyspark's name)
            users = pd.concat(list(rows))["user"].tolist()
            get_s = put_s = 0.0
            if with_state:
                for user in users:
                    started = time.perf_counter()
                    old = self.keys.getValue((user,))
                    got = time.perf_counter()
                    self.keys.updateValue((user,), ((old[0] if old else b"")[:STATE_BYTES] or b"x" * STATE_BYTES,))
                    get_s, put_s = get_s + got - started, put_s + time.perf_counter() - got
            yield pd.DataFrame({"bucket": [int(key[0])], "calls": [len(users)], "get_s": [get_s], "put_s": [put_s]})

        def close(self) -> None:
            pass

    return KeysInMapState


def run(args) -> list[dict]:
    from pyspark.sql import types as T

    from cep.spark_bridge.spark.session import get_spark

    work = Path(tempfile.mkdtemp(prefix="cep-tws-cost-"))
    write_inputs(work / "in", args.keys, args.buckets, args.touched, args.batches)
    spark = get_spark("local[2]", app_name="cep-tws-cost", state_store="rocksdb", shuffle_partitions=2)
    schema = T.StructType([T.StructField("user", T.StringType()), T.StructField("bucket", T.LongType())])
    out_schema = "bucket long, calls long, get_s double, put_s double"
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(work / "in"))
    found = []

    def collect(batch, batch_id: int) -> None:
        rows = batch.collect()
        calls = sum(r.calls for r in rows)
        found.append(
            {
                "batch": batch_id,
                "bucket_calls": len(rows),
                "keys": calls,
                "get_ms_per_key": round(1000 * sum(r.get_s for r in rows) / calls, 3) if calls else None,
                "update_ms_per_key": round(1000 * sum(r.put_s for r in rows) / calls, 3) if calls else None,
            }
        )

    query = (
        df.groupBy("bucket")
        .transformWithStateInPandas(processor_class(not args.no_state)(), out_schema, "Append", "None")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(work / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        for row in found:
            if row["batch"] == progress["batchId"]:
                row["batch_s"] = round(progress["durationMs"]["triggerExecution"] / 1000, 2)
    spark.stop()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--touched", type=int, default=2_000, help="keys with a row in each later micro-batch")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--no-state", action="store_true", help="no MapState call: the micro-batch's other costs")
    args = parser.parse_args()
    for row in run(args):
        row["load_average"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
