"""``CommittedSparkSubmitOperator``: spark-submit a PySpark job whose output goes through a committer.

Every try is one job, whose ID is passed to the application as Spark confs:

========================================  ====================================================
``spark.airflow_commit.job_id``           this try's job ID (the committers put it in every path)
``spark.airflow_commit.committer``        the committer name
``spark.airflow_commit.conflict_mode``    ``fail`` / ``append`` / ``replace`` (when given)
``spark.airflow_commit.destination``      the output directory
``spark.airflow_commit.engine``           ``python`` or ``hadoop``
``spark.airflow_commit.try_number``       Airflow's try number (informational)
========================================  ====================================================

``engine="python"``: the application writes with
:func:`airflow_commit_provider.spark.write_committed`, which reads those confs. The operator ships
this package's ``core`` and ``spark`` modules as a ``--py-files`` zip, so executors need only
boto3 and pyarrow. ``engine="hadoop"``: the Spark conf of Hadoop's own JVM committers
(:func:`airflow_commit_provider.spark.jvm_committer_conf`) is added, and the application writes with
``DataFrameWriter``.

**Exactly once across tries** (``engine="python"``). A try's job ID is derived from the task
instance key and the try number (:mod:`airflow_commit_provider.core.tries`), so every try can name
the jobs of the tries before it without any database. Before it runs anything, a try settles them:
a job that committed (or passed its commit point: it is finished first) while its try did not
succeed is *adopted*: the try runs no Spark job and returns that job's summary. A job whose try
succeeded (marked *delivered*) is left alone: the task was cleared, and runs again. Any other job
is *fenced*: it can never commit, even if its driver is still alive (a worker that died without
``on_kill``), and its pending uploads and temporary files are removed. Adoption is per
destination; ``adopt_committed_tries=False`` turns it off (every try writes again).

After spark-submit succeeds, the operator requires a ``_SUCCESS`` naming this try's job, or the
job's own record (``_airflow_commit/<job ID>.success.json``, when a later job of another run has
since written ``_SUCCESS``), then marks the job delivered. A missing, legacy, stale or foreign
``_SUCCESS`` fails the task. (Hadoop's manifest and classic committers cannot record a given job
ID; for those the ``_SUCCESS`` must have been written after the try started.) On failure, timeout
or kill the operator stops spark-submit and everything it started (its own process group), then
aborts this try's job: its pending uploads and its temporary directory go, nothing of it becomes
visible. If the job had already passed its commit point, the abort finishes the commit instead: the
try still fails, its output is committed, and the next try adopts it.

``engine="hadoop"`` has none of this: Hadoop's JVM committers know nothing of the commit point, so
every try is a new job (a random UUID), a failed try is aborted on a best-effort basis, and only
``conflict_mode="replace"`` (or a fresh destination) keeps retries to one copy.

S3 access comes from the Airflow AWS connection (``aws_conn_id``) and reaches spark-submit as
``AWS_*`` environment variables, never as ``--conf`` or arguments, so it is in no command line,
log or XCom (:class:`~airflow_commit_provider.hooks.spark_submit.CommittedSparkSubmitHook`; on YARN
and Kubernetes only the endpoint and region are passed). The driver reads them and
``write_committed`` hands them to its tasks.

The operator orchestrates: the Spark side is the hook's, settling tries, aborting a job and
verifying its ``_SUCCESS`` are the core's (:mod:`~airflow_commit_provider.core.tries`,
:mod:`~airflow_commit_provider.core.job_control`, :mod:`~airflow_commit_provider.core.hadoop_jobs`,
:mod:`~airflow_commit_provider.core.success_check`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider import lineage
from airflow_commit_provider.assets import commit_extra, destination_asset, emit_commit_event
from airflow_commit_provider.compat import conf as airflow_conf
from airflow_commit_provider.core.committers.registry import ENGINES, WritePlan, resolve
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.hadoop_jobs import abort_hadoop_job
from airflow_commit_provider.core.job_control import JobState, abort_job, mark_delivered
from airflow_commit_provider.core.options import CommitOptions, parse_conflict_mode
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.success_check import SuccessExpectations
from airflow_commit_provider.core.tries import TaskKey, TriedJob, TryPlan, plan_try
from airflow_commit_provider.core.try_workdirs import default_root, open_try_workdir
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
from airflow_commit_provider.spark.config import (
    CONF_COMMITTER,
    CONF_CONFLICT_MODE,
    CONF_DESTINATION,
    CONF_ENGINE,
    CONF_JOB_ID,
    CONF_TRY_NUMBER,
    OPERATOR_CONFS,
)
from airflow_commit_provider.templating import is_template

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Asset, Context

    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["ENGINES", "CommittedSparkSubmitOperator", "build_py_files_zip"]

#: How long to wait for the processes of a stopped job to exit before aborting anyway.
STOP_WAIT_SECONDS = 30.0
#: Partitions listed in the XCom summary; the count is always exact.
SUMMARY_PARTITIONS = 100
#: Subpackages shipped to executors: the protocols and the PySpark writer (no Airflow imports).
SHIPPED_SUBPACKAGES = ("core", "spark")


class CommittedSparkSubmitOperator(BaseOperator):
    """Submit a PySpark application whose output is committed by ``committer`` under ``destination``.

    :param application: the PySpark application (a ``.py`` file). Templated.
    :param destination: the output directory (``s3://``, ``s3a://`` or ``file://``). Templated.
    :param committer: committer name: ``magic``, ``directory``, ``partitioned``, ``manifest``,
        ``file-v1``, ``file-v2``. Templated.
    :param conflict_mode: ``fail``, ``append`` or ``replace`` (staging committers); ``None`` leaves
        the writer's default. Templated.
    :param engine: ``python`` (this project's committers via ``write_committed``) or ``hadoop``
        (Hadoop's JVM committers via Spark conf). Templated.
    :param aws_conn_id: AWS connection for ``s3://`` destinations. Templated.
    :param conn_id: the Spark connection (``spark_default``; host ``local[*]`` runs locally).
    :param allow_unsafe_v2: let ``file-v2`` run (it can leave partial output on failure).
    :param ship_package: ship this package's ``core`` and ``spark`` modules as ``--py-files``.
    :param spark_python: the Python for the driver and executors when the master is ``local``
        (default: the worker's own interpreter, unless ``PYSPARK_PYTHON`` is set).
    :param jvm_conf_options: more keyword arguments for ``jvm_committer_conf`` (engine="hadoop"), e.g.
        ``{"bind_commit_protocol": False}`` where spark-hadoop-cloud is not on the classpath. For an
        ``s3a://`` destination, ``store`` defaults to the AWS connection's endpoint and region
        (S3A reads the credentials from the ``AWS_*`` environment spark-submit gets).
    :param adopt_committed_tries: (engine="python") when an earlier try's job committed but that try
        did not succeed (its worker died, or the application failed after writing), return that
        job's result instead of running again. Jobs that did not commit are fenced either way.
        Adoption is per destination: it is right for an application whose one output is
        ``destination``. An application that writes several outputs can have committed some of
        them and not others; give it ``conflict_mode="replace"`` for every write and set this to
        ``False``, so that every try rewrites all its outputs.
    :param emit_asset: declare ``destination`` as this task's outlet asset (its URI as Airflow's S3
        and file providers write it, see :mod:`airflow_commit_provider.assets`). After a verified
        commit (or an adopted one) the task's event carries the job, committer, files, bytes, rows
        and partitions in its ``extra``, and on Airflow 3.3 each partition written as a partition
        key. Outlets are fixed when the DAG is parsed, so a templated ``destination`` declares no
        asset: give ``outlets=[Asset(...)]`` of your own, or a literal destination.
    :param local_work_root: where each try keeps its local files (the ``--py-files`` zip), in a
        directory named after its task instance and try; the next try of the task instance, or any
        try after :data:`~airflow_commit_provider.core.try_workdirs.DEFAULT_STALE_AFTER`, removes
        what a killed try left (:mod:`airflow_commit_provider.core.try_workdirs`). Default: the
        ``[airflow_commit] local_work_root`` option (``AIRFLOW__AIRFLOW_COMMIT__LOCAL_WORK_ROOT``),
        else ``airflow-commit`` under the system temp dir.
    :param openlineage_inject_parent_job_info: when the OpenLineage provider is enabled, pass the
        Spark job the parent-job confs (``spark.openlineage.parentJobNamespace``, ...) the Spark
        provider injects, so Spark's own OpenLineage listener links its events to this task.

    The other arguments are those of ``SparkSubmitOperator`` / ``SparkSubmitHook`` (``conf``,
    ``files``, ``py_files``, ``application_args``, ``env_vars``, ``executor_memory``, ...), with the
    same templating.

    Returns (XCom) ``{"job_id", "try_job_id", "committer", "engine", "destination", "files", "bytes",
    "rows", "partitions", "partition_count", "duration_seconds", "try_number", "adopted_from_try"}``:
    ``job_id`` is the one in ``_SUCCESS`` (what a downstream sensor checks), ``try_job_id`` the one
    the operator ran (or adopted); they differ only for Hadoop's manifest and file committers, which
    take Spark's own write UUID. ``adopted_from_try`` is the try number whose job was adopted, else
    ``None``.
    """

    template_fields: Sequence[str] = (
        "application",
        "destination",
        "committer",
        "conflict_mode",
        "engine",
        "aws_conn_id",
        "conf",
        "files",
        "py_files",
        "archives",
        "jars",
        "driver_class_path",
        "packages",
        "exclude_packages",
        "keytab",
        "principal",
        "proxy_user",
        "name",
        "application_args",
        "env_vars",
        "properties_file",
        "post_submit_commands",
    )
    template_fields_renderers = {"conf": "json", "env_vars": "json", "application_args": "json"}
    ui_color = "#f6e3c6"

    def __init__(
        self,
        *,
        application: str,
        destination: str,
        committer: str,
        conflict_mode: str | None = None,
        engine: str = "python",
        aws_conn_id: str | None = "aws_default",
        conn_id: str = "spark_default",
        allow_unsafe_v2: bool = False,
        ship_package: bool = True,
        spark_python: str | None = None,
        jvm_conf_options: dict[str, Any] | None = None,
        adopt_committed_tries: bool = True,
        emit_asset: bool = True,
        openlineage_inject_parent_job_info: bool = True,
        local_work_root: str | None = None,
        conf: dict[str, Any] | None = None,
        files: str | None = None,
        py_files: str | None = None,
        archives: str | None = None,
        driver_class_path: str | None = None,
        jars: str | None = None,
        packages: str | None = None,
        exclude_packages: str | None = None,
        repositories: str | None = None,
        total_executor_cores: int | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        driver_memory: str | None = None,
        keytab: str | None = None,
        principal: str | None = None,
        proxy_user: str | None = None,
        name: str = "airflow-commit-spark",
        num_executors: int | None = None,
        status_poll_interval: int = 1,
        application_args: list[Any] | None = None,
        env_vars: dict[str, Any] | None = None,
        verbose: bool = False,
        spark_binary: str | None = None,
        properties_file: str | None = None,
        yarn_queue: str | None = None,
        deploy_mode: str | None = None,
        use_krb5ccache: bool = False,
        post_submit_commands: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application = application
        self.destination = destination
        self.committer = committer
        self.conflict_mode = conflict_mode
        self.engine = engine
        self.aws_conn_id = aws_conn_id
        self.conf = conf
        self.files = files
        self.py_files = py_files
        self.archives = archives
        self.driver_class_path = driver_class_path
        self.jars = jars
        self.packages = packages
        self.exclude_packages = exclude_packages
        self.keytab = keytab
        self.principal = principal
        self.proxy_user = proxy_user
        self.name = name
        self.application_args = application_args
        self.env_vars = env_vars
        self.properties_file = properties_file
        self.post_submit_commands = post_submit_commands
        self._conn_id = conn_id
        self._allow_unsafe_v2 = allow_unsafe_v2
        self._ship_package = ship_package
        self._spark_python = spark_python
        self._jvm_conf_options = dict(jvm_conf_options or {})
        self.adopt_committed_tries = adopt_committed_tries
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.emit_asset = emit_asset
        self._local_work_root = local_work_root
        self.asset: Asset | None = None
        if emit_asset and not is_template(destination):
            self.asset = destination_asset(destination)
            if self.asset not in self.outlets:
                self.add_outlets([self.asset])
        self._hook_options: dict[str, Any] = {
            "repositories": repositories,
            "total_executor_cores": total_executor_cores,
            "executor_cores": executor_cores,
            "executor_memory": executor_memory,
            "driver_memory": driver_memory,
            "num_executors": num_executors,
            "status_poll_interval": status_poll_interval,
            "verbose": verbose,
            "spark_binary": spark_binary,
            "yarn_queue": yarn_queue,
            "deploy_mode": deploy_mode,
            "use_krb5ccache": use_krb5ccache,
        }
        # State of the running try (on_kill may run in the SIGTERM handler, during execute).
        self._hook: CommittedSparkSubmitHook | None = None
        self._job_id: str | None = None
        self._killed = False
        self._aborted = False
        # Re-entrant: on_kill can interrupt execute's own abort in the same thread (signal handler).
        # Created per execution: operators are deep-copied, and locks cannot be.
        self._abort_lock: threading.RLock | None = None
        # What the try made visible, for OpenLineage: the verified summary, or the _SUCCESS of a
        # job that reached its commit point although the try failed.
        self._written: dict[str, Any] | None = None

    @property
    def local_work_root(self) -> str:
        """The root of the tries' local directories (argument, then Airflow option, then temp dir)."""
        configured = airflow_conf.get("airflow_commit", "local_work_root", fallback=None)
        return self._local_work_root or configured or str(default_root())

    @cached_property
    def store_hook(self) -> CommitStoreHook:
        """The destination's store, and the S3 settings spark-submit is given."""
        return CommitStoreHook(aws_conn_id=self.aws_conn_id)

    @contextlib.contextmanager
    def _destination_store(self) -> Iterator[Store]:
        store = self.store_hook.get_store(self.destination)
        try:
            yield store
        finally:
            store.close()

    # Execution ---------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        started = time.monotonic()
        self._validate()
        self._check_launcher()
        self._killed = self._aborted = False
        self._abort_lock = threading.RLock()
        self._job_id = None
        self._written = None
        try_number = _try_number(context)
        if self.engine == "python":
            plan = self._settle_earlier_tries(context, try_number)
            if plan.adopted is not None:
                adopted = plan.adopted
                data = self._adopt(adopted)
                duration = time.monotonic() - started
                result = self._summary(data, adopted.job_id, try_number, duration, adopted.try_number)
                return self._committed(context, data, result)
            job_id = plan.job_id
        else:
            job_id = str(uuid.uuid4())
        self._job_id = job_id
        self.log.info(
            "Try %s: job %s writes %s with the %s committer (engine %s, conflict mode %s)",
            try_number,
            job_id,
            self.destination,
            self.committer,
            self.engine,
            self.conflict_mode or "default",
        )
        try:
            key = _task_key(context) or TaskKey(self.dag_id, self.task_id, f"job-{job_id}", -1)
            with open_try_workdir(self.local_work_root, key, try_number or 1) as workdir:
                hook = self._make_hook(job_id, try_number, str(workdir.path), context)
                self._hook = hook
                submitted_ms = int(time.time() * 1000)
                if self._killed:  # killed before the job started: do not start it
                    raise AirflowException(f"the task was killed before job {job_id} started")
                # spark-submit inherits the directory's lock: it stays while spark-submit lives.
                hook.submit(self.application, pass_fds=(workdir.lock_fd,))
            if self._killed:
                raise AirflowException(f"the task was killed while job {job_id} ran")
            data = self._verify_success(job_id, submitted_ms)
            if self.engine == "python":
                self._mark_delivered(job_id)
        except BaseException as error:  # failures, AirflowTaskTimeout, AirflowTaskTerminated
            self._stop_spark()
            self._abort_job(f"{type(error).__name__}: {error}")
            raise
        finally:
            self._hook = None
        return self._committed(
            context, data, self._summary(data, job_id, try_number, time.monotonic() - started)
        )

    def _committed(self, context: Context, data: SuccessData, result: dict[str, Any]) -> dict[str, Any]:
        """Publish a verified commit: the asset event (extra, partition keys) and, for lineage, `result`."""
        partitions = data.partitions or []
        self._written = {**result, "partitions": partitions}
        if self.asset is not None:
            emit_commit_event(context, self.asset, commit_extra(result, partitions), partitions)
        elif self.emit_asset:
            self.log.info("destination is templated, so this task declared no asset for it (see emit_asset)")
        return result

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
    def _settle_earlier_tries(self, context: Context, try_number: int | None) -> TryPlan:
        """Adopt, leave or fence the jobs of earlier tries (core.tries); log what each one became."""
        key = _task_key(context)
        if key is None or try_number is None:
            raise AirflowException(
                "engine='python' names each try's job after the task instance (dag_id, task_id, run_id, "
                "map_index, try_number), and the context has none"
            )
        options = (
            CommitOptions(conflict_mode=parse_conflict_mode(self.conflict_mode))
            if self.conflict_mode
            else None
        )
        with self._destination_store() as store:
            plan = plan_try(
                store,
                self.destination,
                key,
                try_number,
                self.committer,
                adopt_committed=self.adopt_committed_tries,
                options=options,
            )
        for job in plan.delivered:
            self.log.info(
                "Job %s of try %d was delivered (that try succeeded): this try is a re-run and writes again",
                job.job_id,
                job.try_number,
            )
        for job in plan.fenced:
            if job.found is JobState.ACTIVE:
                self.log.warning(
                    "Fenced job %s of try %d, which was still active (its driver may be alive): it can never "
                    "commit now, and its pending uploads and temporary files are gone",
                    job.job_id,
                    job.try_number,
                )
            elif job.found is JobState.UNKNOWN:
                self.log.info(
                    "Fenced job ID %s of try %d: it never started, and now never can",
                    job.job_id,
                    job.try_number,
                )
            else:
                self.log.info(
                    "Job %s of try %d was aborted already; its leftovers are gone", job.job_id, job.try_number
                )
        for job in plan.not_adopted:
            self.log.warning(
                "Job %s of try %d committed but its try did not succeed; not adopting it (%s): its output "
                "stays, and this try writes again",
                job.job_id,
                job.try_number,
                "adopt_committed_tries=False" if not self.adopt_committed_tries else "a later job is adopted",
            )
        return plan

    def _adopt(self, job: TriedJob) -> SuccessData:
        """Verify and deliver a committed job of an earlier try as this try's result, without running Spark."""
        if self._killed:
            raise AirflowException(f"the task was killed before it could adopt job {job.job_id}")
        self.log.info(
            "Adopting job %s committed by try %d (its try did not succeed): running no Spark job, "
            "returning that job's result",
            job.job_id,
            job.try_number,
        )
        data = self._verify_success(job.job_id, submitted_ms=0)
        self._mark_delivered(job.job_id)
        return data

    def _mark_delivered(self, job_id: str) -> None:
        """Record that this try succeeded with `job_id`, so a later try (a clear) writes again.

        A failure here fails the try: its retry then adopts the job and marks it.
        """
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
            allow_unsafe_v2=self._allow_unsafe_v2,
            engine=self.engine,
        )

    def _validate(self) -> None:
        self.write_plan()
        StorePath.parse(self.destination)
        if not self.application:
            raise ValueError("application is required: the PySpark application to submit")
        reserved = sorted(k for k in (self.conf or {}) if k in OPERATOR_CONFS)
        if reserved:
            raise ValueError(f"conf must not set {', '.join(reserved)}: the operator sets them for each try")

    def _check_launcher(self) -> None:
        """Before any work: fail in one line if spark-submit or Java is missing on this worker."""
        CommittedSparkSubmitHook(
            spark_python=self._spark_python,
            env_vars=self.env_vars,
            conn_id=self._conn_id,
            **self._hook_options,
        ).check_launcher()

    def job_conf(self, job_id: str, try_number: int | None) -> dict[str, str]:
        """The ``spark.airflow_commit.*`` confs (and, for engine="hadoop", the JVM committer conf)."""
        conf = {
            CONF_JOB_ID: job_id,
            CONF_COMMITTER: self.committer,
            CONF_DESTINATION: self.destination,
            CONF_ENGINE: self.engine,
        }
        if self.conflict_mode:
            conf[CONF_CONFLICT_MODE] = self.conflict_mode
        if try_number is not None:
            conf[CONF_TRY_NUMBER] = str(try_number)
        if self.engine == "hadoop":
            from airflow_commit_provider.spark.jvm_committers import plan_conf

            options = dict(self._jvm_conf_options)
            if StorePath.parse(self.destination).scheme == "s3a":
                # Where S3A finds the store; its credentials travel in the environment only.
                options.setdefault("store", self.store_hook.s3_settings)
            conf.update(plan_conf(self.write_plan(), job_id=job_id, **options))
        return conf

    def _make_hook(
        self, job_id: str, try_number: int | None, workdir: str, context: Context
    ) -> CommittedSparkSubmitHook:
        py_files = [p for p in (self.py_files or "").split(",") if p.strip()]
        if self._ship_package:
            py_files.append(build_py_files_zip(workdir))
        conf = {**(self.conf or {}), **self.job_conf(job_id, try_number)}
        if self.openlineage_inject_parent_job_info:
            conf = lineage.parent_job_conf(conf, context)
        return CommittedSparkSubmitHook(
            s3_environment=self.store_hook.spark_environment(self.destination),
            spark_python=self._spark_python,
            env_vars=self.env_vars,
            conf=conf,
            conn_id=self._conn_id,
            files=self.files,
            py_files=",".join(py_files) or None,
            archives=self.archives,
            driver_class_path=self.driver_class_path,
            jars=self.jars,
            packages=self.packages,
            exclude_packages=self.exclude_packages,
            keytab=self.keytab,
            principal=self.principal,
            proxy_user=self.proxy_user,
            name=self.name,
            application_args=self.application_args,
            properties_file=self.properties_file,
            post_submit_commands=self.post_submit_commands,
            **self._hook_options,
        )

    # After the job -------------------------------------------------------------------------------
    def _verify_success(self, job_id: str, submitted_ms: int) -> SuccessData:
        """This job's ``_SUCCESS`` (or its record), or an error naming why what was found is not."""
        expectations = self._try_expectations(job_id, submitted_ms)
        try:
            with self._destination_store() as store:
                found = expectations.check(store, self.destination)
        except InvalidCommitDataError as error:
            raise AirflowException(
                f"job {job_id}: {error}; the {self.committer} committer writes a JSON _SUCCESS, so Spark "
                "did not write through it (for engine='hadoop', check the committer factory and commit "
                "protocol classes are on the classpath)"
            ) from error
        data = found.data
        if found.state == "missing" or data is None:
            raise AirflowException(
                f"spark-submit succeeded but {self.destination} has no _SUCCESS proving job {job_id}: it did "
                f"not commit ({found.describe()}; does the application write through the committer?)"
            )
        if found.state == "rejected":
            raise AirflowException(
                f"the _SUCCESS in {self.destination} is not this try's: it names job {data.job_id!r} "
                f"(committer {data.committer!r}, written {data.date}), this try's job is {job_id!r}; a "
                "_SUCCESS of another job, or written before this try started, means this try's output was "
                f"not committed ({found.describe()})"
            )
        if found.from_record:
            self.log.info(
                "The _SUCCESS in %s belongs to a later job; job %s is verified by its record %s",
                self.destination,
                job_id,
                found.path,
            )
        if expectations.job_id is None:
            self.log.warning(
                "Hadoop's %s committer records Spark's own job ID (%r), not this try's (%s): the _SUCCESS "
                "was accepted because it was written after this try started",
                self.committer,
                data.job_id,
                job_id,
            )
        return data

    def _try_expectations(self, job_id: str, submitted_ms: int) -> SuccessExpectations:
        """What proves this try's job committed.

        Our committers and Hadoop's S3A committers record the job ID the operator passed. Hadoop's
        manifest and FileOutputCommitter cannot be given one (Spark sets a random
        ``spark.sql.sources.writeJobUUID`` per write; the classic committer writes a 0-byte marker),
        so for those the ``_SUCCESS`` must have been written after this try's spark-submit started.
        """
        plan = self.write_plan()
        if plan.records_job_id:
            return SuccessExpectations(job_id=job_id)
        # `newer_than` is strict, and both times are whole milliseconds: written at the start passes.
        started = datetime.fromtimestamp((submitted_ms - 1) / 1000, tz=timezone.utc)
        return SuccessExpectations(newer_than=started, allow_legacy=not plan.traits.jvm.json_success)

    def _summary(
        self,
        data: SuccessData,
        job_id: str,
        try_number: int | None,
        duration: float,
        adopted_from_try: int | None = None,
    ) -> dict[str, Any]:
        summary = data.summary()
        partitions = list(summary.get("partitions") or ())
        result = {
            "job_id": data.job_id or job_id,
            "try_job_id": job_id,
            "committer": data.committer,
            "engine": self.engine,
            "destination": self.destination,
            "files": summary.get("files"),
            "bytes": summary.get("bytes"),
            "rows": summary.get("rows"),
            "partitions": partitions[:SUMMARY_PARTITIONS],
            "partition_count": len(partitions),
            "duration_seconds": round(duration, 3),
            "try_number": try_number,
            "adopted_from_try": adopted_from_try,
        }
        self.log.info("Job %s committed: %s", data.job_id, result)
        return result

    # Failure -------------------------------------------------------------------------------------
    def _stop_spark(self) -> None:
        """Kill spark-submit and everything it started (its process group); wait until they are gone."""
        if self._hook is not None and not self._hook.kill_process_group(STOP_WAIT_SECONDS):
            self.log.warning("processes of job %s are still alive after SIGKILL", self._job_id)

    def _abort_job(self, reason: str) -> None:
        """Abort this try's job once: pending uploads aborted, temporary directory deleted."""
        job_id = self._job_id
        if self._abort_lock is None:
            self._abort_lock = threading.RLock()
        with self._abort_lock:
            if self._aborted or not job_id:
                return
            self._aborted = True
            self._abort_now(job_id, reason)

    def _abort_now(self, job_id: str, reason: str) -> None:
        self.log.warning("Aborting job %s (%s)", job_id, reason)
        try:
            with self._destination_store() as store:
                if self.engine == "hadoop":
                    self.log.info("%s", abort_hadoop_job(store, self.destination, job_id).describe())
                else:
                    why = "the Airflow try failed or was killed"
                    committed = abort_job(store, self.destination, job_id, self.committer, why)
                    if committed is not None:
                        self._log_committed_despite_failure(committed)
                        return
        except Exception:
            self.log.exception(
                "aborting job %s failed; CleanupTemporaryOperator and AbortMultipartUploadsOperator "
                "reclaim what is left",
                job_id,
            )
            return
        self.log.info("Job %s aborted: its pending uploads and temporary files are gone", job_id)

    def _log_committed_despite_failure(self, data: SuccessData) -> None:
        """The job had passed its commit point: abort finished it, so its output is committed."""
        self._written = {**data.summary(), "partitions": data.partitions or []}
        if self.adopt_committed_tries:
            after = f"the next try of this task adopts job {data.job_id} instead of writing again"
        else:
            after = (
                "the next try writes again (adopt_committed_tries=False): only conflict_mode='replace' "
                "keeps that to one copy"
            )
        self.log.warning(
            "Job %s had already reached its commit point, so it could not be aborted: it is COMMITTED "
            "(%s files, %s bytes in %s). This try fails all the same; %s.",
            data.job_id,
            data.file_count,
            data.total_bytes,
            self.destination,
            after,
        )

    # OpenLineage ---------------------------------------------------------------------------------
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


# Helpers ------------------------------------------------------------------------------------------
def _try_number(context: Context | dict[str, Any]) -> int | None:
    ti = context.get("ti") if hasattr(context, "get") else None
    number = getattr(ti, "try_number", None)
    return number if isinstance(number, int) else None


def _task_key(context: Context | dict[str, Any]) -> TaskKey | None:
    """The task instance key of the running try, or None when the context has no task instance."""
    ti = context.get("ti") if hasattr(context, "get") else None
    found = [getattr(ti, name, None) for name in ("dag_id", "task_id", "run_id")]
    names = [name for name in found if isinstance(name, str) and name]
    if len(names) != len(found):
        return None
    dag_id, task_id, run_id = names
    map_index = getattr(ti, "map_index", None)
    return TaskKey(dag_id, task_id, run_id, map_index if isinstance(map_index, int) else -1)


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
