# Payments under load survive a backend killed with SIGKILL and an immediate
# shutdown: every success a client saw acknowledged is SUCCESS, every
# PROCESSING row is on pay_stuck's list, the ledger agrees with its journal
# (pay_verify), and the API works after recovery.
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $workers = 4;
my $payments_per_worker = 20_000;    # far more than fit before the crash

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->append_conf('postgresql.conf', "restart_after_crash = on\nlog_statement = none\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotent_pay');

# One worker's script: each payment begins, then succeeds (most), fails and
# is retried by pay_begin, fails and is reset by hand, or stays PROCESSING
# (its answer lost); some run in an explicit transaction.  Every committed
# statement prints an acknowledgement: ACK|bizno|answer.
sub script
{
	my ($round, $worker) = @_;
	my $sql = '';
	for my $i (1 .. $payments_per_worker)
	{
		my $key = "$round-$worker-$i";
		my $ack = "SELECT 'ACK', '$key',";
		$sql .= "$ack pay_begin('$key', 10, 'EUR');\n";
		my $kind = $i % 10;
		if ($kind <= 5)
		{
			$sql .= "$ack pay_succeed('$key', 'BANK-$key', 1);\n";
		}
		elsif ($kind <= 7)
		{
			# the retry, automatic or after a reset, is attempt 2
			$sql .= "$ack pay_fail('$key', 'declined', 1);\n";
			$sql .= "$ack pay_begin('$key');\n" if $kind == 6;
			$sql .= "$ack pay_reset('$key', 'retry by hand');\n$ack pay_begin('$key');\n"
			  if $kind == 7;
			$sql .= "$ack pay_succeed('$key', 'BANK-$key', 2);\n";
		}
		elsif ($kind == 8)
		{
			# inside a transaction, acknowledged once COMMIT returns (the
			# claim commits with its settlement, so it may run there)
			$sql .= "BEGIN;\nSET LOCAL idempotent_pay.claim_in_transaction = allow;\n"
			  . "SELECT pay_begin('$key-tx', 10, 'EUR');\n"
			  . "SELECT pay_succeed('$key-tx', 'BANK-$key-tx', 1);\nCOMMIT;\n"
			  . "SELECT 'ACK', '$key-tx', 'SUCCESS';\n";
		}
		# kind 9: stays PROCESSING
	}
	return $sql;
}

sub start_load
{
	my ($round) = @_;
	my @runs;
	for my $worker (1 .. $workers)
	{
		my $run = { in => script($round, $worker), out => '', err => '' };
		$run->{harness} = IPC::Run::start(
			[
				'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
				'-d', $node->connstr('postgres')
			],
			'<', \$run->{in}, '>', \$run->{out}, '2>', \$run->{err});
		push @runs, $run;
	}
	return @runs;
}

# Wait until some payments are acknowledged, so the crash lands mid-load.
sub wait_for_load
{
	my @runs = @_;
	for (1 .. 300)
	{
		$_->{harness}->pump_nb for @runs;
		return if (grep { ($_->{out} =~ tr/\n//) > 200 } @runs) == @runs;
		select(undef, undef, undef, 0.05);
	}
	die 'the load never got going';
}

sub finish_load
{
	my @runs = @_;
	my $interrupted = 0;
	for my $run (@runs)
	{
		# psql dies with the server; writing the rest of its script then fails
		my $finished = eval { $run->{harness}->finish };
		$interrupted++ unless $finished;
	}
	return $interrupted;
}

sub check_after_recovery
{
	my ($round, $label, @runs) = @_;
	my (%acknowledged_success, $acks);
	for my $run (@runs)
	{
		for my $line (split /\n/, $run->{out})
		{
			my (undef, $key, $answer) = split /\|/, $line;
			next unless defined $answer;
			$acks++;
			$acknowledged_success{$key} = 1 if $answer eq 'SUCCESS';
		}
	}
	ok($acks > 0, "$label: payments were acknowledged before the crash ($acks)");

	my $keys = join(',', map { "'$_'" } sort keys %acknowledged_success);
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM unnest(ARRAY[$keys]::text[]) AS k
			 LEFT JOIN pay_ledger AS l ON l.bizno = k
			 WHERE l.status IS DISTINCT FROM 'SUCCESS'"),
		0,
		"$label: every acknowledged success is SUCCESS (" . scalar(keys %acknowledged_success) . ')');
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pay_ledger
			 WHERE status = 'PROCESSING'
			   AND bizno NOT IN (SELECT bizno FROM pay_stuck('0 seconds', 1000000))"),
		0,
		"$label: every PROCESSING payment is on pay_stuck's list");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'),
		0, "$label: the ledger agrees with its journal");
	is(amcheck_problems($node), 0, "$label: amcheck finds heap and B-trees of ledger and journal intact");
	is($node->safe_psql('postgres', "SELECT pay_begin('after-$round', 10, 'EUR')"),
		'PROCEED', "$label: the API works after recovery");
}

# contrib amcheck on the ledger and the journal: heap and every B-tree.
sub amcheck_problems
{
	my ($server) = @_;
	return $server->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/amcheck.sql'));
}

# A backend killed with SIGKILL: the postmaster restarts every backend.
my @runs = start_load('kill');
wait_for_load(@runs);
my $victim = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity
	  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() LIMIT 1});
ok(kill('KILL', $victim), 'a backend is killed with SIGKILL');
ok(finish_load(@runs) > 0, 'the load was cut off by the crash');
# pg_isready until the server is back, not poll_query_until alone: its
# psql reads the query from a pipe, and one that finds the server still
# recovering exits unread, which dies of a broken pipe
my $recovery_deadline = time + $PostgreSQL::Test::Utils::timeout_default;
sleep 0.1 until system('pg_isready', '-q', '-d', $node->connstr('postgres')) == 0 or time > $recovery_deadline;
$node->poll_query_until('postgres', 'SELECT true') or die 'no recovery';
check_after_recovery('kill', 'SIGKILL', @runs);

# An immediate shutdown in the middle of the load.
@runs = start_load('immediate');
wait_for_load(@runs);
$node->stop('immediate');
ok(finish_load(@runs) > 0, 'the load was cut off by the immediate shutdown');
$node->start;
check_after_recovery('immediate', 'immediate shutdown', @runs);

$node->stop;
done_testing();
