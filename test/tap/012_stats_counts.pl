# pay_stats reads counts the journal keeps instead of scanning the ledger.
# Under concurrent payments, deletions, resets, refunds, second charges, the
# card flow (holds captured, declined, voided, raised and left to expire) and
# pay_archive taking what was settled (compared in REPEATABLE READ, each answer equals a full count in the same
# snapshot); with a million payments; after a backend is killed with
# SIGKILL in the middle of the work; and after pg_dump and pg_restore with
# default options, pay_stats and pay_stats_transitions equal a full count
# of the ledger and the journal.
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $payments = $ENV{STATS_PAYMENTS} // 1_000_000;
my $loaders = 2;
my $dir = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('counts');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idempotent_pay'\nrestart_after_crash = on\nmax_wal_size = 4GB\n");
$node->start;
for my $db ('postgres', 'busy')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db") if $db ne 'postgres';
	$node->safe_psql($db, 'CREATE EXTENSION idempotent_pay');
	$node->safe_psql($db, slurp_file(dirname(__FILE__) . '/stats_check.sql'));
}

sub check_stats
{
	my ($server, $db) = @_;
	my ($ret, $stdout, $stderr) = $server->psql($db // 'postgres',
		'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT check_stats(); COMMIT;');
	return $ret == 0 ? $stdout : $stderr;
}

sub stats_of
{
	my ($server, $db) = @_;
	return $server->safe_psql($db // 'postgres',
		'SELECT status, payments, refunds, resets, second_charges, unconfirmed_second_charges
		 FROM pay_stats ORDER BY status');
}

# Concurrent work of every kind, while a reader folds, pay_archive moves
# what was settled, and another compares pay_stats with a full count (with
# what the archive took) in one REPEATABLE READ snapshot, repeatedly.
my %scripts = (
	'pay.pgbench' => q{
\set k random(1, 9000000000000000000)
\set r random(1, 20)
SELECT pay_claim('K-' || :k, 10, 'EUR');
\if :r <= 12
SELECT pay_succeed('K-' || :k, 'R' || :k, 1);
\elif :r <= 15
SELECT pay_fail('K-' || :k, 'declined', 1);
\endif
},
	'edges.pgbench' => q{
\set k random(1, 9000000000000000000)
\set r random(1, 7)
SELECT pay_claim('E-' || :k, 10, 'EUR');
\if :r = 1
SELECT pay_fail('E-' || :k, 'declined', 1);
SELECT pay_reset('E-' || :k, 'retry');
\elif :r = 2
SELECT pay_succeed('E-' || :k, 'A' || :k, 1);
SELECT pay_succeed('E-' || :k, 'B' || :k, 1);
\elif :r = 3
SELECT pay_succeed('E-' || :k, 'A' || :k, 1);
SELECT pay_succeed('E-' || :k, 'B' || :k, 1);
SELECT pay_confirm_second_charge('E-' || :k, 'B' || :k);
\elif :r = 4
SELECT pay_succeed('E-' || :k, 'A' || :k, 1);
SELECT pay_confirm_second_charge('E-' || :k, 'C' || :k);
SELECT pay_succeed('E-' || :k, 'C' || :k, 1);
\elif :r = 5
SELECT pay_succeed('E-' || :k, 'A' || :k, 1);
SELECT pay_claim(pay_refund_open('E-' || :k, 'r1', 5, 'back'));
\elif :r = 6
SELECT pay_fail('E-' || :k, 'declined', 1);
DELETE FROM pay_ledger WHERE bizno = 'E-' || :k;
\else
BEGIN;
SELECT pay_succeed('E-' || :k, 'A' || :k, 1);
SELECT pay_refund_open('E-' || :k, 'r2', 3, 'back');
DELETE FROM pay_ledger WHERE parent = 'E-' || :k;
COMMIT;
\endif
},
	# the card flow: a hold of three seconds, captured in part (or declined),
	# voided now and then, or left to expire, when the archive may take it
	'card.pgbench' => q{
DO $$
DECLARE
    k text := md5(random()::text);
    r int := floor(random() * 4)::int;
    auth text;
    step text;
BEGIN
    PERFORM set_config('idempotent_pay.claim_in_transaction', 'allow', true);
    auth := pay_open_authorization('CARD', k, 50, 'EUR', '3 seconds');
    PERFORM pay_claim(auth);
    PERFORM pay_succeed(auth, 'H' || k, 1);
    IF r = 3 THEN
        step := pay_increment_open(auth, 'tip', 5);
        PERFORM pay_claim(step);
        PERFORM pay_succeed(step, 'I' || k, 1);
    END IF;
    step := pay_capture_open(auth, 'c1', 20, false);
    PERFORM pay_claim(step);
    IF r = 0 THEN
        PERFORM pay_fail(step, 'declined', 1);
    ELSE
        PERFORM pay_succeed(step, 'C' || k, 1);
    END IF;
    IF r <= 1 THEN
        step := pay_void_open(auth, 'v');
        PERFORM pay_claim(step);
        PERFORM pay_succeed(step, 'V' || k, 1);
    END IF;
END
$$;
},
	'read.pgbench' => "SELECT count(*) FROM pay_stats;\n",
	# the archive takes what was settled a second ago, in small batches
	'archive.pgbench' => "SELECT pay_archive(now() - interval '1 second', 200);\n",
	'compare.pgbench' => "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT check_stats();\nCOMMIT;\n",);
while (my ($name, $text) = each %scripts)
{
	open my $fh, '>', "$dir/$name" or die $!;
	print $fh $text;
	close $fh;
}

sub start_pgbench
{
	my ($db, $seconds, $clients, @scripts) = @_;
	my $run = { out => '', err => '' };
	local $ENV{PGAPPNAME} = 'stats_work';
	$run->{harness} = IPC::Run::start(
		[
			'pgbench', '-n', '-T', $seconds, '-c', $clients,
			(map { ('-f', "$dir/$_") } @scripts),
			$node->connstr($db)
		],
		'>', \$run->{out}, '2>', \$run->{err});
	return $run;
}

my $work = start_pgbench('busy', 20, 3, 'pay.pgbench@6', 'edges.pgbench@3', 'card.pgbench@2', 'read.pgbench@1');
my $compare = start_pgbench('busy', 20, 1, 'compare.pgbench');
my $archive = start_pgbench('busy', 20, 1, 'archive.pgbench');
ok($work->{harness}->finish, 'the concurrent work ran without an error') or diag($work->{err});
ok($archive->{harness}->finish, 'pay_archive ran throughout without an error') or diag($archive->{err});
cmp_ok($node->safe_psql('busy', 'SELECT count(*) FROM pay_ledger_archive'),
	'>', 0, 'and archived payments while they were paid, reset, refunded and counted');
ok($compare->{harness}->finish, 'every comparison during it found pay_stats equal to a full count')
  or diag($compare->{err});
my ($compared) = $compare->{out} =~ /number of transactions actually processed: (\d+)/;
ok($compared > 0, "compared in the same snapshot while paying ($compared times)");
is(check_stats($node, 'busy'), 'equal', 'pay_stats equals a full count after the work');
ok( $node->safe_psql('busy', q{SELECT sum(n) FROM pay_archive_counts WHERE kind = 'AUTHORIZATION'}) > 0,
	'the archive took authorizations of the card flow meanwhile');
ok( $node->safe_psql('busy', q{SELECT count(*) FROM pay_stats_holds() WHERE closed_reason IS NOT NULL}) > 0,
	'and some holds in the ledger are closed or expired');
cmp_ok($node->safe_psql('busy', q{SELECT sum(n) FROM pay_stats_counts WHERE to_status IS NULL}),
	'>', 0, 'deletions were counted');

# A million payments by raw SQL in the ledger's triggers (each journaled):
# 80% SUCCESS, 10% FAILED, 10% left PROCESSING, loaded by two sessions.
my @loads;
for my $loader (0 .. $loaders - 1)
{
	my $sql = qq{
		INSERT INTO pay_ledger (bizno, status, amount, currency)
		SELECT 'BULK-' || g, 'PROCESSING', 10, 'EUR'
		FROM generate_series(1, $payments) AS g WHERE g % $loaders = $loader;
		UPDATE pay_ledger SET status = 'SUCCESS', channel_ref = 'BANK-' || bizno
		WHERE bizno LIKE 'BULK-%' AND right(bizno, 1) NOT IN ('8', '9')
		  AND right(bizno, 1)::int % $loaders = $loader;
		UPDATE pay_ledger SET status = 'FAILED', last_error = 'declined'
		WHERE bizno LIKE 'BULK-%' AND right(bizno, 1) = '8'
		  AND right(bizno, 1)::int % $loaders = $loader;
	};
	my ($out, $err) = ('', '');
	push @loads,
	  IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
		'<', \$sql, '>', \$out, '2>', \$err);
}
my $load_start = time;
ok($_->finish, 'a loader finished') for @loads;
note(sprintf('loaded in %.0f s', time - $load_start));
is($node->safe_psql('postgres', 'SELECT count(*) FROM pay_ledger'), $payments, "$payments payments loaded");

is($node->safe_psql('postgres', 'SELECT pay_stats_refresh()'), 't', 'the first fold counts them');
is(check_stats($node), 'equal', 'pay_stats equals a full count');

# SIGKILL to a backend in the middle of the work: the postmaster restarts
# every backend and recovers; an open transaction's claims are gone.
my $open = '';
my $open_session = IPC::Run::start([ 'psql', '-X', '-q', '-d', $node->connstr('postgres') ],
	'<', \$open, '>', \my $open_out, '2>', \my $open_err);
# (claims left uncommitted on purpose, so they may run in the transaction)
$open .= "BEGIN;\nSET LOCAL idempotent_pay.claim_in_transaction = allow;\n"
  . "SELECT pay_claim('OPEN-' || g, 10, 'EUR') FROM generate_series(1, 100) AS g;\n";
$open_session->pump_nb;
$work = start_pgbench('postgres', 60, 3, 'pay.pgbench@6', 'edges.pgbench@3', 'read.pgbench@1');
$node->poll_query_until('postgres',
	q{SELECT count(*) >= 3 FROM pg_stat_activity WHERE application_name = 'stats_work'})
  or do { eval { $work->{harness}->finish }; die "the work never got going: $work->{err}" };
sleep 2;
my $victim = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'stats_work' LIMIT 1});
kill 'KILL', $victim;
$work->{harness}->finish;    # its clients lose their connections
eval { $open_session->finish };
# pg_isready until the server is back, not poll_query_until alone: its
# psql reads the query from a pipe, and one that finds the server still
# recovering exits unread, which dies of a broken pipe
my $recovery_deadline = time + $PostgreSQL::Test::Utils::timeout_default;
sleep 0.1 until system('pg_isready', '-q', '-d', $node->connstr('postgres')) == 0 or time > $recovery_deadline;
$node->poll_query_until('postgres', 'SELECT true') or die 'the server did not come back';
is($node->safe_psql('postgres', q{SELECT count(*) FROM pay_ledger WHERE bizno LIKE 'OPEN-%'}),
	0, "the open transaction's claims were lost with the crash");
is(check_stats($node), 'equal', 'after the crash, pay_stats equals a full count');
is($node->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/amcheck.sql')),
	0, 'amcheck finds heap and B-trees of ledger and journal intact after the crash');

# A dump restored with default options: the counts are not dumped, the
# first read counts again.
my $before = stats_of($node);
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/payments.dump", '-d', $node->connstr('postgres') ],
	'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), "$dir/payments.dump" ],
	'pg_restore with default options');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_stats_state'), 0, 'no counts come with the dump');
is(stats_of($node, 'restored'), $before, 'the restored pay_stats answers as before the dump');
is(check_stats($node, 'restored'), 'equal', 'and equals a full count of the restored ledger');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_stats_state'), 1, 'having counted again');

$node->stop;
done_testing();
