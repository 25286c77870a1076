"""Marker files: how a test and the processes it starts (a spark-submit driver, the Spark tasks it
runs) tell each other how far they got, without sleeps. A marker is written atomically, so a
poller never reads half of one, and each wait is bounded, so a broken run ends instead of hanging.

The driver scripts run outside pytest: they put ``tests/`` on ``sys.path`` to import this module,
and `ship_to_tasks` sends it to the executors by value (their Python has no ``tests/``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def write_marker(path: Path, data: dict[str, Any]) -> None:
    """Atomically (rename), so a poller never reads half a marker."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


def wait_for(path: Path, bound: float) -> bool:
    """Whether `path` appeared within `bound` seconds."""
    deadline = time.monotonic() + bound
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # polling for a file another process creates, bounded
    return True


def ship_to_tasks() -> None:
    """Pickle this module's functions by value into Spark tasks that call them."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
