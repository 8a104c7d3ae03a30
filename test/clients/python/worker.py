"""Payment worker for idempotent_pay, in Python with psycopg 3.

What it shows: CLIENT_WORKERS threads pay CLIENT_ORDERS orders against a
simulated bank while answers get lost (as on a half-open network) and a
reconciler settles what is stuck -- and still every order is paid exactly
once.  Each order: claim (in autocommit: the claim is committed when it
answers, before the bank is called -- inside a transaction, psycopg's
default, it would be refused, 25001); on PROCEED charge the bank under bizno/attempt
(the attempt is the fencing token), then settle with that attempt -- or,
30% of the time, "lose" the bank's answer and leave it to the reconciler;
re-claim until ALREADY_SUCCEEDED.  Errors are told apart by SQLSTATE and
constraint name, never by message text; a second charge by pay_succeed's
result (SECOND_CHARGE), never by its warning.

Connection parameters come from the libpq environment (PGHOST, PGPORT,
PGDATABASE, PGUSER).  Exit 0 when every order is SUCCESS and none was
charged twice (by the bank's books, and by pay_succeed's results); exit 1
otherwise, or after 120 seconds.
"""
import json
import os
import random
import sys
import threading
import time
from decimal import Decimal

import psycopg

ORDERS = int(os.environ.get("CLIENT_ORDERS", "200"))
WORKERS = int(os.environ.get("CLIENT_WORKERS", "4"))
LOSS = 0.3            # share of bank answers that get lost
DECLINE_RATE = 0.05   # share of first requests the bank declines
DEADLINE = time.monotonic() + 120

stop = threading.Event()
errors = []           # unexpected errors from any thread
biznos = []          # the bizNo of every order paid
second_charges = []  # "bizno charge" for every SECOND_CHARGE pay_succeed returned


def connect():
    # autocommit=True: each claim is committed when it answers.
    # prepare_threshold=None: never use server-side prepared statements.
    # psycopg 3 otherwise prepares a query after 5 executions (named
    # _pg3_N); behind PgBouncer in transaction pooling the next execution
    # may land on another server connection where that statement does not
    # exist ('prepared statement "_pg3_0" does not exist', 26000).
    return psycopg.connect("", autocommit=True, prepare_threshold=None)


def settle(conn, bizno, attempt, charge, reason):
    """Settle attempt of bizno: pay_succeed under the bank's charge, or
    pay_fail with reason when there is none.  Ignore only the two harmless
    refusals; read a second charge from pay_succeed's result."""
    try:
        if charge is not None:
            result, = conn.execute("SELECT pay_succeed(%s, %s, %s, %s)",
                                   (bizno, str(charge), attempt,
                                    json.dumps({"charge": charge}))).fetchone()
            expected = ("SUCCESS", "SECOND_CHARGE")
        else:
            result, = conn.execute("SELECT pay_fail(%s, %s, %s)",
                                   (bizno, reason, attempt)).fetchone()
            expected = ("FAILED",)
    except psycopg.Error as e:
        diag = (e.sqlstate, e.diag.constraint_name)
        if diag == ("55000", "pay_stale_attempt"):      # late answer, old attempt
            return
        if diag == ("23514", "pay_status_transition"):  # the reconciler settled first
            return
        raise
    if result not in expected:
        raise RuntimeError(f"{bizno}: settling attempt {attempt} returned {result!r}")
    if result == "SECOND_CHARGE":                       # the bank charged it twice
        second_charges.append(f"{bizno} {charge}")


def pay(conn, i):
    amount = Decimal(10 + i % 90) + Decimal("0.99")  # money is Decimal, never float
    bizno = None
    while not stop.is_set():
        if time.monotonic() > DEADLINE:
            raise TimeoutError(f"ORDER-{i} not paid within 120 s")
        try:
            if bizno is None:
                bizno, action, attempt, _, _, _ = conn.execute(
                    "SELECT * FROM pay_open_claim('PY', %s, %s, 'EUR')",
                    (f"ORDER-{i}", amount)).fetchone()
            else:
                action, attempt, _, _, _ = conn.execute(
                    "SELECT * FROM pay_claim(%s)", (bizno,)).fetchone()
        except psycopg.Error as e:
            if e.sqlstate == "40001":                   # serialization: claim again
                continue
            raise
        if action == "ALREADY_SUCCEEDED":
            return bizno
        if action == "IN_PROGRESS":                     # never charge: wait
            time.sleep(0.05)
            continue
        if action != "PROCEED":
            raise RuntimeError(f"{bizno}: unexpected action {action}")
        charge = conn.execute("SELECT bank.charge(%s, %s, %s)",
                              (f"{bizno}/{attempt}", amount, DECLINE_RATE)).fetchone()[0]
        if random.random() < LOSS:
            continue                                    # the answer is lost
        settle(conn, bizno, attempt, charge, "declined")


def worker(n):
    try:
        with connect() as conn:
            for i in range(n, ORDERS, WORKERS):
                biznos.append(pay(conn, i))
    except BaseException as e:
        errors.append(f"worker {n}: {type(e).__name__}: {e}")
        stop.set()


def reconciler(done):
    try:
        with connect() as conn:
            while not stop.is_set() and not done.is_set():
                # pay_stuck locks FOR UPDATE SKIP LOCKED: the locks must last
                # until the stuck payments are settled, so one explicit
                # transaction (also what keeps one server connection under
                # PgBouncer transaction pooling).
                with conn.transaction():
                    stuck = conn.execute("SELECT bizno, attempt FROM pay_stuck('200 milliseconds', 50)").fetchall()
                    for bizno, attempt in stuck:
                        charge = conn.execute("SELECT bank.query_and_close(%s)",
                                              (f"{bizno}/{attempt}",)).fetchone()[0]
                        with conn.transaction():        # savepoint: an ignored refusal
                            settle(conn, bizno, attempt, charge,   # must not abort the rest
                                   "no charge at the bank")
                time.sleep(0.1)
    except BaseException as e:
        errors.append(f"reconciler: {type(e).__name__}: {e}")
        stop.set()


def fail(msg):
    print(f"python: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    done = threading.Event()
    rec = threading.Thread(target=reconciler, args=(done,), daemon=True)
    rec.start()
    workers = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(WORKERS)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(max(0.0, DEADLINE - time.monotonic()))
    done.set()
    rec.join(max(0.0, DEADLINE - time.monotonic()))
    if errors:
        fail("; ".join(errors))
    if any(t.is_alive() for t in workers + [rec]):
        stop.set()
        fail("gave up after 120 s")

    with connect() as conn:
        rows = conn.execute(
            "SELECT b, (SELECT status FROM pay_get(b)) FROM unnest(%s::text[]) AS b",
            (biznos,)).fetchall()
        charges = conn.execute(
            "SELECT count(*) FROM bank.charges WHERE split_part(ref, '/', 1) = ANY(%s)",
            (biznos,)).fetchone()[0]
        doubles = conn.execute(
            "SELECT count(*) FROM (SELECT split_part(ref, '/', 1) FROM bank.charges "
            "GROUP BY 1 HAVING count(*) > 1) d").fetchone()[0]
    unpaid = [f"{b}={s}" for b, s in rows if s != "SUCCESS"]
    if len(rows) != ORDERS or unpaid:
        fail(f"{len(unpaid)} orders not SUCCESS: {', '.join(unpaid[:5])}")
    if doubles:
        fail(f"{doubles} orders charged more than once")
    if second_charges:
        fail(f"{len(second_charges)} second charges: {', '.join(second_charges[:5])}")
    print(f"python: {ORDERS} orders, {charges} bank charges, 0 double charges, "
          f"{len(second_charges)} second charges, {len(rows)} orders found SUCCESS in the ledger")


if __name__ == "__main__":
    main()
