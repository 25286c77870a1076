"""``CommittedSparkSubmitOperator``: spark-submit a PySpark job whose output goes through a committer.

It is the Spark provider's ``SparkSubmitOperator`` (its arguments, defaults and template fields,
see :mod:`~airflow_commit_provider.operators.submission`) whose tries are committed jobs. Every try
is one job, whose ID and commit choices reach the application as the confs
:data:`~airflow_commit_provider.spark.config.cfg.OPERATOR_CONFS`. ``engine="python"``: the application
writes with :func:`~airflow_commit_provider.spark.write_committed`, this package's ``core`` and
``spark`` shipped as ``--py-files``. ``engine="hadoop"``: the conf of Hadoop's JVM committers
(:func:`~airflow_commit_provider.spark.jvm_committer_conf`) is added.

**Exactly once across tries** (``engine="python"``): a try first settles the jobs of the tries
before it (:mod:`~.try_settlement`): it adopts one that committed while its try failed (without
running the application), and fences any other, so it can never commit. After spark-submit, a
``_SUCCESS`` naming this try's job is required, and the job is marked delivered. On failure,
timeout or kill, spark-submit's process group is stopped and the job aborted (:mod:`~.try_abort`);
a job past its commit point is finished instead, and the next try adopts it. A table write found
committed with its partitions not yet registered, by its try or by a retry adopting it, is
registered by a registration-only application (:mod:`~.registration`). ``engine="hadoop"`` runs a
new job per try, aborted on a best-effort basis. S3 credentials reach spark-submit as ``AWS_*``
environment variables only (:class:`~airflow_commit_provider.hooks.spark_submit.CommittedSparkSubmitHook`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.utils.mixins import AwsBaseHookMixin, aws_template_fields
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.assets import destination_asset
from airflow_commit_provider.compat import conf as airflow_conf
from airflow_commit_provider.core.committers.registry import ENGINES, WritePlan
from airflow_commit_provider.core.job_control import mark_delivered
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.core.tries import TriedJob, TryPlan
from airflow_commit_provider.core.try_workdirs import TryWorkdir, default_root, open_try_workdir
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
from airflow_commit_provider.operators.committed_outputs import CommittedOutputs
from airflow_commit_provider.operators.registration import submit_registration, verified_or_registered
from airflow_commit_provider.operators.submission import (
    build_py_files_zip,
    check_submission,
    hook_arguments,
    shipped_py_files,
    try_confs,
    write_plan,
)
from airflow_commit_provider.operators.try_abort import AbortingTry
from airflow_commit_provider.operators.try_outcome import (
    RegistrationPendingError,
    task_key,
    try_number,
    try_summary,
    verify_success,
)
from airflow_commit_provider.operators.try_settlement import log_adoption, settle_earlier_tries
from airflow_commit_provider.templating import is_template
from airflow_commit_provider.ui.link import CommitReportLink, push_report_target

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["ENGINES", "CommittedSparkSubmitOperator", "build_py_files_zip"]


class CommittedSparkSubmitOperator(
    AbortingTry, CommittedOutputs, AwsBaseHookMixin[CommitStoreHook], SparkSubmitOperator
):
    """Submit a PySpark application whose output is committed by ``committer`` under ``destination``.

    :param destination: the output directory (``s3://``, ``s3a://`` or ``file://``). Templated.
    :param table: the catalog table at ``destination`` that ``write_committed(df)`` writes; partitions
        committed but not registered (a driver killed in between) are registered by a registration-only
        application (:mod:`~.registration`). Templated.
    :param committer: ``magic``, ``directory``, ``partitioned``, ``manifest``, ``file-v1``, ``file-v2``
        (case and surrounding spaces do not count). Templated.
    :param conflict_mode: ``fail``, ``append`` or ``replace``; ``None``: the writer's default. Templated.
    :param engine: ``python`` (``write_committed``) or ``hadoop`` (Hadoop's JVM committers). Templated.
    :param aws_conn_id: AWS connection for ``s3://`` destinations; ``region_name``, ``verify`` and
        ``botocore_config`` override it, as in the Amazon provider's operators. Templated but the last.
    :param allow_unsafe_v2: let ``file-v2`` run (it can leave partial output on failure).
    :param ship_package: ship this package's ``core`` and ``spark`` modules as ``--py-files``.
    :param spark_python: the Python of a ``local`` master's driver and executors (default: this one).
    :param jvm_conf_options: more keyword arguments for ``jvm_committer_conf`` (engine="hadoop"), e.g.
        ``{"bind_commit_protocol": False}``; for ``s3a://``, ``store`` defaults to the connection's.
    :param adopt_committed_tries: (engine="python") return the result of an earlier try's job that
        committed although its try failed. Per destination: an application writing several outputs
        should use ``conflict_mode="replace"`` and ``False``.
    :param emit_asset: declare a literal ``destination`` as an outlet asset; its event carries the
        job, committer, files, bytes, rows and partitions (:mod:`airflow_commit_provider.assets`).
    :param local_work_root: where tries keep local files (:mod:`~airflow_commit_provider.core.try_workdirs`;
        default: the ``[airflow_commit] local_work_root`` option, else under the system temp dir).
    :param openlineage_inject_parent_job_info: as the Spark provider's, but on by default: Spark's
        own OpenLineage listener then links its events to this task.

    Every other argument is ``SparkSubmitOperator``'s, with its meaning and templating.

    Returns (XCom) ``{"job_id", "try_job_id", "committer", "engine", "destination", "files", "bytes",
    "rows", "partitions", "partition_count", "duration_seconds", "try_number", "adopted_from_try"}``;
    ``job_id`` (in ``_SUCCESS``) differs from ``try_job_id`` only for Hadoop's manifest and file committers.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        *aws_template_fields("destination", "table", "committer", "conflict_mode", "engine", "archives"),
    )
    aws_hook_class = CommitStoreHook  # `self.hook`: the destination's store, spark-submit's S3 settings
    template_fields_renderers = {"conf": "json", "env_vars": "json", "application_args": "json"}
    ui_color = "#f6e3c6"
    operator_extra_links = (CommitReportLink(),)

    def __init__(
        self,
        *,
        destination: str,
        table: str | None = None,
        committer: str,
        conflict_mode: str | None = None,
        engine: str = "python",
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        allow_unsafe_v2: bool = False,
        ship_package: bool = True,
        spark_python: str | None = None,
        jvm_conf_options: dict[str, Any] | None = None,
        adopt_committed_tries: bool = True,
        emit_asset: bool = True,
        local_work_root: str | None = None,
        openlineage_inject_parent_job_info: bool = True,
        name: str = "airflow-commit-spark",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            name=name, openlineage_inject_parent_job_info=openlineage_inject_parent_job_info, **kwargs
        )
        self.destination, self.table = destination, table
        self.committer, self.conflict_mode = committer, conflict_mode
        self.engine = engine
        self.aws_conn_id, self.region_name, self.verify = aws_conn_id, region_name, verify
        self.botocore_config = botocore_config
        self.allow_unsafe_v2 = allow_unsafe_v2
        self.ship_package = ship_package
        self.spark_python = spark_python
        self.jvm_conf_options = dict(jvm_conf_options or {})
        self.adopt_committed_tries = adopt_committed_tries
        self.emit_asset = emit_asset
        self._local_work_root = local_work_root
        self.asset = destination_asset(destination) if emit_asset and not is_template(destination) else None
        if self.asset is not None and self.asset not in self.outlets:
            self.add_outlets([self.asset])
        # State of the running try (on_kill may run in the SIGTERM handler, during execute).
        self._hook: CommittedSparkSubmitHook | None = None
        self._job_id: str | None = None
        self._plan: WritePlan | None = None
        self._killed = self._aborted = False
        # Re-entrant (on_kill can interrupt execute's abort); made per execution (locks do not deep-copy).
        self._abort_lock: threading.RLock | None = None
        self._written = None

    @property
    def archives(self) -> str | None:  # the provider keeps it private; templated here as it always was
        return self._archives

    @archives.setter
    def archives(self, value: str | None) -> None:
        self._archives = value

    @property
    def local_work_root(self) -> str:
        """The root of the tries' local directories (argument, then Airflow option, then temp dir)."""
        configured = airflow_conf.get("airflow_commit", "local_work_root", fallback=None)
        return self._local_work_root or configured or str(default_root())

    def _destination_store(self) -> contextlib.closing[Store]:
        return contextlib.closing(self.hook.get_store(self.destination))

    # Execution ---------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]  # the XCom summary
        started = time.monotonic()
        plan = self._plan = self._validate()
        self._get_hook().check_launcher()
        self._killed = self._aborted = False
        self._abort_lock, self._job_id, self._written = threading.RLock(), None, None
        number, where = try_number(context), (self.engine, self.destination)
        if plan.engine == "python":
            tries = self._settle_earlier_tries(plan, context)
            if tries.adopted is not None:
                data = self._adopt(plan, tries.adopted, context)
                took, adopted = time.monotonic() - started, tries.adopted
                result = try_summary(data, adopted.job_id, where, number, took, self.log, adopted.try_number)
                return self._publish_commit(context, data, result)
            job_id = tries.job_id
        else:
            job_id = str(uuid.uuid4())
            push_report_target(context, self.destination, self.aws_conn_id, job_id)
        self._job_id = job_id
        self.log.info(
            "Try %s: job %s writes %s with the %s committer (engine %s, conflict mode %s)",
            *(number, job_id, self.destination, plan.committer, plan.engine, self.conflict_mode or "default"),
        )
        try:
            key = task_key(context) or TaskKey(self.dag_id, self.task_id, f"job-{job_id}", -1)
            with open_try_workdir(self.local_work_root, key, number or 1) as workdir:
                conf = {**(self.conf or {}), **self.job_conf(job_id, number, plan, key)}
                self._hook = hook = self._submission_hook(workdir, conf, context)
                submitted_ms = int(time.time() * 1000)
                if self._killed:  # killed before the job started: do not start it
                    raise AirflowException(f"the task was killed before job {job_id} started")
                # spark-submit inherits the directory's lock: it stays while spark-submit lives.
                hook.submit(self.application, pass_fds=(workdir.lock_fd,))
            if self._killed:
                raise AirflowException(f"the task was killed while job {job_id} ran")
            data = self._verified(plan, job_id, submitted_ms, context)
            if data.job_id and data.job_id != job_id:  # Hadoop's manifest committer: Spark's own job ID
                push_report_target(context, self.destination, self.aws_conn_id, data.job_id)
            if plan.engine == "python":
                self._mark_delivered(job_id)
        except BaseException as error:  # failures, AirflowTaskTimeout, AirflowTaskTerminated
            self._stop_spark()
            self._abort_job(f"{type(error).__name__}: {error}")
            raise
        finally:
            self._hook = None
        result = try_summary(data, job_id, where, number, time.monotonic() - started, self.log)
        return self._publish_commit(context, data, result)

    # Earlier tries -------------------------------------------------------------------------------
    def _settle_earlier_tries(self, plan: WritePlan, context: Context) -> TryPlan:
        """Adopt, leave or fence the jobs of earlier tries (:mod:`~.try_settlement`)."""
        adopt = self.adopt_committed_tries
        tries = settle_earlier_tries(
            self._destination_store, plan, context, self.conflict_mode, adopt, self.log
        )
        push_report_target(context, self.destination, self.aws_conn_id, (tries.adopted or tries).job_id)
        return tries

    def _adopt(self, plan: WritePlan, job: TriedJob, context: Context) -> SuccessData:
        """Verify and deliver an earlier try's committed job as this try's result, running no application."""
        if self._killed:
            raise AirflowException(f"the task was killed before it could adopt job {job.job_id}")
        log_adoption(job, self.log)
        data = self._verified(plan, job.job_id, 0, context)
        self._mark_delivered(job.job_id)
        return data

    def _verified(self, plan: WritePlan, job_id: str, submitted_ms: int, context: Context) -> SuccessData:
        """The job's ``_SUCCESS`` (:func:`verify_success`); a table write committed with its
        registration pending is registered first (:mod:`~airflow_commit_provider.operators.registration`)."""

        def verify() -> SuccessData:
            with self._destination_store() as store:
                return verify_success(store, plan, self.destination, job_id, submitted_ms, self.log)

        return verified_or_registered(verify, functools.partial(self._register, context=context), self.log)

    def _register(
        self, pending: RegistrationPendingError, arguments: list[str], context: Context
    ) -> int | None:
        """Run the registration-only application with the write's conf; its exit code."""
        key = task_key(context) or TaskKey(self.dag_id, self.task_id, f"job-{pending.job_id}", -1)
        with open_try_workdir(self.local_work_root, key, try_number(context) or 1) as workdir:
            name = f"{hook_arguments(self).get('name') or self.task_id}-registration"
            self._hook = hook = self._submission_hook(
                workdir, dict(self.conf or {}), context, application_args=arguments, name=name
            )
            if self._killed:
                raise AirflowException(f"the task was killed before registering job {pending.job_id}")
            try:
                exit_code = submit_registration(hook, workdir, self.log)
            finally:
                self._hook = None
        if self._killed:
            raise AirflowException(f"the task was killed while registering job {pending.job_id}")
        return exit_code

    def _mark_delivered(self, job_id: str) -> None:
        """Record that this try succeeded with `job_id`, so a later try (a clear) writes again; if
        this fails, the try fails, and its retry adopts the job and marks it."""
        with self._destination_store() as store:
            mark_delivered(store, self.destination, job_id)

    # Building the submission ---------------------------------------------------------------------
    def write_plan(self) -> WritePlan:
        """How this task's writes are committed; a ValueError for a choice that cannot be honoured."""
        given = (self.committer, self.destination, self.conflict_mode, self.engine)
        return write_plan(given, allow_unsafe_v2=self.allow_unsafe_v2)

    def _validate(self) -> WritePlan:
        """The try's one `WritePlan`, once its arguments are checked."""
        plan = self.write_plan()
        check_submission(self.destination, self.application, self.conf)
        return plan

    def _submission_hook(
        self, workdir: TryWorkdir, conf: dict[str, Any], context: Context, **arguments: Any
    ) -> CommittedSparkSubmitHook:
        """The hook of one spark-submit of this try: the package shipped from the try's directory,
        S3 settings in its environment only, private confs in a file there."""
        return self._get_hook(
            conf=self._lineage_conf(conf, context),
            py_files=shipped_py_files(self.py_files, self.ship_package, workdir.path),
            s3_environment=self.hook.spark_environment(self.destination),
            private_conf_dir=workdir.path,
            **arguments,
        )

    def _get_hook(self, **for_this_try: Any) -> CommittedSparkSubmitHook:
        """The provider's hook arguments (:func:`hook_arguments`), with what this try adds."""
        return CommittedSparkSubmitHook(
            spark_python=self.spark_python, **{**hook_arguments(self), **for_this_try}
        )

    def job_conf(
        self, job_id: str, try_number: int | None, plan: WritePlan | None = None, key: TaskKey | None = None
    ) -> dict[str, str]:
        """The ``spark.airflow_commit.*`` confs (and, for engine="hadoop", the JVM committer conf)."""
        jvm_options = dict(self.jvm_conf_options)
        plan = plan or self.write_plan()
        if plan.engine == "hadoop" and StorePath.parse(self.destination).scheme == "s3a":
            # Where S3A finds the store; its credentials travel in the environment only.
            jvm_options.setdefault("store", self.hook.s3_settings)
        given = (self.destination, self.conflict_mode, self.table)
        return try_confs(plan, given, job_id, (key, try_number), jvm_options)
