"""The commit report as one self-contained HTML page: the file `airflow-commit report --html`
writes for a ticket or an email, and the page the Airflow UI plugin serves; and the plugin's
Commits page (`render_commit_list`) and its notices (`render_notice`).

Jinja2 with autoescaping: every value shown came from files in the store, which anyone with write
access there could have forged, so none of it reaches the page unescaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from airflow_commit_provider.report.commit_report import CommitReport, CommitSummary
from airflow_commit_provider.report.view import SUMMARY_COLUMNS, commit_view, summary_row

_ENVIRONMENT = Environment(
    loader=PackageLoader("airflow_commit_provider.report", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=False,
)
#: Page links shown around the current page of the file list and of the partition table.
_PAGE_LINKS_AROUND = 5


def render_commit(
    report: CommitReport,
    commits: Sequence[CommitSummary] = (),
    *,
    page_link: Callable[[int], str] | None = None,
    job_link: Callable[[str], str] | None = None,
    older_link: str | None = None,
    partition_page_link: Callable[[int], str] | None = None,
) -> str:
    """The page of one commit, under the destination's recent `commits` when given.

    `page_link(n)` gives the address of page n of the file list, `partition_page_link(n)` that of
    page n of the partition table, `job_link(job)` that of another commit's page and `older_link`
    that of the next page of commits (the UI's; a stand-alone file has no links and holds the pages
    it was made with).
    """
    view = commit_view(report)
    partition_links = (
        _page_links(report.partition_page, report.partition_pages, partition_page_link)
        if partition_page_link
        else []
    )
    context: dict[str, Any] = {
        "view": view,
        "state": report.summary.state,
        "sections": view.sections,
        "section_links": {"partitions": partition_links},
        "page_links": _page_links(report.page, report.pages, page_link) if page_link else [],
        "commits": [
            (summary_row(c), job_link(c.job_id) if job_link else None, c.job_id == report.summary.job_id)
            for c in commits
        ],
        "commit_columns": SUMMARY_COLUMNS,
        "older_link": older_link,
    }
    return _ENVIRONMENT.get_template("commit.html.j2").render(context)


@dataclass(frozen=True)
class DestinationCommits:
    """One destination on the Commits page: its newest commits, or why they could not be listed."""

    destination: str
    written_by: str
    """Who last wrote it (the task instance whose commit report `writer_link` is)."""
    writer_link: str
    commits: Sequence[CommitSummary] = ()
    job_link: Callable[[str], str] | None = None
    """The address of a commit's page, by its job."""
    error: str | None = None


def render_commit_list(destinations: Sequence[DestinationCommits], per_destination: int) -> str:
    """The Commits page: each destination with its newest commits (at most `per_destination`)."""
    shown = [
        {
            "destination": entry.destination,
            "written_by": entry.written_by,
            "writer_link": entry.writer_link,
            "error": entry.error,
            "rows": [
                (summary_row(c), entry.job_link(c.job_id) if entry.job_link else None) for c in entry.commits
            ],
        }
        for entry in destinations
    ]
    return _ENVIRONMENT.get_template("commits.html.j2").render(
        destinations=shown, per_destination=per_destination, commit_columns=SUMMARY_COLUMNS
    )


def render_notice(title: str, text: str) -> str:
    """A page that only says something (a refusal, a missing commit), as the plugin's pages look."""
    return _ENVIRONMENT.get_template("notice.html.j2").render(title=title, text=text)


def _page_links(page: int, pages: int, page_link: Callable[[int], str]) -> list[tuple[int, str | None]]:
    """(page number shown from 1, its link or None for the current `page`) around `page`."""
    first = max(0, page - _PAGE_LINKS_AROUND)
    last = min(pages, page + _PAGE_LINKS_AROUND + 1)
    return [(n + 1, None if n == page else page_link(n)) for n in range(first, last)]
