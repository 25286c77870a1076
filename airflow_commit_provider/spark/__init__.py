"""Spark integration: committed DataFrame writes through our committers, and Spark conf for
Hadoop's own (JVM) committers.

- :func:`write_committed` - each Spark task writes and commits one task attempt through
  ``mapInArrow``; the driver commits the job with exactly the results Spark accepted.
- :func:`plan_write` - what a ``write_committed`` call would do (committer, conflict handling, job
  ID), decided without Spark.
- :func:`finish_table_write` - finish a table write that stopped after its commit point (roll the
  commit forward, register its partitions in the catalog).
- :func:`register_data_source` - ``df.write.format("committed")``: the same protocol as a Python
  data source, run by Spark's own write path (classic and Spark Connect sessions).
- :func:`jvm_committer_conf` - Spark conf that makes Spark's own writers use Hadoop's S3A or
  manifest committers; :func:`s3a_store_conf` - where S3A finds a store (never who it is).

Importing this package never imports PySpark; the functions import it when called. Executors need
this package installed (the task function is pickled by reference).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "WriteSummary",
    "applied_conf",
    "default_committer",
    "finish_table_write",
    "jvm_committer_conf",
    "plan_write",
    "register_data_source",
    "s3a_store_conf",
    "write_committed",
]

_EXPORTS = {
    "WriteSummary": "airflow_commit_provider.spark.writer",
    "default_committer": "airflow_commit_provider.core.committers.registry",
    "finish_table_write": "airflow_commit_provider.spark.tables",
    "plan_write": "airflow_commit_provider.spark.write_plan",
    "register_data_source": "airflow_commit_provider.spark.datasource",
    "write_committed": "airflow_commit_provider.spark.writer",
    "jvm_committer_conf": "airflow_commit_provider.spark.jvm_committers",
    "applied_conf": "airflow_commit_provider.spark.session_conf",
    "s3a_store_conf": "airflow_commit_provider.spark.jvm_committers",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
