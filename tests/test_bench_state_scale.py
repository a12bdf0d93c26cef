"""bench/state_scale.py's two state figures: the state's bytes per key and the store's memory, apart.

Spark's ``memoryUsedBytes`` is the store's memory (on RocksDB its block cache and memtables under the cap), not
the state's size; the bench reads each micro-batch's progress as the service reads it for ``cep_state_bytes`` and
``cep_state_memory_bytes``. The progress reports below have the shape of Spark's ``StreamingQueryProgress``
JSON; their figures are those of real runs on this machine (RocksDB at 1 million keys, from
bench/results-state-scale.json; the HDFS-backed store at 3,000 keys), and the expected values are summed by hand.
"""

from __future__ import annotations

from bench import state_scale

ROCKSDB_SST = 38_919_978
ROCKSDB_PINNED = 24_725_456  # the memtables charged to RocksDB's cache under its cap
ROCKSDB_MEMORY = 68_103_637  # memoryUsedBytes: what the bench reported as "state bytes" before
HDFS_CURRENT_VERSION = 489_808
HDFS_MEMORY = 955_352  # the loaded versions on the heap


def progress(batch_id: int, rows: int, memory: int, custom: dict) -> dict:
    return {
        "batchId": batch_id,
        "timestamp": f"2026-12-06T20:0{batch_id}:00.000Z",
        "numInputRows": rows,
        "durationMs": {"triggerExecution": 1500 + batch_id, "addBatch": 1200},
        "eventTime": {"watermark": "2023-11-14T22:13:20.000Z"},
        "stateOperators": [
            {
                "numRowsTotal": 16_384,
                "memoryUsedBytes": memory,
                "allUpdatesTimeMs": 700,
                "commitTimeMs": 90,
                "customMetrics": custom,
            }
        ],
    }


def test_the_state_bytes_are_the_stores_account_of_the_state_and_its_memory_is_reported_apart():
    rocksdb = {"rocksdbSstFileSize": ROCKSDB_SST, "rocksdbPinnedBlocksMemoryUsage": ROCKSDB_PINNED}
    hdfs = {"stateOnCurrentVersionSizeBytes": HDFS_CURRENT_VERSION, "loadedMapCacheHitCount": 4}
    batches = state_scale.batch_numbers(
        [
            progress(0, 2_000, ROCKSDB_MEMORY, rocksdb),
            progress(1, 0, ROCKSDB_MEMORY, rocksdb),  # an idle trigger: no rows, not a micro-batch of the bench
            progress(2, 300, HDFS_MEMORY, hdfs),
        ]
    )

    assert [b["rows"] for b in batches] == [2_000, 300]
    on_rocksdb, on_hdfs = batches
    assert on_rocksdb["state_bytes"] == 63_645_434  # 38,919,978 on disk + 24,725,456 in memtables
    assert on_rocksdb["state_memory_bytes"] == ROCKSDB_MEMORY
    assert on_rocksdb["store_metrics"] == rocksdb
    assert (on_rocksdb["ms"], on_rocksdb["add_batch_ms"], on_rocksdb["state_rows"]) == (1500, 1200, 16_384)
    assert (on_rocksdb["state_updates_ms"], on_rocksdb["state_commit_ms"]) == (700, 90)
    assert on_hdfs["state_bytes"] == HDFS_CURRENT_VERSION
    assert on_hdfs["state_memory_bytes"] == HDFS_MEMORY
    assert on_hdfs["store_metrics"] == {"stateOnCurrentVersionSizeBytes": HDFS_CURRENT_VERSION}


def run_of(**figures) -> dict:
    """A run's record as bench/state_scale.py writes it, with ``figures`` over its state columns."""
    run = {
        "store": "rocksdb",
        "keys": 1_000_000,
        "key_buckets": 16_384,
        "conf": {},
        "settings": {},
        "env": {},
        "fill_rows": 100_000,
        "fill_order": "bucket",
        "checkpoint_bytes_per_key": 108.7,
        "peak_mb": {"peak_process_mb": {"driver": 242.5, "jvm": 939.9, "python_worker": 227.8}},
        "jvm_breakdown_peak_mb": {"java_heap": None},
        "heap_histogram_after_steady": {"live_heap_mb": 60.4},
        "fill_batch_median_s": 113.89,
        "steady_batch_median_s": 87.7,
        "steady_state_commit_median_s": 1.2,
        "restart_to_first_batch_s": 152.1,
        "load_average_before": [17.74, 17.0, 16.0],
    }
    return {**run, **figures}


def table_row(run: dict) -> list[str]:
    found = {"when": "2026-12-06", "nproc": 2, "params": {"steady_rows": 2_000}, "runs": [run]}
    lines = state_scale.report(found)
    header = next(line for line in lines if line.startswith("| keys |"))
    row = next(line for line in lines if line.startswith("| 1,000,000 |"))
    return dict(zip(header.split(" | "), row.split(" | "), strict=True))


def test_the_table_labels_the_state_bytes_and_the_store_memory_for_what_they_are():
    row = table_row(run_of(state_bytes=63_645_434, state_bytes_per_key=63.6, state_memory_bytes=ROCKSDB_MEMORY))
    assert row["state bytes/key (`cep_state_bytes`)"] == "64"
    assert row["store memory (`cep_state_memory_bytes`) / live heap after GC (MB)"] == "65 / 60"  # 68,103,637 B

    # A run recorded before the bench read both (an older record, or --compare-with) kept memoryUsedBytes alone,
    # as its "state_bytes": that is the store's memory. Its state's size comes from the store metrics it kept, by
    # the service's rule, when RocksDB's memory was bounded (the memtables charged to its cache): 63,645,434 B.
    recorded = {"rocksdbSstFileSize": ROCKSDB_SST, "rocksdbPinnedBlocksMemoryUsage": ROCKSDB_PINNED}
    bounded = {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true"}
    older = run_of(state_bytes=ROCKSDB_MEMORY, state_bytes_per_key=68.1, store_metrics_last_steady=recorded)
    assert state_scale.state_figures({**older, "conf": bounded}) == (63.6, ROCKSDB_MEMORY)
    row = table_row({**older, "settings": bounded})
    assert row["state bytes/key (`cep_state_bytes`)"] == "64"
    assert row["store memory (`cep_state_memory_bytes`) / live heap after GC (MB)"] == "65 / 60"
    # Unbounded, RocksDB does not charge its memtables to the cache: the state's size is not known.
    assert table_row(older)["state bytes/key (`cep_state_bytes`)"] == "-"
