"""Searching for failures: explore (fault schedules and feedback) and minimize."""
