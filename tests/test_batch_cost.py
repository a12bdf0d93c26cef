"""``BatchCost``: the jobs a micro-batch's ``foreachBatch`` started, found among the jobs Spark's status tracker
keeps for the query's job group, at a cost that does not grow with that list (a streaming query runs every
micro-batch in one job group, and Spark keeps up to 1,000 of its jobs)."""

from __future__ import annotations

import pytest

from cep.spark_bridge.alerting.batch_cost import BatchCost

pytestmark = pytest.mark.spark

GROUP = "cep-test-batch-cost"


def test_a_batch_s_jobs_are_counted_in_a_few_py4j_calls_however_many_jobs_its_group_kept(spark):
    context = spark.sparkContext
    gateway = context._gateway._gateway_client
    context.setJobGroup(GROUP, "jobs of earlier micro-batches")
    try:
        for _ in range(150):  # earlier micro-batches' jobs, kept by Spark's status tracker
            spark.range(3).collect()
        sent = []
        send = gateway.send_command

        def counting(command, *args, **kwargs):
            sent.append(command)
            return send(command, *args, **kwargs)

        gateway.send_command = counting
        try:
            cost = BatchCost.start(spark)
            with cost.step("work"):
                gateway.send_command = send  # the micro-batch's own work is not BatchCost's
                spark.range(5).collect()
                spark.range(7).collect()
                gateway.send_command = counting
            done = cost.done()
        finally:
            gateway.send_command = send
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    # a hand count: the two collects are one job each, one stage each, one task per partition of spark.range
    partitions = spark.range(5).rdd.getNumPartitions()
    assert (done["jobs"], done["stages"], done["tasks"]) == (2, 2, 2 * partitions)
    # pyspark's getJobIdsForGroup would turn 150+ ids into a list one round trip each, twice
    assert len(sent) < 60, len(sent)
