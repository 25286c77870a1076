"""OpenLineage for committed writes and cleanups: one dataset per destination or scope, never per file.

The OpenLineage provider asks an operator for ``get_openlineage_facets_on_start/complete/failure``;
the operators answer with what is built here. A write is one output dataset for its destination,
with what the commit made visible (``outputStatistics``: rows, bytes, files), the partitions
written (the standard ``subset`` facet, one ``Partition`` each) and, for ``replace``, the lifecycle
change ``OVERWRITE``. A cleanup is one input dataset for its scope with the lifecycle change
``DROP``, as the Amazon provider's ``S3DeleteObjectsOperator`` reports what it deleted, narrowed by
the ``subset`` facet to the locations removed, and ``inputStatistics`` for how much.

Names follow OpenLineage's conventions: namespace ``s3://bucket`` and the key as name for S3 (any
of ``s3``, ``s3a``, ``s3n``), namespace ``file`` and the absolute path for local files.

Only the OpenLineage provider calls into this module, so its imports are made when it does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.paths import StorePath

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

__all__ = ["dataset_id", "parent_job_conf", "removal_lineage", "write_lineage"]

log = logging.getLogger(__name__)

#: Partitions and removed locations listed in a facet; statistics count all of them.
FACET_LOCATIONS = 100
#: Spark conf keys that name the parent job: present means the user chose them.
PARENT_JOB_CONF_PREFIX = "spark.openlineage.parent"


def dataset_id(location: str | StorePath) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a location."""
    path = StorePath.parse(location)
    if path.is_local:
        return "file", path.key
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
            lifecycleStateChange=LifecycleStateChange.OVERWRITE.value
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


def removal_lineage(
    scope: str | StorePath, *, removed: Sequence[StorePath], files: int | None, size: int | None
) -> OperatorLineage:
    """The input dataset of a cleanup that removed `removed` under `scope` (nothing: no dataset)."""
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        LifecycleStateChange,
        LifecycleStateChangeDatasetFacet,
        PreviousIdentifier,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    if not removed:
        return OperatorLineage()
    namespace, name = dataset_id(scope)
    facets = {
        "lifecycleStateChange": LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange.DROP.value,
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
        locations = [dataset_id(path)[1] for path in removed[:FACET_LOCATIONS]]
        input_facets["subset"] = InputSubsetInputDatasetFacet(
            inputCondition=LocationSubsetCondition(locations=locations)
        )
        input_facets["inputStatistics"] = InputStatisticsInputDatasetFacet(size=size, fileCount=files)
    dataset = InputDataset(namespace=namespace, name=name, facets=facets, inputFacets=input_facets)
    return OperatorLineage(inputs=[dataset])


def parent_job_conf(conf: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
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
