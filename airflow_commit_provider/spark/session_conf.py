"""A running session's conf changed for the length of a write.

Spark reads most keys when a job starts, so a write sets them around its own jobs; concurrent
writes in one session (days run as threads) must not undo each other's settings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from airflow_commit_provider.spark.config import HADOOP_CONF_PREFIX


def runtime_key(key: str) -> str:
    """The key to set on a running session: ``spark.hadoop.X`` becomes ``X``."""
    return key[len(HADOOP_CONF_PREFIX) :] if key.startswith(HADOOP_CONF_PREFIX) else key


@contextmanager
def applied_conf(spark: Any, conf: Mapping[str, str]) -> Iterator[None]:
    """Apply ``conf`` to a running session for the block, then restore the previous values."""
    previous: dict[str, str | None] = {}
    try:
        for key, value in conf.items():
            target = runtime_key(key)
            if target not in previous:
                previous[target] = spark.conf.get(target, None)
            spark.conf.set(target, value)
        yield
    finally:
        for target, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(target)
            else:
                spark.conf.set(target, earlier)


class _SharedDefault:
    """Concurrent writes in one session (days run as threads of one driver) share the session's
    conf: each one saving and restoring the value on its own would restore another write's
    setting and leave it behind. The first write that needs the default sets it, the last one
    unsets it, and a value the session already had is never touched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[tuple[int, str], int] = {}

    @contextmanager
    def held(self, spark: Any, key: str, value: str) -> Iterator[None]:
        slot = (id(spark), key)
        with self._lock:
            holders = self._holders.get(slot, 0)
            set_by_session = holders == 0 and spark.conf.get(key, None) is not None
            if not set_by_session:
                if holders == 0:
                    spark.conf.set(key, value)
                self._holders[slot] = holders + 1
        try:
            yield
        finally:
            if not set_by_session:
                with self._lock:
                    self._holders[slot] -= 1
                    if self._holders[slot] == 0:
                        del self._holders[slot]
                        spark.conf.unset(key)


#: Session defaults held while any write of this process needs them (``held_default``).
_shared_defaults = _SharedDefault()


def held_default(spark: Any, key: str, value: str) -> AbstractContextManager[None]:
    """Set ``key`` to ``value`` for the block unless the session sets it; safe for concurrent writes."""
    return _shared_defaults.held(spark, key, value)
