"""Fault schedules drawn from the rule language: what explore/ and the
program generator (prog/) put on a swap device."""
