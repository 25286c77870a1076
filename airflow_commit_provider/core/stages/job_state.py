"""Job setup, the job marker and its checks (continuity of correctness)."""

from __future__ import annotations

import json
import time

from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.errors import JobNotActiveError


def setup_job(ctx: JobContext, required_capabilities: tuple[str, ...]) -> None:
    """Refuse an unsuitable store, remove a previous `_SUCCESS`, and mark the job active."""
    for capability in required_capabilities:
        ctx.store.require(capability, f"the {ctx.committer} committer")
    if ctx.store.get_status(ctx.layout.success_marker) is not None:
        log.info("job %s: removing the previous %s", ctx.job_id, ctx.layout.success_marker)
        ctx.store.delete(ctx.layout.success_marker)
    ctx.store.prepare_directory(ctx.layout.job_attempt_dir)
    marker = {"jobId": ctx.job_id, "committer": ctx.committer, "created": int(time.time() * 1000)}
    ctx.store.write_bytes(ctx.layout.job_marker, json.dumps(marker).encode("utf-8"))


def job_is_active(ctx: JobContext) -> bool:
    return ctx.store.get_status(ctx.layout.job_marker) is not None


def require_active_job(ctx: JobContext, action: str) -> None:
    if not job_is_active(ctx):
        raise JobNotActiveError(
            f"job {ctx.job_id} at {ctx.layout.destination} is not active (never set up, committed or aborted): "
            f"cannot {action}"
        )
