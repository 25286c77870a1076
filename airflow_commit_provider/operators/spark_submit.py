"""``CommittedSparkSubmitOperator``: spark-submit a PySpark job whose output goes through a committer.

It is the Spark provider's ``SparkSubmitOperator`` (its arguments, defaults and template fields,
see :mod:`~airflow_commit_provider.operators.submission`) whose tries are committed jobs. Every try
is one job, whose ID and commit choices reach the application as the confs
:data:`~airflow_commit_provider.spark.config.cfg.OPERATOR_CONFS`. ``engine="python"``: the application
writes with :func:`~airflow_commit_provider.spark.write_committed`, this package's ``core`` and
``spark`` shipped as ``--py-files``. ``engine="hadoop"``: the conf of Hadoop's JVM committers
(:func:`~airflow_commit_provider.spark.jvm_committer_conf`) is added.

**Exactly once across tries** (``engine="python"``): a try first settles the jobs of the tries
before it (:mod:`airflow_commit_provider.core.tries`): it adopts one that committed while its try
failed (running no Spark job), and fences any other, so it can never commit. After spark-submit, a
``_SUCCESS`` naming this try's job is required, and the job is marked delivered. On failure,
timeout or kill, spark-submit's process group is stopped and the job aborted; a job past its commit
point is finished instead, and the next try adopts it. ``engine="hadoop"`` runs a new job per try,
aborted on a best-effort basis. S3 credentials reach spark-submit as ``AWS_*`` environment variables
only (:class:`~airflow_commit_provider.hooks.spark_submit.CommittedSparkSubmitHook`).
"""

from __future__ import annotations

import contextlib
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
from airflow_commit_provider.core.committers.registry import ENGINES, WritePlan, resolve
from airflow_commit_provider.core.job_control import mark_delivered
from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.core.tries import TriedJob, TryPlan, plan_try
from airflow_commit_provider.core.try_workdirs import default_root, open_try_workdir
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
from airflow_commit_provider.operators.committed_outputs import CommittedOutputs
from airflow_commit_provider.operators.submission import build_py_files_zip, hook_arguments, try_confs
from airflow_commit_provider.operators.try_abort import abort_try_job
from airflow_commit_provider.operators.try_outcome import (
    log_settled_tries,
    task_key,
    try_number,
    try_summary,
    verify_success,
)
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.templating import is_template
from airflow_commit_provider.ui.link import CommitReportLink, push_report_target

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["ENGINES", "CommittedSparkSubmitOperator", "build_py_files_zip"]

#: How long to wait for the processes of a stopped job to exit before aborting anyway.
STOP_WAIT_SECONDS = 30.0


class CommittedSparkSubmitOperator(CommittedOutputs, AwsBaseHookMixin[CommitStoreHook], SparkSubmitOperator):
    """Submit a PySpark application whose output is committed by ``committer`` under ``destination``.

    :param destination: the output directory (``s3://``, ``s3a://`` or ``file://``). Templated.
    :param table: the catalog table at ``destination`` that ``write_committed(df)`` writes. Templated.
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
            tries = self._settle_earlier_tries(plan, context, number)
            if tries.adopted is not None:
                data = self._adopt(plan, tries.adopted)
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
                py_files = [p for p in (self.py_files or "").split(",") if p.strip()]
                if self.ship_package:
                    py_files.append(build_py_files_zip(workdir.path))
                conf = {**(self.conf or {}), **self.job_conf(job_id, number, plan, key)}
                self._hook = hook = self._get_hook(
                    conf=self._lineage_conf(conf, context),
                    py_files=",".join(py_files) or None,
                    s3_environment=self.hook.spark_environment(self.destination),
                    private_conf_dir=workdir.path,
                )
                submitted_ms = int(time.time() * 1000)
                if self._killed:  # killed before the job started: do not start it
                    raise AirflowException(f"the task was killed before job {job_id} started")
                # spark-submit inherits the directory's lock: it stays while spark-submit lives.
                hook.submit(self.application, pass_fds=(workdir.lock_fd,))
            if self._killed:
                raise AirflowException(f"the task was killed while job {job_id} ran")
            with self._destination_store() as store:
                data = verify_success(store, plan, self.destination, job_id, submitted_ms, self.log)
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

    def on_kill(self) -> None:
        """Stop spark-submit and its children, abort this try's job; ``execute`` then fails.

        Airflow 3's SIGTERM handler returns after calling this, so the flag makes ``execute`` raise
        even if spark-submit happened to exit cleanly at that moment.
        """
        self._killed = True
        if self._aborted:  # e.g. after execution_timeout: execute has stopped and aborted already
            self.log.info("Killed: job %s was already stopped and aborted", self._job_id)
            return
        self.log.warning("Killed: stopping spark-submit and aborting job %s", self._job_id)
        self._stop_spark()
        if self._job_id:
            self._abort_job("the task was killed")

    # Earlier tries -------------------------------------------------------------------------------
    def _settle_earlier_tries(self, plan: WritePlan, context: Context, number: int | None) -> TryPlan:
        """Adopt, leave or fence the jobs of earlier tries (core.tries); log what each one became."""
        key = task_key(context)
        if key is None or number is None:
            raise AirflowException(
                "engine='python' names each try's job after the task instance (dag_id, task_id, run_id, "
                "map_index, try_number), and the context has none"
            )
        options = CommitOptions(conflict_mode=plan.conflict_mode) if self.conflict_mode else None
        adopt = self.adopt_committed_tries
        with self._destination_store() as store:
            tries = plan_try(
                store, plan.location, key, number, plan.committer, adopt_committed=adopt, options=options
            )
        log_settled_tries(tries, adopt, self.log)
        push_report_target(context, self.destination, self.aws_conn_id, (tries.adopted or tries).job_id)
        return tries

    def _adopt(self, plan: WritePlan, job: TriedJob) -> SuccessData:
        """Verify and deliver a committed job of an earlier try as this try's result, without running Spark."""
        if self._killed:
            raise AirflowException(f"the task was killed before it could adopt job {job.job_id}")
        self.log.info(
            "Adopting job %s committed by try %d (its try did not succeed): running no Spark job, "
            "returning that job's result",
            job.job_id,
            job.try_number,
        )
        with self._destination_store() as store:
            data = verify_success(store, plan, self.destination, job.job_id, 0, self.log)
        self._mark_delivered(job.job_id)
        return data

    def _mark_delivered(self, job_id: str) -> None:
        """Record that this try succeeded with `job_id`, so a later try (a clear) writes again; if
        this fails, the try fails, and its retry adopts the job and marks it."""
        with self._destination_store() as store:
            mark_delivered(store, self.destination, job_id)

    # Building the submission ---------------------------------------------------------------------
    def write_plan(self) -> WritePlan:
        """How this task's writes are committed; a ValueError for a choice that cannot be honoured."""
        if not self.committer:
            raise ValueError("committer is required (magic, directory, partitioned, manifest, file-v1, ...)")
        return resolve(
            self.committer,
            self.destination,
            conflict_mode=self.conflict_mode,
            allow_unsafe_v2=self.allow_unsafe_v2,
            engine=self.engine,
        )

    def _validate(self) -> WritePlan:
        """The try's one `WritePlan`, once its arguments are checked."""
        plan = self.write_plan()
        StorePath.parse(self.destination)
        if not self.application:
            raise ValueError("application is required: the PySpark application to submit")
        reserved = sorted(k for k in (self.conf or {}) if k in cfg.OPERATOR_CONFS)
        if reserved:
            raise ValueError(f"conf must not set {', '.join(reserved)}: the operator sets them for each try")
        return plan

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

    # Failure -------------------------------------------------------------------------------------
    def _stop_spark(self) -> None:
        """Kill spark-submit and everything it started (its process group); wait until they are gone."""
        if self._hook is not None and not self._hook.kill_process_group(STOP_WAIT_SECONDS):
            self.log.warning("processes of job %s are still alive after SIGKILL", self._job_id)

    def _abort_job(self, reason: str) -> None:
        """Abort this try's job once: pending uploads aborted, temporary directory deleted."""
        job_id, plan = self._job_id, self._plan
        if self._abort_lock is None:
            self._abort_lock = threading.RLock()
        with self._abort_lock:
            if self._aborted or not job_id or plan is None:
                return
            self._aborted = True
            committed = abort_try_job(
                self._destination_store, plan, job_id, reason, self.adopt_committed_tries, self.log
            )
            if committed is not None:  # for OpenLineage: the try fails, but its output is committed
                self._written = {**committed.summary(), "partitions": committed.partitions or []}
