"""``CommittedSparkSubmitOperator``: spark-submit a PySpark job whose output goes through a committer.

Every try is one job with a fresh job ID (a UUID), passed to the application as Spark confs:

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

After spark-submit succeeds, the operator reads ``_SUCCESS`` and requires this try's job ID in it:
a missing, legacy, stale or foreign ``_SUCCESS`` fails the task. (Hadoop's manifest and classic
committers cannot record a given job ID; for those the ``_SUCCESS`` must have been written after
the try started.) On failure, timeout or kill the operator stops spark-submit and everything it
started (its own process group), then aborts this try's job: its pending uploads and its temporary
directory go, nothing of it becomes visible. A retry is a new job; with ``conflict_mode="replace"``
(or a fresh destination) exactly one copy of the output remains. Only an application that fails
*after* its job committed leaves visible output behind (the commit happened): retries of such
applications need ``replace`` to stay idempotent.

S3 access comes from the Airflow AWS connection (``aws_conn_id``) and reaches spark-submit as
``AWS_*`` environment variables, never as ``--conf`` or arguments, so it is in no command line,
log or XCom. The driver reads them and ``write_committed`` hands them to its tasks. On YARN and
Kubernetes masters, where the Spark hook would turn environment variables into ``--conf``
arguments, only the endpoint and region are passed and the cluster must supply credentials.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.layout import MAGIC_PREFIX, TEMPORARY_DIR, validate_job_id
from airflow_commit_provider.core.options import CONFLICT_MODES
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, StoreError
from airflow_commit_provider.core.success_check import load_success
from airflow_commit_provider.hooks.commit_store import CommitStoreHook

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import Context

    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = ["ENGINES", "CommittedSparkSubmitOperator", "build_py_files_zip"]

ENGINES = ("python", "hadoop")
CONF_PREFIX = "spark.airflow_commit."
#: How long to wait for the processes of a stopped job to exit before aborting anyway.
STOP_WAIT_SECONDS = 30.0
#: Partitions listed in the XCom summary; the count is always exact.
SUMMARY_PARTITIONS = 100
#: Hadoop committers that put the job ID given in the conf into `_SUCCESS` (fs.s3a.committer.uuid).
HADOOP_COMMITTERS_WITH_JOB_ID = ("magic", "directory", "partitioned")
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
        ``{"bind_commit_protocol": False}`` where spark-hadoop-cloud is not on the classpath.

    The other arguments are those of ``SparkSubmitOperator`` / ``SparkSubmitHook`` (``conf``,
    ``files``, ``py_files``, ``application_args``, ``env_vars``, ``executor_memory``, ...), with the
    same templating.

    Returns (XCom) ``{"job_id", "try_job_id", "committer", "engine", "destination", "files", "bytes",
    "rows", "partitions", "partition_count", "duration_seconds", "try_number"}``: ``job_id`` is the one
    in ``_SUCCESS`` (what a downstream sensor checks), ``try_job_id`` the one the operator generated;
    they differ only for Hadoop's manifest and file committers, which take Spark's own write UUID.
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
        self._hook: SparkSubmitHook | None = None
        self._job_id: str | None = None
        self._killed = False
        self._aborted = False
        # Re-entrant: on_kill can interrupt execute's own abort in the same thread (signal handler).
        # Created per execution: operators are deep-copied, and locks cannot be.
        self._abort_lock: threading.RLock | None = None

    # Execution ---------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        started = time.monotonic()
        self._validate()
        self._killed = self._aborted = False
        self._abort_lock = threading.RLock()
        job_id = self._job_id = str(uuid.uuid4())
        try_number = _try_number(context)
        self.log.info(
            "Try %s: job %s writes %s with the %s committer (engine %s, conflict mode %s)",
            try_number,
            job_id,
            self.destination,
            self.committer,
            self.engine,
            self.conflict_mode or "default",
        )
        store_hook = CommitStoreHook(aws_conn_id=self.aws_conn_id)
        try:
            with tempfile.TemporaryDirectory(prefix="airflow-commit-submit-") as workdir:
                hook = self._make_hook(store_hook, job_id, try_number, workdir)
                self._hook = hook
                submitted_ms = int(time.time() * 1000)
                if self._killed:  # killed before the job started: do not start it
                    raise AirflowException(f"the task was killed before job {job_id} started")
                hook.submit(self.application, start_new_session=True)
            if self._killed:
                raise AirflowException(f"the task was killed while job {job_id} ran")
            data = self._verify_success(store_hook, job_id, submitted_ms)
        except BaseException as error:  # failures, AirflowTaskTimeout, AirflowTaskTerminated
            self._stop_spark()
            self._abort_job(store_hook, f"{type(error).__name__}: {error}")
            raise
        finally:
            self._hook = None
        return self._summary(data, job_id, try_number, time.monotonic() - started)

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
            self._abort_job(CommitStoreHook(aws_conn_id=self.aws_conn_id), "the task was killed")

    # Building the submission ---------------------------------------------------------------------
    def _validate(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine {self.engine!r} is not one of {', '.join(ENGINES)}")
        if not self.committer:
            raise ValueError("committer is required (magic, directory, partitioned, manifest, file-v1, ...)")
        if self.conflict_mode is not None and self.conflict_mode not in CONFLICT_MODES:
            raise ValueError(
                f"conflict_mode {self.conflict_mode!r} is not one of {', '.join(CONFLICT_MODES)}"
            )
        if self.engine == "python":
            from airflow_commit_provider.core.committers import COMMITTERS

            if self.committer not in COMMITTERS:
                raise ValueError(
                    f"unknown committer {self.committer!r}: choose one of {', '.join(sorted(COMMITTERS))}"
                )
            if self.committer == "file-v2" and not self._allow_unsafe_v2:
                raise ValueError(
                    "the file-v2 committer can leave partial output visible when a task fails; "
                    "pass allow_unsafe_v2=True to use it anyway"
                )
        StorePath.parse(self.destination)
        if not self.application:
            raise ValueError("application is required: the PySpark application to submit")
        reserved = sorted(k for k in (self.conf or {}) if k in _reserved_conf_keys())
        if reserved:
            raise ValueError(f"conf must not set {', '.join(reserved)}: the operator sets them for each try")

    def job_conf(self, job_id: str, try_number: int | None) -> dict[str, str]:
        """The ``spark.airflow_commit.*`` confs (and, for engine="hadoop", the JVM committer conf)."""
        conf = {
            f"{CONF_PREFIX}job_id": job_id,
            f"{CONF_PREFIX}committer": self.committer,
            f"{CONF_PREFIX}destination": self.destination,
            f"{CONF_PREFIX}engine": self.engine,
        }
        if self.conflict_mode:
            conf[f"{CONF_PREFIX}conflict_mode"] = self.conflict_mode
        if try_number is not None:
            conf[f"{CONF_PREFIX}try_number"] = str(try_number)
        if self.engine == "hadoop":
            from airflow_commit_provider.spark import jvm_committer_conf

            conf.update(
                jvm_committer_conf(
                    self.destination,
                    self.committer,
                    conflict_mode=self.conflict_mode,
                    job_id=job_id,
                    allow_unsafe_v2=self._allow_unsafe_v2,
                    **self._jvm_conf_options,
                )
            )
        return conf

    def _make_hook(
        self, store_hook: CommitStoreHook, job_id: str, try_number: int | None, workdir: str
    ) -> SparkSubmitHook:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        conf = {**(self.conf or {}), **self.job_conf(job_id, try_number)}
        py_files = [p for p in (self.py_files or "").split(",") if p.strip()]
        if self._ship_package:
            py_files.append(build_py_files_zip(workdir))

        def hook(env: dict[str, Any]) -> SparkSubmitHook:
            return SparkSubmitHook(
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
                env_vars=env or None,
                properties_file=self.properties_file,
                post_submit_commands=self.post_submit_commands,
                **self._hook_options,
            )

        # S3 settings (with credentials) only ever travel in the environment of spark-submit. On YARN
        # and Kubernetes the hook turns env_vars into --conf arguments (a command line), so there
        # only the endpoint and region go, and the cluster supplies credentials (instance roles).
        s3_env = store_hook.spark_environment(self.destination)
        submit_hook = hook({**s3_env, **(self.env_vars or {})})
        if submit_hook._is_yarn or submit_hook._is_kubernetes:
            public = {k: v for k, v in s3_env.items() if k in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")}
            if public != s3_env:
                self.log.info(
                    "Not passing S3 credentials to a %s job (they would be on the spark-submit command "
                    "line): the cluster must provide them",
                    "YARN" if submit_hook._is_yarn else "Kubernetes",
                )
            submit_hook = hook({**public, **(self.env_vars or {})})
        env = {**s3_env, **(self.env_vars or {})}
        if str(submit_hook._connection["master"]).startswith("local"):
            local_env = self._local_environment(submit_hook, env)
            if local_env:
                submit_hook = hook({**local_env, **env})
        return submit_hook

    def _local_environment(self, hook: SparkSubmitHook, env: dict[str, Any]) -> dict[str, str]:
        """For a local master: Spark's Python is this interpreter, and its spark-submit is found."""
        extra: dict[str, str] = {}
        python = self._spark_python or sys.executable
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            if name not in env and (self._spark_python or not os.environ.get(name)):
                extra[name] = python
        binary = hook._connection["spark_binary"] or "spark-submit"
        path = env.get("PATH", os.environ.get("PATH", ""))
        beside = Path(sys.executable).parent
        if shutil.which(binary, path=path) is None and (beside / binary).is_file():
            extra["PATH"] = os.pathsep.join(p for p in (str(beside), path) if p)
        return extra

    # After the job -------------------------------------------------------------------------------
    def _verify_success(self, store_hook: CommitStoreHook, job_id: str, submitted_ms: int) -> SuccessData:
        """This try's ``_SUCCESS``, or an error naming why the one found is not.

        Our committers and Hadoop's S3A committers record the job ID the operator passed. Hadoop's
        manifest and FileOutputCommitter cannot be given one (Spark sets a random
        ``spark.sql.sources.writeJobUUID`` per write; the classic committer writes a 0-byte marker),
        so for those the ``_SUCCESS`` must have been written after this try's spark-submit started.
        """
        by_job_id = self.engine == "python" or self.committer in HADOOP_COMMITTERS_WITH_JOB_ID
        classic = self.engine == "hadoop" and self.committer in ("file-v1", "file-v2")
        store = store_hook.get_store(self.destination)
        try:
            data = load_success(store, self.destination, allow_legacy=classic)
        except FileNotFoundInStoreError as error:
            raise AirflowException(
                f"spark-submit succeeded but {self.destination} has no _SUCCESS: job {job_id} did not "
                "commit (does the application write through the committer?)"
            ) from error
        except InvalidCommitDataError as error:
            raise AirflowException(
                f"job {job_id}: {error}; the {self.committer} committer writes a JSON _SUCCESS, so Spark "
                "did not write through it (for engine='hadoop', check the committer factory and commit "
                "protocol classes are on the classpath)"
            ) from error
        finally:
            store.close()
        if by_job_id:
            if data.job_id != job_id:
                raise AirflowException(
                    f"the _SUCCESS in {self.destination} is not this try's: it names job {data.job_id!r} "
                    f"(committer {data.committer!r}, written {data.date}), this try ran job {job_id!r}; "
                    "a stale or foreign _SUCCESS means this try's output was not committed"
                )
        else:
            if data.timestamp < submitted_ms:
                raise AirflowException(
                    f"the _SUCCESS in {self.destination} was written at {data.date}, before this try "
                    f"(job {job_id}) started: it is stale, this try's output was not committed"
                )
            self.log.warning(
                "Hadoop's %s committer records Spark's own job ID (%r), not this try's (%s): the _SUCCESS "
                "was accepted because it was written after this try started",
                self.committer,
                data.job_id,
                job_id,
            )
        return data

    def _summary(
        self, data: SuccessData, job_id: str, try_number: int | None, duration: float
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
        }
        self.log.info("Job %s committed: %s", data.job_id, result)
        return result

    # Failure -------------------------------------------------------------------------------------
    def _stop_spark(self) -> None:
        """Kill spark-submit and everything it started; wait until they are gone.

        The hook's own ``on_kill`` handles cluster drivers (YARN/K8s/standalone) and spark-submit;
        the process group (spark-submit runs in a session of its own) also takes the Python driver
        and workers, which would otherwise outlive the JVM and could still commit.
        """
        hook = self._hook
        process = getattr(hook, "_submit_sp", None) if hook is not None else None
        if hook is None or process is None:
            return
        if process.poll() is None:
            try:
                hook.on_kill()
            except Exception:
                self.log.exception("SparkSubmitHook.on_kill failed; killing the process group")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            process.wait(timeout=STOP_WAIT_SECONDS)
        if not _wait_for_group_exit(process.pid, STOP_WAIT_SECONDS):
            self.log.warning("processes of job %s are still alive after SIGKILL", self._job_id)

    def _abort_job(self, store_hook: CommitStoreHook, reason: str) -> None:
        """Abort this try's job once: pending uploads aborted, temporary directory deleted."""
        job_id = self._job_id
        if self._abort_lock is None:
            self._abort_lock = threading.RLock()
        with self._abort_lock:
            if self._aborted or not job_id:
                return
            self._aborted = True
            self._abort_now(store_hook, job_id, reason)

    def _abort_now(self, store_hook: CommitStoreHook, job_id: str, reason: str) -> None:
        self.log.warning("Aborting job %s (%s)", job_id, reason)
        try:
            store = store_hook.get_store(self.destination)
        except Exception:
            self.log.exception("cannot open the store of %s to abort job %s", self.destination, job_id)
            return
        try:
            if self.engine == "python":
                _abort_python_job(store, self.destination, self.committer, job_id)
            else:
                _abort_hadoop_job(store, self.destination, job_id, self.log)
            self.log.info("Job %s aborted: its pending uploads and temporary files are gone", job_id)
        except Exception:
            self.log.exception(
                "aborting job %s failed; CleanupTemporaryOperator and AbortMultipartUploadsOperator "
                "reclaim what is left",
                job_id,
            )
        finally:
            store.close()


# Helpers ------------------------------------------------------------------------------------------
def _reserved_conf_keys() -> set[str]:
    names = ("job_id", "committer", "destination", "engine", "conflict_mode", "try_number")
    return {CONF_PREFIX + name for name in names}


def _try_number(context: Context | dict[str, Any]) -> int | None:
    ti = context.get("ti") if hasattr(context, "get") else None
    number = getattr(ti, "try_number", None)
    return number if isinstance(number, int) else None


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


def _abort_python_job(store: Store, destination: str, committer: str, job_id: str) -> None:
    """Abort through the committer: it finds exactly this job's uploads from their records."""
    from airflow_commit_provider.core.committers import create_committer

    try:
        job = create_committer(committer, store, destination, job_id)
    except (ValueError, StoreError):  # e.g. a committer the store cannot host: it never ran
        for layout_dir in _job_dirs(StorePath.parse(destination), job_id):
            store.delete_tree(layout_dir)
        return
    job.abort_job()


def _job_dirs(destination: StorePath, job_id: str) -> list[StorePath]:
    validate_job_id(job_id)
    return [destination.join(TEMPORARY_DIR, job_id), destination.join(f"{MAGIC_PREFIX}{job_id}")]


def _abort_hadoop_job(store: Store, destination: str, job_id: str, log: Any) -> None:
    """Best effort for Hadoop's JVM committers, which keep no records this side can read fully.

    Aborts the uploads listed in the S3A magic committer's ``.pending``/``.pendingset`` files under
    ``__magic_job-<job ID>``, then deletes the job's temporary trees (``__magic_job-<id>``,
    ``_temporary/<id>``, ``.spark-staging-<id>`` ...). The S3A staging committers keep their pending
    upload lists on the cluster filesystem: their uploads are left to AbortMultipartUploadsOperator.
    The manifest committer's ``_temporary/manifest_<id>`` carries Spark's own write UUID and the
    classic committer's ``_temporary/0`` is shared by all jobs: those are left to
    CleanupTemporaryOperator, which deletes temporary trees once they are stale.
    """
    from airflow_commit_provider.core.cleanup import clean_stale_temp_trees
    from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet

    root = StorePath.parse(destination)
    magic_dir = root.join(f"{MAGIC_PREFIX}{job_id}")
    aborted = 0
    if store.capabilities.multipart_upload:
        for status in list(store.list_files(magic_dir)):
            name = status.path.name
            try:
                if name.endswith(".pendingset"):
                    commits = PendingSet.from_bytes(store.read_bytes(status.path), str(status.path)).commits
                elif name.endswith(".pending"):
                    commits = [PendingCommit.from_bytes(store.read_bytes(status.path), str(status.path))]
                else:
                    continue
            except (InvalidCommitDataError, StoreError) as error:
                log.warning("skipping unreadable %s: %s", status.path, error)
                continue
            for commit in commits:
                with contextlib.suppress(StoreError):
                    store.abort_multipart_upload(StorePath.parse(commit.uri), commit.upload_id)
                    aborted += 1
    report = clean_stale_temp_trees(store, root, older_than=0, job_id=job_id, allow_bucket_root=True)
    log.info("job %s: aborted %d uploads; temporary trees: %s", job_id, aborted, report.to_json())


def _wait_for_group_exit(pgid: int, timeout: float) -> bool:
    """True once no live (non-zombie) process is left in the group; polls /proc where it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        time.sleep(0.05)  # waiting for killed processes to exit, not synchronising tests
    return not _group_alive(pgid)


def _group_alive(pgid: int) -> bool:
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
