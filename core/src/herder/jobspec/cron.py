"""Cron expressions as Nomad reads them: the syntax and schedule of its cron library (cronexpr).

Neither of the maintained Python libraries has these semantics: croniter has
no ``W``, no ``5L`` and no trailing year field; cronsim has no ``W`` and no
6- or 7-field forms, and ANDs day-of-month and day-of-week when either starts
with ``*`` (cronexpr ORs them whenever neither is a plain ``*``); and both run
a launch that falls in a daylight-saving gap at the end of the gap, where
cronexpr skips it. So the grammar and the search for the next time are
written here, after cronexpr's documented behaviour:

- 5 fields (minute hour day-of-month month day-of-week), 6 (the same and a
  year, 1970-2099) or 7 (a second first, then the same and a year);
  ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily`` and
  ``@hourly`` (and cron's ``@midnight``, as ``@daily``).
- In each field: ``*`` (or ``?``), a value, ``A-B``, ``*/N``, ``A/N`` (from A
  to the field's end), ``A-B/N``, lists of those; month and day names
  (``jan``, ``january``, ``mon``, ``monday``, any case); day-of-week 7 is
  Sunday; day-of-month ``L`` (the last day), ``LW`` (the last weekday),
  ``15W`` (the weekday nearest the 15th, not crossing the month);
  day-of-week ``5L`` (the last Friday) and ``5#3`` (the third Friday).
- A day matches when day-of-month or day-of-week does if both are
  restricted (neither is ``*``), else when the restricted one does.
- Times are wall-clock times in the zone of the instant given: a time a
  daylight-saving change skips never comes; one it repeats comes twice.

cronexpr's quirks are kept, since a job must launch when Nomad would launch
it: a day-of-week range ending in 7 stops at Saturday (``5-7`` is Friday and
Saturday), a step is at most the field's largest value. Where cronexpr
accepts what cannot run (a range that runs backwards, an eighth field, text
after a ``*`` in a list), this module refuses it instead.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_ALIASES = {
    "@yearly": "0 0 0 1 1 * *",
    "@annually": "0 0 0 1 1 * *",
    "@monthly": "0 0 0 1 * * *",
    "@weekly": "0 0 0 * * 0 *",
    "@daily": "0 0 0 * * * *",
    "@midnight": "0 0 0 * * * *",
    "@hourly": "0 0 * * * * *",
}
_ALIAS = re.compile("|".join(_ALIASES))

# English names, whatever the locale (calendar's names follow it).
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december")
_DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_MONTHS = {name: number for number, full in enumerate(_MONTH_NAMES, 1) for name in (full[:3], full)}
_DAYS = {name: number for number, full in enumerate(_DAY_NAMES) for name in (full[:3], full)}
_STEP = re.compile(r"0?[0-9]|[1-5][0-9]|19[789][0-9]|20[0-9]{2}")
"""cronexpr reads a step through its table of numbers: 0-59 (with a leading 0) and the years."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    pattern: str
    names: dict[str, int]

    def value(self, text: str) -> int:
        return self.names[text] if text in self.names else int(text)


_SECOND = _Field("second", 0, 59, r"0?[0-9]|[1-5][0-9]", {})
_MINUTE = _Field("minute", 0, 59, r"0?[0-9]|[1-5][0-9]", {})
_HOUR = _Field("hour", 0, 23, r"0?[0-9]|1[0-9]|2[0-3]", {})
_DOM = _Field("day-of-month", 1, 31, r"0?[1-9]|[12][0-9]|3[01]", {})
_MONTH = _Field("month", 1, 12, "0?[1-9]|1[012]|" + "|".join(_MONTHS), _MONTHS)
_DOW = _Field("day-of-week", 0, 6, "0?[0-7]|" + "|".join(_DAYS), _DAYS | {"7": 0, "07": 0})
_YEAR = _Field("year", 1970, 2099, r"19[789][0-9]|20[0-9]{2}", {})


class CronError(ValueError):
    """A cron expression that cannot be read; the message says what is wrong."""


@dataclass(frozen=True)
class _Days:
    """What the day-of-month and day-of-week fields ask for."""

    dom: frozenset[int]
    dom_restricted: bool
    last_day: bool
    last_workday: bool
    workdays: frozenset[int]
    dow: frozenset[int]
    dow_restricted: bool
    nth: frozenset[tuple[int, int]]  # (week 1-5, weekday)
    last_of: frozenset[int]  # weekdays whose last one in the month is meant

    def of_month(self, year: int, month: int) -> list[int]:
        """The days of ``month`` that match, in order."""
        first_weekday = _weekday(year, month, 1)
        last = calendar.monthrange(year, month)[1]
        if not self.dom_restricted and not self.dow_restricted:
            return list(range(1, last + 1))
        days: set[int] = set()
        if self.dom_restricted:
            days |= {day for day in self.dom if day <= last}
            if self.last_day:
                days.add(last)
            if self.last_workday:
                days.add(_workday(last, (first_weekday + last - 1) % 7, last))
            days |= {_workday(day, (first_weekday + day - 1) % 7, last) for day in self.workdays if day <= last}
        if self.dow_restricted:
            days |= {day for day in range(1, last + 1) if (first_weekday + day - 1) % 7 in self.dow}
            days |= {day for week, weekday in self.nth
                     if (day := 1 + 7 * (week - 1) + (weekday - first_weekday) % 7) <= last}
            days |= {last - (((first_weekday + last - 1) % 7) - weekday) % 7 for weekday in self.last_of}
        return sorted(days)


def _weekday(year: int, month: int, day: int) -> int:
    """0 for Sunday, as cron counts."""
    return (date(year, month, day).weekday() + 1) % 7


def _workday(day: int, weekday: int, last: int) -> int:
    """The weekday nearest ``day`` (itself a ``weekday``) without leaving the month."""
    if weekday == 6:  # Saturday: the Friday before, or the Monday after the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday: the Monday after, or the Friday before the last day
        return day + 1 if day < last else day - 2
    return day


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression; :meth:`next` finds its launches."""

    text: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: _Days
    months: tuple[int, ...]
    years: tuple[int, ...]

    def next(self, after: datetime) -> datetime | None:
        """The first time after ``after`` (aware) that matches, in ``after``'s
        zone; None when none ever will (its years are past, or it names a day
        no month has, as ``0 0 30 2 *``)."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("after must be an aware datetime")
        zone = after.tzinfo
        found = _Search(self, zone).next(int(after.replace(microsecond=0).timestamp()) + 1)
        return None if found is None else datetime.fromtimestamp(found, zone)


def parse_cron(text: str) -> CronExpression:
    """Parse ``text``; raises :class:`CronError` naming the field and what is wrong with it."""
    fields = _ALIAS.sub(lambda match: _ALIASES[match.group(0)], text).split()
    if len(fields) < 5:
        raise CronError(f"{text!r} has {len(fields)} field(s); a cron expression has 5, 6 (with a year) "
                        "or 7 (with a second first and a year)")
    if len(fields) > 7:
        raise CronError(f"{text!r} has {len(fields)} fields; a cron expression has at most 7")
    seconds = _values(fields.pop(0), _SECOND) if len(fields) == 7 else (0,)
    minute, hour, dom, month, dow, *year = fields
    return CronExpression(
        text=text,
        seconds=seconds,
        minutes=_values(minute, _MINUTE),
        hours=_values(hour, _HOUR),
        days=_days(dom, dow),
        months=_values(month, _MONTH),
        years=_values(year[0], _YEAR) if year else tuple(range(_YEAR.low, _YEAR.high + 1)),
    )


_LOCALTIME = Path("/etc/localtime")


def load_zone(name: str) -> tzinfo:
    """The IANA time zone ``name`` (Go's ``time.LoadLocation``, as Nomad's ``time_zone``):
    "" is UTC, ``Local`` the host's zone (UTC without one); ValueError naming it when unknown."""
    if name in ("", "UTC"):
        return ZoneInfo("UTC")
    if name == "Local":
        if not _LOCALTIME.exists():
            return ZoneInfo("UTC")
        with _LOCALTIME.open("rb") as file:
            return ZoneInfo.from_file(file, key="Local")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as 'Europe/Berlin')") from None


def next_launch(expressions: Iterable[CronExpression], after: datetime) -> datetime | None:
    """The earliest next time of several expressions (Nomad's ``crons``)."""
    times = [found for expression in expressions if (found := expression.next(after)) is not None]
    return min(times, default=None)


# -- parsing ------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One item of a field's list: ``*``, a value, or a span with a step; or
    None for text the field's own forms (``L``, ``15W``, ``5#3``) may read."""

    values: range | None
    star: bool = False


def _entries(text: str, field: _Field) -> list[tuple[str, _Entry]]:
    """The items of a field as written, each with what it reads as."""
    items = [item for item in text.split(",") if item]
    if not items:
        raise CronError(f"{field.name} field: missing directive in {text!r}")
    value = f"(?:{field.pattern})"
    found: list[tuple[str, _Entry]] = []
    for item in items:
        lowered = item.lower()
        if lowered in ("*", "?"):
            found.append((item, _Entry(range(field.low, field.high + 1), star=True)))
            continue
        match = re.fullmatch(rf"(\*|{value})(?:-({value}))?(?:/(\d+))?", lowered)
        if match is None or (match.group(1) == "*" and match.group(2) is not None):
            found.append((item, _Entry(None)))
            continue
        first_text, last_text, step_text = match.groups()
        star = first_text == "*"
        first = field.low if star else field.value(first_text)
        if last_text is not None:
            last = field.value(last_text)
            if field is _DOW and last == 0:
                last = 6  # cronexpr: a day-of-week range ending in 7 (Sunday) ends on Saturday
        else:
            last = field.high if step_text is not None else first
        step = 1
        if step_text is not None:
            step = int(step_text) if _STEP.fullmatch(step_text) else 0
            if not 1 <= step <= field.high:
                raise CronError(f"{field.name} field: invalid interval {item!r} "
                                f"(a step is 1 to {field.high})")
        if last < first:
            raise CronError(f"{field.name} field: range {item!r} runs backwards")
        found.append((item, _Entry(range(first, last + 1, step))))
    return found


def _syntax(field: _Field, item: str) -> CronError:
    return CronError(f"syntax error in {field.name} field: {item!r}")


def _values(text: str, field: _Field) -> tuple[int, ...]:
    values: set[int] = set()
    for item, entry in _entries(text, field):
        if entry.values is None:
            raise _syntax(field, item)
        values.update(entry.values)
    return tuple(sorted(values))


def _days(dom_text: str, dow_text: str) -> _Days:
    dom: set[int] = set()
    workdays: set[int] = set()
    last_day = last_workday = False
    dom_star = False
    for item, entry in _entries(dom_text, _DOM):
        if entry.values is not None:
            dom.update(entry.values)
            dom_star |= entry.star
        elif item.lower() == "l":
            last_day = True
        elif item.lower() == "lw":
            last_workday = True
        elif match := re.fullmatch(f"({_DOM.pattern})w", item.lower()):
            workdays.add(int(match.group(1)))
        else:
            raise _syntax(_DOM, item)
    dow: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    dow_star = False
    for item, entry in _entries(dow_text, _DOW):
        if entry.values is not None:
            dow.update(entry.values)
            dow_star |= entry.star
        elif match := re.fullmatch(f"({_DOW.pattern})l", item.lower()):
            last_of.add(_DOW.value(match.group(1)))
        elif match := re.fullmatch(f"({_DOW.pattern})#([1-5])", item.lower()):
            nth.add((int(match.group(2)), _DOW.value(match.group(1))))
        else:
            raise _syntax(_DOW, item)
    return _Days(dom=frozenset(dom), dom_restricted=not dom_star, last_day=last_day, last_workday=last_workday,
                 workdays=frozenset(workdays), dow=frozenset(dow), dow_restricted=not dow_star,
                 nth=frozenset(nth), last_of=frozenset(last_of))


# -- the search -----------------------------------------------------------------

_EPOCH_DAY = date(1970, 1, 1).toordinal()
_MINUTE_S, _HOUR_S = 60, 3600


def _contains(values: Sequence[int], value: int) -> bool:
    index = bisect_left(values, value)
    return index < len(values) and values[index] == value


class _Search:
    """cronexpr's search for the next time, on Unix seconds in a zone.

    Times are built as Go's ``time.Date`` builds them (fields past their range
    carry over; a wall time a daylight-saving change skips or repeats resolves
    as Go resolves it), since the search relies on both: it steps field by
    field while the zone's offset is the same all day, and hour by hour,
    minute by minute on a day it changes.
    """

    def __init__(self, expression: CronExpression, zone: tzinfo) -> None:
        self.expression = expression
        self.zone = zone

    def local(self, t: int) -> datetime:
        return datetime.fromtimestamp(t, self.zone)

    def offset(self, t: int) -> int:
        offset = self.local(t).utcoffset()
        return int(offset.total_seconds()) if offset is not None else 0

    def date(self, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
        """Go's ``time.Date`` in the zone, as Unix seconds."""
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
        wall = ((date(year, month, 1).toordinal() - _EPOCH_DAY + day - 1) * 86400
                + hour * _HOUR_S + minute * _MINUTE_S + second)
        return wall - self.offset(wall - self.offset(wall))

    def offset_changes_around(self, t: int) -> bool:
        """Whether the zone's offset differs a day before and a day after ``t``'s wall time."""
        at = self.local(t)
        before = self.date(at.year, at.month, at.day - 1, at.hour, at.minute, at.second)
        after = self.date(at.year, at.month, at.day + 1, at.hour, at.minute, at.second)
        return self.offset(before) != self.offset(after)

    def hour(self, t: int) -> int:
        return self.local(t).hour

    def next(self, t: int) -> int | None:
        """The first match at or after ``t``; None past the last year."""
        expression = self.expression
        years, months = expression.years, expression.months
        while True:
            at = self.local(t)
            index = bisect_left(years, at.year)
            if index == len(years):
                return None
            if years[index] != at.year:
                t = self.date(years[index], months[0], 1)
                at = self.local(t)
            index = bisect_left(months, at.month)
            if index == len(months):
                t = self.date(at.year + 1, months[0], 1)
                continue
            if months[index] != at.month:
                t = self.date(at.year, months[index], 1)
                at = self.local(t)
            days = expression.days.of_month(at.year, at.month)
            index = bisect_left(days, at.day)
            if index == len(days):
                t = self.date(at.year, at.month + 1, 1)
                continue
            if days[index] != at.day:
                t = self.date(at.year, at.month, days[index])
                hour = self.hour(t)
                if hour:  # no midnight that day: the nearest hour to it
                    t += (24 - hour) * _HOUR_S if hour > 12 else -hour * _HOUR_S
            if self.offset_changes_around(t):
                t, found = self.within_changing_day(t)
            else:
                t, found = self.within_day(t)
            if found:
                return t

    def within_day(self, t: int) -> tuple[int, bool]:
        """The search on a day of one offset, field by field: the time found and
        True, or the time to search on from and False."""
        expression = self.expression
        hours, minutes, seconds = expression.hours, expression.minutes, expression.seconds
        at = self.local(t)
        index = bisect_left(hours, at.hour)
        if index == len(hours):
            return self.date(at.year, at.month, at.day + 1), False
        if hours[index] != at.hour:
            t = self.date(at.year, at.month, at.day, hours[index], minutes[0], seconds[0])
            at = self.local(t)
        index = bisect_left(minutes, at.minute)
        if index == len(minutes):
            return self.date(at.year, at.month, at.day, at.hour + 1), False
        if minutes[index] != at.minute:
            t = self.date(at.year, at.month, at.day, at.hour, minutes[index], seconds[0])
            at = self.local(t)
        index = bisect_left(seconds, at.second)
        if index == len(seconds):
            return self.date(at.year, at.month, at.day, at.hour, at.minute + 1), False
        if seconds[index] != at.second:
            t = self.date(at.year, at.month, at.day, at.hour, at.minute, seconds[index])
        return t, True

    def within_changing_day(self, t: int) -> tuple[int, bool]:
        """The search on a day whose offset changes, where an hour may last 30,
        60 or 90 minutes: hour by hour, then minute by minute (as :meth:`within_day`)."""
        expression = self.expression
        while not _contains(expression.hours, self.hour(t)):
            before = self.hour(t)
            t += _HOUR_S
            if self.hour(t) == before:
                t += _HOUR_S
            t -= t % _MINUTE_S
            t -= self.local(t).minute * _MINUTE_S
            if self.hour(t) == 0:
                at = self.local(t)
                return self.date(at.year, at.month, at.day), False
        while not _contains(expression.minutes, self.local(t).minute):
            before = self.hour(t)
            t = t - t % _MINUTE_S + _MINUTE_S
            if self.hour(t) != before:
                return t, False
        second = self.local(t).second
        t -= t % _MINUTE_S
        index = bisect_left(expression.seconds, second)
        if index == len(expression.seconds):
            return t + _MINUTE_S, False
        return t + expression.seconds[index], True
