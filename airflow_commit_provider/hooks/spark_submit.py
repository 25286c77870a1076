"""``CommittedSparkSubmitHook``: the Spark provider's ``SparkSubmitHook``, with what a committed job needs.

A committed job needs three things the provider's hook keeps in private attributes: which master it
submits to (to route credentials), the spark-submit process (to kill its whole process group), and
how it turns ``env_vars`` into ``--conf`` arguments on YARN and Kubernetes. This subclass is the one
module that reads them, so a change in the provider is a change here only.

The provider's cluster tracking (``yarn_track_via_rm_api``, ``track_driver_via_k8s_api``, a
standalone master's driver status) is used as the provider's operator uses it: spark-submit returns
once the application is submitted, and the try waits for the application through the cluster
(:mod:`~airflow_commit_provider.operators.durable_submission`). This hook names the application
(:attr:`~CommittedSparkSubmitHook.application_id`), attaches one an earlier try submitted
(:meth:`~CommittedSparkSubmitHook.attach_application`), finds YARN applications by tag, and kills a
tracked application through the cluster, since spark-submit has exited by then.

A kill is final and never lost. The provider's ``submit`` assigns the process it started to
``_submit_sp``; here that assignment records it under a lock that :meth:`~CommittedSparkSubmitHook.
kill_process_group` takes too. A kill before the process is started stops it from starting; one
that arrives between ``Popen`` and the record (from another thread, it waits for the record; from
the submitting thread itself, in its SIGTERM handler, it cannot) kills the group as it is recorded.

S3 settings reach spark-submit as environment variables, never as ``--conf`` or arguments, so they
are in no command line, log or XCom. On YARN and Kubernetes the provider's hook turns environment
variables into ``--conf`` arguments; there only the endpoint and region travel so. On YARN the
connection's credentials go into a shared credentials file only the worker's user can read, shipped
with ``--files`` (YARN copies it into the application's private staging folder and localises it into
each container); the driver's and executors' environments name it (``AWS_SHARED_CREDENTIALS_FILE``,
which boto3, the CRT path through boto3 and the AWS SDK v2 read), and a client-mode driver, which is
spark-submit's own child, gets the credentials in its environment as on a standalone master. On
Kubernetes the credentials are not passed: the cluster supplies them (IRSA, or a Kubernetes Secret
named in ``spark.kubernetes.{driver,executor}.secretKeyRef.*``; docs/yarn-and-kubernetes.md). Confs that
may hold a secret (OpenLineage's transport, with its API key) go into a properties file only the
worker's user can read, given to spark-submit with ``--properties-file`` and
``--load-spark-defaults`` (Spark 4 then still reads ``spark-defaults.conf``), never as ``--conf``.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.hooks.spark_launcher import check_spark_launcher
from airflow_commit_provider.spark.jvm_committers import s3a_credentials_file_conf

__all__ = [
    "CREDENTIALS_FILE_NAME",
    "CREDENTIAL_VARIABLES",
    "PUBLIC_S3_VARIABLES",
    "CommittedSparkSubmitHook",
    "YarnApplication",
    "process_group_alive",
]

#: The S3 variables that may travel as ``--conf`` on YARN and Kubernetes: they carry no secret.
PUBLIC_S3_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")
#: The S3 variables that carry the credentials: on YARN they travel in a file, never as ``--conf``.
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
#: The variable naming a shared credentials file (boto3, the AWS CLI and the AWS SDK v2 read it).
SHARED_CREDENTIALS_FILE_VARIABLE = "AWS_SHARED_CREDENTIALS_FILE"
#: Variables of the user's ``env_vars`` that choose the credentials: given any, the connection's stay behind.
USER_CREDENTIAL_VARIABLES = (*CREDENTIAL_VARIABLES, SHARED_CREDENTIALS_FILE_VARIABLE, "AWS_PROFILE")
#: The credentials file's name, in the try's directory and in every YARN container's working directory.
CREDENTIALS_FILE_NAME = "airflow-commit-aws-credentials"
#: Where a YARN container finds it: in its working directory, where YARN links the localised file
#: and Spark starts the drivers and Python workers. Relative, not ``{{PWD}}/...``: YARN expands that
#: in the launch script, but PySpark also hands ``spark.executorEnv.*`` to its Python workers as
#: the driver read them, unexpanded.
_CONTAINER_CREDENTIALS_FILE = CREDENTIALS_FILE_NAME
#: The YARN confs that set a variable in the application master's (a cluster-mode driver's) and
#: the executors' environments.
YARN_ENVIRONMENT_CONFS = ("spark.yarn.appMasterEnv.", "spark.executorEnv.")
#: Confs of Hadoop's S3A filesystem: a job with any reads S3 through S3A (engine="hadoop", or the user's).
S3A_CONF_PREFIX = "spark.hadoop.fs.s3a."
#: The Python of a YARN application's executors and client-mode driver, and of a cluster-mode driver.
YARN_PYTHON_CONFS = ("spark.pyspark.python", "spark.yarn.appMasterEnv.PYSPARK_PYTHON")
#: Confs that may carry a secret (OpenLineage's transport: an API key, headers): never on a command line.
PRIVATE_CONF_PREFIXES = ("spark.openlineage.transport.",)
#: The properties file spark-submit reads them from, in the try's own directory.
PRIVATE_PROPERTIES_NAME = "private-spark.properties"
#: Where spark-submit's Python comes from when the master is local.
PYTHON_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
#: YARN application states in which an application may still run its driver (the provider's list).
YARN_ACTIVE_STATES = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"})


@dataclass(frozen=True)
class YarnApplication:
    """One application as the ResourceManager lists it."""

    application_id: str
    state: str
    tags: frozenset[str]

    @property
    def active(self) -> bool:
        return self.state in YARN_ACTIVE_STATES


class CommittedSparkSubmitHook(SparkSubmitHook):
    """A ``SparkSubmitHook`` that routes S3 settings safely and can kill everything it started.

    :param s3_environment: ``AWS_*`` variables giving the job S3 access (with credentials), as
        :meth:`CommitStoreHook.spark_environment` returns them. They go into spark-submit's
        environment; on YARN and Kubernetes only :data:`PUBLIC_S3_VARIABLES` are passed so, and on
        YARN the :data:`CREDENTIAL_VARIABLES` in a shipped file (the module's docstring).
    :param spark_python: the Python for the driver and executors when the master is ``local``
        (default: the worker's own interpreter, unless ``PYSPARK_PYTHON`` is set); on YARN, the
        :data:`YARN_PYTHON_CONFS` (a path in the containers, e.g. ``./environment/bin/python`` of a
        venv archive given with ``archives``). A ``conf`` setting them wins.
    :param env_vars: the user's variables; they win over the S3 ones. Naming any of
        :data:`USER_CREDENTIAL_VARIABLES`, they choose the credentials: the connection's are not passed.
    :param private_conf_dir: where the properties file of :data:`PRIVATE_CONF_PREFIXES` confs and
        the credentials file of a YARN job are written (the try's own directory); required for either.

    The other arguments are those of ``SparkSubmitHook``.
    """

    def __init__(
        self,
        *,
        s3_environment: Mapping[str, str] | None = None,
        spark_python: str | None = None,
        env_vars: Mapping[str, Any] | None = None,
        private_conf_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        # Before the provider's __init__, which records "no process yet" through `_submit_sp`.
        self._recorded = threading.Condition(threading.RLock())  # re-entrant: a SIGTERM handler may kill
        self._process: subprocess.Popen[str] | None = None
        self._kill_requested = False
        self._submitting_thread: int | None = None
        super().__init__(env_vars=None, **kwargs)
        self._private_conf_dir = private_conf_dir
        self._spark_python = spark_python
        self._credentials: dict[str, str] = {}  # a YARN job's, shipped in a file (_route_environment)
        self._credentials_file: Path | None = None  # that file, once written (_yarn_additions)
        self._env_vars = self._route_environment(
            dict(s3_environment or {}), dict(env_vars or {}), spark_python
        )

    # What the provider's hook resolved -------------------------------------------------------------
    @property
    def master(self) -> str:
        """The master the connection resolves to (``local[*]``, ``yarn``, ``spark://...``, ``k8s://...``)."""
        return str(self._connection["master"])

    @property
    def env_becomes_conf(self) -> bool:
        """Whether the provider passes the environment as ``--conf`` (YARN and Kubernetes masters)."""
        return bool(self._is_yarn or self._is_kubernetes)

    @property
    def environment(self) -> dict[str, Any]:
        """The variables spark-submit gets (secrets included: never log this)."""
        return {**(self._env_vars or {}), **self._driver_credentials}

    @property
    def shipped_credentials(self) -> bool:
        """Whether the connection's credentials go to a YARN job in the shipped credentials file."""
        return bool(self._credentials)

    @property
    def _driver_credentials(self) -> dict[str, str]:
        """What spark-submit's own environment gets on YARN, for a client-mode driver (its child): the
        credentials, and the file's local path, without which S3A's chain, which has the profile
        reader, fails to start (the reader refuses a missing file)."""
        if self._is_yarn_cluster_mode or not self._credentials:
            return {}
        named = (
            {SHARED_CREDENTIALS_FILE_VARIABLE: str(self._credentials_file)} if self._credentials_file else {}
        )
        return {**self._credentials, **named}

    @property
    def process_group(self) -> int | None:
        """The process group of the running spark-submit (its PID: it leads a session of its own)."""
        return self._process.pid if self._process is not None else None

    @property
    def exit_code(self) -> int | None:
        """spark-submit's exit code once it has ended (None before it started or while it runs)."""
        return self._process.returncode if self._process is not None else None

    @property
    def tracking(self) -> str | None:
        """How the provider follows this submission once spark-submit returns early: ``"yarn"`` (the
        ResourceManager's REST API), ``"kubernetes"`` (the Kubernetes API), ``"standalone"`` (the
        master's driver status); None when spark-submit itself waits for the application."""
        if self._should_track_driver_status:
            return "standalone"
        if getattr(self, "_should_track_driver_via_k8s_api", lambda: False)():
            return "kubernetes"
        if getattr(self, "_should_track_yarn_application_via_rm_api", lambda: False)():
            return "yarn"
        return None

    @property
    def is_yarn_cluster_mode(self) -> bool:
        return bool(self._is_yarn_cluster_mode)

    @property
    def application_id(self) -> str | None:
        """What identifies the submitted application where it runs (the provider's external ID):
        the YARN application ID, the standalone driver ID, or ``namespace:pod`` on Kubernetes."""
        if self._is_kubernetes:
            pod = self._kubernetes_driver_pod
            return f"{self._connection['namespace']}:{pod}" if pod else None
        if self._is_yarn:
            return self._yarn_application_id
        return self._driver_id

    def attach_application(self, application_id: str) -> None:
        """Make an application an earlier try submitted this hook's own, so :meth:`kill_process_group`
        kills it through the cluster (the provider's ``on_kill`` reads these attributes)."""
        if self._is_kubernetes:
            self._kubernetes_driver_pod = application_id.split(":", 1)[-1]
        elif self._is_yarn:
            self._yarn_application_id = application_id
        else:
            self._driver_id = application_id

    def yarn_applications_tagged(self, tags: Iterable[str]) -> list[YarnApplication]:
        """The applications the ResourceManager knows with any of `tags` (``applicationTags``), through
        the address and authentication of the provider's RM tracking."""
        wanted = sorted({tag.lower() for tag in tags})  # YARN keeps tags in lower case
        if not wanted:
            return []
        url = f"{self._get_yarn_rm_base_url()}/ws/v1/cluster/apps"
        response = requests.get(
            url,
            params={"applicationTags": ",".join(wanted)},
            auth=self._resolved_yarn_rm_auth,
            timeout=self._HTTP_TIMEOUT,
        )
        if response.status_code != 200:
            raise RuntimeError(
                f"{url}: the ResourceManager answered HTTP {response.status_code} to a search by tag"
            )
        apps = (response.json().get("apps") or {}).get("app") or []
        found = [
            YarnApplication(
                app["id"],
                app["state"],
                frozenset(t for t in (app.get("applicationTags") or "").split(",") if t),
            )
            for app in apps
        ]
        return sorted((app for app in found if app.tags & set(wanted)), key=lambda app: app.application_id)

    @property
    def kill_requested(self) -> bool:
        """Whether :meth:`kill_process_group` was called: this hook's spark-submit is not to run."""
        return self._kill_requested

    @property
    def _submit_sp(self) -> subprocess.Popen[str] | None:
        return self._process

    @_submit_sp.setter
    def _submit_sp(self, process: subprocess.Popen[str] | None) -> None:
        """The provider's ``submit`` assigns the process it has just started: recorded under the lock,
        and killed at once if a kill came first (before the record, or while it was made)."""
        with self._recorded:
            self._process = process
            self._recorded.notify_all()
            if process is not None and self._kill_requested:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)

    def submit_command(self, application: str) -> list[str]:
        """The spark-submit command line for `application`: what any ``ps`` on the worker shows."""
        return self._build_spark_submit_command(application)

    def _build_spark_submit_command(self, application: str) -> list[str]:
        """The provider's command, with the private confs moved into a properties file and, on YARN,
        the Python confs and the credentials file (:meth:`_yarn_additions`) added."""
        private = {key: value for key, value in self._conf.items() if key.startswith(PRIVATE_CONF_PREFIXES)}
        added_conf, added_files = self._yarn_additions()
        if not private and not added_conf:
            return super()._build_spark_submit_command(application)
        given_conf, given_properties, given_files = self._conf, self._properties_file, self._files
        self._conf = {**added_conf, **{key: value for key, value in given_conf.items() if key not in private}}
        self._files = ",".join(name for name in (given_files, *added_files) if name) or None
        if private:
            self._properties_file = str(self._write_private_properties(private, given_properties))
        try:
            command = super()._build_spark_submit_command(application)
        finally:
            self._conf, self._properties_file, self._files = given_conf, given_properties, given_files
        if private:
            command.insert(command.index("--properties-file") + 2, "--load-spark-defaults")
        if self._driver_credentials:  # the provider sets `_env` (spark-submit's) from env_vars only
            self._env = {**(self._env or {}), **self._driver_credentials}
        return command

    def _yarn_additions(self) -> tuple[dict[str, str], list[str]]:
        """On YARN: the confs naming the containers' Python (``spark_python``) and the credentials
        file (and, for a job using S3A, S3A's chain that reads it), and that file (written now, for
        ``--files``). Nothing elsewhere."""
        conf: dict[str, str] = {}
        files: list[str] = []
        if self._is_yarn and self._spark_python:
            conf.update(dict.fromkeys(YARN_PYTHON_CONFS, self._spark_python))
        if self._is_yarn and self._credentials:
            self._credentials_file = self._write_private_file(
                CREDENTIALS_FILE_NAME, _credentials_file(self._credentials)
            )
            files.append(str(self._credentials_file))
            for prefix in YARN_ENVIRONMENT_CONFS:
                conf[prefix + SHARED_CREDENTIALS_FILE_VARIABLE] = _CONTAINER_CREDENTIALS_FILE
            if any(key.startswith(S3A_CONF_PREFIX) for key in self._conf):  # S3A reads the store
                conf.update(s3a_credentials_file_conf())
        return conf, files

    def _write_private_properties(self, private: Mapping[str, Any], given_file: str | None) -> Path:
        """The user's properties file (if any) followed by the private confs, readable by the owner only."""
        text = Path(given_file).read_text(encoding="utf-8") + "\n" if given_file else ""
        text += "".join(
            f"{_escaped(key, True)}={_escaped(str(value), False)}\n" for key, value in private.items()
        )
        return self._write_private_file(PRIVATE_PROPERTIES_NAME, text, ", ".join(sorted(private)))

    def _write_private_file(self, name: str, text: str, holding: str = "the S3 credentials") -> Path:
        """`text` as the file `name` in ``private_conf_dir``, readable by its owner only."""
        if self._private_conf_dir is None:
            raise ValueError(f"{holding}: a private file needs private_conf_dir")
        path = Path(self._private_conf_dir, name)
        path.unlink(missing_ok=True)  # a file left there keeps its mode; a new one is private from the start
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        return path

    # The process group ----------------------------------------------------------------------------
    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        """Check the launcher, then run spark-submit in a session of its own (:meth:`kill_process_group`).

        Its stdin is /dev/null: a task's stdin is the Airflow supervisor's socket, and a spark-submit
        holding it (an orphan outliving a killed task) keeps the task "running" until a timeout.
        """
        self.check_launcher()
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        with self._recorded:
            if self._kill_requested:
                raise AirflowException("spark-submit was not started: it was killed before it could start")
            self._submitting_thread = threading.get_ident()
        try:
            return super().submit(application, start_new_session=True, **kwargs)
        finally:
            with self._recorded:
                self._submitting_thread = None
                self._recorded.notify_all()

    def check_launcher(self) -> None:
        """Fail with one line naming what is missing (spark-submit, Java 17+) before anything starts.

        Checked in the environment spark-submit gets: the provider passes ``env_vars`` to it on every
        master but Kubernetes, where they become driver confs.
        """
        environment = dict(os.environ)
        if not self._is_kubernetes:
            environment.update({name: str(value) for name, value in self.environment.items()})
        check_spark_launcher(self._connection["spark_binary"], environment)

    def kill_process_group(self, wait_seconds: float) -> bool:
        """Kill spark-submit and everything it started, or keep it from starting; True once they are
        all gone (or none was started), False while some may live.

        The provider's ``on_kill`` handles cluster drivers (YARN, Kubernetes, standalone) and
        spark-submit itself; the process group also takes the Python driver and workers, which
        would otherwise outlive the JVM and could still commit. A spark-submit being started is
        waited for up to `wait_seconds`, unless this is the submitting thread (a SIGTERM handler
        interrupting ``submit``): its group is then killed as the process is recorded.
        """
        deadline = time.monotonic() + wait_seconds
        with self._recorded:
            self._kill_requested = True
            submitting = self._submitting_thread
            if submitting == threading.get_ident() and self._process is None:
                self.log.warning("Killed while spark-submit is being started: it is killed as it starts")
                return False
            self._recorded.wait_for(
                lambda: self._process is not None or self._submitting_thread is None,
                max(deadline - time.monotonic(), 0),
            )
            process = self._process
        if process is None or process.poll() is not None:
            self._kill_tracked_application()
        if process is None:
            return self._submitting_thread is None
        if process.poll() is None:
            try:
                self.on_kill()
            except Exception:
                self.log.exception("SparkSubmitHook.on_kill failed; killing the process group")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            process.wait(timeout=wait_seconds)
        return _wait_for_group_exit(process.pid, wait_seconds)

    def _kill_tracked_application(self) -> None:
        """A tracked application outlives spark-submit: the provider's ``on_kill`` kills it through the
        cluster (the RM's REST API, the standalone master, the driver pod's deletion)."""
        if self.tracking is None or self.application_id is None:
            return
        self.log.info("Killing application %s through %s", self.application_id, self.tracking)
        try:
            self.on_kill()
        except Exception:
            self.log.exception("SparkSubmitHook.on_kill failed for application %s", self.application_id)

    # Environment routing ----------------------------------------------------------------------------
    def _route_environment(
        self, s3_env: dict[str, str], user_env: dict[str, Any], spark_python: str | None
    ) -> dict[str, Any] | None:
        if self.env_becomes_conf:
            public = {name: value for name, value in s3_env.items() if name in PUBLIC_S3_VARIABLES}
            credentials = {name: value for name, value in s3_env.items() if name in CREDENTIAL_VARIABLES}
            chosen = sorted(set(user_env) & set(USER_CREDENTIAL_VARIABLES))
            if credentials and chosen:
                self.log.info(
                    "env_vars set %s: the connection's S3 credentials are not passed", ", ".join(chosen)
                )
            elif credentials and self._is_kubernetes:
                self.log.info(
                    "Not passing S3 credentials to a Kubernetes job (the provider would put them on the "
                    "spark-submit command line): the cluster must provide them, e.g. a Kubernetes Secret "
                    "named in spark.kubernetes.driver.secretKeyRef.* and spark.kubernetes.executor.secretKeyRef.*"
                )
            elif credentials:
                self._credentials = credentials
                self.log.info(
                    "Passing S3 credentials (%s) to a YARN job in the file %s, shipped with --files and "
                    "named by %s in the application master's and executors' environments%s; none on the "
                    "command line or in Spark's conf",
                    ", ".join(credentials),
                    CREDENTIALS_FILE_NAME,
                    SHARED_CREDENTIALS_FILE_VARIABLE,
                    ""
                    if self._is_yarn_cluster_mode
                    else ", and to the client-mode driver in spark-submit's environment",
                )
            return {**public, **user_env} or None
        env = {**s3_env, **user_env}
        if self.master.startswith("local"):
            env = {**self._local_environment(env, spark_python), **env}
        return env or None

    def _local_environment(self, env: dict[str, Any], spark_python: str | None) -> dict[str, str]:
        """For a local master: Spark's Python is this interpreter, and its spark-submit is found."""
        extra: dict[str, str] = {}
        python = spark_python or sys.executable
        for name in PYTHON_VARIABLES:
            if name not in env and (spark_python or not os.environ.get(name)):
                extra[name] = python
        binary = self._connection["spark_binary"] or "spark-submit"
        path = env.get("PATH", os.environ.get("PATH", ""))
        beside = Path(sys.executable).parent
        if shutil.which(binary, path=path) is None and (beside / binary).is_file():
            extra["PATH"] = os.pathsep.join(p for p in (str(beside), path) if p)
        return extra


def _credentials_file(credentials: Mapping[str, str]) -> str:
    """`credentials` (:data:`CREDENTIAL_VARIABLES`) as a shared credentials file's default profile."""
    parser = configparser.RawConfigParser()
    parser["default"] = {name.lower(): value for name, value in credentials.items()}  # aws_access_key_id...
    text = io.StringIO()
    parser.write(text)
    return text.getvalue()


def _escaped(text: str, key: bool) -> str:
    """`text` as java.util.Properties reads it back (backslash escapes; in a key also `=`, `:`, blanks)."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        text = text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif text.startswith(" "):
        text = "\\" + text
    return text


def _wait_for_group_exit(pgid: int, timeout: float) -> bool:
    """True once no live (non-zombie) process is left in the group."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_group_alive(pgid):
            return True
        time.sleep(0.05)  # waiting for killed processes to exit, not synchronising tests
    return not process_group_alive(pgid)


def process_group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process is in the group; reads /proc where it exists."""
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
