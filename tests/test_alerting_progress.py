"""The stream's control loop reads only Spark's progress reports it has not folded yet (``status.new_progress``).

On Spark: a file-source query run one file per micro-batch (``processAllAvailable``, no sleeps). Whatever part of
the reports was seen before, the new ones are exactly pyspark's ``recentProgress`` after the last one seen, in
the same order, with the same fields; with every report seen, none.
"""

from __future__ import annotations

import json

import pytest

from cep.spark_bridge.alerting.status import new_progress


def _key(progress) -> tuple[int, str]:
    return int(progress.batchId), str(progress.timestamp)


@pytest.mark.spark
def test_new_progress_is_recent_progress_after_the_last_report_seen(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    stream = spark.readStream.schema("n LONG").option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        stream.groupBy().count().writeStream.outputMode("complete").format("memory").queryName("progress_probe")
    ).start()
    try:
        for batch in range(4):
            (source / f"{batch}.json").write_text("\n".join(json.dumps({"n": i}) for i in range(batch + 1)))
            query.processAllAvailable()
        everything = query.recentProgress
        assert len(everything) >= 4
        for seen_count in range(len(everything) + 1):
            seen = {_key(p) for p in everything[:seen_count]}
            found = new_progress(query, seen)
            assert [_key(p) for p in found] == [_key(p) for p in everything[seen_count:]]
            assert [p.json for p in found] == [p.json for p in everything[seen_count:]]
        assert sum(p.numInputRows for p in new_progress(query, set())) == 1 + 2 + 3 + 4
    finally:
        query.stop()
