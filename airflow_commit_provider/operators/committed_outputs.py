"""What a committed write tells Airflow about its destination: its asset and its OpenLineage.

A mixin of :class:`~airflow_commit_provider.operators.spark_submit.CommittedSparkSubmitOperator`,
kept apart so the operator holds the try logic: the asset the operator declares gets its event
after a verified (or adopted) commit (:mod:`airflow_commit_provider.assets`); the OpenLineage facets
and the confs linking Spark's own listener to the task are :mod:`airflow_commit_provider.lineage`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_commit_provider import lineage
from airflow_commit_provider.assets import commit_extra, emit_commit_event
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.paths import StorePath

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Asset, Context

    from airflow_commit_provider.core.formats.success import SuccessData

__all__ = ["CommittedOutputs"]

log = logging.getLogger(__name__)


class CommittedOutputs:
    """The destination as an asset and an OpenLineage dataset, with what the commit made visible."""

    destination: str
    conflict_mode: str | None
    emit_asset: bool
    asset: Asset | None = None
    #: What the try made visible, for OpenLineage: the verified summary, or the _SUCCESS of a job
    #: that reached its commit point although the try failed.
    _written: dict[str, Any] | None = None

    def _publish_commit(self, context: Context, data: SuccessData, result: dict[str, Any]) -> dict[str, Any]:
        """Publish a verified commit: the asset event (extra, partition keys) and, for lineage, `result`."""
        partitions = [p for p in data.partitions if p]
        count = len(partitions) if data.partition_count is None else data.partition_count
        listed_at = partition_list_uri(self.destination, data)
        extra = commit_extra(result, partitions, partition_count=count, partition_list=listed_at)
        # What lineage reports: the extra's partitions (its facet lists no more) and the counts.
        self._written = {**result, "partitions": extra["partitions"]}
        if self.asset is not None:
            emit_commit_event(context, self.asset, extra, partitions, count)
        elif self.emit_asset:
            log.info("destination is templated, so this task declared no asset for it (see emit_asset)")
        return result

    def _lineage_conf(self, conf: dict[str, Any], context: Context) -> dict[str, Any]:
        """`conf` with the OpenLineage properties the Spark provider's arguments ask for."""
        if getattr(self, "_openlineage_inject_parent_job_info", False):
            conf = lineage.parent_job_conf(conf, context)
        if getattr(self, "_openlineage_inject_transport_info", False):  # Spark provider 6.3.0 lacks it
            conf = _transport_conf(conf, context)
        return conf

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The destination, before anything is written (OVERWRITE for ``replace``)."""
        return lineage.write_lineage(self.destination, replace=self.conflict_mode == "replace")

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The destination with what the commit made visible: rows, bytes, files, partitions."""
        return lineage.write_lineage(
            self.destination, replace=self.conflict_mode == "replace", written=self._written
        )

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """The destination; with statistics only if the job committed although the try failed."""
        return self.get_openlineage_facets_on_complete(task_instance)


def partition_list_uri(destination: str, data: SuccessData) -> str:
    """Where every partition a committed job wrote is listed, for readers of its asset event: its
    partition list when `_SUCCESS` names only the first ones, else the job's record (its
    ``partitionStats`` name each partition). Both outlive the `_SUCCESS` the next job replaces."""
    root = StorePath.parse(destination)
    if data.partition_list is not None:
        return data.partition_list.location(root).uri()
    return JobLayout(root, data.job_id).job_record.uri()


def _transport_conf(conf: dict[str, Any], context: Context) -> dict[str, Any]:
    """The provider's transport properties (the user asked: they may hold an API key)."""
    try:
        from airflow.providers.common.compat.openlineage.utils.spark import (
            inject_transport_information_into_spark_properties,
        )
    except ImportError:
        log.warning("openlineage_inject_transport_info: this Airflow has no OpenLineage transport to pass")
        return conf
    return dict(inject_transport_information_into_spark_properties(dict(conf), context))
