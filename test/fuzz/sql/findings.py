#!/usr/bin/env python3
"""What a sqlsmith run found, read from the fuzzed server's CSV log.

    findings.py SRC_DIR CSV_LOG ROLE=SQLSMITH_OUTPUT...

A finding is any of:
  - a backend that died: the postmaster's "terminated by signal" (or
    "by exception"), or a PANIC;
  - an XX000 (internal error), from any code but the PostgreSQL functions of
    POSTGRES_OWN, which raise it without the extension too (each with its
    reproduction): those are listed, not counted;
  - an error raised by idempotent_pay -- its C code (the log's LOCATION is a
    function defined in SRC_DIR) or a RAISE in one of its PL/pgSQL functions
    -- whose SQLSTATE is not of a documented class.

It prints, per role, the queries sqlsmith ran (from its progress output) and
the errors each role met (all, and those raised by idempotent_pay, by
SQLSTATE), then every finding with its statement; the exit status is 1 when
there is a finding.
"""
import collections
import csv
import glob
import os
import re
import sys

# The SQLSTATE classes idempotent_pay raises, as its documentation lists
# them: connection (08, through the proxy), data exception (22), integrity
# (23), read-only transaction (25), trigger protocol (39), serialization
# (40), privileges and wrong objects (42), limits (54), object state (55);
# and P0002, an unknown payment.  A RAISE without an errcode (P0001), an
# internal error (XX) or anything else is a finding.
DOCUMENTED_CLASSES = {"08", "22", "23", "25", "39", "40", "42", "54", "55"}
DOCUMENTED_STATES = {"P0002"}

# CSV log columns (the same from PostgreSQL 15 to 18)
USER, SEVERITY, SQLSTATE, MESSAGE, DETAIL, CONTEXT, QUERY, LOCATION = 1, 11, 12, 13, 14, 18, 19, 21

# PostgreSQL functions that raise XX000 for sqlsmith's input in a database
# without idempotent_pay; idempotent_pay's code calls none of them.
POSTGRES_OWN = {
    "coerce_type": "SELECT CAST(CASE WHEN true THEN CAST(NULL AS unknown) "
                   "ELSE CAST(NULL AS unknown) END AS unknown)",
    "intervaltypmodout": "SELECT intervaltypmodout(1)",
    "AdjustIntervalForTypmod": "SELECT pg_catalog.interval('1 day'::interval, 57)",
    "intervaltypmodleastfield": "SELECT pg_catalog.interval(max(x) OVER (), 57) "
                                "FROM (VALUES ('1 day'::interval)) AS v(x)",
    "SetNextObjectId": "SELECT pg_stop_making_pinned_objects()",
    "amvalidate": "SELECT pg_catalog.amvalidate(0)",
    "lo_import_internal": "SELECT pg_catalog.lo_import(pg_catalog.repeat('x', 5000))",
    "acldefault_sql": "SELECT pg_catalog.acldefault('A', 10)",
}
OUR_PLPGSQL = re.compile(r"^PL/pgSQL function (?:\S+\.)?pay_\w+\(")
DIED = re.compile(r"terminated by (signal|exception)")


def our_functions(src):
    """file name -> the C functions defined in it."""
    defined = {}
    for path in glob.glob(os.path.join(src, "*.c")):
        with open(path, encoding="utf-8") as f:
            defined[os.path.basename(path)] = set(
                re.findall(r"^([A-Za-z_]\w*)\(", f.read(), re.MULTILINE))
    return defined


def raised_by_us(row, defined):
    match = re.match(r"^(\w+), ([\w.]+):\d+$", row[LOCATION])
    if not match:
        return False
    function, file = match.groups()
    if function in defined.get(file, ()):
        return True
    return function == "exec_stmt_raise" and bool(OUR_PLPGSQL.match(row[CONTEXT]))


def queries_run(output):
    """The queries sqlsmith reported: one progress character per query."""
    count = 0
    with open(output, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and re.fullmatch(r"[.eStCx]+", line):
                count += len(line)
    return count


def main():
    src, log = sys.argv[1], sys.argv[2]
    outputs = dict(arg.split("=", 1) for arg in sys.argv[3:])
    defined = our_functions(src)
    errors = collections.Counter()
    ours = collections.defaultdict(collections.Counter)
    findings = []
    postgres_own = []

    with open(log, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.reader(f):
            if len(row) <= LOCATION:
                continue
            severity, state = row[SEVERITY], row[SQLSTATE]
            if DIED.search(row[MESSAGE]) or severity == "PANIC":
                findings.append(("crash", row))
                continue
            if severity not in ("ERROR", "FATAL"):
                continue
            errors[row[USER]] += 1
            by_us = raised_by_us(row, defined)
            if by_us:
                ours[row[USER]][state] += 1
            if state == "XX000" and not by_us and row[LOCATION].split(",")[0] in POSTGRES_OWN:
                postgres_own.append(row)
            elif state == "XX000":
                findings.append(("XX000", row))
            elif by_us and state[:2] not in DOCUMENTED_CLASSES and state not in DOCUMENTED_STATES:
                findings.append(("undocumented SQLSTATE", row))

    for role, output in outputs.items():
        states = ", ".join(f"{s} {n}" for s, n in sorted(ours[role].items())) or "none"
        print(f"{role}: {queries_run(output)} queries, {errors[role]} errors, "
              f"raised by idempotent_pay: {states}")
    crashes = sum(1 for kind, _ in findings if kind == "crash")
    internal = sum(1 for kind, _ in findings if kind == "XX000")
    print(f"{crashes} crashes, {internal} XX000, "
          f"{len(findings) - crashes - internal} undocumented SQLSTATEs")
    for function, repro in POSTGRES_OWN.items():
        seen = sum(1 for row in postgres_own if row[LOCATION].startswith(function + ","))
        if seen:
            print(f"{seen} XX000 from PostgreSQL's {function}, not counted: "
                  f"it raises one without the extension too ({repro})")
    for kind, row in findings:
        print(f"--- {kind}: {row[USER] or 'postmaster'} {row[SQLSTATE]} {row[MESSAGE]}")
        if row[LOCATION]:
            print(f"    at {row[LOCATION]}")
        statement = row[QUERY] or row[DETAIL]  # a crash: "Failed process was running: ..."
        if statement:
            print("    " + statement[:4000].replace("\n", "\n    "))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
