"""Where a job commit spends its time: wall-clock seconds of each stage of `Committer.commit_job`.

`with stage_timer() as phases: committer.commit_job(...)` fills `phases` with the seconds spent
loading manifests, making the entries visible, writing `_SUCCESS`, folding the lost attempts into
the job record, and cleaning up (of which: listing/reading the upload records to abort uncommitted
uploads). It wraps the stage functions
for the duration of the block; a stage this version of the code no longer has is simply absent.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from airflow_commit_provider.core.stages import cleanup, commit_files, load_manifests, lost_attempts, success

_STAGES: tuple[tuple[Any, str, str], ...] = (
    (load_manifests, "load_committed_manifests", "load manifests"),
    (commit_files, "commit_entries", "complete uploads / renames"),
    (success, "save_success", "write _SUCCESS"),
    (lost_attempts, "fold_lost_attempts", "fold lost attempts into the record"),
    (cleanup, "remove_job_files", "cleanup"),
    (cleanup, "abort_uncommitted_uploads", "cleanup: scan upload records"),
)


@contextlib.contextmanager
def stage_timer() -> Iterator[dict[str, float]]:
    phases: dict[str, float] = {}
    originals: list[tuple[Any, str, Callable[..., Any]]] = []

    def timed(function: Callable[..., Any], label: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                phases[label] = phases.get(label, 0.0) + time.perf_counter() - start

        return wrapper

    for module, name, label in _STAGES:
        function = getattr(module, name, None)
        if function is not None:
            originals.append((module, name, function))
            setattr(module, name, timed(function, label))
    try:
        yield phases
    finally:
        for module, name, function in originals:
            setattr(module, name, function)
