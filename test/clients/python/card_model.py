"""A model-based test of the card flow: authorizations, captures, voids,
increments and refunds, against an oracle of what each reply may be.

CARD_MODEL_SESSIONS sessions (psycopg2, autocommit: each claim committed
when it answers) work at once on CARD_MODEL_LIVE authorizations at a time,
each retired after CARD_MODEL_OPS_PER_AUTH operations and replaced by a new
one, until every session has run CARD_MODEL_OPS operations: open an
authorization again (the same amount, or another), claim it, open a
capture (a new key or one already used, at its amount or another, final
or not), a void, an increment or a refund, claim any of them.  A PROCEED
calls a simulated bank under bizNo/attempt, which books the step or
declines it; the answer is lost CARD_MODEL_LOSS of the time.  A reconciler
takes pay_stuck rows, asks the bank with query-and-close and settles them.
A third of the authorizations expire 80 ms after their hold.

Every call is recorded with its start, its end and its reply.  Afterwards,
for each authorization, the oracle looks for an order of its calls that
keeps their real-time order (a call that ended before another started comes
first) in which every reply is one the rules allow (linearizability, by
Wing and Gong's search): an accept the model forbids (a capture over the
authorized, a capture or increment after a close, a refund over the
captured...), or a refusal it says cannot happen, fails the test.  Then
each authorization's pay_authorization_balance must equal the sums of its
children and stay within its limits, every step SUCCESS must be the one
booking of the bank under its reference and every booking a step SUCCESS,
pay_verify must be clean, and amcheck must find nothing in the ledger's and
the journal's indexes and heaps.  It prints the calls made and the
refusals seen, per kind.

Connection: the libpq environment (PGHOST, PGPORT, PGDATABASE, PGUSER), a
superuser (the checks); the sessions connect as CARD_MODEL_APP_USER when
set, an application role pay_grant made.  Exit 0 when everything holds, 1
otherwise, 2 on a setup error.
"""
import collections
import os
import random
import sys
import threading
import time
from decimal import Decimal

import psycopg2
import psycopg2.extensions

SESSIONS = int(os.environ.get("CARD_MODEL_SESSIONS", "6"))
OPS = int(os.environ.get("CARD_MODEL_OPS", "1500"))
LIVE = int(os.environ.get("CARD_MODEL_LIVE", "4"))
OPS_PER_AUTH = int(os.environ.get("CARD_MODEL_OPS_PER_AUTH", "60"))
LOSS = float(os.environ.get("CARD_MODEL_LOSS", "0.3"))
DECLINE = 0.1
SEED = int(os.environ.get("CARD_MODEL_SEED", str(int(time.time()))))
APP_USER = os.environ.get("CARD_MODEL_APP_USER")
STUCK_AFTER = "150 milliseconds"
SHORT_EXPIRY = 0.08          # seconds, for a third of the authorizations
# Clocks: the server's statement time falls inside the call's interval as
# the client measures it; this much slack either side.
CLOCK_SLACK = 0.05
SEARCH_LIMIT = 2_000_000     # states the oracle visits for one authorization
DEADLINE = time.monotonic() + float(os.environ.get("CARD_MODEL_SECONDS", "240"))

KINDS = ("capture", "void", "increment", "refund")
PROCESSING_OR_SUCCESS = ("PROCESSING", "SUCCESS")


def connect(user=None):
    dsn = "" if user is None else f"user={user}"
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


# ---------------------------------------------------------------------------
# The calls, each recorded as one operation of the history
# ---------------------------------------------------------------------------

class Op:
    """One call: which authorization, what (kind and arguments), when
    (start and end on the client's clock) and the reply: ("ok", value) or
    ("err", sqlstate, constraint, detail)."""
    __slots__ = ("auth", "kind", "args", "start", "end", "reply", "index")

    def __init__(self, auth, kind, args):
        self.auth, self.kind, self.args = auth, kind, args
        self.start = self.end = None
        self.reply = None
        self.index = None

    def __repr__(self):
        return (f"{self.kind}{self.args} -> {self.reply} "
                f"[{self.start:.3f}, {self.end:.3f}]")


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = collections.defaultdict(list)   # auth index -> [Op]
        self.runs = collections.Counter()           # kind -> calls
        self.refusals = collections.Counter()       # (kind, sqlstate, constraint) -> count

    def record(self, op):
        with self.lock:
            self.ops[op.auth].append(op)
            self.runs[op.kind] += 1
            if op.reply[0] == "err":
                name = op.reply[2] or ""
                detail = op.reply[3] or ""
                if name == "pay_authorization_closed" and detail.startswith("Closed: "):
                    name += f" ({detail[8:].split(';')[0]})"
                self.refusals[(op.kind, op.reply[1], name)] += 1


HISTORY = History()


def call(conn, auth, kind, args, sql, params, record=True):
    """Run sql (one statement, autocommit) as operation kind of authorization
    auth; return its reply.  An error of the server is a reply like any
    other; the oracle judges it."""
    op = Op(auth, kind, args)
    op.start = time.time()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        op.reply = ("ok", row if row is None or len(row) > 1 else row[0])
    except psycopg2.Error as e:
        if e.pgcode is None:
            raise
        op.reply = ("err", e.pgcode, e.diag.constraint_name, e.diag.message_detail)
    op.end = time.time()
    if record:
        HISTORY.record(op)
    return op


# ---------------------------------------------------------------------------
# The simulated bank: books a step under its reference bizNo/attempt, or
# declines; query_and_close reports the booking and refuses the reference
# from then on (so nothing is booked after a reconciler failed it)
# ---------------------------------------------------------------------------

class Bank:
    def __init__(self):
        self.lock = threading.Lock()
        self.booked = {}          # reference -> amount
        self.closed = set()
        self.requests = set()
        self.declined = 0
        self.lost = 0             # answers lost on the way back

    def book(self, ref, amount, rng):
        with self.lock:
            first = ref not in self.requests
            self.requests.add(ref)
            if ref in self.closed or (first and rng.random() < DECLINE):
                self.declined += 1
                return None
            if ref not in self.booked:
                self.booked[ref] = amount
            return f"BANK-{ref}"

    def query_and_close(self, ref):
        with self.lock:
            self.closed.add(ref)
            return f"BANK-{ref}" if ref in self.booked else None


BANK = Bank()


# ---------------------------------------------------------------------------
# What the sessions share: the live authorizations and the steps opened
# ---------------------------------------------------------------------------

class Auth:
    def __init__(self, index, biz_id, amount, expires_in):
        self.index = index
        self.biz_id = biz_id
        self.amount = amount
        self.expires_in = expires_in      # None: the default, 7 days
        self.bizno = None
        self.held = False                 # a reply said the hold is placed
        self.ops = 0
        self.steps = {}                   # (kind, key) -> (bizno, amount, final)
        self.keys = collections.Counter()  # kind -> keys issued


class Shared:
    def __init__(self, rng):
        self.lock = threading.Lock()
        self.rng = rng
        self.auths = []                   # every authorization, by index
        self.live = []
        self.targets = {}                 # bizno -> (auth index, kind, key)
        self.done = threading.Event()

    def new_auth(self, conn):
        with self.lock:
            index = len(self.auths)
            expires_in = None if index % 3 else f"{SHORT_EXPIRY} seconds"
            auth = Auth(index, f"AUTH-{SEED}-{os.getpid()}-{index}",
                        Decimal(100 + self.rng.randrange(0, 5) * 20), expires_in)
            self.auths.append(auth)
        op = open_auth(conn, auth, auth.amount)
        if op.reply[0] != "ok":
            raise RuntimeError(f"opening authorization {auth.biz_id}: {op.reply}")
        auth.bizno = op.reply[1]
        with self.lock:
            self.targets[auth.bizno] = (auth.index, "auth", None)
            self.live.append(auth)
        return auth

    def pick(self, rng):
        with self.lock:
            return rng.choice(self.live) if self.live else None

    def count_op(self, conn, auth):
        """Count one operation of auth; retire it after OPS_PER_AUTH."""
        with self.lock:
            auth.ops += 1
            retire = auth.ops == OPS_PER_AUTH
        if retire:
            self.new_auth(conn)             # its successor first: never none live
            with self.lock:
                self.live.remove(auth)


def open_auth(conn, auth, amount):
    if auth.expires_in is None:
        return call(conn, auth.index, "open_auth", (str(amount),),
                    "SELECT pay_open_authorization('CARD', %s, %s, 'EUR')",
                    (auth.biz_id, amount))
    return call(conn, auth.index, "open_auth", (str(amount),),
                "SELECT pay_open_authorization('CARD', %s, %s, 'EUR', %s::interval)",
                (auth.biz_id, amount, auth.expires_in))


OPENERS = {
    "capture": "SELECT pay_capture_open(%s, %s, %s, %s)",
    "void": "SELECT pay_void_open(%s, %s)",
    "increment": "SELECT pay_increment_open(%s, %s, %s)",
    "refund": "SELECT pay_refund_open(%s, %s, %s, 'model')",
}


def open_step(conn, shared, auth, kind, rng):
    """Open a step of auth: a new key, or one already opened (at its amount,
    or at another)."""
    with shared.lock:
        known = [k for (kd, k) in auth.steps if kd == kind]
        if known and rng.random() < 0.4:
            key = rng.choice(known)
            _, amount, final = auth.steps[(kind, key)]
            if rng.random() < 0.25 and amount is not None:
                amount = amount + Decimal(5)          # another amount: frozen
            elif kind == "capture" and rng.random() < 0.1:
                final = not final                     # another kind: the key is taken
        else:
            auth.keys[kind] += 1
            key = f"{kind[0].upper()}{auth.keys[kind]}"
            amount = {"capture": Decimal(rng.randrange(1, 9) * 10),
                      "void": None,
                      "increment": Decimal(rng.randrange(1, 4) * 10),
                      "refund": Decimal(rng.randrange(1, 6) * 5)}[kind]
            final = kind == "capture" and rng.random() < 0.15
    if kind == "capture":
        params = (auth.bizno, key, amount, final)
        args = (key, str(amount), final)
    elif kind == "void":
        params, args = (auth.bizno, key), (key,)
        final = None
    else:
        params, args = (auth.bizno, key, amount), (key, str(amount))
        final = None
    op = call(conn, auth.index, "open_" + kind, args, OPENERS[kind], params)
    if op.reply[0] == "ok":
        with shared.lock:
            first = auth.steps.setdefault((kind, key), (op.reply[1], amount, final))
            shared.targets.setdefault(op.reply[1], (auth.index, kind, key))
        if first[0] != op.reply[1]:
            raise AssertionError(f"{auth.biz_id}: {kind} {key} opened as {first[0]}, "
                                 f"then answered {op.reply[1]}")
    return op


def claim_and_charge(conn, shared, auth, kind, key, bizno, amount, rng):
    """Claim a step (or the authorization); on PROCEED call the bank and,
    unless the answer is lost, settle with it."""
    args = ("auth",) if kind == "auth" else (key,)
    op = call(conn, auth.index, "claim_" + kind, args,
              "SELECT action, attempt FROM pay_claim(%s)", (bizno,))
    if kind == "auth" and op.reply == ("ok", ("ALREADY_SUCCEEDED", op.reply[1][1])):
        auth.held = True
    if op.reply[0] != "ok" or op.reply[1][0] != "PROCEED":
        return
    attempt = op.reply[1][1]
    ref = f"{bizno}/{attempt}"
    booked = BANK.book(ref, amount, rng)
    if rng.random() < LOSS:
        with BANK.lock:
            BANK.lost += 1
        return                                    # the answer is lost: the reconciler's
    settle(conn, auth.index, kind, key, bizno, attempt, booked)


def settle(conn, auth_index, kind, key, bizno, attempt, booked, by="worker"):
    args = ("auth" if kind == "auth" else key, attempt, by)
    if booked is not None:
        return call(conn, auth_index, "succeed_" + kind, args,
                    "SELECT pay_succeed(%s, %s, %s)", (bizno, booked, attempt))
    return call(conn, auth_index, "fail_" + kind, args,
                "SELECT pay_fail(%s, 'declined', %s)", (bizno, attempt))


def session(n, shared, errors):
    rng = random.Random(SEED * 1000 + n)
    try:
        conn = connect(APP_USER)
        for _ in range(OPS):
            if time.monotonic() > DEADLINE:
                raise RuntimeError("gave up: past the deadline")
            auth = shared.pick(rng)
            r = rng.random()
            if r < 0.04:
                amount = auth.amount if rng.random() < 0.7 else auth.amount + 1
                op = open_auth(conn, auth, amount)
                if op.reply[0] == "ok" and op.reply[1] != auth.bizno:
                    raise AssertionError(f"{auth.biz_id} reopened as {op.reply[1]}, "
                                         f"not {auth.bizno}")
            elif r < 0.12 or (not auth.held and r < 0.7):
                claim_and_charge(conn, shared, auth, "auth", None, auth.bizno, auth.amount, rng)
            else:
                with shared.lock:
                    steps = list(auth.steps.items())
                if r < 0.50 or not steps:
                    kind = rng.choices(KINDS, weights=(6, 1, 2, 3))[0]
                    open_step(conn, shared, auth, kind, rng)
                else:
                    (kind, key), (bizno, amount, _) = rng.choice(steps)
                    claim_and_charge(conn, shared, auth, kind, key, bizno, amount, rng)
            shared.count_op(conn, auth)
        conn.close()
    except BaseException as e:
        errors.append(f"session {n}: {type(e).__name__}: {e}")


RECONCILED = collections.Counter()      # kind -> settlements by the reconciler


def reconcile_pass(conn, shared):
    """One pass: the stuck steps, asked of the bank and settled, in the
    transaction that holds their pay_stuck row locks; each settlement in
    a savepoint, so that a refusal (the oracle judges it) leaves the rest.
    A settlement takes effect at the commit: its operation ends there."""
    conn.autocommit = False
    pending = []
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT bizno, attempt FROM pay_stuck(%s::interval, 50)", (STUCK_AFTER,))
            stuck = cur.fetchall()
        for bizno, attempt in stuck:
            with shared.lock:
                target = shared.targets.get(bizno)
            if target is None:
                continue                        # not this run's
            auth_index, kind, key = target
            booked = BANK.query_and_close(f"{bizno}/{attempt}")
            with conn.cursor() as cur:
                cur.execute("SAVEPOINT settle")
            op = settle(conn, auth_index, kind, key, bizno, attempt, booked, by="reconciler")
            RECONCILED[kind] += 1
            with conn.cursor() as cur:
                cur.execute("ROLLBACK TO SAVEPOINT settle" if op.reply[0] == "err"
                            else "RELEASE SAVEPOINT settle")
            pending.append(op)
        conn.commit()
    finally:
        conn.autocommit = True
    now = time.time()
    for op in pending:
        op.end = now
    return len(stuck)


def reconciler(shared, errors, stop):
    try:
        conn = connect(APP_USER)
        while not stop.is_set():
            reconcile_pass(conn, shared)
            time.sleep(0.05)
        conn.close()
    except BaseException as e:
        errors.append(f"reconciler: {type(e).__name__}: {e}")


# ---------------------------------------------------------------------------
# The oracle: the rules, as a step function over one authorization's state
# ---------------------------------------------------------------------------
#
# A state is a tuple (auth_status, auth_attempt, steps) where steps is a
# sorted tuple of (kind, key, amount, final, status, attempt).  Expiry is
# judged against expires_at, which the hold's success fixed (read
# afterwards from pay_authorization_balance), and the call's interval.

def figures(steps):
    f = collections.Counter()
    for kind, _, amount, final, status, _ in steps:
        if status in PROCESSING_OR_SUCCESS:
            f[kind + "_" + status] += amount if amount is not None else 1
            if kind == "capture" and final:
                f["final_" + status] += 1
    return f


def close_reasons(base, steps):
    """Why the authorization is closed to captures and increments, apart
    from expiry (judged by time)."""
    f = figures(steps)
    authorized = base + f["increment_SUCCESS"]
    reasons = set()
    if f["void_PROCESSING"] or f["void_SUCCESS"]:
        reasons.add("void")
    if f["final_PROCESSING"] or f["final_SUCCESS"]:
        reasons.add("final")
    if f["capture_SUCCESS"] >= authorized:
        reasons.add("captured")
    return reasons, f, authorized


def time_cases(op, expires_at):
    """Whether the call may have run before expiry, after it, or both."""
    cases = set()
    if expires_at is None or op.start - CLOCK_SLACK < expires_at:
        cases.add(False)
    if expires_at is not None and op.end + CLOCK_SLACK >= expires_at:
        cases.add(True)
    return cases


def card_refusal(kind, amount, base, steps, expired, claiming):
    """The refusal a new step of kind gets when opened (claiming false) or a
    step in INIT or FAILED gets when claimed, or None when it passes: first
    the close (for every step but a refund), then an increment after a
    capture, then the limits, which hold at the claim."""
    reasons, f, authorized = close_reasons(base, steps)
    if expired:
        reasons.add("expired")
    if kind != "refund" and reasons:
        # the detail names the first reason of these
        label = ("voided" if f["void_SUCCESS"] else "void in flight" if f["void_PROCESSING"]
                 else "final capture done" if f["final_SUCCESS"]
                 else "final capture in flight" if f["final_PROCESSING"]
                 else "fully captured" if "captured" in reasons else "expired")
        return ("55000", "pay_authorization_closed", label)
    if kind == "increment" and (f["capture_PROCESSING"] or f["capture_SUCCESS"]):
        return ("55000", "pay_increment_after_capture")
    if not claiming:
        return None
    if kind == "capture" and f["capture_PROCESSING"] + f["capture_SUCCESS"] + amount > authorized:
        return ("23514", "pay_capture_limit")
    if kind == "refund" and f["refund_PROCESSING"] + f["refund_SUCCESS"] + amount > f["capture_SUCCESS"]:
        return ("23514", "pay_refund_limit")
    return None


def card_outcomes(kind, amount, base, steps, op, expires_at, claiming):
    """The outcomes a call may get: None (it passes) or a refusal, one for
    each side of the hold's expiry the call may have run on."""
    return {card_refusal(kind, amount, base, steps, expired, claiming)
            for expired in time_cases(op, expires_at)}


def refused_as(reply, outcomes):
    """Whether error reply is one of the refusals of outcomes: its SQLSTATE
    and constraint, and for a close the reason its detail names first."""
    for outcome in outcomes:
        if outcome is not None and reply[1:3] == outcome[:2] and (
                len(outcome) < 3 or (reply[3] or "").startswith(f"Closed: {outcome[2]};")):
            return True
    return False


TRANSIENT = {"40001", "40P01"}          # serialization failure, deadlock: nothing done


def step_state(state, op, base, expires_at):
    """The state after op if its reply is one the rules allow in state, else
    None."""
    auth_status, auth_attempt, steps = state
    reply = op.reply
    if reply[0] == "err" and reply[1] in TRANSIENT:
        return state
    kind = op.kind
    if kind == "open_auth":
        if Decimal(op.args[0]) == base:
            return state if reply[0] == "ok" else None
        # another amount: frozen under the business action
        return state if reply[0] == "err" and reply[1:3] == ("55000", "pay_amount_frozen") else None

    if kind.startswith("open_"):
        step_kind = kind[5:]
        key = op.args[0]
        amount = Decimal(op.args[1]) if step_kind != "void" else None
        final = op.args[2] if step_kind == "capture" else None
        existing = [s for s in steps if s[0] == step_kind and s[1] == key]
        if auth_status != "SUCCESS":
            refusal = ("55000", "pay_refund_unpaid" if step_kind == "refund"
                       else "pay_authorization_not_held")
            return state if reply[0] == "err" and reply[1:3] == refusal else None
        if existing:
            # found again, whatever the authorization's state: under its
            # kind (a capture's final names its kind) and amount only
            s = existing[0]
            if s[3] != final:
                refusal = ("55000", "pay_step_key_taken")
            elif s[2] != amount and step_kind != "void":
                refusal = ("55000", "pay_amount_frozen")
            else:
                return state if reply[0] == "ok" else None
            return state if reply[0] == "err" and reply[1:3] == refusal else None
        outcomes = card_outcomes(step_kind, amount, base, steps, op, expires_at, False)
        if reply[0] == "err":
            return state if refused_as(reply, outcomes) else None
        if None not in outcomes:
            return None
        new = (step_kind, key, amount, final, "INIT", 0)
        return (auth_status, auth_attempt, tuple(sorted(steps + (new,), key=sort_key)))

    verb, _, target = kind.partition("_")
    if target == "auth":
        status, attempt = auth_status, auth_attempt
    else:
        matches = [s for s in steps if s[0] == target and s[1] == op.args[0]]
        if not matches:
            return None                   # a call on a step not opened yet
        s = matches[0]
        status, attempt = s[4], s[5]

    def with_status(new_status, new_attempt):
        if target == "auth":
            return (new_status, new_attempt, steps)
        new = s[:4] + (new_status, new_attempt)
        return (auth_status, auth_attempt,
                tuple(sorted([x for x in steps if x is not s] + [new], key=sort_key)))

    if verb == "claim":
        if reply[0] == "ok":
            action, got_attempt = reply[1]
        if status == "PROCESSING":
            return state if reply[0] == "ok" and (action, got_attempt) == ("IN_PROGRESS", attempt) else None
        if status == "SUCCESS":
            return state if reply[0] == "ok" and action == "ALREADY_SUCCEEDED" else None
        # INIT or FAILED: PROCEED under the next attempt, unless a rule refuses
        if target == "auth":
            outcomes = {None}
        else:
            outcomes = card_outcomes(target, s[2], base, steps, op, expires_at, True)
        if reply[0] == "ok":
            if action != "PROCEED" or got_attempt != attempt + 1 or None not in outcomes:
                return None
            return with_status("PROCESSING", attempt + 1)
        return state if refused_as(reply, outcomes) else None

    # succeed or fail under op.args[1], the attempt
    got_attempt = op.args[1]
    if status == "PROCESSING" and got_attempt == attempt:
        expected = "SUCCESS" if verb == "succeed" else "FAILED"
        if reply == ("ok", expected):
            return with_status(expected, attempt)
        return None
    if reply[0] == "err" and reply[1:3] in (("55000", "pay_stale_attempt"),
                                            ("23514", "pay_status_transition")):
        return state
    return None


def sort_key(s):
    return (s[0], s[1])


def linearize(ops, base, expires_at):
    """Wing and Gong's search: an order of ops that keeps real time and in
    which every reply is allowed.  Returns None, or (the ops placed in the
    deepest order found, the ops that could not be placed next, the state
    there) when there is none."""
    ops = sorted(ops, key=lambda o: o.start)
    for i, op in enumerate(ops):
        op.index = i
    n = len(ops)
    full = (1 << n) - 1
    seen = set()
    best = [0, [], None, []]
    visited = [0]
    sys.setrecursionlimit(max(10000, 4 * n + 100))

    def candidates(done):
        # the calls not placed that no unplaced call ended before
        out = []
        min_end = None
        for op in ops:
            if done >> op.index & 1:
                continue
            if min_end is not None and op.start > min_end:
                break
            out.append(op)
            min_end = op.end if min_end is None else min(min_end, op.end)
        return out

    order = []

    def search(done, state):
        if done == full:
            return True
        if (done, state) in seen:
            return False
        seen.add((done, state))
        visited[0] += 1
        if visited[0] > SEARCH_LIMIT:
            raise RuntimeError("search limit")
        cands = candidates(done)
        for op in cands:
            nxt = step_state(state, op, base, expires_at)
            if nxt is None:
                continue
            order.append(op)
            if search(done | 1 << op.index, nxt):
                return True
            order.pop()
        if len(order) >= best[0]:
            best[:] = [len(order), list(order), state, cands]
        return False

    if search(0, ("INIT", 0, ())):
        return None
    return best[1], best[3], best[2]


# ---------------------------------------------------------------------------
# The run and the checks
# ---------------------------------------------------------------------------

def main():
    rng = random.Random(SEED)
    shared = Shared(rng)
    errors = []
    admin = connect()
    for _ in range(LIVE):
        shared.new_auth(connect(APP_USER))
    stop = threading.Event()
    rec = threading.Thread(target=reconciler, args=(shared, errors, stop), daemon=True)
    rec.start()
    threads = [threading.Thread(target=session, args=(n, shared, errors), daemon=True)
               for n in range(SESSIONS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, DEADLINE - time.monotonic()))
    # let the reconciler settle everything still in flight
    biznos = list(shared.targets)
    while time.monotonic() < DEADLINE and not errors:
        with admin.cursor() as cur:
            cur.execute("SELECT count(*) FROM pay_ledger WHERE bizno = ANY(%s) "
                        "AND status = 'PROCESSING'", (biznos,))
            if cur.fetchone()[0] == 0:
                break
        time.sleep(0.1)
    stop.set()
    rec.join(10)
    ran = time.monotonic() - started
    if errors or any(t.is_alive() for t in threads + [rec]):
        fail("; ".join(errors) or "gave up: a session or the reconciler still runs")

    problems = []
    # the oracle, authorization by authorization
    with admin.cursor() as cur:
        for auth in shared.auths:
            cur.execute("SELECT authorized, captured, capture_in_flight, refunded, refund_in_flight,"
                        " capturable, refundable, closed_reason, extract(epoch FROM expires_at)"
                        " FROM pay_authorization_balance(%s)", (auth.bizno,))
            balance = cur.fetchone()
            expires_at = float(balance[8]) if balance[8] is not None else None
            try:
                verdict = linearize(HISTORY.ops[auth.index], auth.amount, expires_at)
            except RuntimeError as e:
                problems.append(f"{auth.biz_id}: the oracle gave up ({e}) "
                                f"over {len(HISTORY.ops[auth.index])} calls")
                continue
            if verdict is not None:
                placed, stuck_ops, state = verdict
                lines = [f"{auth.biz_id} ({auth.bizno}, {auth.amount} EUR, expires at "
                         f"{expires_at}): no order of its {len(HISTORY.ops[auth.index])} calls "
                         f"explains the replies; after {len(placed)} placed, the state is",
                         f"    {state}", "  and none of these replies is allowed there:"]
                lines += [f"    {op}" for op in stuck_ops]
                lines += ["  the last calls placed:"] + [f"    {op}" for op in placed[-8:]]
                problems.append("\n".join(lines))
            problems += check_balance(cur, auth, balance)
        problems += check_bank(cur, shared)
        cur.execute("SELECT bizno, problem FROM pay_verify()")
        problems += [f"pay_verify: {b}: {p}" for b, p in cur.fetchall()]
        problems += amcheck(cur)

    report(ran, len(shared.auths))
    if problems:
        for p in problems[:20]:
            print(f"card model: {p}", file=sys.stderr)
        fail(f"{len(problems)} problems (seed {SEED})")
    print(f"card model: seed {SEED}: every reply allowed by the model, every balance the sums of "
          f"its children and within its limits, the bank's books the ledger's, pay_verify and "
          f"amcheck clean")


def check_balance(cur, auth, balance):
    """pay_authorization_balance against the sums of the ledger's children,
    and the limits."""
    problems = []
    cur.execute("""
        SELECT CASE WHEN a.status = 'SUCCESS' THEN a.amount ELSE 0 END,
               coalesce(sum(c.amount) FILTER (WHERE c.step = 'increment' AND c.status = 'SUCCESS'), 0),
               coalesce(sum(c.amount) FILTER (WHERE c.step = 'capture' AND c.status = 'SUCCESS'), 0),
               coalesce(sum(c.amount) FILTER (WHERE c.step = 'capture' AND c.status = 'PROCESSING'), 0),
               coalesce(sum(c.amount) FILTER (WHERE c.step = 'refund' AND c.status = 'SUCCESS'), 0),
               coalesce(sum(c.amount) FILTER (WHERE c.step = 'refund' AND c.status = 'PROCESSING'), 0)
        FROM pay_ledger AS a
        LEFT JOIN (SELECT l.*, %s AS step FROM pay_ledger AS l) AS c ON c.parent = a.bizno
        WHERE a.bizno = %s
        GROUP BY a.amount, a.status""" % (STEP_KIND_SQL, "%s"), (auth.bizno,))
    base, increments, captured, capturing, refunded, refunding = cur.fetchone()
    authorized = base + increments
    got = dict(zip(("authorized", "captured", "capture_in_flight", "refunded", "refund_in_flight"),
                   balance[:5]))
    want = {"authorized": authorized, "captured": captured, "capture_in_flight": capturing,
            "refunded": refunded, "refund_in_flight": refunding}
    for name, value in want.items():
        if got[name] != value:
            problems.append(f"{auth.biz_id}: pay_authorization_balance says {name} {got[name]}, "
                            f"its children add up to {value}")
    if captured + capturing > authorized:
        problems.append(f"{auth.biz_id}: captures {captured} + {capturing} in flight "
                        f"over the authorized {authorized}")
    if refunded + refunding > captured:
        problems.append(f"{auth.biz_id}: refunds {refunded} + {refunding} in flight "
                        f"over the captured {captured}")
    if balance[6] is not None and balance[6] != captured - refunded - refunding:
        problems.append(f"{auth.biz_id}: refundable {balance[6]}, not "
                        f"{captured - refunded - refunding}")
    if balance[5] is not None and (balance[5] < 0 or balance[5] > authorized - captured - capturing):
        problems.append(f"{auth.biz_id}: capturable {balance[5]} out of [0, "
                        f"{authorized - captured - capturing}]")
    return problems


# The kind of a step, as the ledger records it (the step column).
STEP_KIND_SQL = ("CASE WHEN l.kind IS NULL THEN 'refund' "
                 "WHEN l.kind IN ('CAPTURE', 'FINAL_CAPTURE') THEN 'capture' ELSE lower(l.kind) END")


def check_bank(cur, shared):
    """Every SUCCESS of the run is the bank's one booking under its
    reference, and every booking is a SUCCESS."""
    cur.execute("SELECT bizno || '/' || attempt FROM pay_ledger "
                "WHERE bizno = ANY(%s) AND status = 'SUCCESS'", (list(shared.targets),))
    succeeded = {r for (r,) in cur.fetchall()}
    booked = set(BANK.booked)
    problems = [f"bank: {r} SUCCESS in the ledger, never booked" for r in sorted(succeeded - booked)]
    problems += [f"bank: {r} booked, not SUCCESS in the ledger" for r in sorted(booked - succeeded)]
    return problems


def amcheck(cur):
    cur.execute("SET client_min_messages = warning")
    cur.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
    cur.execute("""
        SELECT c.relname
        FROM pg_index AS i
        JOIN pg_class AS c ON c.oid = i.indexrelid
        JOIN pg_am AS am ON am.oid = c.relam
        WHERE i.indrelid IN ('pay_ledger'::regclass, 'pay_journal'::regclass)
          AND am.amname = 'btree'""")
    problems = []
    for (index,) in cur.fetchall():
        try:
            cur.execute("SELECT bt_index_parent_check(%s::regclass, heapallindexed => true)", (index,))
        except psycopg2.Error as e:
            problems.append(f"amcheck: {index}: {e.pgerror.strip()}")
    cur.execute("SELECT (SELECT count(*) FROM verify_heapam('pay_ledger')) + "
                "(SELECT count(*) FROM verify_heapam('pay_journal'))")
    heap = cur.fetchone()[0]
    if heap:
        problems.append(f"amcheck: verify_heapam found {heap} problems")
    return problems


def report(seconds, auths):
    calls = sum(HISTORY.runs.values())
    print(f"card model: seed {SEED}, {SESSIONS} sessions and a reconciler, {auths} authorizations "
          f"({LIVE} at a time), {calls} calls in {seconds:.1f} s")
    print(f"  the bank: {len(BANK.booked)} steps booked, {BANK.declined} declined, "
          f"{BANK.lost} answers lost ({LOSS:.0%}); the reconciler settled "
          f"{sum(n for k, n in RECONCILED.items())} stuck steps")
    print(f"  {'call':<18} {'run':>6}   refusals")
    for kind in sorted(HISTORY.runs):
        refused = [f"{n:>5} {state} {name}".rstrip() for (k, state, name), n
                   in sorted(HISTORY.refusals.items()) if k == kind] or ["    -"]
        print(f"  {kind:<18} {HISTORY.runs[kind]:>6} {refused[0]}")
        for line in refused[1:]:
            print(f"  {'':<18} {'':>6} {line}")


def fail(msg):
    print(f"card model: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
