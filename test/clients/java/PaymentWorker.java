/*
 * PaymentWorker -- a payment worker for idempotent_pay, in Java over JDBC.
 *
 * CLIENT_WORKERS threads (each with its own autocommit Connection) pay
 * CLIENT_ORDERS orders against the simulated bank (test/demo/bank.sql):
 * claim (in autocommit, so the claim is committed when it answers, before the
 * bank is called -- inside a transaction it would be refused, 25001); on
 * PROCEED charge under "bizno/attempt", then either lose the answer
 * (30 %) or settle with that attempt; claim again until ALREADY_SUCCEEDED.
 * A reconciler thread settles what stays PROCESSING by asking the bank
 * (pay_stuck inside a transaction, bank.query_and_close, settle, commit).
 * A second charge is read from pay_succeed's result (SECOND_CHARGE), never
 * from its warning.
 *
 * At the end every order must be SUCCESS and no bizno charged twice, by the
 * bank's books nor by pay_succeed's results.  Prints
 *   java: <orders> orders, <charges> bank charges, 0 double charges,
 *         0 second charges, <n> orders found SUCCESS in the ledger
 * and exits 0; exits 1 on any failure or after 120 s.
 *
 * Connection: env PGHOST (a TCP host: the driver has no Unix sockets),
 * PGPORT, PGDATABASE, PGUSER; no password (trust).  Money is BigDecimal.
 * Errors are told apart by SQLSTATE and constraint name, never by message.
 */

import java.math.BigDecimal;
import java.sql.*;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.postgresql.util.PSQLException;

public class PaymentWorker {
    static final BigDecimal AMOUNT = new BigDecimal("12.34");
    static final double DECLINE_RATE = 0.05, LOSE_RATE = 0.3;

    static String url, user;
    static int orders;
    static String[] biznos;                       // per order, as pay_open_claim named it
    static final AtomicInteger nextOrder = new AtomicInteger();
    static final AtomicInteger lostAnswers = new AtomicInteger(), reconciled = new AtomicInteger();
    static final AtomicReference<Throwable> failure = new AtomicReference<>();
    /** "bizno charge" for every SECOND_CHARGE pay_succeed returned. */
    static final List<String> secondCharges = Collections.synchronizedList(new ArrayList<>());
    static volatile boolean workersDone;

    public static void main(String[] args) throws Exception {
        String host = env("PGHOST", "127.0.0.1");
        if (host.startsWith("/"))
            die("PGHOST=" + host + " is a Unix socket directory; the JDBC driver needs a TCP host");
        // prepareThreshold=0: never switch to named server-side prepared
        // statements.  Under PgBouncer's transaction pooling consecutive
        // statements may run on different server connections, where a
        // statement prepared on another one does not exist.  (PgBouncer also
        // needs ignore_startup_parameters = extra_float_digits: the driver
        // always sends it at startup, which PgBouncer refuses otherwise.)
        url = "jdbc:postgresql://" + host + ":" + env("PGPORT", "5432") + "/"
                + env("PGDATABASE", "postgres") + "?prepareThreshold=0";
        user = env("PGUSER", "postgres");
        orders = Integer.parseInt(env("CLIENT_ORDERS", "200"));
        int workers = Integer.parseInt(env("CLIENT_WORKERS", "4"));
        biznos = new String[orders];

        Thread watchdog = new Thread(() -> {
            try { Thread.sleep(120_000); } catch (InterruptedException e) { return; }
            die("gave up after 120 s: " + nextOrder.get() + " of " + orders + " orders started");
        });
        watchdog.setDaemon(true);
        watchdog.start();

        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; w++)
            threads.add(start("worker-" + w, PaymentWorker::work));
        Thread reconciler = start("reconciler", PaymentWorker::reconcile);
        for (Thread t : threads) t.join();
        workersDone = true;
        reconciler.join();
        if (failure.get() != null) {
            failure.get().printStackTrace();
            die("a thread failed: " + failure.get());
        }
        verify();
    }

    /* ---- the workers ---- */

    static void work() throws SQLException {
        try (Connection c = connect()) {
            for (int i; (i = nextOrder.getAndIncrement()) < orders && failure.get() == null; )
                biznos[i] = pay(c, "ORDER-" + i);
        }
    }

    /** Pays one order: claim until ALREADY_SUCCEEDED, charging only on PROCEED. */
    static String pay(Connection c, String bizId) throws SQLException {
        String bizno = null;
        while (failure.get() == null) {
            String action;
            int attempt;
            try (PreparedStatement ps = bizno == null
                    ? c.prepareStatement("SELECT bizno, action, attempt FROM pay_open_claim(?, ?, ?, ?)")
                    : c.prepareStatement("SELECT ?::text AS bizno, action, attempt FROM pay_claim(?)")) {
                if (bizno == null) {
                    ps.setString(1, "JV");
                    ps.setString(2, bizId);
                    ps.setBigDecimal(3, AMOUNT);
                    ps.setString(4, "EUR");
                } else {
                    ps.setString(1, bizno);
                    ps.setString(2, bizno);
                }
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    bizno = rs.getString(1);
                    action = rs.getString(2);
                    attempt = rs.getInt(3);
                }
            } catch (SQLException e) {
                if ("40001".equals(e.getSQLState())) continue;      // retry the claim
                throw e;
            }
            switch (action) {
                case "ALREADY_SUCCEEDED":
                    return bizno;
                case "IN_PROGRESS":                                   // never charge: wait
                    sleep(50);
                    break;
                case "PROCEED": {
                    Long chargeId = charge(c, bizno + "/" + attempt);
                    if (ThreadLocalRandom.current().nextDouble() < LOSE_RATE)
                        lostAnswers.incrementAndGet();                // the answer is lost
                    else
                        settle(c, bizno, attempt, chargeId);
                    break;
                }
                default:
                    throw new IllegalStateException(bizno + ": unexpected action " + action);
            }
        }
        throw new IllegalStateException("stopped: another thread failed");
    }

    static Long charge(Connection c, String ref) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT bank.charge(?, ?, ?)")) {
            ps.setString(1, ref);
            ps.setBigDecimal(2, AMOUNT);
            ps.setDouble(3, DECLINE_RATE);                            // a rate, not money
            return queryLong(ps);
        }
    }

    /**
     * pay_succeed (charged) or pay_fail (declined) under the attempt charged.
     * In autocommit: returns false when the answer came too late and was
     * rightly refused.  In a transaction every error is the caller's (it
     * has aborted the transaction).  pay_succeed answers SUCCESS, or
     * SECOND_CHARGE (counted) when the payment succeeded already under
     * another charge; pay_fail answers FAILED; any other result throws.
     */
    static boolean settle(Connection c, String bizno, int attempt, Long chargeId) throws SQLException {
        String sql = chargeId != null ? "SELECT pay_succeed(?, ?, ?, ?::jsonb)" : "SELECT pay_fail(?, ?, ?)";
        while (true) {
            String result;
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                ps.setString(1, bizno);
                ps.setString(2, chargeId != null ? chargeId.toString() : "declined");
                ps.setInt(3, attempt);
                if (chargeId != null) ps.setString(4, "{\"charge\": " + chargeId + "}");
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    result = rs.getString(1);
                }
            } catch (SQLException e) {
                if (!c.getAutoCommit()) throw e;
                if ("40001".equals(e.getSQLState())) continue;                        // retry
                if (settledElsewhere(e)) return false;
                throw e;
            }
            if (chargeId != null && "SECOND_CHARGE".equals(result))
                secondCharges.add(bizno + " " + chargeId);         // charged twice
            else if (!(chargeId != null ? "SUCCESS" : "FAILED").equals(result))
                throw new IllegalStateException(bizno + ": settling attempt " + attempt + " returned " + result);
            return true;
        }
    }

    /** A late answer for an old attempt (55000), or a payment already settled (23514). */
    static boolean settledElsewhere(SQLException e) {
        String constraint = null;
        if (e instanceof PSQLException && ((PSQLException) e).getServerErrorMessage() != null)
            constraint = ((PSQLException) e).getServerErrorMessage().getConstraint();
        return "55000".equals(e.getSQLState()) && "pay_stale_attempt".equals(constraint)
            || "23514".equals(e.getSQLState()) && "pay_status_transition".equals(constraint);
    }

    /* ---- the reconciler ---- */

    static void reconcile() throws SQLException {
        try (Connection c = connect()) {
            c.setAutoCommit(false);               // pay_stuck's row locks last until commit
            while (!workersDone && failure.get() == null) {
                int n;
                try {
                    n = reconcileRound(c);
                    c.commit();
                } catch (SQLException e) {
                    c.rollback();                 // the round is undone, bank closes included
                    if ("40001".equals(e.getSQLState()) || settledElsewhere(e)) continue;
                    throw e;
                }
                if (n == 0) sleep(100);
            }
        }
    }

    static int reconcileRound(Connection c) throws SQLException {
        List<String> biznos = new ArrayList<>();
        List<Integer> attempts = new ArrayList<>();
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT bizno, attempt FROM pay_stuck('200 milliseconds', 50)")) {
            while (rs.next()) {
                biznos.add(rs.getString(1));
                attempts.add(rs.getInt(2));
            }
        }
        for (int k = 0; k < biznos.size(); k++) {
            Long chargeId;
            try (PreparedStatement ps = c.prepareStatement("SELECT bank.query_and_close(?)")) {
                ps.setString(1, biznos.get(k) + "/" + attempts.get(k));
                chargeId = queryLong(ps);
            }
            if (settle(c, biznos.get(k), attempts.get(k), chargeId))
                reconciled.incrementAndGet();
        }
        return biznos.size();
    }

    /* ---- the check ---- */

    static void verify() throws SQLException {
        try (Connection c = connect()) {
            int settled = 0;
            try (PreparedStatement get = c.prepareStatement("SELECT status FROM pay_get(?)")) {
                for (int i = 0; i < orders; i++) {
                    get.setString(1, biznos[i]);
                    try (ResultSet rs = get.executeQuery()) {
                        String status = rs.next() ? rs.getString(1) : "(no row)";
                        if (!"SUCCESS".equals(status))
                            die("ORDER-" + i + " (" + biznos[i] + ") is " + status + ", not SUCCESS");
                    }
                    settled++;
                }
            }
            long charges, doubles;
            try (Statement st = c.createStatement()) {
                charges = queryLong(st, "SELECT count(*) FROM bank.charges");
                doubles = queryLong(st, "SELECT count(*) FROM (SELECT split_part(ref, '/', 1) "
                        + "FROM bank.charges GROUP BY 1 HAVING count(*) > 1) d");
            }
            if (doubles != 0)
                die(doubles + " payments charged more than once");
            if (!secondCharges.isEmpty())
                die(secondCharges.size() + " second charges: "
                        + String.join(", ", secondCharges.subList(0, Math.min(5, secondCharges.size()))));
            System.err.println("java: " + lostAnswers.get() + " answers lost, "
                    + reconciled.get() + " settled by the reconciler");
            System.out.println("java: " + orders + " orders, " + charges + " bank charges, "
                    + doubles + " double charges, " + secondCharges.size() + " second charges, "
                    + settled + " orders found SUCCESS in the ledger");
            System.exit(0);
        }
    }

    /* ---- helpers ---- */

    static Connection connect() throws SQLException {
        return DriverManager.getConnection(url, user, "");
    }

    static Long queryLong(PreparedStatement ps) throws SQLException {
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            long v = rs.getLong(1);
            return rs.wasNull() ? null : v;
        }
    }

    static long queryLong(Statement st, String sql) throws SQLException {
        try (ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    interface Body { void run() throws Exception; }

    static Thread start(String name, Body body) {
        Thread t = new Thread(() -> {
            try { body.run(); } catch (Throwable e) { failure.compareAndSet(null, e); }
        }, name);
        t.start();
        return t;
    }

    static void sleep(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
    }

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static void die(String message) {
        System.err.println("java: FAILED: " + message);
        System.exit(1);
    }
}
