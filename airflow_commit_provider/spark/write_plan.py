"""Everything ``write_committed`` decides before any Spark work, from its arguments and the conf.

Planning reads settings through a :class:`~airflow_commit_provider.spark.config.ConfSource` (a
session's ``SparkConf``, or a plain dict) and imports no PySpark, so what a write would do - which
committer, which conflict handling, which job ID, options and S3 settings - can be checked on its
own. Every refusal happens here, before a job is set up.

A write ``CommittedSparkSubmitOperator`` planned is checked once, by the operator: the driver takes
its plan from the conf, whose digest (``spark.airflow_commit.plan_digest``) says it is the one the
operator checked, and refuses a conf that no longer matches it. Without the operator, or for a
write whose arguments differ from the operator's plan, the write is checked here.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.committers import WritePlan, resolve
from airflow_commit_provider.core.committers.registry import accepted_plan
from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.core.options import CommitOptions, parse_conflict_mode
from airflow_commit_provider.core.paths import HDFS_SCHEME, Destination, StorePath
from airflow_commit_provider.core.store.settings import HdfsSettings, S3Settings
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark import write_options
from airflow_commit_provider.spark.formats import file_format


@dataclass(frozen=True)
class SparkWritePlan:
    """One planned ``write_committed``: the commit plan plus what the Spark side needs."""

    commit: WritePlan
    format: str
    job_id: str
    commit_options: CommitOptions
    """With the conflict mode the committer applies (`WritePlan.committer_conflict_mode`)."""
    s3: S3Settings
    hdfs: HdfsSettings | None
    """An ``hdfs://`` destination's settings, resolved on the driver (`HdfsSettings.resolved_for`)."""
    writer: write_options.WriterOptions

    @property
    def destination(self) -> StorePath:
        """Where the write goes, in its store (a ``write_committed`` plan is always on one of ours)."""
        return self.commit.destination.root

    @property
    def table(self) -> str | None:
        """The catalog table written, whose partitions are registered after the commit."""
        return self.commit_options.table


def plan_write(
    destination: str | os.PathLike[str] | StorePath | None,
    *,
    conf: cfg.ConfSource,
    format: str = "parquet",
    partition_by: str | Sequence[str] = (),
    committer: str | None = None,
    conflict_mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    table: str | None = None,
) -> SparkWritePlan:
    """Plan a write (see ``write_committed`` for the arguments); raise ValueError if it cannot be.

    Unset arguments come from the conf: ``spark.airflow_commit.destination``, ``.committer``,
    ``.conflict_mode`` (default ``append``) and ``.job_id`` (default a new uuid4). `table` is the
    catalog table at `destination` (``spark.tables`` resolved it), recorded in the job's commit decision.
    """
    from_operator = cfg.operator_planned(conf)  # first: a conf changed since is refused before all else
    fmt = file_format(format).name
    parsed = write_options.parse_options(options, fmt, conf)
    destination = destination if destination is not None else conf.get(cfg.CONF_DESTINATION)
    if not destination:
        raise ValueError(f"no destination: pass one or set {cfg.CONF_DESTINATION}")
    commit_options = write_options.commit_options(parsed.committer, conf)
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    planned = from_operator and _planned_committer(conf, destination, committer, conflict_mode)
    if planned:
        commit = accepted_plan(
            planned,
            Destination.parse(destination),
            columns,
            parse_conflict_mode(conf.get(cfg.CONF_CONFLICT_MODE) or "append"),
            engine="python",
            allow_unsafe_v2=commit_options.allow_unsafe_v2,
        )
    else:
        commit = resolve(
            committer or conf.get(cfg.CONF_COMMITTER) or None,
            destination,
            partition_columns=columns,
            conflict_mode=(conflict_mode or conf.get(cfg.CONF_CONFLICT_MODE) or "append").lower(),
            allow_unsafe_v2=commit_options.allow_unsafe_v2,
        )
    root = commit.destination.root
    local = root.is_local
    return SparkWritePlan(
        commit=commit,
        format=fmt,
        job_id=validate_job_id(conf.get(cfg.CONF_JOB_ID) or str(uuid.uuid4())),
        commit_options=dataclasses.replace(
            commit_options, conflict_mode=commit.committer_conflict_mode, table=table
        ),
        s3=S3Settings() if local else write_options.resolve_s3_settings(parsed.s3, conf, environ),
        hdfs=_hdfs_settings(root, environ),
        writer=parsed.writer,
    )


def _hdfs_settings(root: StorePath, environ: Mapping[str, str] | None) -> HdfsSettings | None:
    """For an ``hdfs://`` destination, its WebHDFS address and user from the driver's environment,
    which the tasks receive; refused here, naming the destination, when they cannot be resolved."""
    if root.scheme != HDFS_SCHEME:
        return None
    try:
        return HdfsSettings.from_environment(environ).resolved_for(root.bucket, environ)
    except ValueError as error:
        raise ValueError(f"{root}: {error}") from None


def _planned_committer(
    conf: cfg.ConfSource,
    destination: str | os.PathLike[str] | StorePath,
    committer: str | None,
    conflict_mode: str | None,
) -> str | None:
    """The committer of the operator's plan, if this is the write it planned for ``write_committed``
    (``engine="python"``): the destination, committer and conflict mode given are the conf's, or unset."""
    planned = conf.get(cfg.CONF_COMMITTER)
    given = str(destination) if isinstance(destination, StorePath) else os.fspath(destination)
    if (
        conf.get(cfg.CONF_ENGINE) == "python"
        and given == conf.get(cfg.CONF_DESTINATION)
        and committer in (None, planned)
        and conflict_mode in (None, conf.get(cfg.CONF_CONFLICT_MODE))
    ):
        return planned
    return None
