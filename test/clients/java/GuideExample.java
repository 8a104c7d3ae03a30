import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeoutException;

/**
 * Runs doc/guide.md's JDBC example (class PayOrder, the block between
 * "<!-- example java: begin -->" and "<!-- example java: end -->", which
 * test/clients/java/guide_example compiles as written) against a bank that
 * loses answers: the same run as README's Python example gets
 * (test/clients/python/readme_example.py).  Four threads, each on a
 * connection of its own, pay ORDERS orders (argument 1, 240 by default),
 * every order twice at once, in rounds; between rounds a reconciler asks the
 * bank about the payments left PROCESSING and settles them.  The bank books
 * each charge, loses the answer of 30% of them (TimeoutException) and
 * declines the first attempt of every tenth order.  Exit 0 only when every
 * order is SUCCESS under the one charge the bank booked for it, none was
 * charged twice, payOrder threw nothing and settled every charge whose answer
 * it received.  Needs PGHOST (a TCP host), PGPORT, PGDATABASE, PGUSER.
 */
public class GuideExample {
    static final double LOSS = 0.3;
    static final int ROUNDS = 5;

    /** The bank's books; query and close makes a reference decline from then on. */
    static final class Books {
        final Random random = new Random(43);
        final Map<String, List<String>> charges = new HashMap<>();
        final Set<String> closed = new HashSet<>(), requests = new HashSet<>();
        int lost, declined, booked;

        synchronized String book(String reference) throws TimeoutException {
            boolean first = requests.add(reference);
            String[] parts = reference.split("/");
            int order = Integer.parseInt(parts[0].split("-")[2]);
            if (closed.contains(reference) || (first && parts[1].equals("1") && order % 10 == 0)) {
                declined++;
                return null;
            }
            String id = "CH-" + ++booked;
            charges.computeIfAbsent(reference, r -> new ArrayList<>()).add(id);
            if (random.nextDouble() < LOSS) {
                lost++;
                throw new TimeoutException(reference + ": no answer from the bank");
            }
            return id;
        }

        synchronized String queryAndClose(String reference) {
            closed.add(reference);
            List<String> booked = charges.get(reference);
            return booked == null ? null : booked.get(0);
        }
    }

    /** The bank as one call of payOrder sees it: it knows whether it answered. */
    static final class CallBank implements PayOrder.Bank {
        final Books books;
        boolean answered;
        CallBank(Books books) { this.books = books; }
        public String charge(String reference, BigDecimal amount) throws TimeoutException {
            String charge = books.book(reference);
            answered = true;
            return charge;
        }
    }

    static Connection connect() throws SQLException {
        String url = "jdbc:postgresql://" + System.getenv("PGHOST") + ":" + System.getenv("PGPORT") + "/"
                + System.getenv("PGDATABASE") + "?prepareThreshold=0";
        return DriverManager.getConnection(url, System.getenv("PGUSER"), "");
    }

    static int reconcile(Books books) throws SQLException {
        int settled = 0;
        try (Connection c = connect()) {
            c.setAutoCommit(false);                  // pay_stuck's locks last until the commit
            List<String[]> stuck = new ArrayList<>();
            try (ResultSet rs = c.createStatement().executeQuery(
                    "SELECT bizno, attempt FROM pay_stuck('0 seconds', 100000)")) {
                while (rs.next()) stuck.add(new String[] {rs.getString(1), rs.getString(2)});
            }
            for (String[] s : stuck) {
                String charge = books.queryAndClose(s[0] + "/" + s[1]);
                try (PreparedStatement settle = c.prepareStatement(charge == null
                        ? "SELECT pay_fail(?, 'no charge at the bank', ?)" : "SELECT pay_succeed(?, ?, ?)")) {
                    settle.setString(1, s[0]);
                    if (charge == null) settle.setLong(2, Long.parseLong(s[1]));
                    else { settle.setString(2, charge); settle.setLong(3, Long.parseLong(s[1])); }
                    settle.execute();
                }
                settled++;
            }
            c.commit();
        }
        return settled;
    }

    public static void main(String[] args) throws Exception {
        int orders = args.length > 0 ? Integer.parseInt(args[0]) : 240;
        Books books = new Books();
        List<String> errors = new ArrayList<>(), dropped = new ArrayList<>();
        Map<String, Integer> outcomes = new TreeMap<>();
        Set<Integer> paid = new HashSet<>();
        int[] counts = new int[3];                   // calls, settled by payOrder, by the reconciler
        int rounds = 0;
        while (paid.size() < orders && rounds < ROUNDS && errors.isEmpty()) {
            rounds++;
            ConcurrentLinkedQueue<Integer> work = new ConcurrentLinkedQueue<>();
            for (int i = 0; i < orders; i++)
                if (!paid.contains(i)) { work.add(i); work.add(i); }   // twice at once
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                Thread thread = new Thread(() -> {
                    try (Connection conn = connect()) {
                        Integer i;
                        while ((i = work.poll()) != null) {
                            CallBank bank = new CallBank(books);
                            PayOrder.Outcome outcome;
                            try {
                                outcome = PayOrder.payOrder(conn, bank, "ORDER-" + i,
                                        new BigDecimal((10 + i % 90) + ".99"));
                            } catch (Exception e) {
                                synchronized (errors) { errors.add("ORDER-" + i + ": " + e.toString().split("\n")[0]); }
                                continue;
                            }
                            synchronized (errors) {
                                counts[0]++;
                                outcomes.merge(outcome.status(), 1, Integer::sum);
                                if (outcome.status().equals("paid")) paid.add(i);
                                if (bank.answered && outcome.status().equals("pending")) dropped.add("ORDER-" + i);
                                if (bank.answered && outcome.status().equals("paid")) counts[1]++;
                            }
                        }
                    } catch (SQLException e) {
                        synchronized (errors) { errors.add("connect: " + e); }
                    }
                });
                thread.start();
                threads.add(thread);
            }
            for (Thread thread : threads) thread.join();
            counts[2] += reconcile(books);
        }

        Map<String, List<String>> booked = new HashMap<>();   // every charge of an order, any bizNo
        books.charges.forEach((reference, charges) ->
                booked.computeIfAbsent("ORDER-" + reference.split("-")[2], o -> new ArrayList<>()).addAll(charges));
        long twice = booked.values().stream().filter(charges -> charges.size() > 1).count();
        List<String> wrong = new ArrayList<>();
        try (Connection c = connect();
             PreparedStatement find = c.prepareStatement("SELECT status, channel_ref FROM pay_find('SHOP', ?)")) {
            for (int i = 0; i < orders; i++) {
                find.setString(1, "ORDER-" + i);
                List<String> charges = booked.getOrDefault("ORDER-" + i, List.of());
                try (ResultSet rs = find.executeQuery()) {
                    boolean row = rs.next();
                    String status = row ? rs.getString(1) : null, ref = row ? rs.getString(2) : null;
                    if (!"SUCCESS".equals(status) || charges.size() != 1 || !charges.get(0).equals(ref))
                        wrong.add("ORDER-" + i + ": " + status + " " + ref + ", the bank booked " + charges);
                }
            }
        }
        StringBuilder kinds = new StringBuilder();
        outcomes.forEach((k, v) -> kinds.append(kinds.length() == 0 ? "" : ", ").append(k).append(' ').append(v));
        System.out.println("orders " + orders + ", rounds " + rounds + ", calls of payOrder " + counts[0] + ": " + kinds);
        System.out.println("bank: " + books.booked + " charges booked, " + books.lost + " answers lost, "
                + books.declined + " declined");
        System.out.println("payments settled by payOrder " + counts[1] + ", by the reconciler " + counts[2]);
        System.out.println("orders charged twice " + twice);
        System.out.println("orders not SUCCESS under their one charge " + wrong.size());
        System.out.println("charges answered to payOrder and left unsettled " + dropped.size());
        System.out.println("errors thrown by payOrder " + errors.size());
        for (List<String> list : List.of(wrong, dropped, errors))
            list.stream().limit(5).forEach(line -> System.out.println("  " + line));
        System.exit(twice == 0 && wrong.isEmpty() && dropped.isEmpty() && errors.isEmpty() ? 0 : 1);
    }
}
