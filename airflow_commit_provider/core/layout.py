"""Where a job keeps its work, as Hadoop lays it out, with the job UUID in every path.

A unique job ID per directory (SPARK-33402, HADOOP-18797) means two jobs writing to the same
destination never share or delete each other's work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_commit_provider.core.paths import StorePath

#: The whole string must match (`fullmatch`): `$` would let `job1\n` through into S3 keys.
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: The marker of a committed job (and, from the partitioned committer, of each partition it wrote).
SUCCESS_FILENAME = "_SUCCESS"
TEMPORARY_DIR = "_temporary"
MAGIC_PREFIX = "__magic_job-"
RECORDS_DIR = "_airflow_commit"
"""Per-job outcomes and records, beside the output and hidden from its readers (the `_` prefix),
as Hadoop's `fs.s3a.committer.summary.report.directory` keeps job summaries."""
#: The names of a job's lists under `JobLayout.lists_dir`: prefix, the SHA-256 of the bytes, suffix.
FILE_LIST_PREFIX = "files-"
PARTITION_LIST_PREFIX = "partitions-"
LIST_SUFFIX = ".parquet"
RECORD_KINDS = {"outcome": ".outcome.json", "success": ".success.json", "delivered": ".delivered.json"}
RECORDS_INDEX_DIR = "_index"
"""The records index under the records directory: one create-only entry per decided job
(`core.records_index`). No job ID starts with `_`, so it is never a job's lists folder."""
#: Digits of an index entry's inverted decision time: epoch milliseconds below 10^13 (the year 2286).
INDEX_TIME_DIGITS = 13
_LATEST_INDEXED_MILLIS = 10**INDEX_TIME_DIGITS - 1
_INDEX_ENTRY = re.compile(rf"([0-9]{{{INDEX_TIME_DIGITS}}})-({_JOB_ID.pattern})\.json")


def validate_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise ValueError(
            f"job_id {job_id!r} is not usable in paths: use letters, digits, '.', '_' or '-' (a UUID is ideal)"
        )
    return job_id


@dataclass(frozen=True)
class JobLayout:
    destination: StorePath
    job_id: str
    magic: bool = False

    @property
    def job_dir(self) -> StorePath:
        if self.magic:
            return self.destination.join(f"{MAGIC_PREFIX}{self.job_id}")
        return self.destination.join(TEMPORARY_DIR, self.job_id)

    @property
    def job_attempt_dir(self) -> StorePath:
        if self.magic:
            return self.job_dir.join(f"job-{self.job_id}", "00")
        return self.job_dir.join("00")

    @property
    def job_marker(self) -> StorePath:
        """Exists from job setup until abort or cleanup; task commits check it (continuity of correctness)."""
        return self.job_dir.join("job.json")

    @property
    def records_dir(self) -> StorePath:
        return self.destination.join(RECORDS_DIR)

    @property
    def outcome(self) -> StorePath:
        """The job's commit point: created once, if absent, saying commit (with the task list) or abort."""
        return self.records_dir.join(f"{self.job_id}{RECORD_KINDS['outcome']}")

    @property
    def job_record(self) -> StorePath:
        """The job's durable summary in the `_SUCCESS` format; it outlives later jobs' `_SUCCESS`."""
        return self.records_dir.join(f"{self.job_id}{RECORD_KINDS['success']}")

    @property
    def lists_dir(self) -> StorePath:
        """Where the job keeps what grows with it (its file list, its partition list), beside its
        records: written before the commit point, deleted with the job's work on abort; a committed
        job's stay until its records are pruned."""
        return self.records_dir.join(self.job_id)

    def file_list(self, sha256: str) -> StorePath:
        """The job's file list, named by the SHA-256 of its bytes: two drivers of one job can only
        ever write the same content under one name."""
        return self.lists_dir.join(f"{FILE_LIST_PREFIX}{sha256}{LIST_SUFFIX}")

    def partition_list(self, sha256: str) -> StorePath:
        """The job's partition list (written past `PARTITIONS_LIMIT`), named as the file list is."""
        return self.lists_dir.join(f"{PARTITION_LIST_PREFIX}{sha256}{LIST_SUFFIX}")

    @property
    def delivery_marker(self) -> StorePath:
        """Written by the orchestrator when the try that ran this job succeeded."""
        return self.records_dir.join(f"{self.job_id}{RECORD_KINDS['delivered']}")

    def index_entry(self, decided_at: int) -> StorePath:
        """The job's entry in the records index, for the decision made at `decided_at` (epoch ms)."""
        return self.records_dir.join(RECORDS_INDEX_DIR, index_entry_name(self.job_id, decided_at))

    @property
    def success_marker(self) -> StorePath:
        return self.destination.join(SUCCESS_FILENAME)

    def partition_success(self, partition: str) -> StorePath:
        """A partition's own `_SUCCESS`, so one day's sensor is not confused by another day's job."""
        return self.destination.join(partition, SUCCESS_FILENAME)

    def task_id(self, task: int) -> str:
        return f"task_{self.job_id}_m_{task:06d}"

    def task_attempt_id(self, task: int, attempt: int) -> str:
        return f"attempt_{self.job_id}_m_{task:06d}_{attempt}"

    def task_attempt_dir(self, task_attempt_id: str) -> StorePath:
        base = self.task_attempts_dir.join(task_attempt_id)
        return base.join("__base") if self.magic else base

    @property
    def task_attempts_dir(self) -> StorePath:
        """Where the task attempts that write into the store keep their work, one directory each."""
        return self.job_attempt_dir.join("tasks")

    def attempt_note(self, task_attempt_id: str) -> StorePath:
        """The note an attempt leaves when it ends without being its task's commit (`LostAttempt`)."""
        return self.attempt_notes_dir.join(f"{task_attempt_id}.json")

    @property
    def attempt_notes_dir(self) -> StorePath:
        return self.job_attempt_dir.join("attempts")

    def attempt_dirs(self, task_attempt_id: str) -> tuple[StorePath, ...]:
        """Every folder of the job's tree a task attempt writes into: its work directory, its
        upload records, its task's manifests and its note."""
        return (
            self.task_attempt_dir(task_attempt_id),
            self.upload_records_dir(task_attempt_id),
            self.manifests_dir,
            self.attempt_notes_dir,
        )

    def task_of_attempt(self, task_attempt_id: str) -> str | None:
        """The task an attempt ID of this job belongs to, None for anything else."""
        attempt = re.fullmatch(rf"attempt_{re.escape(self.job_id)}_m_([0-9]{{6,}})_[0-9]+", task_attempt_id)
        return None if attempt is None else f"task_{self.job_id}_m_{attempt[1]}"

    def is_attempt_of_this_job(self, task_id: str, task_attempt_id: str) -> bool:
        """Whether the IDs are this job's, as `task_id` and `task_attempt_id` write them, and the
        attempt is one of that task's: a record naming any other is not this job's word."""
        return self.task_of_attempt(task_attempt_id) == task_id

    @property
    def manifests_dir(self) -> StorePath:
        return self.job_attempt_dir.join("manifests")

    def manifest_path(self, task_id: str) -> StorePath:
        """The committed manifest (or pendingset) of a task: its existence is the task's commit."""
        return self.manifests_dir.join(f"{task_id}-manifest.json")

    def upload_records_dir(self, task_attempt_id: str | None = None) -> StorePath:
        """Records of every multipart upload an attempt started, so abort can find them all."""
        base = self.job_attempt_dir.join("uploads")
        return base.join(task_attempt_id) if task_attempt_id else base

    @property
    def swap_dir(self) -> StorePath:
        """Where job commit of ``replace`` on a rename store keeps the partitions it swaps
        (`stages.swaps`): in the job's folder, so the job's cleanup removes whatever a swap left."""
        return self.job_dir.join("swap")

    def incoming_partition(self, partition: str) -> StorePath:
        """Where the job's files of `partition` are gathered before the folder is swapped in."""
        return self.swap_dir.join("incoming", partition)

    def replaced_partition(self, partition: str) -> StorePath:
        """Where the partition folder the job replaces is put aside until it is deleted."""
        return self.swap_dir.join("replaced", partition)

    def committed_task_dir(self, task_id: str) -> StorePath:
        """FileOutputCommitter v1's committed-task directory."""
        return self.job_attempt_dir.join("committed", task_id)


def parse_record_name(name: str) -> tuple[str, str] | None:
    """(job ID, kind) of a file name in the records directory, or None for anything else."""
    for kind, suffix in RECORD_KINDS.items():
        if name.endswith(suffix):
            job_id = name[: -len(suffix)]
            return (job_id, kind) if _JOB_ID.fullmatch(job_id) else None
    return None


def index_entry_name(job_id: str, decided_at: int) -> str:
    """`<10^13 - 1 - decided_at, 13 digits>-<jobId>.json`: S3 lists keys in ascending order, so
    the newest decisions come first (ties in job ID order). Times outside 0 to 10^13 - 1 ms are
    clamped, so every name has the same width and sorts by time."""
    inverted = _LATEST_INDEXED_MILLIS - min(max(decided_at, 0), _LATEST_INDEXED_MILLIS)
    return f"{inverted:0{INDEX_TIME_DIGITS}d}-{validate_job_id(job_id)}.json"


def parse_index_entry_name(name: str) -> tuple[str, int] | None:
    """(job ID, decision time in epoch ms) of an index entry's file name, or None for anything else."""
    match = _INDEX_ENTRY.fullmatch(name)
    return None if match is None else (match[2], _LATEST_INDEXED_MILLIS - int(match[1]))


def is_job_id(name: str) -> bool:
    return isinstance(name, str) and _JOB_ID.fullmatch(name) is not None
