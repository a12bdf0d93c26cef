"""Where one micro-batch's ``foreachBatch`` spends its time, step by step, and the Spark jobs it starts.

``AlertStream._write_batch`` times each of its steps (``BatchCost.step``) and counts the Spark jobs and
stages it started (Spark's status tracker, by the job group the micro-batch runs in); the stream puts them
beside Spark's own parts of the micro-batch (``durationMs``) in the status's ``last_batch.foreach_batch``,
so anyone can see, on a real deployment as in bench/kafka_e2e.py, whether a micro-batch's time goes to the
rules (the ``collect`` step runs the stateful step), the file sinks, the outboxes or the journal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Spark's status tracker lists a job group's jobs as long as it retains them (spark.ui.retainedJobs, 1,000 by
# default), far more than one micro-batch starts: the jobs new since the start of the batch are its own.
_GROUP = "spark.jobGroup.id"


@dataclass
class BatchCost:
    """Milliseconds per step of one ``foreachBatch`` call, and the jobs, stages and tasks it started."""

    tracker: Any = None
    store: Any = None  # Spark's status store (the JVM's), for the run time of each stage
    group: str | None = None
    jobs_before: frozenset[int] = frozenset()
    started: float = field(default_factory=time.perf_counter)
    steps_ms: dict[str, float] = field(default_factory=dict)
    # CPU of the thread that runs foreachBatch, per step: the driver's own Python work, apart from the time a
    # step waits for Spark's jobs (which the JVM and the Python workers spend) and from what a loaded machine adds.
    steps_cpu_ms: dict[str, float] = field(default_factory=dict)
    group_jobs: Callable[[], frozenset[int]] | None = None  # the ids of the group's jobs (``_group_jobs``)

    @classmethod
    def start(cls, spark: Any) -> BatchCost:
        """Begin timing a micro-batch run on ``spark`` (the session ``foreachBatch`` hands over)."""
        try:
            context = spark.sparkContext
            tracker = context.statusTracker()
            group = context.getLocalProperty(_GROUP)
            group_jobs = _group_jobs(spark, group)
            before = group_jobs()
        except Exception:  # noqa: BLE001 - a Spark Connect session has no status tracker: times only
            return cls()
        try:
            store = spark._jsparkSession.sparkContext().statusStore()
        except Exception:  # noqa: BLE001 - no JVM at hand: counts without the stages' run times
            store = None
        return cls(tracker=tracker, store=store, group=group, jobs_before=before, group_jobs=group_jobs)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        began, began_cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.steps_ms[name] = round((time.perf_counter() - began) * 1000, 1)
            self.steps_cpu_ms[name] = round((time.thread_time() - began_cpu) * 1000, 1)

    def done(self) -> dict:
        """``{"total_ms", "steps_ms", "steps_cpu_ms", "jobs", "stages", "tasks", "stage_run_ms"}`` (the counts
        None without a status tracker)."""
        jobs = stages = tasks = run_ms = None
        if self.tracker is not None:
            try:
                new = sorted(self.group_jobs() - self.jobs_before)
                infos = [self.tracker.getJobInfo(job) for job in new]
                stage_ids = {stage for info in infos if info is not None for stage in info.stageIds}
                # a stage whose output is cached or shuffled already is listed and skipped: it ran no task
                ran = [s for s in map(self.tracker.getStageInfo, stage_ids) if s is not None and s.numCompletedTasks]
                jobs, stages, tasks = len(new), len(ran), sum(s.numCompletedTasks for s in ran)
                run_ms = self._stage_run_ms(sorted(s.stageId for s in ran))
            except Exception:  # noqa: BLE001 - a stopping context: the times are still right
                pass
        return {
            "total_ms": round((time.perf_counter() - self.started) * 1000, 1),
            "steps_ms": dict(self.steps_ms),
            "steps_cpu_ms": dict(self.steps_cpu_ms),
            "jobs": jobs,
            "stages": stages,
            "tasks": tasks,
            "stage_run_ms": run_ms,
        }

    def _stage_run_ms(self, stage_ids: list[int]) -> list[int] | None:
        """The tasks' run time summed per stage, in the order the stages ran (Spark's ``executorRunTime``; a
        stage of a Python UDF counts the time its tasks waited for the Python workers)."""
        if self.store is None:
            return None
        return [int(self.store.lastStageAttempt(stage).executorRunTime()) for stage in stage_ids]


def _group_jobs(spark: Any, group: str | None) -> Callable[[], frozenset[int]]:
    """A call that gives the ids of the jobs Spark's status tracker keeps for ``group``. A streaming query runs all
    its micro-batches in one job group, so the list grows with the stream up to the jobs Spark retains (1,000), and
    pyspark's ``getJobIdsForGroup`` turns the Java array into a list one Py4J round trip per id: 2,000 round trips
    a micro-batch on a stream that has run a few minutes. Here the JVM writes the array as one text instead."""
    tracker = spark._jsparkSession.sparkContext().statusTracker()
    arrays = getattr(spark._jvm, "java.util.Arrays")

    def ids() -> frozenset[int]:
        text = arrays.toString(tracker.getJobIdsForGroup(group))  # "[3, 7, 12]"
        return frozenset(int(n) for n in text[1:-1].split(",") if n.strip())

    return ids
