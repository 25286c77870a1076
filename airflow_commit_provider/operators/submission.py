"""What a committed try hands spark-submit: its confs, the provider's hook arguments, and the package.

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
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_commit_provider.core.committers.registry import WritePlan, resolve
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.task_key import TaskKey, TryOrigin
from airflow_commit_provider.spark import config as cfg

__all__ = [
    "SHIPPED_SUBPACKAGES",
    "build_py_files_zip",
    "check_submission",
    "hook_arguments",
    "shipped_py_files",
    "try_confs",
    "write_plan",
]

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


def write_plan(given: tuple[str, str, str | None, str], *, allow_unsafe_v2: bool) -> WritePlan:
    """How a task's writes are committed, from its (committer, destination, conflict mode, engine);
    a ValueError for a choice that cannot be honoured."""
    committer, destination, conflict_mode, engine = given
    if not committer:
        raise ValueError("committer is required (magic, directory, partitioned, manifest, file-v1, ...)")
    return resolve(
        committer, destination, conflict_mode=conflict_mode, allow_unsafe_v2=allow_unsafe_v2, engine=engine
    )


def check_submission(destination: str, application: str, conf: Mapping[str, Any] | None) -> None:
    """A ValueError naming the argument unless the destination, application and conf can be submitted."""
    StorePath.parse(destination)
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
    given: tuple[str, str | None, str | None],
    job_id: str,
    task_try: tuple[TaskKey | None, int | None],
    jvm_options: dict[str, Any],
) -> dict[str, str]:
    """The ``spark.airflow_commit.*`` confs of one try (for engine="hadoop", with the JVM committer conf).

    `given` is the (destination, conflict mode, table) as the user wrote them; the committer is the
    plan's, as `resolve` spelled it, so the application reads the name every other entry point does.
    `task_try` is the task instance and try number, recorded with the job's decision when both are known.
    A table is written by ``write_committed``, which registers its partitions (engine="python"); the
    destination stays the table's location, which the operator's store checks need without Spark,
    and the driver refuses a table that is elsewhere.
    """
    destination, conflict_mode, table = given
    key, try_number = task_try
    conf = {
        cfg.CONF_JOB_ID: job_id,
        cfg.CONF_COMMITTER: plan.committer,
        cfg.CONF_DESTINATION: destination,
        cfg.CONF_ENGINE: plan.engine,
    }
    if conflict_mode:
        conf[cfg.CONF_CONFLICT_MODE] = plan.conflict_mode
    if table:
        if plan.engine != "python":
            raise ValueError(
                f"table={table!r} needs engine='python': write_committed registers its partitions"
            )
        conf[cfg.CONF_TABLE] = table
    if try_number is not None:
        conf[cfg.CONF_TRY_NUMBER] = str(try_number)
        if key is not None:
            conf[cfg.CONF_ORIGIN] = json.dumps(TryOrigin(key, try_number).to_json())
    if plan.engine == "hadoop":
        from airflow_commit_provider.spark.jvm_committers import plan_conf

        conf.update(plan_conf(plan, job_id=job_id, **jvm_options))
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
