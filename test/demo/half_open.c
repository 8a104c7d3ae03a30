/*
 * half_open.c
 *	  The half-open-network incident, replayed against a simulated bank.
 *
 * N workers pay M orders.  The bank (schema "bank", test/demo/bank.sql)
 * books a charge and then, with probability --loss, the worker never sees
 * the answer; it declines a share (--decline) of first requests.
 *
 * naive:	 no answer means "try again": charge again until an answer arrives.
 * guarded: pay_open -> pay_claim, in autocommit (libpq's way: each
 *			 statement its own transaction), so the claim is committed before
 *			 the bank is called; PROCEED charges once under reference
 *			 bizNo/attempt and settles with pay_succeed / pay_fail and the
 *			 attempt; IN_PROGRESS never charges but waits while a reconciler
 *			 thread takes pay_stuck rows, asks the bank (query_and_close)
 *			 under the same reference and settles them; FAILED is retried by
 *			 pay_claim.
 *
 * Then the refunds phase: every order is asked two refunds of 60% of its
 * amount, under refund keys R1 and R2, by two workers at once, with the
 * same lost answers and declines.  naive: no answer means "refund again".
 * guarded: pay_refund_open -> pay_claim, settled as a payment; the claim
 * that would refund more than was captured is refused (pay_refund_limit).
 *
 * Then the card phase: a quarter as many card payments, each authorized
 * (a hold), captured in two parts (CARD_FIRST_PERCENT, then
 * CARD_SECOND_PERCENT of the hold), the rest voided, and CARD_REFUND_PERCENT
 * of the hold refunded, with the same lost answers and declines.  naive: no
 * answer means "send again", except for the second capture, whose lost
 * answer makes the worker void the rest at once and leave the capture to a
 * retry job that sends it again afterwards.  guarded: pay_open_authorization,
 * pay_capture_open, pay_void_open, pay_refund_open, each step claimed and
 * settled as a payment; the lost second capture is voided and retried the
 * same way, and the claims the authorization's limits or its close refuse
 * are counted.
 *
 * Prints three tables; exits 1 if the guarded run charged an order twice,
 * paid a refund twice (by the bank's books, or by a SECOND_CHARGE that
 * pay_succeed returned), refunded more than was captured or left a payment
 * or a refund unsettled; if its card phase captured beyond an
 * authorization, captured after a void, refunded beyond the captured or
 * left a step unsettled; or if the naive card phase showed no over-capture
 * or no capture after a void (the demo then demonstrates nothing), 2 on
 * any other error.
 *
 * Through a PL/Proxy proxy (idempotent_pay_proxy), conninfo is the proxy
 * database, which has the bank, and each -p names the database of one
 * partition: the workers pay through the proxy, while the reconciler takes
 * pay_stuck rows on each partition directly (their row locks last only as
 * long as its transaction there) and settles them in the same transaction.
 * A line per shard then shows how the payments spread.
 *
 * Usage: half_open [-w workers] [-o orders] [-l loss] [-d decline] [-s seed]
 *		  [-p partition-conninfo ...] [conninfo]
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
#define MAX_PARTITIONS		64

typedef struct Options
{
	int			workers;
	int			orders;
	double		loss;
	double		decline;
	unsigned	seed;
	const char *conninfo;
	/* through a proxy: the databases of its partitions, in partition order */
	int			npartitions;
	const char *partitions[MAX_PARTITIONS];
} Options;

/* What the workers of a run do. */
typedef enum Phase
{
	PAYMENTS,
	REFUNDS,
	CARDS
} Phase;

/* Refunds asked per order, each of REFUND_PERCENT of its amount. */
#define REFUND_KEYS		2
#define REFUND_PERCENT	60

/*
 * The card phase: an authorization per CARD_ORDERS_PER orders, of 100 to
 * 180; captured in two parts, the rest voided, and refunded in part (each
 * a percentage of the hold).
 */
#define CARD_ORDERS_PER		4
#define CARD_FIRST_PERCENT	50
#define CARD_SECOND_PERCENT 30
#define CARD_REFUND_PERCENT 60

/* The steps of a card payment whose claims a rule may refuse. */
typedef enum CardStep
{
	CARD_CAPTURE,
	CARD_VOID,
	CARD_REFUND,
	CARD_HOLD,
	CARD_STEPS
} CardStep;

static const char *const card_step_names[CARD_STEPS] = {"capture", "void", "refund", "hold"};

typedef struct Worker
{
	const Options *options;
	int			index;
	bool		guarded;
	Phase		phase;
	long		refused;		/* refunds the limit refused */
	long		card_refused[CARD_STEPS];	/* card steps whose claim was refused */
	long		second_charges; /* SECOND_CHARGE results of pay_succeed */
	unsigned	rng;
	char		run[32];		/* distinguishes this run's references */
	char		error[512];
} Worker;

typedef struct Totals
{
	long		charges;		/* or refunds */
	long		charged_twice;	/* or refunds paid twice */
	char		over_collected[64];	/* or over-refunded */
	long		over_refunded_orders;
	long		refused;
	long		second_charges;
	long		unsettled;
	double		seconds;
	/* the card phase, read off the bank's books */
	long		authorizations;
	long		captures;
	long		over_captured;	/* authorizations captured beyond their hold */
	char		money_over_captured[64];
	long		captured_after_void;	/* captures booked after the void */
	long		refunded_beyond;	/* authorizations refunded beyond the captured */
	long		voids;
	long		card_refused[CARD_STEPS];
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

/* The amount of each refund asked of order i: REFUND_PERCENT of its amount. */
static void
refund_amount(int i, char *buf, size_t size)
{
	long		cents = (10 + i % 490) * 100L + (i * 37) % 100;
	long		refund = cents * REFUND_PERCENT / 100;

	snprintf(buf, size, "%ld.%02ld", refund / 100, refund % 100);
}

/*
 * Settle attempt of bizno (a payment or a refund) with the bank's answer:
 * pay_succeed under the booking's id, or pay_fail with reason when nothing
 * was booked.  A worker's call may be refused -- 23514 or 55000 when the
 * reconciler settled it first, 40001 when it was changing the row -- and
 * the worker then looks again; the reconciler, which holds the row's lock,
 * is never refused.  A SECOND_CHARGE is counted; any other error or result
 * is fatal.
 */
static void
settle(Worker *w, PGconn *conn, const char *bizno, const char *attempt, const char *booked,
	   const char *reason, bool may_be_refused)
{
	const char *params[3] = {bizno, booked ? booked : reason, attempt};
	char		state[6];
	char	   *result = query_value(conn, booked ? "SELECT pay_succeed($1, $2, $3::int)"
									 : "SELECT pay_fail($1, $2, $3::int)",
									 3, params, may_be_refused ? state : NULL);

	if (result == NULL && may_be_refused && state[0] != '\0')
	{
		if (strcmp(state, "23514") != 0 && strcmp(state, "55000") != 0 &&
			strcmp(state, "40001") != 0)
			die("settling attempt %s of %s failed with SQLSTATE %s", attempt, bizno, state);
		return;
	}
	if (result != NULL && booked && strcmp(result, "SECOND_CHARGE") == 0)
		w->second_charges++;
	else if (result == NULL || strcmp(result, booked ? "SUCCESS" : "FAILED") != 0)
		die("settling attempt %s of %s returned %s", attempt, bizno, result ? result : "NULL");
	free(result);
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
		/*
		 * the decision and the attempt it is for, in one round trip, and
		 * committed when it answers: outside a transaction block
		 */
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

			snprintf(ref, sizeof(ref), "%s/%s", bizno, attempt);
			charge = query_value(conn, "SELECT bank.charge($1, $2, $3)", 3, charge_params, NULL);
			if (answer_arrives(w))
				settle(w, conn, bizno, attempt, charge, "declined", true);
			free(charge);
		}
		else
			usleep(IN_PROGRESS_WAIT_US);	/* never charge: the reconciler asks the bank */
		free(claim);
	}
	free(bizno);
}

static void
refund_naively(Worker *w, PGconn *conn, int order, int key)
{
	char		ref[64];
	char		amount[32];
	char		decline[32];
	const char *params[3] = {ref, amount, decline};

	/* the order's charge reference, then the refund key */
	snprintf(ref, sizeof(ref), "NAIVE-%s-%d:R%d", w->run, order, key);
	refund_amount(order, amount, sizeof(amount));
	snprintf(decline, sizeof(decline), "%g", w->options->decline);
	for (;;)
	{
		char	   *refund = query_value(conn, "SELECT bank.refund($1, $2, $3)", 3, params, NULL);
		bool		answered = answer_arrives(w);
		bool		refunded = refund != NULL;

		free(refund);
		if (answered && refunded)
			return;
		/* no answer, or declined: refund again */
	}
}

/*
 * Refund key R<key> of order: opened (or found again) for the order's
 * payment, claimed and settled like a payment; refused for good when the
 * claim would refund more than was captured.
 */
static void
refund_guarded(Worker *w, PGconn *conn, int order, int key)
{
	char		biz_id[64];
	char		amount[32];
	char		refund_amount_text[32];
	char		refund_key[8];
	char		decline[32];
	char		ref[160];
	char		state[6];
	char	   *bizno;
	char	   *refund;

	snprintf(biz_id, sizeof(biz_id), "ORDER-%s-%d", w->run, order);
	order_amount(order, amount, sizeof(amount));
	refund_amount(order, refund_amount_text, sizeof(refund_amount_text));
	snprintf(refund_key, sizeof(refund_key), "R%d", key);
	snprintf(decline, sizeof(decline), "%g", w->options->decline);
	{
		const char *params[2] = {biz_id, amount};

		bizno = query_value(conn, "SELECT pay_open('DEMO', $1, $2::numeric, 'USD')", 2, params, NULL);
	}
	{
		const char *params[3] = {bizno, refund_key, refund_amount_text};

		refund = query_value(conn, "SELECT pay_refund_open($1, $2, $3::numeric, 'customer return')",
							 3, params, NULL);
	}

	for (;;)
	{
		const char *key_param[1] = {refund};
		char	   *claim = query_value(conn, "SELECT action || ' ' || attempt FROM pay_claim($1)",
										1, key_param, state);
		char	   *action = claim;
		char	   *attempt;

		if (claim == NULL && strcmp(state, "23514") == 0)
		{
			w->refused++;		/* pay_refund_limit: the other refund took it */
			break;
		}
		if (claim == NULL)
			die("pay_claim(%s) failed with SQLSTATE %s", refund, state);
		attempt = strchr(claim, ' ');
		*attempt++ = '\0';
		if (strcmp(action, "ALREADY_SUCCEEDED") == 0)
		{
			free(claim);
			break;
		}
		if (strcmp(action, "PROCEED") == 0)
		{
			const char *refund_params[3] = {ref, refund_amount_text, decline};
			char	   *booked;

			snprintf(ref, sizeof(ref), "%s/%s", refund, attempt);
			booked = query_value(conn, "SELECT bank.refund($1, $2, $3)", 3, refund_params, NULL);
			if (answer_arrives(w))
				settle(w, conn, refund, attempt, booked, "declined", true);
			free(booked);
		}
		else
			usleep(IN_PROGRESS_WAIT_US);
		free(claim);
	}
	free(refund);
	free(bizno);
}

/* percent of the hold of authorization i (100 to 180). */
static void
card_amount(int i, int percent, char *buf, size_t size)
{
	long		cents = (100 + (i % 5) * 20) * 100L * percent / 100;

	snprintf(buf, size, "%ld.%02ld", cents / 100, cents % 100);
}

/*
 * Send a card step to the bank under ref (amount NULL for a void): the
 * booking's id (malloc'd), or NULL when the bank declined.
 */
static char *
card_bank(Worker *w, PGconn *conn, CardStep step, const char *ref, const char *auth,
		  const char *amount)
{
	char		decline[32];
	const char *params[5] = {card_step_names[step], ref, auth, amount, decline};

	snprintf(decline, sizeof(decline), "%g", w->options->decline);
	return query_value(conn, "SELECT bank.card($1, $2, $3, $4::numeric, $5)", 5, params, NULL);
}

/* Send a card step once; whether an answer arrived saying it was booked. */
static bool
card_naively_once(Worker *w, PGconn *conn, CardStep step, const char *ref, const char *auth,
				  const char *amount)
{
	char	   *booked = card_bank(w, conn, step, ref, auth, amount);
	bool		answered = answer_arrives(w);

	free(booked);
	return answered && booked != NULL;
}

/* Send a card step again and again until an answer says it was booked. */
static void
card_naively_until_answered(Worker *w, PGconn *conn, CardStep step, const char *ref,
							const char *auth, const char *amount)
{
	while (!card_naively_once(w, conn, step, ref, auth, amount))
		;
}

/*
 * The naive card payment: every step sent until an answer arrives, but
 * the second capture, whose lost answer makes the worker void the rest at
 * once and leave the capture to a retry job, which sends it again.
 */
static void
card_naively(Worker *w, PGconn *conn, int i)
{
	char		auth[64];
	char		ref[80];
	char		hold[32];
	char		first[32];
	char		second[32];
	char		refund[32];
	bool		second_answered;

	snprintf(auth, sizeof(auth), "NAIVE-CARD-%s-%d", w->run, i);
	card_amount(i, 100, hold, sizeof(hold));
	card_amount(i, CARD_FIRST_PERCENT, first, sizeof(first));
	card_amount(i, CARD_SECOND_PERCENT, second, sizeof(second));
	card_amount(i, CARD_REFUND_PERCENT, refund, sizeof(refund));

	snprintf(ref, sizeof(ref), "%s:H", auth);
	card_naively_until_answered(w, conn, CARD_HOLD, ref, auth, hold);
	snprintf(ref, sizeof(ref), "%s:C1", auth);
	card_naively_until_answered(w, conn, CARD_CAPTURE, ref, auth, first);
	snprintf(ref, sizeof(ref), "%s:C2", auth);
	second_answered = card_naively_once(w, conn, CARD_CAPTURE, ref, auth, second);
	/* the rest released; after a lost answer at once, the retry job later */
	snprintf(ref, sizeof(ref), "%s:V1", auth);
	card_naively_until_answered(w, conn, CARD_VOID, ref, auth, NULL);
	if (!second_answered)
	{
		snprintf(ref, sizeof(ref), "%s:C2", auth);
		card_naively_until_answered(w, conn, CARD_CAPTURE, ref, auth, second);
	}
	snprintf(ref, sizeof(ref), "%s:R1", auth);
	card_naively_until_answered(w, conn, CARD_REFUND, ref, auth, refund);
}

/* What became of a card step card_drive drove. */
typedef enum StepEnd
{
	STEP_SUCCEEDED,
	STEP_REFUSED,				/* its claim was refused: a limit, a close */
	STEP_ANSWER_LOST			/* stop_when_lost: its bank call's answer was lost */
} StepEnd;

/*
 * Drive card step bizno (an authorization's hold, or one of its steps) as
 * a payment: claim it; on PROCEED send it to the bank under bizNo/attempt
 * and settle it with the answer, if one arrives; on IN_PROGRESS wait for
 * the reconciler; until ALREADY_SUCCEEDED or a refusal of the claim (23514
 * or 55000: a limit, the authorization closed), which is counted.  With
 * stop_when_lost, return at the first lost answer.
 */
static StepEnd
card_drive(Worker *w, PGconn *conn, CardStep step, const char *bizno, const char *auth,
		   const char *amount, bool stop_when_lost)
{
	for (;;)
	{
		const char *key[1] = {bizno};
		char		state[6];
		char	   *claim = query_value(conn, "SELECT action || ' ' || attempt FROM pay_claim($1)",
										1, key, state);
		char	   *attempt;

		if (claim == NULL && (strcmp(state, "23514") == 0 || strcmp(state, "55000") == 0))
		{
			w->card_refused[step]++;
			return STEP_REFUSED;
		}
		if (claim == NULL)
			die("pay_claim(%s) failed with SQLSTATE %s", bizno, state);
		attempt = strchr(claim, ' ');
		*attempt++ = '\0';
		if (strcmp(claim, "ALREADY_SUCCEEDED") == 0)
		{
			free(claim);
			return STEP_SUCCEEDED;
		}
		if (strcmp(claim, "PROCEED") == 0)
		{
			char		ref[160];
			char	   *booked;
			bool		answered;

			snprintf(ref, sizeof(ref), "%s/%s", bizno, attempt);
			booked = card_bank(w, conn, step, ref, auth, amount);
			answered = answer_arrives(w);
			if (answered)
				settle(w, conn, bizno, attempt, booked, "declined", true);
			free(booked);
			if (!answered && stop_when_lost)
			{
				free(claim);
				return STEP_ANSWER_LOST;
			}
		}
		else
			usleep(IN_PROGRESS_WAIT_US);	/* never send again: the reconciler asks the bank */
		free(claim);
	}
}

/*
 * The guarded card payment, the naive one's steps through idempotent_pay:
 * the authorization opened and its hold driven; the first capture; the
 * second, not final, and on its lost answer the void at once and the
 * capture's retry after it (which answers IN_PROGRESS until the reconciler
 * settles it, then ALREADY_SUCCEEDED, or is refused: the void closed the
 * authorization); otherwise the void; then the refund.
 */
static void
card_guarded(Worker *w, PGconn *conn, int i)
{
	char		biz_id[64];
	char		hold[32];
	char		first[32];
	char		second[32];
	char		refund[32];
	char	   *auth;
	char	   *capture1;
	char	   *capture2;
	char	   *void_step;
	char	   *refund_step;
	StepEnd		second_end;

	snprintf(biz_id, sizeof(biz_id), "CARD-%s-%d", w->run, i);
	card_amount(i, 100, hold, sizeof(hold));
	card_amount(i, CARD_FIRST_PERCENT, first, sizeof(first));
	card_amount(i, CARD_SECOND_PERCENT, second, sizeof(second));
	card_amount(i, CARD_REFUND_PERCENT, refund, sizeof(refund));
	{
		const char *params[2] = {biz_id, hold};

		auth = query_value(conn, "SELECT pay_open_authorization('DEMO', $1, $2::numeric, 'USD')",
						   2, params, NULL);
	}
	card_drive(w, conn, CARD_HOLD, auth, auth, hold, false);
	{
		const char *params[2] = {auth, first};

		capture1 = query_value(conn, "SELECT pay_capture_open($1, 'C1', $2::numeric, false)",
							   2, params, NULL);
	}
	card_drive(w, conn, CARD_CAPTURE, capture1, auth, first, false);
	{
		const char *params[2] = {auth, second};

		capture2 = query_value(conn, "SELECT pay_capture_open($1, 'C2', $2::numeric, false)",
							   2, params, NULL);
	}
	second_end = card_drive(w, conn, CARD_CAPTURE, capture2, auth, second, true);
	{
		const char *params[1] = {auth};

		void_step = query_value(conn, "SELECT pay_void_open($1, 'V1')", 1, params, NULL);
	}
	card_drive(w, conn, CARD_VOID, void_step, auth, NULL, false);
	if (second_end == STEP_ANSWER_LOST)
		card_drive(w, conn, CARD_CAPTURE, capture2, auth, second, false);
	{
		const char *params[2] = {auth, refund};

		refund_step = query_value(conn,
								  "SELECT pay_refund_open($1, 'R1', $2::numeric, 'customer return')",
								  2, params, NULL);
	}
	card_drive(w, conn, CARD_REFUND, refund_step, auth, refund, false);
	free(refund_step);
	free(void_step);
	free(capture2);
	free(capture1);
	free(auth);
}

/*
 * One pass over one ledger: every PROCESSING payment older than
 * STUCK_AFTER is asked of the bank under the reference its worker charged,
 * bizNo/attempt, which the bank then closes, and settled by the answer, in
 * the transaction that holds its pay_stuck row lock.
 */
static void
reconcile_ledger(Worker *w, PGconn *ledger, PGconn *bank)
{
	PGresult   *stuck;

	exec_or_die(ledger, "BEGIN");
	stuck = PQexec(ledger, "SELECT bizno, attempt FROM pay_stuck('" STUCK_AFTER "', 100)");
	if (PQresultStatus(stuck) != PGRES_TUPLES_OK)
		die("pay_stuck: %s", PQerrorMessage(ledger));
	for (int i = 0; i < PQntuples(stuck); i++)
	{
		const char *bizno = PQgetvalue(stuck, i, 0);
		const char *attempt = PQgetvalue(stuck, i, 1);
		char		ref[160];
		const char *query[1] = {ref};
		char	   *charge;

		snprintf(ref, sizeof(ref), "%s/%s", bizno, attempt);
		charge = query_value(bank, "SELECT bank.query_and_close($1)", 1, query, NULL);
		settle(w, ledger, bizno, attempt, charge, "no charge at the bank", false);
		free(charge);
	}
	PQclear(stuck);
	exec_or_die(ledger, "COMMIT");
}

/*
 * The reconciler: passes over the ledger -- over each partition's, through
 * a proxy -- until the workers are done.
 */
static void *
reconcile(void *arg)
{
	Worker	   *w = arg;
	const Options *options = w->options;
	PGconn	   *bank = connect_or_die(options->conninfo);
	int			nledgers = options->npartitions > 0 ? options->npartitions : 1;
	PGconn	   *ledgers[MAX_PARTITIONS];

	for (int i = 0; i < nledgers; i++)
		ledgers[i] = options->npartitions > 0 ? connect_or_die(options->partitions[i]) : bank;
	while (!workers_done)
	{
		for (int i = 0; i < nledgers; i++)
			reconcile_ledger(w, ledgers[i], bank);
		usleep(RECONCILE_EVERY_US);
	}
	for (int i = 0; i < options->npartitions; i++)
		PQfinish(ledgers[i]);
	PQfinish(bank);
	return NULL;
}

static void *
work(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = connect_or_die(w->options->conninfo);

	if (w->phase == PAYMENTS)
		for (int order = w->index; order < w->options->orders; order += w->options->workers)
		{
			if (w->guarded)
				pay_guarded(w, conn, order);
			else
				pay_naively(w, conn, order);
		}
	else if (w->phase == CARDS)
		for (int i = w->index; i < w->options->orders / CARD_ORDERS_PER; i += w->options->workers)
		{
			if (w->guarded)
				card_guarded(w, conn, i);
			else
				card_naively(w, conn, i);
		}
	else
		/* the refunds of one order go to neighbouring workers, at once */
		for (int task = w->index; task < w->options->orders * REFUND_KEYS; task += w->options->workers)
		{
			if (w->guarded)
				refund_guarded(w, conn, task / REFUND_KEYS, task % REFUND_KEYS + 1);
			else
				refund_naively(w, conn, task / REFUND_KEYS, task % REFUND_KEYS + 1);
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

/*
 * The orders of a run (biz_id LIKE $1) a ledger holds as SUCCESS, and their
 * refunds; the authorizations of its card phase not held, and their steps
 * still PROCESSING.
 */
#define SETTLED_ORDERS \
	"SELECT count(*) FROM pay_ledger WHERE biz_id LIKE $1 AND status = 'SUCCESS'"
#define SETTLED_REFUNDS \
	"SELECT count(*) FROM pay_ledger AS r JOIN pay_ledger AS p ON p.bizno = r.parent " \
	"WHERE p.biz_id LIKE $1 AND r.status = 'SUCCESS'"
#define UNSETTLED_CARDS \
	"SELECT count(*) FROM pay_ledger AS l WHERE " \
	"(l.biz_id LIKE $1 AND l.status <> 'SUCCESS') OR " \
	"(l.status = 'PROCESSING' AND l.parent IN (SELECT bizno FROM pay_ledger WHERE biz_id LIKE $1))"

/* A count over the ledger: conn's, or every partition's through a proxy. */
static long
count_ledgers(const Options *options, PGconn *conn, const char *sql, const char *param)
{
	long		total = 0;

	if (options->npartitions == 0)
		return count(conn, sql, param);
	for (int i = 0; i < options->npartitions; i++)
	{
		PGconn	   *partition = connect_or_die(options->partitions[i]);

		total += count(partition, sql, param);
		PQfinish(partition);
	}
	return total;
}

/*
 * Through a proxy: a line per shard (a server, named by its node id) with
 * the guarded run's payments on each of its partitions.
 */
static void
print_spread(const Options *options, const char *run)
{
	char		biz_like[64];
	int			node_of[MAX_PARTITIONS];
	long		settled_on[MAX_PARTITIONS];
	bool		shown[MAX_PARTITIONS] = {false};

	snprintf(biz_like, sizeof(biz_like), "ORDER-%s-%%", run);
	for (int i = 0; i < options->npartitions; i++)
	{
		PGconn	   *partition = connect_or_die(options->partitions[i]);
		char	   *node = query_value(partition, "SELECT current_setting('idempotent_pay.node_id')",
									   0, NULL, NULL);

		node_of[i] = atoi(node);
		settled_on[i] = count(partition, SETTLED_ORDERS, biz_like);
		free(node);
		PQfinish(partition);
	}

	printf("\npayments per shard, through the proxy (%d partitions):\n", options->npartitions);
	for (int i = 0; i < options->npartitions; i++)
	{
		char		detail[1024] = "";
		size_t		used = 0;
		long		total = 0;

		if (shown[i])
			continue;
		for (int j = i; j < options->npartitions; j++)
		{
			if (node_of[j] != node_of[i])
				continue;
			shown[j] = true;
			total += settled_on[j];
			if (used < sizeof(detail))
				used += snprintf(detail + used, sizeof(detail) - used, "%spartition %d: %ld",
								 used > 0 ? ", " : "", j, settled_on[j]);
		}
		printf("  shard with node_id %-4d %6ld payments (%s)\n", node_of[i], total, detail);
	}
}

/*
 * Refunds per refund, and per order against what the bank charged it, all
 * read off the bank's references: $1 is the pattern of the run's.
 */
static void
count_refunds(PGconn *conn, bool guarded, const char *pattern, Totals *totals)
{
	const char *params[1] = {pattern};
	/* refunds(payment, refund, amount), charged(payment, captured) */
	const char *naive_refunds =
		"WITH refunds AS (SELECT split_part(ref, ':', 1) AS payment, split_part(ref, ':', 2) AS refund, amount "
		"                 FROM bank.refunds WHERE ref LIKE $1), "
		"     charged AS (SELECT ref AS payment, sum(amount) AS captured FROM bank.charges "
		"                 WHERE ref LIKE $1 GROUP BY 1) ";
	/* bizNo/attempt; a refund's bizNo is issued for its order's biz_id */
	const char *guarded_refunds =
		"WITH refunds AS (SELECT (pay_bizno_parse(split_part(ref, '/', 1))).biz_id AS payment, "
		"                        split_part(ref, '/', 1) AS refund, amount "
		"                 FROM bank.refunds WHERE ref LIKE $1), "
		"     charged AS (SELECT (pay_bizno_parse(split_part(ref, '/', 1))).biz_id AS payment, "
		"                        sum(amount) AS captured "
		"                 FROM bank.charges WHERE ref LIKE $1 GROUP BY 1) ";
	const char *with = guarded ? guarded_refunds : naive_refunds;
	const char *over =
		"per_order AS (SELECT r.payment, sum(r.amount) - min(c.captured) AS over "
		"              FROM refunds AS r JOIN charged AS c USING (payment) GROUP BY 1) ";
	char		sql[2048];
	char	   *money;

	snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM refunds", with);
	totals->charges = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM (SELECT FROM refunds GROUP BY payment, refund "
			 "HAVING count(*) > 1) AS twice", with);
	totals->charged_twice = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s, %s SELECT count(*) FROM per_order WHERE over > 0", with, over);
	totals->over_refunded_orders = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s, %s SELECT to_char(coalesce(sum(over) FILTER (WHERE over > 0), 0), "
			 "'FM999999990.00') FROM per_order", with, over);
	money = query_value(conn, sql, 1, params, NULL);
	snprintf(totals->over_collected, sizeof(totals->over_collected), "%s", money);
	free(money);
}

/*
 * The card phase off the bank's books, per authorization (bank.card's
 * auth: the naive run's reference, the guarded run's bizNo; $1 the pattern
 * of the run's): its hold, what was captured, and in which order the bank
 * took the captures and the void.
 */
static void
count_cards(PGconn *conn, const char *pattern, Totals *totals)
{
	const char *params[1] = {pattern};
	const char *per_auth =
		"WITH books AS (SELECT * FROM bank.card WHERE auth LIKE $1), "
		"     voided AS (SELECT auth, min(id) AS void_id FROM books WHERE kind = 'void' GROUP BY 1), "
		"     per_auth AS (SELECT b.auth, "
		"                         min(b.amount) FILTER (WHERE b.kind = 'hold') AS held, "
		"                         coalesce(sum(b.amount) FILTER (WHERE b.kind = 'capture'), 0) AS captured, "
		"                         coalesce(sum(b.amount) FILTER (WHERE b.kind = 'refund'), 0) AS refunded, "
		"                         count(*) FILTER (WHERE b.kind = 'capture') AS captures, "
		"                         count(*) FILTER (WHERE b.kind = 'void') AS voids, "
		"                         count(*) FILTER (WHERE b.kind = 'capture' AND b.id > v.void_id) AS after_void "
		"                  FROM books AS b LEFT JOIN voided AS v USING (auth) GROUP BY b.auth) ";
	char		sql[2048];
	char	   *money;

	snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM per_auth", per_auth);
	totals->authorizations = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT coalesce(sum(captures), 0) FROM per_auth", per_auth);
	totals->captures = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM per_auth WHERE captured > held", per_auth);
	totals->over_captured = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT coalesce(sum(after_void), 0) FROM per_auth", per_auth);
	totals->captured_after_void = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT count(*) FROM per_auth WHERE refunded > captured", per_auth);
	totals->refunded_beyond = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT coalesce(sum(voids), 0) FROM per_auth", per_auth);
	totals->voids = count(conn, sql, pattern);
	snprintf(sql, sizeof(sql), "%s SELECT to_char(coalesce(sum(captured - held) FILTER (WHERE captured > held), 0), "
			 "'FM999999990.00') FROM per_auth", per_auth);
	money = query_value(conn, sql, 1, params, NULL);
	snprintf(totals->money_over_captured, sizeof(totals->money_over_captured), "%s", money);
	free(money);
}

static Totals
run_mode(const Options *options, bool guarded, Phase phase, const char *run)
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
		workers[i].phase = phase;
		workers[i].rng = options->seed * 7919u + (unsigned) i + (guarded ? 104729u : 0u);
		snprintf(workers[i].run, sizeof(workers[i].run), "%s", run);
	}
	if (guarded)
		pthread_create(&reconciler, NULL, reconcile, &workers[options->workers]);
	for (int i = 0; i < options->workers; i++)
		pthread_create(&threads[i], NULL, work, &workers[i]);
	memset(&totals, 0, sizeof(totals));
	for (int i = 0; i < options->workers; i++)
	{
		pthread_join(threads[i], NULL);
		totals.refused += workers[i].refused;
		for (int step = 0; step < CARD_STEPS; step++)
			totals.card_refused[step] += workers[i].card_refused[step];
		totals.second_charges += workers[i].second_charges;
	}
	workers_done = true;
	if (guarded)
	{
		pthread_join(reconciler, NULL);
		totals.second_charges += workers[options->workers].second_charges;
	}
	totals.seconds = now_seconds() - started;

	/* Charges per order: the reference is the order (naive) or bizNo/attempt. */
	conn = connect_or_die(options->conninfo);
	if (phase == CARDS)
		snprintf(pattern, sizeof(pattern), guarded ? "DEMO-CARD-%s-%%" : "NAIVE-CARD-%s-%%", run);
	else
		snprintf(pattern, sizeof(pattern), guarded ? "DEMO-ORDER-%s-%%" : "NAIVE-%s-%%", run);
	if (phase == CARDS)
		count_cards(conn, pattern, &totals);
	else if (phase == REFUNDS)
		count_refunds(conn, guarded, pattern, &totals);
	else
	{
		const char *per_order =
			"WITH per_order AS (SELECT split_part(ref, '/', 1) AS payment, count(*) AS n, min(amount) AS amount "
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

		snprintf(biz_like, sizeof(biz_like), phase == CARDS ? "CARD-%s-%%" : "ORDER-%s-%%", run);
		/* every order is paid; every refund asked is paid or refused */
		if (phase == CARDS)
			totals.unsettled = count_ledgers(options, conn, UNSETTLED_CARDS, biz_like);
		else if (phase == PAYMENTS)
			totals.unsettled = options->orders - count_ledgers(options, conn, SETTLED_ORDERS, biz_like);
		else
			totals.unsettled = (long) options->orders * REFUND_KEYS - totals.refused -
				count_ledgers(options, conn, SETTLED_REFUNDS, biz_like);
	}
	else
		totals.unsettled = 0;	/* a naive worker stops only on an answered request */
	PQfinish(conn);
	free(threads);
	free(workers);
	return totals;
}

int
main(int argc, char **argv)
{
	Options		options = {8, 2000, 0.30, 0.05, 42, "dbname=demo", 0, {NULL}};
	int			opt;
	char		run[32];
	Totals		naive,
				guarded,
				naive_refunds,
				guarded_refunds,
				naive_cards,
				guarded_cards;
	PGconn	   *conn;
	bool		cards;

	while ((opt = getopt(argc, argv, "w:o:l:d:s:p:h")) != -1)
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
			case 'p':
				if (options.npartitions == MAX_PARTITIONS)
					die("at most %d partitions", MAX_PARTITIONS);
				options.partitions[options.npartitions++] = optarg;
				break;
			default:
				fprintf(stderr, "usage: %s [-w workers] [-o orders] [-l loss] [-d decline] [-s seed] "
						"[-p partition-conninfo ...] [conninfo]\n", argv[0]);
				return 2;
		}
	}
	if (optind < argc)
		options.conninfo = argv[optind];
	if (options.workers < 1 || options.orders < 1 || options.loss < 0 || options.loss >= 1 ||
		options.decline < 0 || options.decline >= 1)
		die("workers and orders must be positive, loss and decline in [0, 1)");

	/* fail early, and plainly, when the extension (or the proxy) is not there */
	conn = connect_or_die(options.conninfo);
	exec_or_die(conn, options.npartitions > 0 ? "SELECT pay_partition_count()"
				: "SELECT 1 FROM pay_ledger LIMIT 0");
	/* the card phase needs the card flow (through a proxy: its version's) */
	{
		char	   *found = query_value(conn, "SELECT to_regproc('pay_capture_open') IS NOT NULL",
										0, NULL, NULL);

		cards = strcmp(found, "t") == 0;
		free(found);
	}
	if (!cards && options.npartitions == 0)
		die("this database has no pay_capture_open: the demo needs idempotent_pay 1.4");
	PQfinish(conn);
	for (int i = 0; i < options.npartitions; i++)
	{
		conn = connect_or_die(options.partitions[i]);
		exec_or_die(conn, "SELECT 1 FROM pay_ledger LIMIT 0");
		PQfinish(conn);
	}
	snprintf(run, sizeof(run), "%ld", (long) getpid());

	printf("%d workers, %d orders, %.0f%% of answers lost, %.0f%% of first requests declined%s\n\n",
		   options.workers, options.orders, options.loss * 100, options.decline * 100,
		   options.npartitions > 0 ? ", through a PL/Proxy proxy" : "");
	fflush(stdout);
	naive = run_mode(&options, false, PAYMENTS, run);
	guarded = run_mode(&options, true, PAYMENTS, run);
	naive_refunds = run_mode(&options, false, REFUNDS, run);
	guarded_refunds = run_mode(&options, true, REFUNDS, run);
	if (cards)
	{
		naive_cards = run_mode(&options, false, CARDS, run);
		guarded_cards = run_mode(&options, true, CARDS, run);
	}

	printf("%-24s %14s %14s\n", "", "naive", "idempotent_pay");
	printf("%-24s %14d %14d\n", "orders", options.orders, options.orders);
	printf("%-24s %14ld %14ld\n", "bank charges", naive.charges, guarded.charges);
	printf("%-24s %14ld %14ld\n", "orders charged twice", naive.charged_twice, guarded.charged_twice);
	printf("%-24s %14s %14s\n", "money over-collected", naive.over_collected, guarded.over_collected);
	printf("%-24s %14ld %14ld\n", "orders not settled", naive.unsettled, guarded.unsettled);
	printf("%-24s %14.1f %14.1f\n", "wall time (s)", naive.seconds, guarded.seconds);
	if (options.npartitions > 0)
		print_spread(&options, run);

	printf("\nrefunds: %d per order, %d%% of its amount each, asked at once\n\n",
		   REFUND_KEYS, REFUND_PERCENT);
	printf("%-28s %14s %14s\n", "", "naive", "idempotent_pay");
	printf("%-28s %14d %14d\n", "refunds asked", options.orders * REFUND_KEYS,
		   options.orders * REFUND_KEYS);
	printf("%-28s %14ld %14ld\n", "bank refunds", naive_refunds.charges, guarded_refunds.charges);
	printf("%-28s %14ld %14ld\n", "refunds paid twice", naive_refunds.charged_twice,
		   guarded_refunds.charged_twice);
	printf("%-28s %14ld %14ld\n", "orders over-refunded", naive_refunds.over_refunded_orders,
		   guarded_refunds.over_refunded_orders);
	printf("%-28s %14s %14s\n", "money over-refunded", naive_refunds.over_collected,
		   guarded_refunds.over_collected);
	printf("%-28s %14s %14ld\n", "refused: over the capture", "-", guarded_refunds.refused);
	printf("%-28s %14ld %14ld\n", "refunds not settled", naive_refunds.unsettled,
		   guarded_refunds.unsettled);
	printf("%-28s %14.1f %14.1f\n", "wall time (s)", naive_refunds.seconds, guarded_refunds.seconds);

	if (cards)
	{
		printf("\ncard payments: %d authorizations of 100 to 180, captured in two parts (%d%% and %d%% "
			   "of the hold), the rest voided, %d%% refunded; a lost answer to the second capture "
			   "voids at once and leaves the capture to a retry\n\n",
			   options.orders / CARD_ORDERS_PER, CARD_FIRST_PERCENT, CARD_SECOND_PERCENT,
			   CARD_REFUND_PERCENT);
		printf("%-32s %14s %14s\n", "", "naive", "idempotent_pay");
		printf("%-32s %14ld %14ld\n", "authorizations", naive_cards.authorizations,
			   guarded_cards.authorizations);
		printf("%-32s %14ld %14ld\n", "bank captures", naive_cards.captures, guarded_cards.captures);
		printf("%-32s %14ld %14ld\n", "bank voids", naive_cards.voids, guarded_cards.voids);
		printf("%-32s %14ld %14ld\n", "over-captures", naive_cards.over_captured,
			   guarded_cards.over_captured);
		printf("%-32s %14s %14s\n", "money over-captured", naive_cards.money_over_captured,
			   guarded_cards.money_over_captured);
		printf("%-32s %14ld %14ld\n", "captures after a void", naive_cards.captured_after_void,
			   guarded_cards.captured_after_void);
		printf("%-32s %14ld %14ld\n", "refunds beyond the captured", naive_cards.refunded_beyond,
			   guarded_cards.refunded_beyond);
		printf("%-32s %14s %14ld\n", "refused: captures", "-",
			   guarded_cards.card_refused[CARD_CAPTURE]);
		printf("%-32s %14s %14ld\n", "refused: voids", "-", guarded_cards.card_refused[CARD_VOID]);
		printf("%-32s %14s %14ld\n", "refused: refunds", "-", guarded_cards.card_refused[CARD_REFUND]);
		printf("%-32s %14ld %14ld\n", "steps not settled", naive_cards.unsettled,
			   guarded_cards.unsettled);
		printf("%-32s %14.1f %14.1f\n", "wall time (s)", naive_cards.seconds, guarded_cards.seconds);
	}
	else
		printf("\ncard payments: skipped, the proxy has no pay_capture_open\n");

	if (guarded.charged_twice != 0 || guarded.second_charges != 0 || guarded.unsettled != 0 ||
		strcmp(guarded.over_collected, "0.00") != 0)
	{
		printf("\nFAILED: the guarded run charged an order twice (%ld second charges reported) "
			   "or left one unsettled\n", guarded.second_charges);
		return 1;
	}
	if (guarded_refunds.charged_twice != 0 || guarded_refunds.second_charges != 0 ||
		guarded_refunds.over_refunded_orders != 0 || guarded_refunds.unsettled != 0)
	{
		printf("\nFAILED: the guarded run paid a refund twice (%ld second charges reported), "
			   "refunded more than was charged, or left a refund unsettled\n",
			   guarded_refunds.second_charges);
		return 1;
	}
	if (cards && (guarded_cards.over_captured != 0 || guarded_cards.captured_after_void != 0 ||
				  guarded_cards.refunded_beyond != 0 || guarded_cards.unsettled != 0))
	{
		printf("\nFAILED: the guarded card payments captured beyond an authorization, captured after "
			   "a void, refunded beyond the captured or left a step unsettled\n");
		return 1;
	}
	if (cards && (naive_cards.over_captured == 0 || naive_cards.captured_after_void == 0))
	{
		printf("\nFAILED: the naive card payments showed no over-capture or no capture after a void: "
			   "the demo shows too little (more orders, or more loss)\n");
		return 1;
	}
	return 0;
}
