/*
 * half_open.c
 *	  The half-open-network incident, replayed against a simulated bank.
 *
 * N workers pay M orders.  The bank (schema "bank", test/demo/bank.sql)
 * books a charge and then, with probability --loss, the worker never sees
 * the answer; it declines a share (--decline) of first requests.
 *
 * naive:	 no answer means "try again": charge again until an answer arrives.
 * guarded: pay_open -> pay_claim; PROCEED charges once under reference
 *			 bizNo:attempt and settles with pay_succeed / pay_fail and the
 *			 attempt; IN_PROGRESS never charges but waits while a reconciler
 *			 thread takes pay_stuck rows, asks the bank (query_and_close) and
 *			 settles them; FAILED is retried by pay_claim.
 *
 * Prints one table; exits 1 if the guarded run charged an order twice or
 * left one unsettled, 2 on any other error.
 *
 * Usage: half_open [-w workers] [-o orders] [-l loss] [-d decline] [-s seed]
 *		  [conninfo]
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include <libpq-fe.h>

/* How long a payment stays PROCESSING before the reconciler asks the bank. */
#define STUCK_AFTER		"100 milliseconds"
#define RECONCILE_EVERY_US	20000
#define IN_PROGRESS_WAIT_US 10000

typedef struct Options
{
	int			workers;
	int			orders;
	double		loss;
	double		decline;
	unsigned	seed;
	const char *conninfo;
} Options;

typedef struct Worker
{
	const Options *options;
	int			index;
	bool		guarded;
	unsigned	rng;
	char		run[32];		/* distinguishes this run's references */
	char		error[512];
} Worker;

typedef struct Totals
{
	long		charges;
	long		charged_twice;
	char		over_collected[64];
	long		unsettled;
	double		seconds;
} Totals;

static volatile bool workers_done = false;

static void
die(const char *fmt,...)
{
	va_list		args;

	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
	exit(2);
}

static double
now_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return tv.tv_sec + tv.tv_usec / 1e6;
}

static double
uniform(unsigned *rng)
{
	return rand_r(rng) / ((double) RAND_MAX + 1.0);
}

static PGconn *
connect_or_die(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connection failed: %s", PQerrorMessage(conn));
	return conn;
}

/*
 * Run a statement with text parameters; return its single value (malloc'd,
 * NULL for SQL NULL).  On an error, return NULL and copy the SQLSTATE into
 * sqlstate (if given), or die when the caller expects no error.
 */
static char *
query_value(PGconn *conn, const char *sql, int nparams, const char *const *params,
			char *sqlstate)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	char	   *value = NULL;

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		if (sqlstate == NULL || state == NULL)
			die("%s: %s", sql, PQerrorMessage(conn));
		strncpy(sqlstate, state, 5);
		sqlstate[5] = '\0';
		PQclear(res);
		return NULL;
	}
	if (sqlstate)
		sqlstate[0] = '\0';
	if (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0))
		value = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

static void
exec_or_die(PGconn *conn, const char *sql)
{
	free(query_value(conn, sql, 0, NULL, NULL));
}

/* The amount of order i: distinct per order, with cents. */
static void
order_amount(int i, char *buf, size_t size)
{
	snprintf(buf, size, "%d.%02d", 10 + i % 490, (i * 37) % 100);
}

/* Whether the answer to a charge made it back to the caller. */
static bool
answer_arrives(Worker *w)
{
	return uniform(&w->rng) >= w->options->loss;
}

static void
pay_naively(Worker *w, PGconn *conn, int order)
{
	char		ref[64];
	char		amount[32];
	char		decline[32];
	const char *params[3] = {ref, amount, decline};

	snprintf(ref, sizeof(ref), "NAIVE-%s-%d", w->run, order);
	order_amount(order, amount, sizeof(amount));
	snprintf(decline, sizeof(decline), "%g", w->options->decline);
	for (;;)
	{
		char	   *charge = query_value(conn, "SELECT bank.charge($1, $2, $3)", 3, params, NULL);
		bool		answered = answer_arrives(w);
		bool		charged = charge != NULL;

		free(charge);
		if (answered && charged)
			return;
		/* no answer, or declined: charge again */
	}
}

static void
pay_guarded(Worker *w, PGconn *conn, int order)
{
	char		biz_id[64];
	char		amount[32];
	char		decline[32];
	char		ref[160];
	char		state[6];
	char	   *bizno;

	snprintf(biz_id, sizeof(biz_id), "ORDER-%s-%d", w->run, order);
	order_amount(order, amount, sizeof(amount));
	snprintf(decline, sizeof(decline), "%g", w->options->decline);
	{
		const char *params[2] = {biz_id, amount};

		bizno = query_value(conn, "SELECT pay_open('DEMO', $1, $2::numeric, 'USD')", 2, params, NULL);
	}

	for (;;)
	{
		const char *key[1] = {bizno};
		/* the decision and the attempt it is for, in one round trip */
		char	   *claim = query_value(conn, "SELECT action || ' ' || attempt FROM pay_claim($1)",
										1, key, state);
		char	   *action = claim;
		char	   *attempt;

		if (claim == NULL)
			die("pay_claim(%s) failed with SQLSTATE %s", bizno, state);
		attempt = strchr(claim, ' ');
		*attempt++ = '\0';
		if (strcmp(action, "ALREADY_SUCCEEDED") == 0)
		{
			free(claim);
			break;
		}
		if (strcmp(action, "PROCEED") == 0)
		{
			const char *charge_params[3] = {ref, amount, decline};
			char	   *charge;

			snprintf(ref, sizeof(ref), "%s:%s", bizno, attempt);
			charge = query_value(conn, "SELECT bank.charge($1, $2, $3)", 3, charge_params, NULL);
			if (answer_arrives(w))
			{
				const char *settle[3] = {bizno, charge ? charge : "declined", attempt};

				/* a 23514 or 55000 here means the reconciler settled it: look again */
				free(query_value(conn, charge ? "SELECT pay_succeed($1, $2, $3::int)"
								 : "SELECT pay_fail($1, $2, $3::int)", 3, settle, state));
			}
			free(charge);
		}
		else
			usleep(IN_PROGRESS_WAIT_US);	/* never charge: the reconciler asks the bank */
		free(claim);
	}
	free(bizno);
}

/*
 * The reconciler: every PROCESSING payment older than STUCK_AFTER is asked
 * of the bank, which closes its reference, and settled by the answer.
 */
static void *
reconcile(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = connect_or_die(w->options->conninfo);

	while (!workers_done)
	{
		PGresult   *stuck;

		exec_or_die(conn, "BEGIN");
		stuck = PQexec(conn, "SELECT bizno, attempt FROM pay_stuck('" STUCK_AFTER "', 100)");
		if (PQresultStatus(stuck) != PGRES_TUPLES_OK)
			die("pay_stuck: %s", PQerrorMessage(conn));
		for (int i = 0; i < PQntuples(stuck); i++)
		{
			const char *bizno = PQgetvalue(stuck, i, 0);
			const char *attempt = PQgetvalue(stuck, i, 1);
			char		ref[160];
			const char *query[1] = {ref};
			char	   *charge;

			snprintf(ref, sizeof(ref), "%s:%s", bizno, attempt);
			charge = query_value(conn, "SELECT bank.query_and_close($1)", 1, query, NULL);
			{
				const char *settle[3] = {bizno, charge ? charge : "no charge at the bank", attempt};

				free(query_value(conn, charge ? "SELECT pay_succeed($1, $2, $3::int)"
								 : "SELECT pay_fail($1, $2, $3::int)", 3, settle, NULL));
			}
			free(charge);
		}
		PQclear(stuck);
		exec_or_die(conn, "COMMIT");
		usleep(RECONCILE_EVERY_US);
	}
	PQfinish(conn);
	return NULL;
}

static void *
work(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = connect_or_die(w->options->conninfo);

	for (int order = w->index; order < w->options->orders; order += w->options->workers)
	{
		if (w->guarded)
			pay_guarded(w, conn, order);
		else
			pay_naively(w, conn, order);
	}
	PQfinish(conn);
	return NULL;
}

static long
count(PGconn *conn, const char *sql, const char *run)
{
	const char *params[1] = {run};
	char	   *value = query_value(conn, sql, 1, params, NULL);
	long		result = value ? atol(value) : 0;

	free(value);
	return result;
}

static Totals
run_mode(const Options *options, bool guarded, const char *run)
{
	pthread_t  *threads = calloc(options->workers, sizeof(pthread_t));
	Worker	   *workers = calloc(options->workers + 1, sizeof(Worker));
	pthread_t	reconciler;
	double		started = now_seconds();
	Totals		totals;
	PGconn	   *conn;
	char		pattern[64];
	char	   *money;

	workers_done = false;
	for (int i = 0; i <= options->workers; i++)
	{
		workers[i].options = options;
		workers[i].index = i;
		workers[i].guarded = guarded;
		workers[i].rng = options->seed * 7919u + (unsigned) i + (guarded ? 104729u : 0u);
		snprintf(workers[i].run, sizeof(workers[i].run), "%s", run);
	}
	if (guarded)
		pthread_create(&reconciler, NULL, reconcile, &workers[options->workers]);
	for (int i = 0; i < options->workers; i++)
		pthread_create(&threads[i], NULL, work, &workers[i]);
	for (int i = 0; i < options->workers; i++)
		pthread_join(threads[i], NULL);
	workers_done = true;
	if (guarded)
		pthread_join(reconciler, NULL);
	totals.seconds = now_seconds() - started;

	/* Charges per order: the reference is the order (naive) or bizNo:attempt. */
	conn = connect_or_die(options->conninfo);
	snprintf(pattern, sizeof(pattern), guarded ? "DEMO-ORDER-%s-%%" : "NAIVE-%s-%%", run);
	{
		const char *per_order =
			"WITH per_order AS (SELECT split_part(ref, ':', 1) AS payment, count(*) AS n, min(amount) AS amount "
			"                   FROM bank.charges WHERE ref LIKE $1 GROUP BY 1) ";
		char		sql[1024];
		const char *params[1] = {pattern};

		snprintf(sql, sizeof(sql), "%s SELECT coalesce(sum(n), 0) FROM per_order", per_order);
		totals.charges = count(conn, sql, pattern);
		snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM per_order WHERE n > 1", per_order);
		totals.charged_twice = count(conn, sql, pattern);
		snprintf(sql, sizeof(sql),
				 "%s SELECT to_char(coalesce(sum((n - 1) * amount), 0), 'FM999999990.00') FROM per_order",
				 per_order);
		money = query_value(conn, sql, 1, params, NULL);
		snprintf(totals.over_collected, sizeof(totals.over_collected), "%s", money);
		free(money);
	}
	if (guarded)
	{
		char		biz_like[64];

		snprintf(biz_like, sizeof(biz_like), "ORDER-%s-%%", run);
		totals.unsettled = options->orders -
			count(conn, "SELECT count(*) FROM pay_ledger WHERE biz_id LIKE $1 AND status = 'SUCCESS'",
				  biz_like);
	}
	else
		totals.unsettled = 0;	/* a naive worker stops only on an answered charge */
	PQfinish(conn);
	free(threads);
	free(workers);
	return totals;
}

int
main(int argc, char **argv)
{
	Options		options = {8, 2000, 0.30, 0.05, 42, "dbname=demo"};
	int			opt;
	char		run[32];
	Totals		naive,
				guarded;
	PGconn	   *conn;

	while ((opt = getopt(argc, argv, "w:o:l:d:s:h")) != -1)
	{
		switch (opt)
		{
			case 'w':
				options.workers = atoi(optarg);
				break;
			case 'o':
				options.orders = atoi(optarg);
				break;
			case 'l':
				options.loss = atof(optarg);
				break;
			case 'd':
				options.decline = atof(optarg);
				break;
			case 's':
				options.seed = (unsigned) strtoul(optarg, NULL, 10);
				break;
			default:
				fprintf(stderr, "usage: %s [-w workers] [-o orders] [-l loss] [-d decline] [-s seed] [conninfo]\n",
						argv[0]);
				return 2;
		}
	}
	if (optind < argc)
		options.conninfo = argv[optind];
	if (options.workers < 1 || options.orders < 1 || options.loss < 0 || options.loss >= 1 ||
		options.decline < 0 || options.decline >= 1)
		die("workers and orders must be positive, loss and decline in [0, 1)");

	/* fail early, and plainly, when the extension is not there */
	conn = connect_or_die(options.conninfo);
	exec_or_die(conn, "SELECT 1 FROM pay_ledger LIMIT 0");
	PQfinish(conn);
	snprintf(run, sizeof(run), "%ld", (long) getpid());

	printf("%d workers, %d orders, %.0f%% of answers lost, %.0f%% of first requests declined\n\n",
		   options.workers, options.orders, options.loss * 100, options.decline * 100);
	fflush(stdout);
	naive = run_mode(&options, false, run);
	guarded = run_mode(&options, true, run);

	printf("%-24s %14s %14s\n", "", "naive", "idempotent_pay");
	printf("%-24s %14d %14d\n", "orders", options.orders, options.orders);
	printf("%-24s %14ld %14ld\n", "bank charges", naive.charges, guarded.charges);
	printf("%-24s %14ld %14ld\n", "orders charged twice", naive.charged_twice, guarded.charged_twice);
	printf("%-24s %14s %14s\n", "money over-collected", naive.over_collected, guarded.over_collected);
	printf("%-24s %14ld %14ld\n", "orders not settled", naive.unsettled, guarded.unsettled);
	printf("%-24s %14.1f %14.1f\n", "wall time (s)", naive.seconds, guarded.seconds);

	if (guarded.charged_twice != 0 || guarded.unsettled != 0 ||
		strcmp(guarded.over_collected, "0.00") != 0)
	{
		printf("\nFAILED: the guarded run charged an order twice or left one unsettled\n");
		return 1;
	}
	return 0;
}
