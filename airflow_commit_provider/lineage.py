"""OpenLineage for committed writes and cleanups: one dataset per destination or removed area, never per file.

The OpenLineage provider asks an operator for ``get_openlineage_facets_on_start/complete/failure``;
the operators answer with what is built here. A write is one output dataset for its destination,
with what the commit made visible (``outputStatistics``: rows, bytes, files), the partitions
written (the standard ``subset`` facet, one ``Partition`` each) and, for ``replace``, the lifecycle
change ``OVERWRITE``.

A cleanup reports what it removed as input datasets with the lifecycle change ``DROP``, as the
Amazon provider's ``S3DeleteObjectsOperator`` does for the keys it deletes. Each is named after
what was removed, never after the table the cleanup ran in: Marquez soft-deletes a dataset it
sees dropped (MarquezProject/marquez#1847) whatever the ``subset`` facet says, so a DROP named
after the scope would hide a live table after every hourly cleanup of its leftovers.

Names follow OpenLineage's conventions: namespace ``s3://bucket`` and the key as name for S3 (any
of ``s3``, ``s3a``, ``s3n``), namespace ``file`` and the absolute path for local files.

Only the OpenLineage provider calls into this module, so its imports are made when it does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.cleanup.records import RecordPruneReport
from airflow_commit_provider.cleanup.reports import KEPT_OUTCOMES
from airflow_commit_provider.cleanup.temp_trees import TempCleanReport
from airflow_commit_provider.cleanup.uploads import AbortReport
from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import HDFS_SCHEME, StorePath

if TYPE_CHECKING:
    from airflow.providers.common.compat.openlineage.facet import InputDataset
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from airflow_commit_provider.cleanup.reports import CleanupReport

__all__ = ["dataset_id", "parent_job_conf", "removal_lineage", "write_lineage"]

log = logging.getLogger(__name__)

#: Partitions and removed locations listed in a facet; statistics count all of them.
FACET_LOCATIONS = 100
#: Datasets one cleanup reports dropped: enough for a table's leftovers, few enough for one event.
DROPPED_DATASETS = 50
# The named trees and the locations of the rest come from the outcomes a report keeps.
assert DROPPED_DATASETS - 1 + FACET_LOCATIONS <= KEPT_OUTCOMES
#: Under a cleanup's scope, the dataset standing for the temporary trees past `DROPPED_DATASETS`.
OTHER_TEMPORARY_TREES = "_other_temporary_trees"
#: Under a cleanup's scope, the dataset standing for the multipart uploads it aborted.
PENDING_UPLOADS = "_pending_uploads"
#: Spark conf keys that name the parent job: present means the user chose them.
PARENT_JOB_CONF_PREFIX = "spark.openlineage.parent"


def dataset_id(destination: str | StorePath) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a destination (or any path in a store), as its naming
    spec has them: ``file``, ``hdfs://<namenode>:<port>`` with an absolute path, ``s3://<bucket>``."""
    path = StorePath.parse(destination)
    if path.is_local:
        return "file", path.key
    if path.scheme == HDFS_SCHEME:
        return f"hdfs://{path.bucket}", "/" + path.key.strip("/")
    return f"s3://{path.bucket}", path.key.strip("/") or "/"


def write_lineage(
    destination: str | StorePath, *, replace: bool, written: Mapping[str, Any] | None = None
) -> OperatorLineage:
    """The output dataset of a write; with `written` (files, bytes, rows, partitions), what it made visible."""
    from airflow.providers.common.compat.openlineage.facet import (
        LifecycleStateChange,
        LifecycleStateChangeDatasetFacet,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    namespace, name = dataset_id(destination)
    facets: dict[str, Any] = {}
    if replace:
        facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange.OVERWRITE
        )
    output_facets: dict[str, Any] = {}
    if written is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=written["rows"], size=written["bytes"], fileCount=written["files"]
        )
        partitions = [p for p in written["partitions"] if p]
        if partitions and (subset := _partition_subset(partitions[:FACET_LOCATIONS])) is not None:
            output_facets["subset"] = subset
    dataset = OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets)
    return OperatorLineage(outputs=[dataset])


def removal_lineage(report: CleanupReport[Any, Any] | None) -> OperatorLineage:
    """The datasets a cleanup dropped, each named after a removed area (a dry run drops nothing).

    Temporary trees are the unit a cleanup deletes, so each deleted tree (``<table>/_temporary/<job>``,
    ``<table>/__magic_job-<job>``, ``<table>/.spark-staging-<job>``, or ``<table>/_temporary`` for
    files loose in it) is one dataset with the files and bytes it held. Past `DROPPED_DATASETS`,
    the last dataset, ``<scope>/_other_temporary_trees``, stands for the rest: their sum, and their
    names in its ``subset`` facet. Pruned job records are ``<table>/_airflow_commit``, the records
    directory, with the record files in ``subset``.

    Aborted uploads are one dataset, ``<scope>/_pending_uploads``, with their keys in ``subset``.
    An upload's key is where its object would have appeared: in the table or one of its live
    partitions, so neither its key's directory nor the scope may be the dropped name. A name per
    partition would also leave a new dropped dataset in the lineage graph for every day with an
    abandoned upload, where one name per scope stays one node however many cleanups run.
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    if report is None or report.dry_run:
        return OperatorLineage()
    if isinstance(report, TempCleanReport):
        dropped = _temporary_trees(report)
    elif isinstance(report, AbortReport):
        dropped = _pending_uploads(report)
    elif isinstance(report, RecordPruneReport):
        dropped = _job_records(report)
    else:
        raise TypeError(f"no lineage for a {type(report).__name__}")
    return OperatorLineage(inputs=[_dropped_dataset(area) for area in dropped])


@dataclass(frozen=True)
class _Dropped:
    """One dataset a cleanup dropped, and what it held (None: not measured)."""

    path: StorePath
    files: int | None
    bytes: int | None
    paths: tuple[StorePath, ...] = ()
    """What the dataset stands for, when it is not itself one removed path (OpenLineage's subset
    facet calls them locations)."""


def _temporary_trees(report: TempCleanReport) -> list[_Dropped]:
    """The first trees in path order, then one dataset summing the rest (from the report's totals)."""
    kept = report.kept  # the acted-on trees with the smallest paths, in path order
    trees = [_Dropped(o.tree.path, o.files, o.bytes) for o in kept]
    if report.acted_count <= DROPPED_DATASETS:
        return trees
    named, rest = trees[: DROPPED_DATASETS - 1], trees[DROPPED_DATASETS - 1 :]
    other = _Dropped(
        report.listing.scope.join(OTHER_TEMPORARY_TREES),
        report.totals["files"] - sum(tree.files or 0 for tree in named),
        report.totals["bytes"] - sum(tree.bytes or 0 for tree in named),
        tuple(tree.path for tree in rest),
    )
    return [*named, other]


def _pending_uploads(report: AbortReport) -> list[_Dropped]:
    if not report.acted_count:
        return []
    keys = tuple(o.upload.path for o in report.kept)  # the first keys in key order; the count is of all
    return [
        _Dropped(report.listing.scope.join(PENDING_UPLOADS), report.acted_count, report.bytes_reclaimed, keys)
    ]


def _job_records(report: RecordPruneReport) -> list[_Dropped]:
    if not report.acted_count:
        return []
    files = sorted((status for o in report.kept for status in o.job.files), key=lambda s: s.path)
    directory = report.listing.scope.join(RECORDS_DIR)
    return [_Dropped(directory, report.totals["files"], report.totals["bytes"], tuple(s.path for s in files))]


def _dropped_dataset(dropped: _Dropped) -> InputDataset:
    """The input dataset, with ``inputStatistics`` and, when it stands for several paths, ``subset``."""
    from airflow.providers.common.compat.openlineage.facet import (
        DatasetFacet,
        InputDataset,
        LifecycleStateChange,
        LifecycleStateChangeDatasetFacet,
        PreviousIdentifier,
    )

    namespace, name = dataset_id(dropped.path)
    facets: dict[str, DatasetFacet] = {
        "lifecycleStateChange": LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange.DROP,
            previousIdentifier=PreviousIdentifier(namespace=namespace, name=name),
        )
    }
    input_facets: dict[str, Any] = {}
    try:
        from openlineage.client.generated.base_subset_dataset import (
            InputSubsetInputDatasetFacet,
            LocationSubsetCondition,
        )
        from openlineage.client.generated.input_statistics_input_dataset import (
            InputStatisticsInputDatasetFacet,
        )
    except ImportError:  # an OpenLineage client older than the subset and input statistics facets
        log.debug("this OpenLineage client has no subset or inputStatistics facet")
    else:
        if dropped.paths:
            locations = [dataset_id(path)[1] for path in dropped.paths[:FACET_LOCATIONS]]
            input_facets["subset"] = InputSubsetInputDatasetFacet(
                inputCondition=LocationSubsetCondition(locations=locations)
            )
        input_facets["inputStatistics"] = InputStatisticsInputDatasetFacet(
            size=dropped.bytes, fileCount=dropped.files
        )
    return InputDataset(namespace=namespace, name=name, facets=facets, inputFacets=input_facets)


def parent_job_conf(conf: Mapping[str, Any], context: Context) -> dict[str, Any]:
    """`conf` with the parent-job properties the Spark provider injects, when OpenLineage is enabled.

    Spark's own OpenLineage listener, where a cluster runs it, then links its events to this
    task's run. They are IDs and names only (never the transport, which can hold an API key).
    Properties the user set already are kept; without the provider, or with it disabled, `conf` is
    returned as it is. Lineage never fails a write: if the properties cannot be made (a task
    instance the provider cannot name), the job runs without them and a warning says so.
    """
    try:
        from airflow.providers.openlineage import conf as openlineage_conf
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
        )
    except ImportError:
        return dict(conf)
    if openlineage_conf.is_disabled():
        return dict(conf)
    try:
        return inject_parent_job_information_into_spark_properties(dict(conf), context)
    except Exception as error:  # the provider's own listener never fails a task either
        log.warning("OpenLineage parent-job confs not passed to Spark: %s: %s", type(error).__name__, error)
        return dict(conf)


def _partition_subset(partitions: list[str]) -> Any:
    """The ``subset`` facet listing `partitions` (``dt=2024-01-01/kind=a`` → its dimensions)."""
    try:
        from openlineage.client.generated.base_subset_dataset import (
            OutputSubsetOutputDatasetFacet,
            Partition,
            PartitionSubsetCondition,
        )
    except ImportError:  # an OpenLineage client older than the subset facet
        log.debug("this OpenLineage client has no subset facet: partitions are not reported")
        return None
    return OutputSubsetOutputDatasetFacet(
        outputCondition=PartitionSubsetCondition(
            partitions=[Partition(dimensions=_dimensions(p), identifier=p) for p in partitions]
        )
    )


def _dimensions(partition: str) -> dict[str, str]:
    """``dt=2024-01-01/kind=a`` → ``{"dt": "2024-01-01", "kind": "a"}`` (Hive-style directories)."""
    pairs = (part.partition("=") for part in partition.split("/") if part)
    return {column: value for column, _, value in pairs}
