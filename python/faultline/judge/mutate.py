"""Mutation self-test (`faultline run SCENARIO --mutate lie|corrupt`): one
rule that breaks the swap device's data on purpose, and the judgement of
whether the scenario's data check saw it (docs/launcher.md).

A scenario whose data check still passes under the mutation has a blind
checker: it could not see lost or damaged swap data either.
"""

import re

from faultline.errors import EXIT_FAIL

KINDS = ("lie", "corrupt")
RULE_NAME = "mutate"
# The swap device's first writes are mkswap's header (one page) and nothing
# else before the test's workload starts: past SKIP_WRITES every write is a
# swap-out of the test's pages.  Every data scenario expects at least 500
# pages swapped out (vmstat_min pswpout), so writes SKIP_WRITES+1 ..
# SKIP_WRITES+MUTATED_WRITES fall inside its data phase.  256 pages are a
# few percent of what the scenarios swap out: enough that some of them are
# read back and verified, few enough not to take the guest down first.
SKIP_WRITES = 16
MUTATED_WRITES = 256
# The KTAP results that verify data (swapstress, swaptest, iocheck): a
# mutation must fail one of these, not some other check.
DATA_CHECK = re.compile(r"verif|intact|bad pages|read back")


def rule(kind):
    """The rule --mutate KIND adds to a scenario's rules."""
    return (f"{RULE_NAME}: write after={SKIP_WRITES} count={MUTATED_WRITES} {kind}"
            f"  # --mutate {kind}")


def apply(sc, kind):
    """Add the mutation rule to scenario @sc (in place)."""
    rules = sc.faults.rules
    sc.faults.rules = (rules.rstrip("\n") + "\n" if rules.strip() else "") + rule(kind) + "\n"
    sc.mutate = kind
    return sc


def verdict(kind, status, diag, results, faults):
    """What a mutated run showed: dict for report.json (mutation)."""
    hits = 0
    if isinstance(faults, dict):
        hits = next((r["hits"] for r in faults.get("rules", [])
                     if r.get("name") == RULE_NAME), 0)
    failed = [r["name"] for r in results if r["kind"] == "fail"]
    data_failed = [n for n in failed if DATA_CHECK.search(n)]
    errors = diag.get("data_errors", 0)
    caught = status == EXIT_FAIL and hits > 0 and errors > 0 and bool(data_failed)
    if caught:
        first = next(r for r in results if r["kind"] == "fail" and r["name"] == data_failed[0])
        measured = f"{first['detail']}; " if first.get("detail") else ""
        why = f"caught by its data check: {data_failed[0]} ({measured}data_errors {errors})"
    elif hits == 0:
        why = "the mutation rule never fired: it cannot tell"
    elif status != EXIT_FAIL or not failed:
        why = f"NOT caught: the run passed with {hits} writes mutated (blind checker)"
    elif not data_failed or not errors:
        why = (f"NOT caught by a data check: the run failed on {failed[0]} "
               f"(data_errors {errors})")
    else:
        why = "NOT caught"
    return {"action": kind, "rule": rule(kind).split("  #")[0], "hits": hits,
            "data_errors": errors, "data_checks_failed": data_failed,
            "caught": caught, "verdict": why}
