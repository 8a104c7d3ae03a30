"""A worker killed between the bank call and its commit, in Python with
psycopg2 and its defaults.

psycopg2, like psycopg 3, runs every statement in a transaction until
commit() unless the connection is in autocommit.  A worker that claims
there, calls the bank and dies before it commits loses its claim with the
crash: the retry would be answered PROCEED under the same attempt again, and
the bank would charge twice.  So idempotent_pay refuses a claim inside a
transaction block (25001 pay_claim_in_transaction) unless the caller says
it commits the claim itself (idempotent_pay.claim_in_transaction = allow).

Three workers, each paying an order of its own in a process of its own,
each killed with SIGKILL after the bank call and before it commits; then a
retry worker claims the same order again (in autocommit, the documented
pattern) and charges it if told PROCEED:

  defaults           psycopg2's defaults: the claim is refused with 25001,
                     and the bank is never called;
  autocommit         the claim is committed when it answers: the retry gets
                     IN_PROGRESS, one charge;
  commit-after-claim no autocommit, the claim allowed in the transaction and
                     committed right after it: IN_PROGRESS, one charge.

The bank (test/demo/bank.sql) books every charge through a connection of
its own in autocommit, as a real bank keeps what it charged whatever the
caller does next.  Connection parameters come from the libpq environment.
Exit 0 when every order was charged at most once and as described; exit 1
otherwise.  `killed_worker.py worker <case>` is the killed worker itself.
"""
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal

import psycopg2
import psycopg2.errors

AMOUNT = Decimal("42.00")
CASES = ("defaults", "autocommit", "commit-after-claim")


def order_of(case):
    return f"KILLED-{case}-{os.getpid()}"


def bank_charge(ref):
    """The bank books the charge whatever happens to the caller."""
    bank = psycopg2.connect("")
    bank.autocommit = True
    with bank.cursor() as cur:
        cur.execute("SELECT bank.charge(%s, %s, 0)", (ref, AMOUNT))
        charge, = cur.fetchone()
    bank.close()
    return charge


def worker(case, order):
    """Claim order, charge it, report, and wait to be killed before commit."""
    conn = psycopg2.connect("")                  # psycopg2's defaults: no autocommit
    if case == "autocommit":
        conn.autocommit = True
    cur = conn.cursor()
    if case == "commit-after-claim":
        # this code commits the claim itself, right after it, before the bank
        # (SET LOCAL: a plain SET would outlive the transaction, and behind a
        # transaction pooler reach other clients)
        cur.execute("SET LOCAL idempotent_pay.claim_in_transaction = allow")
    try:
        cur.execute("SELECT bizno, action, attempt FROM pay_open_claim('PYKILL', %s, %s, 'EUR')",
                    (order, AMOUNT))
    except psycopg2.Error as e:
        print(f"refused {e.pgcode} {e.diag.constraint_name}", flush=True)
        return
    bizno, action, attempt = cur.fetchone()
    if case == "commit-after-claim":
        conn.commit()
    print(f"claimed {bizno} {action} {attempt}", flush=True)
    if action != "PROCEED":
        return
    bank_charge(f"{bizno}/{attempt}")
    print("charged", flush=True)
    time.sleep(60)                               # killed here, before any commit


def run_case(case):
    """The killed worker, then the retry; returns a problem or None."""
    order = order_of(case)
    child = subprocess.Popen([sys.executable, __file__, "worker", case, order],
                             stdout=subprocess.PIPE, text=True)
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("charged"):
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait()
    killed = child.returncode == -signal.SIGKILL

    retry = psycopg2.connect("")
    retry.autocommit = True                      # the documented pattern
    cur = retry.cursor()
    count = "SELECT count(*) FROM bank.charges WHERE split_part(ref, '/', 1) LIKE %s"
    cur.execute(count, (f"PYKILL-{order}-%",))
    charged_by_worker, = cur.fetchone()
    cur.execute("SELECT bizno, action, attempt FROM pay_open_claim('PYKILL', %s, %s, 'EUR')",
                (order, AMOUNT))
    bizno, action, attempt = cur.fetchone()
    if action == "PROCEED":
        bank_charge(f"{bizno}/{attempt}")
    cur.execute(count, (f"PYKILL-{order}-%",))
    charges, = cur.fetchone()
    retry.close()

    print(f"python killed worker, {case}: worker {' / '.join(lines) or '(nothing)'}"
          f"{', killed' if killed else ''}; {charged_by_worker} bank charge(s) by the worker; "
          f"retry {action} {attempt}; {charges} bank charge(s) in all")
    if charges > 1:
        return f"{case}: {charges} charges (the retry was answered {action} {attempt})"
    if case == "defaults":
        if not lines or not lines[0].startswith("refused 25001 pay_claim_in_transaction"):
            return f"defaults: the claim was not refused with 25001: {lines}"
        if charged_by_worker != 0 or action != "PROCEED" or attempt != 1:
            return f"defaults: the worker charged, or the retry was not the first claim: {action} {attempt}"
    else:
        if not killed or lines[-1:] != ["charged"]:
            return f"{case}: the worker was not killed after the bank call: {lines}"
        if charges != 1 or action != "IN_PROGRESS" or attempt != 1:
            return f"{case}: the retry was answered {action} {attempt}, {charges} charges"
    return None


def main():
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2], sys.argv[3])
        return
    problems = [p for p in (run_case(case) for case in CASES) if p]
    if problems:
        print(f"python killed worker: FAILED: {'; '.join(problems)}", file=sys.stderr)
        sys.exit(1)
    print("python killed worker: the refused claim charged nothing; "
          "each committed claim was charged once, its retry IN_PROGRESS")


if __name__ == "__main__":
    main()
