"""A task's schedule in the reader's words ("Every Monday at 07:00"), for the common crontabs; ``None`` for the
others, which the page then shows as written."""

from __future__ import annotations

from datetime import time

from django.utils import formats
from django.utils.dates import WEEKDAYS
from django.utils.translation import gettext as _

WEEKDAYS_OF_CRON = {0: 6, 7: 6, 1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}  # cron's day (0 and 7: Sunday) → Django's


def schedule_words(schedule: str) -> str | None:
    fields = schedule.split()
    if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()) or fields[3] != "*":
        return None
    minute, hour, day, _month, weekday = fields
    if int(minute) > 59 or int(hour) > 23:
        return None
    at = formats.time_format(time(int(hour), int(minute)))
    if day != "*":
        if weekday != "*" or not day.isdigit() or not 1 <= int(day) <= 31:
            return None
        return _("On day %(day)s of each month at %(time)s") % {"day": day, "time": at}
    if weekday == "*":
        return _("Every day at %(time)s") % {"time": at}
    if weekday == "1-5":
        return _("Weekdays at %(time)s") % {"time": at}
    days = weekday.split(",")
    if not all(d.isdigit() and int(d) <= 7 for d in days):
        return None
    names = [str(WEEKDAYS[WEEKDAYS_OF_CRON[int(d)]]) for d in dict.fromkeys(days)]
    shown = (
        names[0]
        if len(names) == 1
        else _("%(first)s and %(last)s") % {"first": ", ".join(names[:-1]), "last": names[-1]}
    )
    return _("Every %(days)s at %(time)s") % {"days": shown, "time": at}
