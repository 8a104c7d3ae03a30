# pay_stats counts the duplicate answers of pay_begin in shared memory when
# the library is preloaded, resets them on demand and at restart; without
# preloading it shows them as NULL.
use strict;
use warnings;

use File::Basename;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotent_pay'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotent_pay');

sub stat_of
{
	my ($status, $column) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(${column}::text, 'NULL') FROM pay_stats WHERE status = '$status'");
}

$node->safe_psql(
	'postgres', q{
	SELECT pay_begin('S-1', 10, 'EUR'), pay_begin('S-1'), pay_begin('S-1');
	SELECT pay_succeed('S-1', 'BANK-1', 1);
	SELECT pay_begin('S-1'), pay_begin('S-1');
	SELECT pay_begin('S-2', 10, 'EUR'), pay_fail('S-2', 'declined', 1), pay_begin('S-2');
});
is(stat_of('PROCESSING', 'duplicate_answers'), 2, 'IN_PROGRESS answers are counted');
is(stat_of('SUCCESS', 'duplicate_answers'), 2, 'ALREADY_SUCCEEDED answers are counted');
is(stat_of('INIT', 'resets'), 1, 'resets are counted from the journal');
is(stat_of('PROCESSING', 'payments'), 1, 'payments per status');

# Counted across sessions: the counters are shared.
$node->safe_psql('postgres', q{SELECT pay_begin('S-1')});
is(stat_of('SUCCESS', 'duplicate_answers'), 3, 'answers from every session add up');

is( $node->safe_psql(
		'postgres', q{SET idempotent_pay.stuck_after = 0;
		              SELECT stuck FROM pay_stats WHERE status = 'PROCESSING'}),
	1,
	'a PROCESSING payment older than stuck_after is stuck');
is(stat_of('PROCESSING', 'stuck'), 0, 'and not before stuck_after (5 minutes)');

$node->safe_psql('postgres', 'SELECT pay_stats_reset()');
is(stat_of('SUCCESS', 'duplicate_answers'), 0, 'pay_stats_reset starts again from zero');
is(stat_of('INIT', 'resets'), 1,
	'resets count every reset ever, from the journal: pay_stats_reset leaves them');

$node->safe_psql('postgres', q{SELECT pay_begin('S-1')});
$node->restart;
is(stat_of('SUCCESS', 'duplicate_answers'), 0, 'a restart starts the counters again');

# stuck and oldest_processing_since come from the PROCESSING set a fold
# keeps: after a fold, a read visits a few rows of it however many payments
# are PROCESSING, and answers as a full count would.  Each read is one
# transaction that counts the rows it visited (pg_stat_xact_*) in the
# ledger, the journal and the counts' tables, with a stuck_after that makes
# the payments before batch Q-2 stuck and the others not.
$node->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/stats_check.sql'));

sub load_processing
{
	my ($batch, $payments) = @_;
	$node->safe_psql('postgres',
		"INSERT INTO pay_ledger (bizno, status, amount, currency)
		 SELECT 'Q-$batch-' || g, 'PROCESSING', 10, 'EUR' FROM generate_series(1, $payments) AS g");
}

sub read_stats
{
	# tuples read by scans of these tables and of their indexes
	my $visited = q{
		SELECT sum(pg_stat_get_xact_tuples_returned(c.oid)) AS visited
		FROM pg_class AS c LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
		WHERE coalesce(i.indrelid, c.oid) = ANY (ARRAY['pay_ledger', 'pay_journal', 'pay_stats_processing',
		                                               'pay_stats_deletions']::regclass[])};
	return $node->safe_psql(
		'postgres', qq{
		BEGIN;
		SELECT set_config('idempotent_pay.stuck_after',
		                  ceil(extract(epoch FROM now() - min(processing_since)) * 1000)::text, true)
		FROM pay_ledger WHERE bizno LIKE 'Q-2-%' \\gset
		$visited \\gset before_
		SELECT stuck, payments FROM pay_stats WHERE status = 'PROCESSING' \\gset
		$visited \\gset after_
		SELECT :after_visited - :before_visited AS visited, :stuck AS stuck, :payments AS payments,
		       check_stats() AS compared;
		COMMIT;});
}

load_processing(1, 1000);
$node->safe_psql('postgres', 'SELECT pg_sleep(0.01)');    # Q-2 entered PROCESSING later
load_processing(2, 1000);
$node->safe_psql('postgres', 'SELECT pay_stats_refresh()');
$node->safe_psql('postgres', 'SELECT pay_stats_refresh()');
my ($visited, $stuck, $processing, $compared) = split /\|/, read_stats();
is($compared, 'equal', 'with 2001 payments PROCESSING, pay_stats equals a full count');
ok($stuck > 0 && $stuck < $processing, "of which some are stuck ($stuck), not all");
cmp_ok($visited, '<=', 10, "a read after a fold visits a few rows ($visited), not the PROCESSING set");

load_processing(3, 20000);
$node->safe_psql('postgres', 'SELECT pay_stats_refresh()');
$node->safe_psql('postgres', 'SELECT pay_stats_refresh()');
($visited, $stuck, $processing, $compared) = split /\|/, read_stats();
is($compared, 'equal', "with $processing payments PROCESSING, pay_stats equals a full count");
cmp_ok($visited, '<=', 10, "and a read visits as few rows ($visited) after a fold of 20000 more");

# Without preloading: no counters, and a reset says why.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
is(stat_of('SUCCESS', 'duplicate_answers'), 'NULL', 'not preloaded: no counters');
is(stat_of('SUCCESS', 'payments'), 1, 'the rest of pay_stats still works');
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT pay_stats_reset()');
like($stderr, qr/idempotent_pay keeps no counters/, 'a reset without counters is refused');

$node->stop;
done_testing();
