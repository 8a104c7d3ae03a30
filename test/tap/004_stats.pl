# pay_stats counts the duplicate answers of pay_begin in shared memory when
# the library is preloaded, resets them on demand and at restart; without
# preloading it shows them as NULL.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
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

# Without preloading: no counters, and a reset says why.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
is(stat_of('SUCCESS', 'duplicate_answers'), 'NULL', 'not preloaded: no counters');
is(stat_of('SUCCESS', 'payments'), 1, 'the rest of pay_stats still works');
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT pay_stats_reset()');
like($stderr, qr/idempotent_pay keeps no counters/, 'a reset without counters is refused');

$node->stop;
done_testing();
