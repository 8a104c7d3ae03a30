# Logical replication of pay_ledger and pay_journal to a subscriber, through
# the publication the archive needs (below), FOR ALL TABLES WITH
# (publish_via_partition_root = true): payments made before the
# subscription (initial table sync) and after it (streaming)
# -- successes, failures, automatic retries, a reset with a note,
# pay_transition, amount and currency changes while INIT or FAILED, a raw
# DELETE of an INIT payment, a DBA's manual fix with a note, a rolled-back
# payment -- arrive identical row for row, ledger and journal; the journal
# is not doubled (the ledger's journal and bookkeeping triggers do not fire
# under the apply worker's session_replication_role = replica, while the
# guards, ENABLE ALWAYS, let every replicated step through); pay_verify() is
# empty on the subscriber.  On the subscriber, raw illegal writes are still
# refused as on any node, and replication goes on after them.
#
# PostgreSQL 15 does not replicate sequences: the subscriber's
# pay_journal_seq_seq has not moved.  A subscriber taken into service
# (subscription disabled) that pays before setting it collides with the
# replicated journal seq values; after
#   SELECT setval('pay_journal_seq_seq', (SELECT max(seq) FROM pay_journal))
# it pays, settles a payment left PROCESSING on the publisher, and answers
# ALREADY_SUCCEEDED for one paid there.
#
# Retention (in a database of its own): pay_archive on the publisher reaches
# the subscriber -- its archive's rows, published as rows of the partitioned
# tables, land in the subscriber's default partitions, and the ledger's and
# journal's deletions of the same transaction pass its guard -- and
# replication goes on; the subscriber's ledger, archive, pay_archive_keys
# and pay_archive_verify are the publisher's.  Taken into service (the
# subscription dropped), the subscriber answers late retries of archived
# payments from its archive or refuses them, never charging one again.  A
# subscription to a publication of pay_ledger and pay_journal alone stops
# at the first archive: the apply of the journal's deletion is refused.
use strict;
use warnings;

use File::Basename;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $publisher = PostgreSQL::Test::Cluster->new('publisher');
$publisher->init(allows_streaming => 'logical');
# The publisher's payments change amounts while INIT or FAILED, journaled:
# since 1.4 that takes the operator's idempotent_pay.parameter_change = allow.
$publisher->append_conf('postgresql.conf',
	"idempotent_pay.node_id = 1\nidempotent_pay.parameter_change = allow\n");
# the payments here use keys of their own, keys of another system: accepted
$publisher->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$publisher->start;

# Its own node id, so bizNos it issues once in service never come from the
# publisher's space.
my $subscriber = PostgreSQL::Test::Cluster->new('subscriber');
$subscriber->init;
$subscriber->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$subscriber->append_conf('postgresql.conf', "idempotent_pay.node_id = 2\n");
$subscriber->start;

$_->safe_psql('postgres', 'CREATE EXTENSION idempotent_pay') for $publisher, $subscriber;

# Before the subscription: reaches the subscriber by the initial table sync.
$publisher->safe_psql(
	'postgres', q{
	SELECT pay_begin('L-SUCCESS', 10, 'EUR'), pay_succeed('L-SUCCESS', 'BANK-1', 1);
	SELECT pay_begin('L-FAILED', 20, 'EUR'), pay_fail('L-FAILED', 'declined', 1);
	SELECT pay_begin('L-PROCESSING', 30, 'EUR');
	SELECT pay_begin('L-RETRIED', 40, 'EUR'), pay_fail('L-RETRIED', 'timeout', 1);
	SELECT pay_begin('L-RETRIED'), pay_succeed('L-RETRIED', 'BANK-2', 2);
	SELECT pay_begin('L-RESET', 50, 'EUR'), pay_fail('L-RESET', 'declined', 1);
	SELECT pay_reset('L-RESET', 'customer called');
	SELECT pay_begin('L-FIX', 70, 'EUR'), pay_fail('L-FIX', 'bank down', 1);
	SELECT pay_begin('L-LEFT', 80, 'EUR');
	SELECT pay_open('SHOP', 'ORDER-1', 60, 'EUR');
	SELECT pay_open('SHOP', 'ORDER-1', 61, 'EUR');
});
my $order_1 = $publisher->safe_psql('postgres', q{SELECT pay_open('SHOP', 'ORDER-1', 61, 'EUR')});

$publisher->safe_psql('postgres',
	'CREATE PUBLICATION pay FOR ALL TABLES WITH (publish_via_partition_root = true)');
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION pay CONNECTION '" . $publisher->connstr . " dbname=postgres' PUBLICATION pay");
$subscriber->wait_for_subscription_sync($publisher, 'pay');

# The ledger and the journal as text, row for row, and the journal's size.
sub ledger
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT string_agg(l::text, E'\n' ORDER BY l.bizno) FROM pay_ledger AS l});
}

sub journal
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		q{SELECT string_agg(j::text, E'\n' ORDER BY j.seq) FROM pay_journal AS j});
}

sub journal_rows
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT count(*) FROM pay_journal');
}

sub same_on_both
{
	my ($label) = @_;
	is(ledger($subscriber), ledger($publisher), "$label: the ledger is identical row for row");
	is(journal($subscriber), journal($publisher), "$label: the journal is identical row for row");
	is(journal_rows($subscriber), journal_rows($publisher),
		"$label: the journal is not doubled (" . journal_rows($publisher) . ' rows on each)');
	is($subscriber->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'),
		0, "$label: pay_verify() is empty on the subscriber");
}

same_on_both('initial sync');

# After the subscription: streamed by the apply worker.
my $order_2 = $publisher->safe_psql('postgres', q{SELECT pay_open('SHOP', 'ORDER-2', 90, 'EUR')});
$publisher->safe_psql(
	'postgres', qq{
	-- new payments, a success and a failure
	SELECT pay_begin('S-SUCCESS', 11, 'EUR'), pay_succeed('S-SUCCESS', 'BANK-3', 1);
	SELECT pay_begin('S-FAILED', 12, 'EUR'), pay_fail('S-FAILED', 'declined', 1);
	-- rows from the initial sync move on
	SELECT pay_succeed('L-PROCESSING', 'BANK-4', 1);
	SELECT pay_begin('L-RESET'), pay_succeed('L-RESET', 'BANK-5', 2);
	-- an automatic retry of a FAILED payment with a new amount
	SELECT pay_begin('L-FAILED', 25, 'EUR');
	SELECT pay_fail('L-FAILED', 'declined again', 2);
	-- and another, with a new currency too
	SELECT pay_begin('L-FAILED', 26, 'USD'), pay_succeed('L-FAILED', 'BANK-6', 3);
	-- a reset with a note, then the retry
	SELECT pay_reset('S-FAILED', 'customer called again');
	SELECT pay_begin('S-FAILED'), pay_succeed('S-FAILED', 'BANK-7', 2);
	-- pay_open again with another amount and currency while INIT
	SELECT pay_open('SHOP', 'ORDER-1', 62, 'USD');
	-- pay_transition, then the bank's reference of the phone payment: since
	-- 1.3 a payment enters SUCCESS only with its channel_ref, which
	-- pay_transition cannot give (23514 pay_success_reference)
	SELECT pay_transition('$order_2', 'PROCESSING', 'started by phone');
	SELECT pay_succeed('$order_2', 'PHONE-1', 1);
	-- a raw DELETE of INIT payments: one synced, one streamed
	DELETE FROM pay_ledger WHERE bizno = '$order_1';
	INSERT INTO pay_ledger (bizno, status, amount, currency) VALUES ('S-DELETED', 'INIT', 5, 'EUR');
	DELETE FROM pay_ledger WHERE bizno = 'S-DELETED';
	-- a DBA's manual fix of a FAILED payment
	UPDATE pay_ledger SET status = 'INIT', note = 'ticket 1' WHERE bizno = 'L-FIX';
	-- several payments in one transaction, and one rolled back (claims the
	-- test commits or rolls back on purpose, so they may run there)
	SET idempotent_pay.claim_in_transaction = allow;
	BEGIN;
	SELECT pay_begin('S-TX-1', 13, 'EUR'), pay_succeed('S-TX-1', 'BANK-TX-1', 1);
	SELECT pay_begin('S-TX-2', 14, 'EUR'), pay_fail('S-TX-2', 'declined', 1);
	COMMIT;
	BEGIN;
	SELECT pay_begin('S-ROLLED-BACK', 15, 'EUR');
	ROLLBACK;
});
$publisher->wait_for_catchup('pay');

same_on_both('streaming');

is( $subscriber->safe_psql(
		'postgres', q{SELECT status || ' ' || note FROM pay_ledger WHERE bizno = 'L-FIX'}),
	'INIT ticket 1', "the DBA's fix and its note arrived");
is( $subscriber->safe_psql(
		'postgres', q{SELECT string_agg(coalesce(from_status::text, '-') || '>' || to_status || ' '
		              || amount || ' ' || currency, ', ' ORDER BY seq)
		              FROM pay_journal WHERE bizno = 'L-FAILED'}),
	'->PROCESSING 20 EUR, PROCESSING>FAILED 20 EUR, '
	  . 'FAILED>FAILED 25 EUR, FAILED>INIT 25 EUR, INIT>PROCESSING 25 EUR, PROCESSING>FAILED 25 EUR, '
	  . 'FAILED>FAILED 26 USD, FAILED>INIT 26 USD, INIT>PROCESSING 26 USD, PROCESSING>SUCCESS 26 USD',
	'the retries with new amounts arrived with their journal, once');
is( $subscriber->safe_psql(
		'postgres', qq{SELECT count(*) FROM pay_ledger WHERE bizno IN ('$order_1', 'S-DELETED', 'S-ROLLED-BACK')}),
	0, 'the deleted payments and the rolled-back one are not on the subscriber');
is( $subscriber->safe_psql(
		'postgres', qq{SELECT count(*) > 0 FROM pay_journal WHERE bizno IN ('$order_1', 'S-DELETED')}),
	't', 'the journal of the deleted payments stays');
is( $subscriber->safe_psql(
		'postgres', q{SELECT string_agg(table_name || '.' || trigger_name || ' ' || enabled, ', '
		              ORDER BY table_name::text, trigger_name) FROM pay_guards}),
	join(', ', grep { !/^#/ } split(/\n/, slurp_file(dirname(__FILE__) . '/extension_guards.txt'))),
	'every guard on the subscriber fires always, the archive\'s too');

my $log = slurp_file($subscriber->logfile);
unlike($log, qr/processing remote data|exited with exit code [1-9]|terminated by signal/,
	'no replication worker failed on the subscriber');

# On the subscriber, raw illegal writes are refused as on any node.
my $journal_before = journal($subscriber);
my ($ret, $stdout, $stderr) =
  $subscriber->psql('postgres', q{UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'L-SUCCESS'});
like($stderr, qr/illegal payment status transition from SUCCESS to INIT/,
	'subscriber: SUCCESS -> INIT is refused');
($ret, $stdout, $stderr) =
  $subscriber->psql('postgres', q{UPDATE pay_ledger SET amount = 1 WHERE bizno = 'L-PROCESSING'});
like($stderr, qr/frozen/, 'subscriber: the amount of a SUCCESS payment is frozen');
($ret, $stdout, $stderr) =
  $subscriber->psql('postgres', q{DELETE FROM pay_ledger WHERE bizno = 'L-SUCCESS'});
like($stderr, qr/DELETE is refused on table "pay_ledger"/, 'subscriber: a SUCCESS payment is not deleted');
($ret, $stdout, $stderr) =
  $subscriber->psql('postgres', q{INSERT INTO pay_ledger (bizno, status) VALUES ('X', 'SUCCESS')});
like($stderr, qr/illegal payment status transition from \(new row\) to SUCCESS/,
	'subscriber: no row planted in SUCCESS');
($ret, $stdout, $stderr) = $subscriber->psql('postgres', q{DELETE FROM pay_journal});
like($stderr, qr/DELETE is refused on table "pay_journal"/, 'subscriber: the journal is append-only');
($ret, $stdout, $stderr) = $subscriber->psql('postgres', q{TRUNCATE pay_ledger});
like($stderr, qr/TRUNCATE is refused/, 'subscriber: no TRUNCATE of the ledger');
is(journal($subscriber), $journal_before, 'subscriber: the refusals left the journal untouched');

# Replication goes on after the refusals.
$publisher->safe_psql('postgres',
	q{SELECT pay_begin('S-AFTER', 16, 'EUR'), pay_succeed('S-AFTER', 'BANK-8', 1)});
$publisher->wait_for_catchup('pay');
is($subscriber->safe_psql('postgres', q{SELECT status FROM pay_ledger WHERE bizno = 'S-AFTER'}),
	'SUCCESS', 'a payment made after the refusals arrives');
same_on_both('after the refusals');

# The journal's sequence is not replicated: on the subscriber it never moved.
my $max_seq = $publisher->safe_psql('postgres', 'SELECT max(seq) FROM pay_journal');
is($subscriber->safe_psql('postgres', 'SELECT max(seq) FROM pay_journal'),
	$max_seq, 'the subscriber holds journal rows up to the publisher\'s last seq');
is($subscriber->safe_psql('postgres', 'SELECT last_value || \' \' || is_called FROM pay_journal_seq_seq'),
	'1 false', 'the subscriber\'s pay_journal_seq_seq has not advanced (PostgreSQL 15 replicates no sequence)');
note 'publisher pay_journal_seq_seq: '
  . $publisher->safe_psql('postgres', 'SELECT last_value || \' \' || is_called FROM pay_journal_seq_seq');

# The subscriber taken into service: the subscription disabled, its apply
# worker gone.
$subscriber->safe_psql('postgres', 'ALTER SUBSCRIPTION pay DISABLE');
$subscriber->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM pg_stat_subscription WHERE subname = 'pay' AND pid IS NOT NULL})
  or die 'the apply worker did not stop';

# Paying before the sequence is set collides with the replicated seqs.
my $ledger_before = ledger($subscriber);
$journal_before = journal($subscriber);
($ret, $stdout, $stderr) = $subscriber->psql('postgres', q{SELECT pay_begin('SUB-1', 17, 'EUR')});
isnt($ret, 0, 'a payment on the subscriber before setval is refused (the journal seq collides)');
note "the refusal: $stderr";
is(ledger($subscriber), $ledger_before, 'and nothing of it is in the ledger');
is(journal($subscriber), $journal_before, 'nor in the journal');

# The procedure: set the sequence past the replicated rows, then pay.
$subscriber->safe_psql('postgres',
	q{SELECT setval('pay_journal_seq_seq', (SELECT max(seq) FROM pay_journal))});
is($subscriber->safe_psql('postgres', q{SELECT pay_begin('SUB-1', 17, 'EUR')}),
	'PROCEED', 'after setval, a new payment on the subscriber proceeds');
is($subscriber->safe_psql('postgres', q{SELECT pay_succeed('SUB-1', 'BANK-9', 1)}),
	'SUCCESS', 'and succeeds');
is($subscriber->safe_psql('postgres', q{SELECT pay_succeed('L-LEFT', 'BANK-10', 1)}),
	'SUCCESS', 'a payment left PROCESSING on the publisher is settled on the subscriber');
is($subscriber->safe_psql('postgres', q{SELECT pay_begin('L-SUCCESS')}),
	'ALREADY_SUCCEEDED', 'a payment made on the publisher is not charged again');
is($subscriber->safe_psql('postgres', q{SELECT pay_begin('L-FIX')}),
	'PROCEED', 'the payment the DBA fixed proceeds');
my $order_3 = $subscriber->safe_psql('postgres', q{SELECT pay_open('SHOP', 'ORDER-3', 18, 'EUR')});
is($subscriber->safe_psql('postgres', "SELECT node_id FROM pay_bizno_parse('$order_3')"),
	2, 'a bizNo issued on the subscriber carries its own node id');
is( $subscriber->safe_psql(
		'postgres', qq{SELECT count(*) FROM pay_journal
		               WHERE bizno IN ('SUB-1', 'L-LEFT', 'L-FIX', '$order_3') AND seq > $max_seq}),
	5, 'the subscriber\'s journal rows follow the replicated ones');
is( $subscriber->safe_psql(
		'postgres', 'SELECT count(*) = count(DISTINCT seq) FROM pay_journal'),
	't', 'no journal seq is used twice');
is($subscriber->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'),
	0, 'pay_verify() is empty on the subscriber in service');
is($subscriber->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/amcheck.sql')),
	0, 'amcheck finds heap and B-trees of ledger and journal intact on the subscriber');

# pay_stats on the subscriber: its journal carries the publisher's
# transaction ids, so while the subscription exists it counts by scanning,
# exactly; once dropped, the subscriber keeps counts of its own.
$subscriber->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/stats_check.sql'));
$publisher->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/stats_check.sql'));
is($publisher->safe_psql('postgres', 'SELECT check_stats()'), 'equal',
	'publisher: pay_stats equals a full count');
is($subscriber->safe_psql('postgres', 'SELECT check_stats()'), 'equal',
	'subscriber in service, subscription kept: pay_stats equals a full count');
is($subscriber->safe_psql('postgres', 'SELECT pay_stats_refresh()'), 'f',
	'and folds nothing while the journal is a subscription\'s');
$subscriber->safe_psql('postgres', 'ALTER SUBSCRIPTION pay SET (slot_name = NONE)');
$subscriber->safe_psql('postgres', 'DROP SUBSCRIPTION pay');
is($subscriber->safe_psql('postgres', 'SELECT pay_stats_refresh()'), 't',
	'the subscription dropped, the subscriber counts for itself');
$subscriber->safe_psql('postgres', q{SELECT pay_begin('SUB-2', 19, 'EUR'), pay_succeed('SUB-2', 'BANK-11', 1)});
is($subscriber->safe_psql('postgres', 'SELECT check_stats()'), 'equal',
	'and pay_stats equals a full count, its own payments included');

############################################################################
# Retention, in a database of its own on each node (check_stats above
# compares pay_stats with the journal alone).  The publisher's payments by
# name (an order as SHOP/biz_id, a refund as "refund of" its payment), each
# with [the month of 2025 it is dated back to, whether pay_archive moves
# it]: PROCESSING stays, as does a payment whose refund is in flight.  March
# is archived before the subscription (it reaches the subscriber by the
# initial sync), April after it (by the apply).

for my $node ($publisher, $subscriber)
{
	$node->safe_psql('postgres', 'CREATE DATABASE retention');
	$node->safe_psql('retention', 'CREATE EXTENSION idempotent_pay');
}
sub on_publisher { return $publisher->safe_psql('retention', $_[0]); }
sub on_subscriber { return $subscriber->safe_psql('retention', $_[0]); }
my $name_sql = q{CASE WHEN prefix = 'SHOP' THEN 'SHOP/' || biz_id
                      WHEN parent IS NOT NULL THEN 'refund of ' || parent ELSE bizno END};
my %retained = (
	'K-MAR-SUCCESS' => [ '03', 1 ],
	'K-MAR-FAILED' => [ '03', 1 ],
	'K-SUCCESS' => [ '04', 1 ],
	'K-FAILED' => [ '04', 1 ],
	'K-REFUNDED' => [ '04', 1 ],
	'refund of K-REFUNDED' => [ '04', 1 ],
	'SHOP/K-PAID' => [ '04', 1 ],
	'SHOP/K-OPENED' => [ '04', 1 ],
	'K-PROCESSING' => [ '04', 0 ],
	'K-REFUNDING' => [ '04', 0 ],
	'refund of K-REFUNDING' => [ '04', 0 ],
	'K-RECENT' => [ undef, 0 ]);
sub date_back
{
	my ($month) = @_;
	my @names = grep { ($retained{$_}[0] // '') eq $month } keys %retained;
	on_publisher("SET session_replication_role = replica;\n"
		  . "UPDATE pay_ledger SET updated_at = '2025-$month-10 12:00+00' WHERE $name_sql IN ('"
		  . join("', '", @names) . "')");
}
on_publisher(q{
SELECT pay_begin('K-MAR-SUCCESS', 10, 'EUR'), pay_succeed('K-MAR-SUCCESS', 'BANK-K-MAR-SUCCESS', 1);
SELECT pay_begin('K-MAR-FAILED', 10, 'EUR'), pay_fail('K-MAR-FAILED', 'declined', 1);
SELECT pay_begin('K-SUCCESS', 10, 'EUR'), pay_succeed('K-SUCCESS', 'BANK-K-SUCCESS', 1);
SELECT pay_begin('K-FAILED', 10, 'EUR'), pay_fail('K-FAILED', 'declined', 1);
SELECT pay_begin('K-REFUNDED', 10, 'EUR'), pay_succeed('K-REFUNDED', 'BANK-K-REFUNDED', 1);
SELECT pay_refund_open('K-REFUNDED', 'R1', 4) AS refund \gset
SELECT pay_claim(:'refund', 4, 'EUR'), pay_succeed(:'refund', 'BANK-REFUND-1', 1);
SELECT bizno FROM pay_open_claim('SHOP', 'K-PAID', 10, 'EUR') \gset
SELECT pay_succeed(:'bizno', 'BANK-K-PAID', 1);
SELECT pay_open('SHOP', 'K-OPENED', 10, 'EUR');
SELECT pay_begin('K-PROCESSING', 10, 'EUR');
SELECT pay_begin('K-REFUNDING', 10, 'EUR'), pay_succeed('K-REFUNDING', 'BANK-K-REFUNDING', 1);
SELECT pay_refund_open('K-REFUNDING', 'R1', 4) AS refund \gset
SELECT pay_claim(:'refund', 4, 'EUR');
SELECT pay_begin('K-RECENT', 10, 'EUR'), pay_succeed('K-RECENT', 'BANK-K-RECENT', 1);
});
my %bizno_of = split /[|\n]/, on_publisher("SELECT $name_sql, bizno FROM pay_ledger");
my %journal_rows = split /[|\n]/,
  on_publisher("SELECT $name_sql, count(*) FROM pay_journal JOIN pay_ledger USING (bizno) GROUP BY 1");
sub archived_in
{
	my ($month) = @_;
	return sort grep { ($retained{$_}[0] // '') eq $month && $retained{$_}[1] } keys %retained;
}
sub journal_rows_of
{
	my $n = 0;
	$n += $journal_rows{$_} for @_;
	return $n;
}
date_back('03');
is(on_publisher("SELECT pay_archive('2025-04-01')"), scalar(grep { !/^refund of / } archived_in('03')),
	'retention: the publisher archives March before the subscription');

# The publication the archive needs, and the one this test used before
# 1.3, each with a subscription (the latter in a database of its own).
$subscriber->safe_psql('postgres', 'CREATE DATABASE plain');
$subscriber->safe_psql('plain', 'CREATE EXTENSION idempotent_pay');
on_publisher('CREATE PUBLICATION retention FOR ALL TABLES WITH (publish_via_partition_root = true); '
	  . 'CREATE PUBLICATION plain FOR TABLE pay_ledger, pay_journal');
for my $db ('retention', 'plain')
{
	$subscriber->safe_psql($db,
		"CREATE SUBSCRIPTION $db CONNECTION '" . $publisher->connstr . " dbname=retention' PUBLICATION $db");
	$subscriber->wait_for_subscription_sync($publisher, $db, $db);
}
is( on_subscriber(
		"SELECT string_agg($name_sql || ' ' || tableoid::regclass, ', ' ORDER BY $name_sql COLLATE \"C\")
		 FROM pay_ledger_archive"),
	join(', ', map { "$_ pay_ledger_archive_default" } archived_in('03')),
	'retention: the initial sync brings March\'s archive into the subscriber\'s default partition');

# April, archived while the subscriptions stream; a payment after it.
date_back('04');
$publisher->wait_for_catchup($_) for 'retention', 'plain';
my $ledger_sql = "SELECT string_agg($name_sql, ' ' ORDER BY $name_sql COLLATE \"C\") FROM pay_ledger";
my %archived = map { $_ => 1 } archived_in('03');
is(on_subscriber($ledger_sql), join(' ', sort grep { !$archived{$_} } keys %retained),
	'retention: before April\'s archive the subscriber\'s ledger holds every payment but March\'s');
my $log_offset = -s $subscriber->logfile;
is(on_publisher("SELECT pay_archive('2025-05-01')"), scalar(grep { !/^refund of / } archived_in('04')),
	'retention: the publisher archives April');
on_publisher(q{SELECT pay_begin('K-LATER', 10, 'EUR'), pay_succeed('K-LATER', 'BANK-K-LATER', 1)});
$publisher->wait_for_catchup('retention');

$archived{$_} = 1 for archived_in('04');
is(on_subscriber($ledger_sql), join(' ', sort 'K-LATER', grep { !$archived{$_} } keys %retained),
	'retention: the subscriber\'s ledger lost exactly the archived payments, and the payment after them arrived');
for my $sql (
	[ ledger => q{SELECT string_agg(l::text, E'\n' ORDER BY l.bizno) FROM pay_ledger AS l} ],
	[ journal => q{SELECT string_agg(j::text, E'\n' ORDER BY j.seq) FROM pay_journal AS j} ],
	[ 'archived payments' => q{SELECT string_agg(a::text, E'\n' ORDER BY a.bizno) FROM pay_ledger_archive AS a} ],
	[ 'archived journal' => q{SELECT string_agg(a::text, E'\n' ORDER BY a.seq) FROM pay_journal_archive AS a} ],
	[ pay_archive_keys => q{SELECT string_agg(k::text, E'\n' ORDER BY k.lo) FROM pay_archive_keys AS k} ],
	[ pay_archive_verify => 'SELECT * FROM pay_archive_verify()' ])
{
	my ($what, $query) = @$sql;
	is(on_subscriber($query), on_publisher($query), "retention: the subscriber's $what: the publisher's, row for row");
}
is( on_subscriber(
		"SELECT string_agg($name_sql || ' ' || tableoid::regclass, ', ' ORDER BY $name_sql COLLATE \"C\")
		 FROM pay_ledger_archive"),
	join(', ', map { "$_ pay_ledger_archive_default" } sort keys %archived),
	'retention: every archived payment and refund is in the subscriber\'s default partition');
is( on_subscriber(
		q{SELECT string_agg(DISTINCT tableoid::regclass::text, ' ') || ' ' || count(*) FROM pay_journal_archive}),
	'pay_journal_archive_default ' . journal_rows_of(keys %archived),
	'retention: and every journal row of them in its journal\'s');
is( on_subscriber(
		q{SELECT string_agg(concat_ws('|', month, payments, ledger_rows, journal_rows, kept,
		                              coalesce(problem, 'no problem')), E'\n' ORDER BY month)
		  FROM pay_archive_verify()}),
	join("\n", map {
		my @in = archived_in($_);
		sprintf '2025-%s-01|%d|%d|%d|t|no problem', $_, scalar(grep { !/^refund of / } @in), scalar(@in),
		  journal_rows_of(@in)
	} '03', '04'),
	'retention: pay_archive_verify on the subscriber: March and April as archived, no problem');
is(on_subscriber('SELECT count(*) FROM pay_verify()'), 0, 'retention: pay_verify() is empty on the subscriber');
is( on_subscriber(
		q{SELECT string_agg(t, ', ' ORDER BY t COLLATE "C")
		  FROM (SELECT tgrelid::regclass || '.' || tgname || ' ' || tgenabled::text AS t
		        FROM pg_trigger WHERE tgname LIKE 'pay\_%\_archive\_moved') AS triggers}),
	'pay_journal_archive.pay_journal_archive_moved A, pay_journal_archive_default.pay_journal_archive_moved A, '
	  . 'pay_ledger_archive.pay_ledger_archive_moved A, pay_ledger_archive_default.pay_ledger_archive_moved A',
	'retention: the archive\'s pay_archive_moved fires always on the subscriber, in its apply too');
for my $node ([ publisher => \&on_publisher ], [ subscriber => \&on_subscriber ])
{
	my ($where, $sql) = @$node;
	is( $sql->(
			q{SELECT count(*) FROM pay_stats AS s
			  WHERE s.payments <> (SELECT count(*) FROM pay_ledger AS l WHERE l.status = s.status)}),
		0, "retention, $where: pay_stats counts the live ledger's payments");
	is( $sql->(
			q{SELECT (SELECT sum(transitions) FROM pay_stats_transitions)
			       - (SELECT count(*) FROM pay_journal WHERE from_status IS DISTINCT FROM to_status)
			       - (SELECT count(*) FROM pay_journal_archive WHERE from_status IS DISTINCT FROM to_status)}),
		0, "retention, $where: and every transition of the journal and of the archive");
}
is( on_subscriber(
		q{SELECT apply_error_count || ' ' || sync_error_count FROM pg_stat_subscription_stats
		  WHERE subname = 'retention'}),
	'0 0', 'retention: the subscription applied the archive without an error');

# The subscription to the ledger and the journal alone: the apply of the
# archive's deletion from the journal is refused (its rows reached no
# archive there), again on every retry; nothing after it arrives.
ok( $subscriber->poll_query_until(
		'plain', q{SELECT apply_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 'plain'}),
	'retention: a subscription to pay_ledger and pay_journal alone fails at the archive');
my $apply_context = 'during message type "DELETE" for replication target relation "public.pay_journal"';
like(substr(slurp_file($subscriber->logfile), $log_offset),
	qr/ERROR:  DELETE is refused on table "pay_journal"\n(?:.*\n){2}.*CONTEXT:  processing remote data .*\Q$apply_context\E/,
	'retention: its apply worker is refused the journal\'s deletion');
is( $subscriber->safe_psql(
		'plain', "SELECT count(*) FILTER (WHERE bizno = 'K-SUCCESS') || ' ' || count(*) FILTER (WHERE bizno = 'K-LATER')
		          FROM pay_ledger"),
	'1 0', 'retention: replication stopped there: the archived K-SUCCESS is still in its ledger, K-LATER never came');
$subscriber->safe_psql('plain', 'DROP SUBSCRIPTION plain');

# The subscriber taken into service: its subscription dropped, the journal's
# sequence set.  Late retries of payments archived on the publisher -- by
# the initial sync or the apply -- are answered from the subscriber's
# archive or refused, never charged again.
$subscriber->safe_psql('retention', 'DROP SUBSCRIPTION retention');
on_subscriber(q{SELECT setval('pay_journal_seq_seq', (SELECT max(seq) FROM pay_journal))});
my $session = $subscriber->background_psql('retention', on_error_stop => 0);
$session->query_safe('\set VERBOSITY verbose');
sub answer_of
{
	my ($out, $failed) = $session->query($_[0]);
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return $out unless $failed;
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	my ($constraint) = $err =~ /^CONSTRAINT NAME:\s+(\S+)$/m;
	return join ' ', grep { defined } $state // "error ($err)", $constraint;
}
for my $case (
	[ "SELECT action, channel_ref FROM pay_claim('K-SUCCESS', 10, 'EUR')", 'ALREADY_SUCCEEDED|BANK-K-SUCCESS' ],
	[ "SELECT pay_begin('K-MAR-SUCCESS')", 'ALREADY_SUCCEEDED' ],
	[ "SELECT action FROM pay_claim('$bizno_of{'SHOP/K-PAID'}')", 'ALREADY_SUCCEEDED' ],
	[ "SELECT pay_open('SHOP', 'K-PAID', 10, 'EUR')", $bizno_of{'SHOP/K-PAID'} ],
	[ "SELECT pay_open('SHOP', 'K-OPENED', 10, 'EUR')", $bizno_of{'SHOP/K-OPENED'} ],
	[ "SELECT pay_claim('$bizno_of{'SHOP/K-OPENED'}')", '55000 pay_archived' ],
	[ "SELECT pay_begin('K-FAILED', 10, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_claim('K-MAR-FAILED')", '55000 pay_archived' ],
	[ "SELECT pay_succeed('K-SUCCESS', 'BANK-LATE', 1)", '55000 pay_archived' ],
	[ "SELECT pay_refund_open('K-REFUNDED', 'R2', 1)", '55000 pay_archived' ],
	[ "SELECT action FROM pay_claim('$bizno_of{'refund of K-REFUNDED'}', 4, 'EUR')", 'ALREADY_SUCCEEDED' ])
{
	my ($call, $expected) = @$case;
	is(answer_of($call), $expected, "retention, taken into service: $call answers $expected");
}
is( answer_of(
		"SELECT count(*) FROM pay_ledger WHERE bizno IN ('"
		  . join("', '", map { $bizno_of{$_} } sort keys %archived)
		  . "') OR (prefix, biz_id) IN (('SHOP', 'K-PAID'), ('SHOP', 'K-OPENED'))"),
	0, 'retention: no late retry put an archived payment back in the subscriber\'s ledger');
is(answer_of("SELECT action FROM pay_claim('K-NEW', 10, 'EUR')"), 'PROCEED',
	'retention: a key never archived proceeds on the subscriber');
is(answer_of('SELECT count(*) FROM pay_verify()'), 0, 'retention: pay_verify() is empty on the subscriber in service');
$session->quit;

$subscriber->stop;
$publisher->stop;
done_testing();
