"""`success show|verify DESTINATION`: a job's `_SUCCESS` (or its record), shown or
checked as the sensor checks it (`success.check`), and with `--files` every file it lists."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from airflow_commit_provider.cli.arguments import CliError, store_for
from airflow_commit_provider.cli.output import emit, for_machines, progress_for
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import LegacySuccessMarkerError, SuccessData
from airflow_commit_provider.core.layout import SUCCESS_FILENAME
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.progress import format_size
from airflow_commit_provider.success.check import (
    SuccessCheck,
    SuccessExpectations,
    is_legacy,
    success_path,
)
from airflow_commit_provider.success.listed_files import FilesCheck, check_listed_files


def _success_json(path: StorePath, data: SuccessData, source: str = SUCCESS_FILENAME) -> dict[str, Any]:
    return {
        "path": str(path),
        "source": source,
        "legacy": is_legacy(data),
        "success": data.success,
        "state": data.state,
        "description": data.description,
        **data.summary(),
    }


def _missing(path: StorePath, found: SuccessCheck) -> str:
    """Why nothing was found, starting as the CLI always has: `no _SUCCESS at ...`."""
    return "; ".join([f"no _SUCCESS at {path}", *found.reasons[1:]])


def _found_note(found: SuccessCheck, path: StorePath) -> str:
    """Says so when the job's record stands in for a `_SUCCESS` that is absent or another job's."""
    return f" (job record; {path} is absent or names another job)" if found.from_record else ""


def show(args: argparse.Namespace) -> int:
    """`success show`."""
    path = success_path(args.destination)
    with store_for(args, args.destination).session() as store:
        found = SuccessExpectations(job_id=args.job_id, allow_legacy=True).check(store, path)
    data = found.data
    if found.state == "missing" or data is None:
        raise CliError(_missing(path, found))
    if args.job_id and not found.from_record and data.job_id != args.job_id:
        raise CliError("; ".join(found.reasons))
    if for_machines(args):
        emit(_success_json(found.path, data, found.source), args)
        return 0
    if is_legacy(data):
        print(f"{path}: legacy 0-byte marker (classic FileOutputCommitter), written {data.date}")
        return 0
    summary = data.summary()
    partitions = data.partitions
    rows = [
        ("committer", data.committer),
        ("job ID", f"{data.job_id} ({data.job_id_source})" if data.job_id_source else data.job_id),
        ("written", f"{data.date} on {data.hostname}"),
        ("state", f"{data.state or '-'} ({'success' if data.success else 'FAILED'})"),
        ("files", str(summary["files"])),
        ("bytes", format_size(data.total_bytes) if data.total_bytes is not None else "?"),
        ("rows", "?" if data.rows is None else str(data.rows)),
        (
            "partitions",
            f"{data.total_partitions}: {', '.join(partitions[:10])}"
            f"{' ...' if data.total_partitions > min(len(partitions), 10) else ''}",
        ),
        ("description", data.description),
    ]
    print(f"{found.path}{_found_note(found, path)}")
    for label, value in rows:
        print(f"  {label:<12} {value}")
    return 0


def verify(args: argparse.Namespace) -> int:
    """`success verify`."""
    path = success_path(args.destination)
    found: SuccessCheck | None = None
    files: FilesCheck | None = None
    with store_for(args, args.destination).session() as store:
        try:
            newer = None if args.newer_than is None else datetime.now(timezone.utc) - args.newer_than
            expectations = SuccessExpectations.build(
                job_id=args.job_id,
                committers=args.committer,
                min_files=args.min_files,
                newer_than=newer,
                required_partitions=args.partition,
                allow_legacy=args.allow_legacy,
            )
            found = expectations.check(store, path)
            reasons = list(found.reasons)
            if found.state == "missing":
                reasons = [f"{_missing(path, found)}: the job has not committed (or wrote elsewhere)"]
            elif args.files and found.data is not None:
                try:
                    files = _check_files(args, store, found, found.data)
                except InvalidCommitDataError as error:
                    reasons.append(f"cannot check the files: {' '.join(str(error).split())}")
                else:
                    reasons += _files_reasons(files)
        except LegacySuccessMarkerError:
            reasons = [
                "_SUCCESS is a legacy 0-byte marker with no job details (pass --allow-legacy to accept)"
            ]
        except InvalidCommitDataError as error:
            reasons = [f"unreadable: {' '.join(str(error).split())}"]
    data = None if found is None or found.state == "missing" else found.data
    checked = path if found is None else found.path
    if for_machines(args):
        emit(
            {
                "path": str(path),
                "checked": str(checked),
                "ok": not reasons,
                "reasons": reasons,
                "success": None
                if data is None or found is None
                else _success_json(checked, data, found.source),
                **({"files": files.to_json() if files else None} if args.files else {}),
            },
            args,
        )
        return 1 if reasons else 0
    if reasons:
        print(f"FAILED {checked}")
        for reason in reasons:
            print(f"  - {reason}")
    else:
        assert data is not None and found is not None
        print(
            f"OK {checked}: job {data.job_id or '-'} by {data.committer or 'legacy committer'}, "
            f"{data.date}{_found_note(found, path)}"
        )
    if files is not None:
        print(f"  files: {files.describe()}")
        if files.unlisted_examples:
            more = files.unlisted - len(files.unlisted_examples)
            print(
                f"  not listed: {', '.join(files.unlisted_examples)}{f' and {more:,} more' if more else ''}"
            )
    return 1 if reasons else 0


def _check_files(
    args: argparse.Namespace, store: Store, found: SuccessCheck, data: SuccessData
) -> FilesCheck:
    """`--files`: every file the judged `_SUCCESS` (or record) lists, against one listing."""
    if is_legacy(data):
        raise InvalidCommitDataError(f"{found.path}: a 0-byte marker lists no files to check")
    with progress_for(args) as progress:
        return check_listed_files(store, data, found.destination, source=str(found.path), progress=progress)


def _files_reasons(files: FilesCheck) -> list[str]:
    """A failed `--files` check as reasons: one a problem up to `PROBLEM_LINES`, then a count."""
    if files.ok:
        return []
    more = (
        [f"... and {files.problems_left_out:,} more missing or of another size"]
        if files.problems_left_out
        else []
    )
    return [*files.problems, *more]
