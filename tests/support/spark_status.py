"""What Spark's status tracker says of a driver's jobs, for test drivers that must wait until the
tasks Spark killed (a speculative straggler, say) have really ended before they report."""

from __future__ import annotations

import time
from typing import Any


def stage_counts(spark: Any, group: str | None = None) -> list[dict[str, int]]:
    """Each stage of the jobs in `group` (None: jobs without a group) with its task counts."""
    tracker = spark.sparkContext.statusTracker()
    found = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage_id in info.stageIds if info else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                found.append(
                    {
                        "stage": stage_id,
                        "active": stage.numActiveTasks,
                        "completed": stage.numCompletedTasks,
                        "failed": stage.numFailedTasks,
                    }
                )
    return found


def wait_until_no_task_runs(spark: Any, bound: float, group: str | None = None) -> list[dict[str, int]]:
    """Poll (bounded by `bound` seconds) until no task of those jobs runs; their stages' counts."""
    deadline = time.monotonic() + bound
    while any(stage["active"] for stage in stage_counts(spark, group)) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling Spark's status, bounded
    return stage_counts(spark, group)
