"""``CommittedSparkSubmitOperator``: spark-submit a PySpark job whose output goes through a committer.

It is the Spark provider's ``SparkSubmitOperator`` (its arguments, defaults and template fields,
see :mod:`~airflow_commit_provider.operators.submission`) whose tries are committed jobs. Every try
is one job, whose ID and commit choices reach the application as the confs
:data:`~airflow_commit_provider.spark.config.cfg.OPERATOR_CONFS`. ``engine="python"``: the application
writes with :func:`~airflow_commit_provider.spark.write_committed`, this package's ``core`` and
``spark`` shipped as ``--py-files``. ``engine="hadoop"``: the conf of Hadoop's JVM committers
(:func:`~airflow_commit_provider.spark.jvm_committer_conf`) is added. Each try is one
:class:`~.committed_try.CommittedTry`, which owns its plan, job, spark-submit and delivery.

**Exactly once across tries** (``engine="python"``): a try first settles the jobs of the tries
before it (:mod:`~.try_settlement`): it adopts one that committed while its try failed (without
running the application), and fences any other, so it can never commit. After spark-submit, a
``_SUCCESS`` naming this try's job is required, and the job is marked delivered. On failure,
timeout or kill, spark-submit's process group is stopped and the job aborted (:mod:`~.try_abort`);
a job past its commit point is finished instead, and the next try adopts it. A table write found
committed with its partitions not yet registered, by its try or by a retry adopting it, is
registered by a registration-only application (:mod:`~.registration`). ``engine="hadoop"`` runs a
new job per try, aborted on a best-effort basis.

**Durable submission** (:mod:`~.durable_submission`): where the provider follows the application
through the cluster (``yarn_track_via_rm_api``, ``track_driver_via_k8s_api``, a standalone master in
cluster mode), spark-submit returns once it is submitted, the try waits for it through the cluster,
and with the provider's ``durable`` (default True) the application is stored in the task state
store and tagged with its job on YARN, so a retry waits for it before it settles its job.

S3 credentials reach spark-submit as ``AWS_*`` environment variables only, and a YARN job's
containers in a private credentials file shipped with ``--files``, never as ``--conf``
(:class:`~airflow_commit_provider.hooks.spark_submit.CommittedSparkSubmitHook`; docs/yarn-and-kubernetes.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.utils.mixins import AwsBaseHookMixin, aws_template_fields
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_commit_provider import lineage
from airflow_commit_provider.airflow_config import LOCAL_WORK_ROOT
from airflow_commit_provider.assets import destination_asset
from airflow_commit_provider.compat import conf as airflow_conf
from airflow_commit_provider.core.committers.registry import ENGINES, WritePlan
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
from airflow_commit_provider.operators.committed_try import CommittedTry
from airflow_commit_provider.operators.report_link import CommitReportLink
from airflow_commit_provider.operators.submission import (
    build_py_files_zip,
    hook_arguments,
    try_confs,
    write_plan,
)
from airflow_commit_provider.templating import is_template
from airflow_commit_provider.tries.workdirs import default_root

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

__all__ = ["ENGINES", "CommittedSparkSubmitOperator", "build_py_files_zip"]


class CommittedSparkSubmitOperator(AwsBaseHookMixin[CommitStoreHook], SparkSubmitOperator):
    """Submit a PySpark application whose output is committed by ``committer`` under ``destination``.

    :param destination: where the job writes, a table's root folder (``s3://``, ``s3a://`` or ``file://``). Templated.
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
    :param spark_python: the Python of a ``local`` master's driver and executors (default: this one);
        on YARN, the containers' (``spark.pyspark.python`` and the AM's ``PYSPARK_PYTHON``), e.g.
        ``./environment/bin/python`` of a venv given with ``archives``.
    :param jvm_conf_options: more keyword arguments for ``jvm_committer_conf`` (engine="hadoop"), e.g.
        ``{"bind_commit_protocol": False}``; for ``s3a://``, ``store`` defaults to the connection's.
    :param adopt_committed_tries: (engine="python") return the result of an earlier try's job that
        committed although its try failed. Per destination: an application writing several outputs
        should use ``conflict_mode="replace"`` and ``False``.
    :param emit_asset: declare a literal ``destination`` as an outlet asset; its event carries the
        job, committer, files, bytes, rows and partitions (:mod:`airflow_commit_provider.assets`).
    :param local_work_root: where tries keep local files (:mod:`~airflow_commit_provider.tries.workdirs`;
        default: the ``[airflow_commit] local_work_root`` option, else under the system temp dir).
    :param openlineage_inject_parent_job_info: as the Spark provider's, but on by default: Spark's
        own OpenLineage listener then links its events to this task.
    :param durable: the Spark provider's: where it tracks the application through the cluster, a
        retry reconnects to an earlier try's application and settles its job (:mod:`~.durable_submission`);
        YARN cluster mode with durable needs ``yarn_track_via_rm_api=True``, as in the provider.

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
        self._try: CommittedTry | None = None  # the running (or last) try: on_kill and OpenLineage read it

    @property
    def archives(self) -> str | None:  # the provider keeps it private; templated here as it always was
        return self._archives

    @archives.setter
    def archives(self, value: str | None) -> None:
        self._archives = value

    @property
    def local_work_root(self) -> str:
        """The root of the tries' local directories (argument, then Airflow option, then temp dir)."""
        return self._local_work_root or LOCAL_WORK_ROOT.read(airflow_conf) or str(default_root())

    # Execution ---------------------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]  # the XCom summary
        self._try = CommittedTry(self, context)
        return self._try.run()

    def on_kill(self) -> None:
        """Stop the running try: spark-submit and its children killed, its job aborted; execute fails."""
        if self._try is not None:
            self._try.kill()

    # The try's plan and submission ---------------------------------------------------------------
    def write_plan(self) -> WritePlan:
        """How this task's writes are committed; a ValueError for a choice that cannot be honoured."""
        return write_plan(
            committer=self.committer,
            destination=self.destination,
            conflict_mode=self.conflict_mode,
            engine=self.engine,
            allow_unsafe_v2=self.allow_unsafe_v2,
        )

    def job_conf(
        self, job_id: str, try_number: int | None, plan: WritePlan | None = None, key: TaskKey | None = None
    ) -> dict[str, str]:
        """The ``spark.airflow_commit.*`` confs (and, for engine="hadoop", the JVM committer conf)."""
        plan = plan or self.write_plan()
        jvm_options = dict(self.jvm_conf_options)
        if plan.engine == "hadoop" and plan.destination.scheme == "s3a":
            # Where S3A finds the store; its credentials travel in the environment only.
            jvm_options.setdefault("store", self.hook.s3_settings)
        return try_confs(
            plan,
            job_id,
            table=self.table,
            key=key,
            try_number=try_number,
            jvm_options=jvm_options,
            max_job_duration=self.execution_timeout,
        )

    def _get_hook(self, **for_this_try: Any) -> CommittedSparkSubmitHook:
        """The provider's hook arguments (:func:`hook_arguments`), with what this try adds."""
        return CommittedSparkSubmitHook(
            spark_python=self.spark_python, **{**hook_arguments(self), **for_this_try}
        )

    # OpenLineage ---------------------------------------------------------------------------------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The destination, before anything is written (OVERWRITE for ``replace``)."""
        return lineage.write_lineage(self.destination, replace=self.conflict_mode == "replace")

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The destination with what the commit made visible: rows, bytes, files, partitions."""
        written = self._try.written if self._try is not None else None
        return lineage.write_lineage(
            self.destination, replace=self.conflict_mode == "replace", written=written
        )

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        """The destination; with statistics only if the job committed although the try failed."""
        return self.get_openlineage_facets_on_complete(task_instance)
