"""What a committed try hands spark-submit: its plan and confs, the provider's hook arguments, the
OpenLineage properties, and the package.

``CommittedSparkSubmitOperator`` subclasses the Spark provider's ``SparkSubmitOperator``, so its
arguments, defaults and template fields are the provider's own, with no copy here to drift. The
provider's operator keeps each ``SparkSubmitHook`` argument ``x`` as its attribute ``x`` or ``_x``
(its ``_get_hook`` passes them so); :func:`hook_arguments` reads them back by the installed hook's
signature, so an argument a newer provider adds reaches our hook too. The Spark-provider test in
tests/airflow/test_committed_spark_submit_arguments.py compares the hook built so with the
provider's own, argument by argument.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import zipfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_commit_provider import lineage
from airflow_commit_provider.core.committers.registry import WritePlan, resolve
from airflow_commit_provider.core.formats.outcome import origin_json
from airflow_commit_provider.core.task_key import TaskKey, TryOrigin
from airflow_commit_provider.spark import config as cfg

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = [
    "SHIPPED_SUBPACKAGES",
    "build_py_files_zip",
    "check_submission",
    "hook_arguments",
    "lineage_conf",
    "shipped_py_files",
    "try_confs",
    "write_plan",
]

log = logging.getLogger(__name__)

#: Subpackages shipped to executors: the protocols and the PySpark writer (no Airflow imports).
SHIPPED_SUBPACKAGES = ("core", "spark")
_NOT_ARGUMENTS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def hook_arguments(operator: object) -> dict[str, Any]:
    """The ``SparkSubmitHook`` arguments a provider ``SparkSubmitOperator`` holds, by the hook's signature."""
    held = vars(operator)
    arguments: dict[str, Any] = {}
    for name, parameter in inspect.signature(SparkSubmitHook.__init__).parameters.items():
        if name == "self" or parameter.kind in _NOT_ARGUMENTS:
            continue
        attribute = next((a for a in (name, f"_{name}") if a in held), None)
        if attribute is not None:
            arguments[name] = held[attribute]
    return arguments


def write_plan(
    *, committer: str, destination: str, conflict_mode: str | None, engine: str, allow_unsafe_v2: bool
) -> WritePlan:
    """How a task's writes are committed (its destination parsed, once); a ValueError for a choice
    that cannot be honoured."""
    if not committer:
        raise ValueError("committer is required (magic, directory, partitioned, manifest, file-v1, ...)")
    return resolve(
        committer, destination, conflict_mode=conflict_mode, allow_unsafe_v2=allow_unsafe_v2, engine=engine
    )


def check_submission(plan: WritePlan, application: str, conf: Mapping[str, Any] | None) -> None:
    """A ValueError naming the argument unless the plan, application and conf can be submitted: a
    try checks its job's ``_SUCCESS`` through a store of ours, so its destination must be in one."""
    plan.destination.root  # noqa: B018  (raises, in one line, for a filesystem only Hadoop opens)
    if not application:
        raise ValueError("application is required: the PySpark application to submit")
    reserved = sorted(k for k in (conf or {}) if k in cfg.OPERATOR_CONFS)
    if reserved:
        raise ValueError(f"conf must not set {', '.join(reserved)}: the operator sets them for each try")


def shipped_py_files(
    py_files: str | None, ship_package: bool, directory: str | os.PathLike[str]
) -> str | None:
    """``--py-files``: the user's, then this package's executor modules zipped into `directory`."""
    files = [path for path in (py_files or "").split(",") if path.strip()]
    if ship_package:
        files.append(build_py_files_zip(directory))
    return ",".join(files) or None


def try_confs(
    plan: WritePlan,
    job_id: str,
    *,
    table: str | None,
    key: TaskKey | None,
    try_number: int | None,
    jvm_options: dict[str, Any],
    max_job_duration: timedelta | None = None,
) -> dict[str, str]:
    """The ``spark.airflow_commit.*`` confs of one try (for engine="hadoop", with the JVM committer conf).

    They are the plan's values, as `resolve` spelled and parsed them, so the application reads the
    names every other entry point does, and their digest (``cfg.CONF_PLAN_DIGEST``) lets the driver
    take the plan as checked. The task instance `key` and `try_number` are recorded with the job's
    decision when both are known. A table is written by ``write_committed``, which registers its
    partitions (engine="python"); the destination stays the table's root folder, which the
    operator's store checks need without Spark, and the driver refuses a table that is elsewhere.
    `max_job_duration` (the task's ``execution_timeout``) tells job setup how long the job may run,
    against the bucket's lifecycle rules; it is not planned (a user's conf may set it when the task
    has no timeout).
    """
    conf = {
        cfg.CONF_JOB_ID: job_id,
        cfg.CONF_COMMITTER: plan.committer,
        cfg.CONF_DESTINATION: plan.destination.uri,
        cfg.CONF_ENGINE: plan.engine,
        cfg.CONF_CONFLICT_MODE: plan.conflict_mode,
    }
    if table:
        if plan.engine != "python":
            raise ValueError(
                f"table={table!r} needs engine='python': write_committed registers its partitions"
            )
        conf[cfg.CONF_TABLE] = table
    if try_number is not None:
        conf[cfg.CONF_TRY_NUMBER] = str(try_number)
        if key is not None:
            conf[cfg.CONF_ORIGIN] = json.dumps(origin_json(TryOrigin(key, try_number)))
    conf[cfg.CONF_PLAN_DIGEST] = cfg.plan_digest(conf)
    if max_job_duration is not None:
        conf[cfg.CONF_MAX_JOB_DURATION] = f"{max_job_duration.total_seconds():g}"
    if plan.engine == "hadoop":
        from airflow_commit_provider.spark.jvm_committers import plan_conf

        conf.update(plan_conf(plan, job_id=job_id, **jvm_options))
    return conf


def lineage_conf(
    conf: Mapping[str, Any], context: Context, *, parent_job_info: bool, transport_info: bool
) -> dict[str, Any]:
    """`conf` with the OpenLineage properties the Spark provider's arguments ask for: the parent
    job's (IDs and names), and the transport's only when asked (it may hold an API key)."""
    conf = dict(conf)
    if parent_job_info:
        conf = lineage.parent_job_conf(conf, context)
    if transport_info:
        try:
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_transport_information_into_spark_properties,
            )
        except ImportError:
            log.warning(
                "openlineage_inject_transport_info: this Airflow has no OpenLineage transport to pass"
            )
        else:
            conf = dict(inject_transport_information_into_spark_properties(conf, context))
    return conf


def build_py_files_zip(directory: str | os.PathLike[str]) -> str:
    """Zip ``airflow_commit_provider/{__init__.py,core,spark}`` into ``directory`` for ``--py-files``.

    Only the modules that run in Spark are shipped: they import neither Airflow nor this package's
    Airflow modules, so executors need nothing but boto3 and pyarrow.
    """
    import airflow_commit_provider

    package_dir = Path(airflow_commit_provider.__file__).resolve().parent
    target = Path(directory, f"airflow_commit_provider-{airflow_commit_provider.__version__}.zip")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(package_dir / "__init__.py", "airflow_commit_provider/__init__.py")
        for sub in SHIPPED_SUBPACKAGES:
            root = package_dir / sub
            if not root.is_dir():
                continue
            for source in sorted(root.rglob("*.py")):
                if "__pycache__" in source.parts:
                    continue
                archive.write(source, f"airflow_commit_provider/{source.relative_to(package_dir).as_posix()}")
    return str(target)
