"""Runs README.md's application example, as written, against a bank that
loses answers.

    python3 readme_example.py EXAMPLE.py [ORDERS]

EXAMPLE.py is the README's Python block (test/tap/016_readme_example.pl
extracts it); it must define connect() and pay_order(conn, bank, order_id,
amount).  Four threads, each on a connection of its own from connect(),
pay ORDERS orders (240 by default), every order twice at once (a customer
who clicks twice), in rounds: after each round a reconciler, as the guide's,
asks the bank about the payments left PROCESSING (pay_stuck, then the bank's
query and close) and settles them; the next round pays again every order not
yet answered "paid".  The bank books each charge and then loses the answer
of 30% of them (pay_order sees TimeoutError), and declines the first attempt
of every tenth order.

Prints what happened and exits 0 only when every order is SUCCESS in the
ledger under the one charge the bank booked for it, no order was charged
twice, pay_order raised nothing, and pay_order settled every charge whose
answer it received (a settlement refused as harmless there, say under the
wrong attempt, leaves a paid order PROCESSING).  Connection parameters come
from the libpq environment.
"""
import queue
import random
import sys
import threading
from decimal import Decimal

import psycopg2

WORKERS = 4
LOSS = 0.3
ROUNDS = 5


class Bank:
    """A bank that books a charge per reference, loses answers, and closes a
    reference it was asked about (query and close), so that a request still
    in flight is declined from then on."""

    def __init__(self, seed):
        self.lock = threading.Lock()
        self.random = random.Random(seed)
        self.charges = {}      # reference -> [charge id, ...]
        self.closed = set()
        self.requests = set()
        self.lost = 0
        self.declined = 0
        self.answered = threading.local()

    def charge(self, reference, amount):
        with self.lock:
            first = reference not in self.requests
            self.requests.add(reference)
            bizno, attempt = reference.rsplit("/", 1)
            order = int(bizno.split("-")[2])
            if reference in self.closed or (first and attempt == "1" and order % 10 == 0):
                self.declined += 1
                self.answered.value = True
                return None
            charge = f"CH-{sum(map(len, self.charges.values())) + 1}"
            self.charges.setdefault(reference, []).append(charge)
            if self.random.random() < LOSS:
                self.lost += 1
                raise TimeoutError(f"{reference}: no answer from the bank")
            self.answered.value = True
            return charge

    def query_and_close(self, reference):
        with self.lock:
            self.closed.add(reference)
            return (self.charges.get(reference) or [None])[0]


def reconcile(bank):
    """Settle every payment left PROCESSING, by asking the bank."""
    settled = 0
    conn = psycopg2.connect("")
    with conn, conn.cursor() as cur:   # one transaction: pay_stuck's locks last until the end
        cur.execute("SELECT bizno, attempt FROM pay_stuck('0 seconds', 100000)")
        for bizno, attempt in cur.fetchall():
            charge = bank.query_and_close(f"{bizno}/{attempt}")
            if charge is None:
                cur.execute("SELECT pay_fail(%s, 'no charge at the bank', %s)", (bizno, attempt))
            else:
                cur.execute("SELECT pay_succeed(%s, %s, %s)", (bizno, charge, attempt))
            settled += 1
    conn.close()
    return settled


def main():
    source = open(sys.argv[1]).read()
    orders = int(sys.argv[2]) if len(sys.argv) > 2 else 240
    example = {}
    exec(compile(source, "README.md's example", "exec"), example)
    connect, pay_order = example["connect"], example["pay_order"]

    bank = Bank(seed=43)
    errors = []
    dropped = []           # a charge answered to pay_order, left unsettled by it
    outcomes = {}
    paid = set()
    by_example = 0
    by_reconciler = 0
    calls = 0
    rounds = 0
    while len(paid) < orders and rounds < ROUNDS and not errors:
        rounds += 1
        work = queue.Queue()
        for i in range(orders):
            if i not in paid:
                work.put(i)
                work.put(i)    # the same order, twice at once

        def worker():
            nonlocal by_example, calls
            try:
                conn = connect()
            except Exception as e:
                errors.append(f"connect: {type(e).__name__}: {e}")
                return
            while True:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    break
                bank.answered.value = False
                try:
                    outcome, _ = pay_order(conn, bank, f"ORDER-{i}", Decimal(10 + i % 90) + Decimal("0.99"))
                except Exception as e:
                    errors.append(f"ORDER-{i}: {type(e).__name__}: {str(e).splitlines()[0]}")
                    conn.close()
                    conn = connect()
                    continue
                with bank.lock:
                    calls += 1
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    if outcome == "paid":
                        paid.add(i)
                    if bank.answered.value and outcome == "pending":
                        dropped.append(f"ORDER-{i}")
                    if bank.answered.value and outcome == "paid":
                        by_example += 1
            conn.close()

        threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        by_reconciler += reconcile(bank)

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    def order_of(reference):          # SHOP-ORDER-<i>-...-<check>/<attempt>
        return "ORDER-" + reference.split("-")[2]
    booked = {}                       # every charge of an order, under any bizNo
    for reference, charges in bank.charges.items():
        booked.setdefault(order_of(reference), []).extend(charges)
    twice = sum(1 for charges in booked.values() if len(charges) > 1)
    wrong = []
    for i in range(orders):
        cur.execute("SELECT status, channel_ref FROM pay_find('SHOP', %s)", (f"ORDER-{i}",))
        row = cur.fetchone()
        if row is None or row[0] != "SUCCESS" or booked.get(f"ORDER-{i}") != [row[1]]:
            wrong.append(f"ORDER-{i}: {row and row[0]} {row and row[1]}, the bank booked "
                         f"{booked.get(f'ORDER-{i}', [])}")
    print(f"orders {orders}, rounds {rounds}, calls of pay_order {calls}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"bank: {sum(map(len, bank.charges.values()))} charges booked, {bank.lost} answers lost, "
          f"{bank.declined} declined")
    print(f"payments settled by pay_order {by_example}, by the reconciler {by_reconciler}")
    print(f"orders charged twice {twice}")
    print(f"orders not SUCCESS under their one charge {len(wrong)}")
    print(f"charges answered to pay_order and left unsettled {len(dropped)}")
    print(f"errors raised by pay_order {len(errors)}")
    for line in (wrong[:5] + dropped[:5] + errors[:5]):
        print("  " + line)
    sys.exit(0 if twice == 0 and not wrong and not dropped and not errors else 1)


main()
