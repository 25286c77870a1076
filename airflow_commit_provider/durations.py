"""Human durations ("90s", "15m", "6h", "2d") for cleanup ages, and the default ages.

Read by the cleanups, the operators and the CLI's declarations (`cli.definition`), which Airflow
imports whenever any `airflow` command starts: so this module is a leaf, outside the `cleanup`
package, whose import brings the committers' code.

Ages decide what gets destroyed, so anything ambiguous (a bare number, an unknown unit) is
refused with a message naming the argument, rather than guessed.
"""

from __future__ import annotations

import re
from datetime import timedelta

#: Uploads and temp trees younger than this are presumed live (rclone's default too).
DEFAULT_OLDER_THAN = timedelta(hours=24)
#: Job records are read by sensors and Airflow retries long after the job: kept a month by default.
DEFAULT_RECORDS_OLDER_THAN = timedelta(days=30)
#: The longest a job may run, setup to decision, unless told: an abort outcome fences an orphaned
#: driver for that long, so job records are never pruned younger than this.
DEFAULT_MAX_JOB_DURATION = timedelta(days=7)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TERM = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")


def parse_duration(text: str, argument: str = "duration") -> timedelta:
    """Parse `90s`, `15m`, `6h`, `2d`, `1w` or a sum such as `1h30m`; `0s` means no age limit."""
    if not isinstance(text, str):
        raise ValueError(f"{argument}: expected a duration such as 90s, 15m, 6h or 2d, got {text!r}")
    compact = text.strip().lower().replace(" ", "")
    terms = _TERM.findall(compact)
    if not compact or "".join(n + u for n, u in terms) != compact:
        raise ValueError(
            f"{argument}: invalid duration {text!r}: use a number with a unit s, m, h, d or w "
            "(e.g. 90s, 15m, 6h, 2d)"
        )
    return _bounded(sum(float(number) * _UNITS[unit] for number, unit in terms), text, argument)


def as_timedelta(value: str | int | float | timedelta, argument: str = "older_than") -> timedelta:
    """Accept a duration string, a timedelta or seconds (operators get any of these)."""
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, bool):
        raise ValueError(f"{argument}: expected a duration, got {value!r}")
    elif isinstance(value, (int, float)):
        result = _bounded(value, value, argument)
    else:
        result = parse_duration(value, argument)
    if result < timedelta(0):
        raise ValueError(f"{argument}: duration must not be negative, got {value!r}")
    return result


def _bounded(seconds: float, value: object, argument: str) -> timedelta:
    """`seconds` as a timedelta, or a ValueError naming `argument` for NaN or more than a
    timedelta holds (a billion days), rather than timedelta's own OverflowError or message."""
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise ValueError(
            f"{argument}: duration {value!r} is not a number of seconds a timedelta holds"
        ) from None


def format_duration(seconds: float) -> str:
    """Compact age for tables: `2d3h`, `15m`, `42s`."""
    remaining = max(0, int(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if remaining >= size:
            parts.append(f"{remaining // size}{unit}")
            remaining %= size
        if len(parts) == 2:
            return "".join(parts)
    if remaining or not parts:
        parts.append(f"{remaining}s")
    return "".join(parts[:2])
