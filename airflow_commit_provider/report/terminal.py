"""The commit report in a terminal, drawn with `rich` (plain text when piped)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from airflow_commit_provider.report.commit_report import CommitReport, CommitSummary
from airflow_commit_provider.report.view import SUMMARY_COLUMNS, commit_view, summary_row


def print_commits(console: Console, destination: str, commits: Sequence[CommitSummary]) -> None:
    """A destination's recent commits, newest first."""
    console.print(
        _table(f"Recent commits under {destination}", SUMMARY_COLUMNS, [summary_row(c) for c in commits])
    )


def print_commit(console: Console, report: CommitReport) -> None:
    """One commit: its facts, tasks, job-commit phases, partitions and a page of its files."""
    view = commit_view(report)
    facts = Table.grid(padding=(0, 2))
    for name, value in view.facts:
        facts.add_row(f"[bold]{name}[/bold]", value)
    console.print(f"[bold]{view.title}[/bold]")
    console.print(facts)
    for section in view.sections:
        if section.rows:
            console.print(_table(section.title, section.columns, section.rows))
            if section.note:
                console.print(section.note)
    console.print(view.page_note)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table
