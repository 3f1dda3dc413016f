"""Cron expressions read and scheduled as Nomad's cron library (cronexpr) does.

The tables are cronexpr's documented behaviour: its README's examples and the
next-launch times its own tests assert, daylight-saving changes included.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from herder.jobspec.cron import CronError, next_launch, parse_cron

UTC = ZoneInfo("UTC")


def at(text: str, zone: ZoneInfo = UTC) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


# (expression, from, next): times in UTC.
NEXT = [
    ("* * * * * * *", "2013-01-01 00:00:00", "2013-01-01 00:00:01"),
    ("* * * * * * *", "2013-01-01 23:59:59", "2013-01-02 00:00:00"),
    ("* * * * * * *", "2016-02-28 23:59:59", "2016-02-29 00:00:00"),
    ("*/5 * * * * * *", "2013-01-01 00:00:00", "2013-01-01 00:00:05"),
    ("*/5 * * * * * *", "2012-12-31 23:59:59", "2013-01-01 00:00:00"),
    ("* * * * *", "2013-01-01 00:00:00", "2013-01-01 00:01:00"),
    ("* * * * *", "2013-01-01 00:00:59", "2013-01-01 00:01:00"),
    ("* * * * *", "2013-02-28 23:59:00", "2013-03-01 00:00:00"),
    ("17-43/5 * * * *", "2013-01-01 00:00:00", "2013-01-01 00:17:00"),
    ("17-43/5 * * * *", "2013-01-01 00:30:00", "2013-01-01 00:32:00"),
    ("17-43/5 * * * *", "2013-01-01 00:50:00", "2013-01-01 01:17:00"),
    ("17-43/5 * * * *", "2012-12-31 23:50:00", "2013-01-01 00:17:00"),
    ("15-30/4,55 * * * *", "2013-01-01 00:16:00", "2013-01-01 00:19:00"),
    ("15-30/4,55 * * * *", "2013-01-01 00:30:00", "2013-01-01 00:55:00"),
    ("15-30/4,55 * * * *", "2013-01-01 00:55:00", "2013-01-01 01:15:00"),
    ("0 0 * * MON", "2013-01-01 00:00:00", "2013-01-07 00:00:00"),
    ("0 0 * * MON", "2013-12-30 00:30:00", "2014-01-06 00:00:00"),
    ("0 0 * * friday", "2013-01-28 00:00:00", "2013-02-01 00:00:00"),
    ("0 0 * * 6,7", "2013-01-01 00:00:00", "2013-01-05 00:00:00"),
    ("0 0 * * 6,7", "2013-01-05 00:00:00", "2013-01-06 00:00:00"),  # 7 is Sunday
    ("0 0 * * 5-7", "2013-01-01 00:00:00", "2013-01-04 00:00:00"),
    ("0 0 * * 5-7", "2013-01-05 00:00:00", "2013-01-11 00:00:00"),  # cronexpr: 5-7 ends on Saturday
    ("0 0 * * 6#5", "2013-09-02 00:00:00", "2013-11-30 00:00:00"),
    ("0 0 * * 5L", "2013-09-02 00:00:00", "2013-09-27 00:00:00"),
    ("0 0 * * 0L", "2013-09-02 00:00:00", "2013-09-29 00:00:00"),
    ("0 0 14W * *", "2013-03-31 00:00:00", "2013-04-15 00:00:00"),  # the 14th is a Sunday
    ("0 0 14W * *", "2013-08-31 00:00:00", "2013-09-13 00:00:00"),  # a Saturday
    ("0 0 30W * *", "2013-03-02 00:00:00", "2013-03-29 00:00:00"),
    ("0 0 30W * *", "2013-09-02 00:00:00", "2013-09-30 00:00:00"),
    ("0 0 30W * *", "2013-11-02 00:00:00", "2013-11-29 00:00:00"),
    ("0 0 1W * *", "2013-05-31 00:00:00", "2013-06-03 00:00:00"),  # the 1st a Saturday: Monday the 3rd
    ("0 0 L * *", "2013-09-02 00:00:00", "2013-09-30 00:00:00"),
    ("0 0 L * *", "2014-02-01 00:00:00", "2014-02-28 00:00:00"),
    ("0 0 L * *", "2016-02-15 00:00:00", "2016-02-29 00:00:00"),
    ("0 0 LW * *", "2013-11-02 00:00:00", "2013-11-29 00:00:00"),
    ("0 0 LW * *", "2014-08-15 00:00:00", "2014-08-29 00:00:00"),
    ("0 0 * 04 * *", "2013-09-02 00:00:00", "2014-04-01 00:00:00"),  # 6 fields: the last is a year
    ("0 0 * 04 * *", "2014-04-03 03:00:00", "2014-04-04 00:00:00"),
    ("0 0 29 2 *", "2013-08-29 09:28:00", "2016-02-29 00:00:00"),
    ("* * * * * 2050", "2013-08-31 00:00:00", "2050-01-01 00:00:00"),
    ("30 0 0 1-31/5 Oct-Dec * 2000,2006,2008,2013-2015", "2013-01-01 00:00:00", "2013-10-01 00:00:30"),
    ("0 0 0 * Feb-Nov/2 thu#3 2000-2050", "2013-01-01 00:00:00", "2013-02-21 00:00:00"),
    ("0 0 0 * Feb-Nov/2 thu#3 2000-2050", "2013-02-21 00:00:00", "2013-04-18 00:00:00"),
    ("30 3 15W 3/3 *", "2013-01-01 00:00:00", "2013-03-15 03:30:00"),
    ("30 3 15W 3/3 *", "2013-03-15 03:30:00", "2013-06-14 03:30:00"),  # the 15th of June 2013 is a Saturday
    # Both day fields restricted: either matches (a step counts as restricted).
    ("0 0 */10 * 1", "2013-01-01 00:00:00", "2013-01-07 00:00:00"),
    ("0 0 */10 * 1", "2013-01-07 00:00:00", "2013-01-11 00:00:00"),
    ("0 0 13 * 5", "2013-09-01 00:00:00", "2013-09-06 00:00:00"),
    ("0 0 13 * 5", "2013-09-06 00:00:00", "2013-09-13 00:00:00"),
    ("0 0 ? * 5", "2013-09-06 00:00:00", "2013-09-13 00:00:00"),
    ("@yearly", "2013-09-06 10:00:00", "2014-01-01 00:00:00"),
    ("@annually", "2013-09-06 10:00:00", "2014-01-01 00:00:00"),
    ("@monthly", "2013-09-06 10:00:00", "2013-10-01 00:00:00"),
    ("@weekly", "2013-09-06 10:00:00", "2013-09-08 00:00:00"),
    ("@daily", "2013-09-06 10:00:00", "2013-09-07 00:00:00"),
    ("@midnight", "2013-09-06 10:00:00", "2013-09-07 00:00:00"),
    ("@hourly", "2013-09-06 10:00:00", "2013-09-06 11:00:00"),
    ("0 3 * * *", "2013-09-06 03:00:00.5", "2013-09-07 03:00:00"),
    ("0 3 * * *", "2013-09-06 02:59:59.9", "2013-09-06 03:00:00"),
]


@pytest.mark.parametrize(("expression", "start", "expected"), NEXT, ids=[f"{e}@{s}" for e, s, _ in NEXT])
def test_next_launch_as_cronexpr(expression: str, start: str, expected: str) -> None:
    assert parse_cron(expression).next(at(start)) == at(expected)


def test_next_n_of_the_fifth_saturday() -> None:
    expression, moment = parse_cron("0 0 * * 6#5"), at("2013-09-02 08:44:30")
    found = []
    for _ in range(5):
        next_time = expression.next(moment)
        assert next_time is not None
        found.append(next_time)
        moment = next_time
    assert [moment.date().isoformat() for moment in found] == [
        "2013-11-30", "2014-03-29", "2014-05-31", "2014-08-30", "2014-11-29"]


def test_a_year_past_never_comes() -> None:
    assert parse_cron("* * * * * 1980").next(at("2013-08-31 00:00:00")) is None
    assert parse_cron("0 0 30 2 *").next(at("2013-08-31 00:00:00")) is None


def test_several_expressions_the_earliest_wins() -> None:
    crons = [parse_cron("0 3 * * *"), parse_cron("30 1 * * *"), parse_cron("* * * * * 1980")]
    assert next_launch(crons, at("2013-01-01 02:00:00")) == at("2013-01-01 03:00:00")
    assert next_launch(crons, at("2013-01-01 00:00:00")) == at("2013-01-01 01:30:00")
    assert next_launch([parse_cron("* * * * * 1980")], at("2013-01-01 00:00:00")) is None


LA = ZoneInfo("America/Los_Angeles")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def _instant(zone: ZoneInfo, text: str, plus: float = 0) -> datetime:
    """A wall time in ``zone`` plus ``plus`` seconds of real time (as Go's ``time.Date(...).Add``)."""
    start = datetime.fromisoformat(text).replace(tzinfo=zone)
    return datetime.fromtimestamp(start.timestamp() + plus, zone)


H = 3600
# (zone, expression, start, launches): each launch as (wall time, seconds of real time added).
DST = [
    (LA, "0 2 * * * 2019", ("2019-02-07 01:00", 0), [("2019-02-07 02:00", 0), ("2019-02-08 02:00", 0)]),
    (LA, "0 4 * * * 2019", ("2019-03-09 01:00", 0), [("2019-03-09 04:00", 0), ("2019-03-10 04:00", 0)]),
    # Spring forward: 2:00-2:59 does not exist on March 10: no launch that day.
    (LA, "2 2 * * * 2019", ("2019-03-09 01:00", 0), [("2019-03-09 02:02", 0), ("2019-03-11 02:02", 0)]),
    (LA, "0 2 * * * 2019", ("2019-03-09 01:00", 0), [("2019-03-09 02:00", 0), ("2019-03-11 02:00", 0)]),
    (LA, "0 1 * * * 2019", ("2019-03-09 00:00", 0),
     [("2019-03-09 01:00", 0), ("2019-03-10 00:00", H), ("2019-03-11 01:00", 0)]),
    # Fall back: 1:00-1:59 comes twice on November 3: launches within it come twice.
    (LA, "30 0 * * * 2019", ("2019-11-03 00:00", 0), [("2019-11-03 00:30", 0), ("2019-11-04 00:30", 0)]),
    (LA, "30 3 * * * 2019", ("2019-11-03 00:10", H), [("2019-11-03 03:30", 0), ("2019-11-04 03:30", 0)]),
    (LA, "30 3 * * * 2019", ("2019-11-03 00:10", 2 * H), [("2019-11-03 03:30", 0), ("2019-11-04 03:30", 0)]),
    (LA, "30 1 * * * 2019", ("2019-11-03 00:00", 0),
     [("2019-11-03 00:30", H), ("2019-11-03 00:30", 2 * H), ("2019-11-04 01:30", 0)]),
    (LA, "0 1 * * * 2019", ("2019-11-03 00:00", 0),
     [("2019-11-03 00:00", H), ("2019-11-03 00:00", 2 * H), ("2019-11-04 01:00", 0)]),
    (LA, "0 2 * * * 2019", ("2019-11-03 00:00", 0), [("2019-11-03 00:00", 3 * H), ("2019-11-04 02:00", 0)]),
    (LA, "30 1 * * * 2019", ("2019-11-03 00:40", H), [("2019-11-03 00:30", 2 * H), ("2019-11-04 01:30", 0)]),
    (LA, "30 1 * * * 2019", ("2019-11-03 00:40", 2 * H), [("2019-11-04 01:30", 0)]),
    (LA, "30 * * * * 2019", ("2019-11-03 00:00", 0),
     [("2019-11-03 00:30", 0), ("2019-11-03 00:30", H), ("2019-11-03 00:30", 2 * H), ("2019-11-03 02:30", 0)]),
    # Lord Howe moves its clocks by 30 minutes.
    (LORD_HOWE, "3 1 * * * 2019", ("2019-04-06 00:00", 0), [("2019-04-06 01:03", 0), ("2019-04-07 01:03", 0)]),
    (LORD_HOWE, "31 1 * * * 2019", ("2019-04-06 00:00", 0),
     [("2019-04-06 01:31", 0), ("2019-04-07 00:31", 60 * 60), ("2019-04-07 00:31", 90 * 60), ("2019-04-08 01:31", 0)]),
    (LORD_HOWE, "3 2 * * * 2019", ("2019-10-05 00:00", 0), [("2019-10-05 02:03", 0), ("2019-10-07 02:03", 0)]),
    # 2:31 exists on October 6, but cronexpr's hour-by-hour search misses it; so does Nomad.
    (LORD_HOWE, "31 2 * * * 2019", ("2019-10-05 00:00", 0), [("2019-10-05 02:31", 0), ("2019-10-07 02:31", 0)]),
]


@pytest.mark.parametrize(("zone", "expression", "start", "launches"), DST,
                         ids=[f"{z.key}:{e}@{s[0]}+{s[1]}" for z, e, s, _ in DST])
def test_daylight_saving_changes_as_cronexpr(zone: ZoneInfo, expression: str, start: tuple[str, int],
                                              launches: list[tuple[str, int]]) -> None:
    parsed, moment = parse_cron(expression), _instant(zone, *start)
    for wall, plus in launches:
        expected = _instant(zone, wall, plus)
        found = parsed.next(moment)
        assert found is not None and found.timestamp() == expected.timestamp(), (moment, found, expected)
        assert found.tzinfo is zone
        moment = found


@pytest.mark.parametrize("zone", [LA, LORD_HOWE, ZoneInfo("America/Sao_Paulo")], ids=lambda zone: zone.key)
@pytest.mark.parametrize("expression", ["* * * * *", "0 2 * * *", "* 1 * * *", "35 1 * * *", "5 23 * * *"])
@pytest.mark.parametrize("day", ["2018-02-17", "2018-11-03", "2019-03-10", "2019-04-06", "2019-10-05",
                                 "2019-11-03"])
def test_around_a_change_launches_only_go_forward(zone: ZoneInfo, expression: str, day: str) -> None:
    """cronexpr's property: every few minutes from the evening before to the morning after,
    the next launch is later, never earlier than the one before; a minute later when every
    minute is asked for. (Instants are compared by timestamp: Python compares two times of
    one zone by their wall clock.)"""
    parsed = parse_cron(expression)
    start = _instant(zone, f"{day} 00:00", 0) - timedelta(hours=2)
    previous = start
    for minute in range(0, 30 * 60, 11):
        moment = datetime.fromtimestamp(start.timestamp() + minute * 60, zone)
        found = parsed.next(moment)
        assert found is not None, moment
        assert found.timestamp() > moment.timestamp() and found.timestamp() >= previous.timestamp(), (moment, found)
        if expression.startswith("* * "):
            assert found.timestamp() - moment.timestamp() == 60
        previous = found


ERRORS = [
    ("", "has 0 field(s); a cron expression has 5, 6 (with a year) or 7"),
    ("* * * *", "has 4 field(s)"),
    ("0 0 0 * * * * 2020", "has 8 fields; a cron expression has at most 7"),
    ("60 * * * *", "syntax error in minute field: '60'"),
    ("* 24 * * *", "syntax error in hour field: '24'"),
    ("* * 0 * *", "syntax error in day-of-month field: '0'"),
    ("* * 32 * *", "syntax error in day-of-month field: '32'"),
    ("* * * 13 *", "syntax error in month field: '13'"),
    ("* * * foo *", "syntax error in month field: 'foo'"),
    ("* * * * 8", "syntax error in day-of-week field: '8'"),
    ("* * * * L", "syntax error in day-of-week field: 'L'"),
    ("* * * * 1#6", "syntax error in day-of-week field: '1#6'"),
    ("* * 1-5W * *", "syntax error in day-of-month field: '1-5W'"),
    ("* * * * * 1969", "syntax error in year field: '1969'"),
    ("*/60 * * * * * *", "second field: invalid interval '*/60' (a step is 1 to 59)"),
    ("2-20/61 * * * * *", "minute field: invalid interval '2-20/61'"),
    ("*/0 * * * *", "minute field: invalid interval '*/0'"),
    ("* * * * */7", "day-of-week field: invalid interval '*/7' (a step is 1 to 6)"),
    ("*/007 * * * *", "minute field: invalid interval '*/007'"),
    ("30-10 * * * *", "minute field: range '30-10' runs backwards"),
    ("*,junk * * * *", "syntax error in minute field: 'junk'"),
    (", * * * *", "minute field: missing directive in ','"),
    ("*-5 * * * *", "syntax error in minute field: '*-5'"),
    ("@reboot", "has 1 field(s)"),
]


@pytest.mark.parametrize(("expression", "message"), ERRORS, ids=[e or "empty" for e, _ in ERRORS])
def test_a_bad_expression_is_an_error_naming_what_is_wrong(expression: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(expression)
    assert message in str(caught.value)


def test_forms_cronexpr_accepts() -> None:
    for expression in ["00 09 * * 01", "0 0 ? * ?", "0 0 * JAN-mar,December *", "0 0 * * sun-sat",
                       "5,,10 * * * *", "0 0 1,15,L * *", "0 0 * * 1#1,5L", "0  0\t* * *", "0 0 * * 0-7"]:
        parse_cron(expression)


def test_next_needs_a_zone() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_cron("* * * * *").next(datetime(2020, 1, 1))
