# Failover to a synchronous standby under load: four clients pay on the
# primary, the primary is shut down immediately, the standby is promoted.  On
# the new primary every payment is in the state its acknowledged calls left
# it in -- or, for the one call per client that was in flight, in the state
# that call would have left -- so every acknowledged SUCCESS is SUCCESS; every
# PROCESSING payment is on pay_stuck's list; the ledger agrees with its
# journal (pay_verify); the API goes on; and no bizNo issued after the
# promotion equals one issued before it.
use strict;
use warnings;

use IPC::Run;
use File::Basename;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $started = time;
my $workers = 4;
my $payments_per_worker = 10_000;    # far more than fit before the failover
my $acks_before_failover = 500;      # per worker, before the primary dies

# A primary and a streaming standby, synchronous: a commit returns only once
# the standby has flushed it (synchronous_commit = on).  The setting is made
# after the base backup, so that the promoted standby does not wait for a
# standby of its own.
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "log_statement = none\n");
$primary->start;
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
# the walreceiver's application_name, which synchronous_standby_names names
$standby->append_conf('postgresql.conf',
	"primary_conninfo = '" . $primary->connstr . " application_name=standby'\n");
$standby->start;

$primary->append_conf('postgresql.conf',
	"synchronous_standby_names = 'standby'\nsynchronous_commit = on\n");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'", 'sync')
  or die 'the standby never became synchronous';

$primary->safe_psql('postgres', 'CREATE EXTENSION idempotent_pay');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
		"SELECT extversion IS NOT NULL FROM pg_extension WHERE extname = 'idempotent_pay'"),
	't', 'the extension is on the synchronous standby before the load');

# One worker's script, as units.  A unit is the statements of one step of one
# payment and ends with an acknowledgement printed only after they returned:
# ACK|worker|unit|payment|call|answer|bizNo, the last a fresh
# pay_bizno('PAY', 'SAME'), so the ACK lines also record bizNos the old
# primary issued up to its end.  Each unit commits at most once, and psql
# sends a unit only after the previous one returned: when the primary dies,
# every unit up to a worker's last ACK is committed and on the standby, the
# next one may or may not be, and none after it was ever sent.
#
# Each payment begins, then succeeds (most); fails and stays FAILED, or is
# retried by pay_begin; fails and is reset by hand; succeeds inside an
# explicit transaction (acknowledged once COMMIT returned); is opened with
# pay_open, which gives a bizNo (then stays INIT, or is paid); or stays
# PROCESSING (its answer lost).  The unit records the payment's status and
# attempt after it, and the answer it must give.
sub script
{
	my ($worker) = @_;
	my ($sql, @units) = ('');
	my $unit = sub {
		my ($payment, $call, $expr, $answer, $status, $attempt, $before) = @_;
		push @units,
		  {
			payment => $payment,
			call => $call,
			answer => $answer,
			state => "$status/$attempt"
		  };
		$sql .= $before // '';
		$sql .= sprintf "SELECT 'ACK', %d, %d, '%s', '%s', %s, pay_bizno('PAY', 'SAME');\n",
		  $worker, scalar(@units), $payment, $call, $expr;
	};
	for my $i (1 .. $payments_per_worker)
	{
		my $key = "fo-$worker-$i";
		my $kind = $i % 10;
		my $variant = int($i / 10) % 2;
		if ($kind == 7)
		{
			$unit->(
				$key, 'tx', "'SUCCESS'", 'SUCCESS', 'SUCCESS', 1,
				"BEGIN;\nSELECT pay_begin('$key', 10, 'EUR');\nSELECT pay_succeed('$key', 'BANK-$key', 1);\nCOMMIT;\n");
			next;
		}
		if ($kind == 8)
		{
			my $payment = "SHOP/W$worker-$i";
			$unit->(
				$payment, 'open', ":'bizno'", undef, 'INIT', 0,
				"SELECT pay_open('SHOP', 'W$worker-$i', 10, 'EUR') AS bizno \\gset\n");
			next unless $variant;    # stays INIT: not charged yet
			$unit->($payment, 'begin', "pay_begin(:'bizno')", 'PROCEED', 'PROCESSING', 1);
			$unit->($payment, 'succeed', "pay_succeed(:'bizno', 'BANK-W$worker-$i', 1)", 'SUCCESS', 'SUCCESS', 1);
			next;
		}
		$unit->($key, 'begin', "pay_begin('$key', 10, 'EUR')", 'PROCEED', 'PROCESSING', 1);
		next if $kind == 9;          # stays PROCESSING
		my $attempt = 1;
		if ($kind == 5 || $kind == 6)
		{
			$unit->($key, 'fail', "pay_fail('$key', 'declined', 1)", 'FAILED', 'FAILED', 1);
			next if $kind == 5 && !$variant;    # stays FAILED
			$unit->($key, 'reset', "pay_reset('$key', 'retry by hand')", 'INIT', 'INIT', 1)
			  if $kind == 6;
			$unit->($key, 'begin', "pay_begin('$key')", 'PROCEED', 'PROCESSING', 2);
			$attempt = 2;
		}
		$unit->($key, 'succeed', "pay_succeed('$key', 'BANK-$key', $attempt)", 'SUCCESS', 'SUCCESS', $attempt);
	}
	return ($sql, \@units);
}

my $scripts = PostgreSQL::Test::Utils::tempdir;
my @runs;
for my $worker (1 .. $workers)
{
	my ($sql, $units) = script($worker);
	my $file = "$scripts/worker$worker.sql";
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh $sql;
	close $fh;
	my $run = { worker => $worker, units => $units, out => '', err => '' };
	$run->{harness} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-d', $primary->connstr('postgres'), '-f', $file
		],
		'<', '/dev/null', '>', \$run->{out}, '2>', \$run->{err});
	push @runs, $run;
}

# Wait until every worker has enough acknowledged units, so that the primary
# dies in the middle of the load.
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (1)
{
	my $ready = 0;
	for my $run (@runs)
	{
		$run->{harness}->pump_nb if $run->{harness}->pumpable;
		die "worker $run->{worker} stopped before the failover: $run->{err}"
		  unless $run->{harness}->pumpable;
		my $acks = () = $run->{out} =~ /^ACK\|/mg;
		$ready++ if $acks >= $acks_before_failover;
	}
	last if $ready == $workers;
	die 'the load never got going' if time > $deadline;
	usleep(20_000);
}

# pay_stats' counts, folded on the primary under load, go to the standby
# with everything else.
is($primary->safe_psql('postgres', 'SELECT pay_stats_refresh()'), 't', 'the primary folds the journal under load');

# The primary dies under load; each psql loses its connection and stops
# (with exit status 2, or 3 when the loss surfaced as a failed statement), and
# none on an ERROR: no statement of the load was refused.
$primary->stop('immediate');
my $cut_off = 0;
for my $run (@runs)
{
	$run->{harness}->finish;
	if ($run->{harness}->result(0) != 0 && $run->{err} !~ /\bERROR:/)
	{
		$cut_off++;
	}
	else
	{
		diag "worker $run->{worker}: exit status "
		  . $run->{harness}->result(0)
		  . ", stderr: $run->{err}";
	}
}
is($cut_off, $workers, 'the failover cut off every worker, and only it');

# The standby has every acknowledged commit; promote it.
my $replicated = $standby->safe_psql('postgres', 'SELECT count(*) FROM pay_ledger');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';
my $new = $standby;

# What the clients saw: the units each worker had acknowledged, in order and
# with the expected answers, and the bizNos printed.
my ($acks, $wrong_acks, %acked, %in_flight, %opened, @printed) = (0, 0);
for my $run (@runs)
{
	my $n = 0;
	for my $line (grep { /^ACK\|/ } split /\n/, $run->{out})
	{
		my (undef, $worker, $number, $payment, $call, $answer, $bizno) = split /\|/, $line, -1;
		my $unit = $run->{units}[$n++];
		$wrong_acks++
		  unless defined $bizno
		  && $worker == $run->{worker}
		  && $number == $n
		  && $payment eq $unit->{payment}
		  && $call eq $unit->{call}
		  && (!defined $unit->{answer} || $answer eq $unit->{answer});
		$acked{$payment} = $unit->{state};
		$opened{$payment} = $answer if $call eq 'open';
		push @printed, $bizno;
		push @printed, $answer if $call eq 'open';
	}
	$acks += $n;
	$run->{acked} = $n;
	my $next = $run->{units}[$n];
	$in_flight{ $next->{payment} } = $next->{state} if $next;
}
note "$acks units acknowledged before the failover ("
  . join(' + ', map { $_->{acked} } @runs) . ' by the workers), '
  . scalar(keys %acked) . ' payments';
is($wrong_acks, 0, "every acknowledgement came in order with its expected answer ($acks)");

# The new primary's ledger, before anything new is written: payments by the
# name the workers know them by.
my %found;
for my $row (
	split /\n/,
	$new->safe_psql(
		'postgres',
		"SELECT CASE WHEN prefix = 'SHOP' THEN 'SHOP/' || biz_id ELSE bizno END,
			bizno, status || '/' || attempt FROM pay_ledger"))
{
	my ($payment, $bizno, $state) = split /\|/, $row;
	$found{$payment} = { bizno => $bizno, state => $state };
}
my $state_of = sub { my $f = $found{ $_[0] }; $f ? $f->{state} : 'absent' };

# Every acknowledged SUCCESS is SUCCESS.
my @acked_success = grep { $acked{$_} =~ /^SUCCESS/ } keys %acked;
my $found_success = grep { $state_of->($_) =~ /^SUCCESS/ } @acked_success;
note scalar(@acked_success) . " payments acknowledged SUCCESS, $found_success found SUCCESS";
is($found_success, scalar(@acked_success), 'every acknowledged success is SUCCESS on the new primary');

# An acknowledged FAILED is FAILED, unless the payment's next call (a retry
# or a reset) was in flight and committed: then it is what that call made it.
my @acked_failed = grep { $acked{$_} =~ /^FAILED/ } keys %acked;
my $found_failed = grep { $state_of->($_) eq $acked{$_} } @acked_failed;
my $moved_on = grep {
	$state_of->($_) ne $acked{$_}
	  && defined $in_flight{$_}
	  && $state_of->($_) eq $in_flight{$_}
} @acked_failed;
note scalar(@acked_failed)
  . " payments acknowledged FAILED, $found_failed found FAILED, $moved_on moved on by their in-flight call";
is($found_failed + $moved_on, scalar(@acked_failed),
	'every acknowledged failure is FAILED or what its in-flight call made it');

# The whole ledger, payment by payment (status and attempt): what the
# acknowledged units left, or what the in-flight unit left; a payment no
# acknowledged or in-flight unit touched is absent.
my (@wrong, $in_flight_committed);
for my $payment (sort keys %{ { %acked, %in_flight, %found } })
{
	my $state = $state_of->($payment);
	my $acked = $acked{$payment} // 'absent';
	if (defined $in_flight{$payment} && $state eq $in_flight{$payment} && $state ne $acked)
	{
		$in_flight_committed++;
		next;
	}
	push @wrong, "$payment: found $state, acknowledged $acked, in flight "
	  . ($in_flight{$payment} // 'nothing')
	  unless $state eq $acked;
}
note scalar(keys %found) . " ledger rows on the new primary ($replicated read on the standby before"
  . " the promotion); " . ($in_flight_committed // 0) . " of $workers in-flight calls had committed";
is(scalar(@wrong), 0, 'every payment is in the state its acknowledged (or in-flight) calls left')
  or diag join("\n", @wrong[ 0 .. ($#wrong < 19 ? $#wrong : 19) ]);

my $opened_wrong = grep { !$found{$_} || $found{$_}{bizno} ne $opened{$_} } keys %opened;
is($opened_wrong, 0,
	'every bizNo pay_open acknowledged is the one recorded (' . scalar(keys %opened) . ')');

# Every PROCESSING payment is on the reconciler's list, and only those.
my $older = "older_than => '0 seconds', max_rows => 1000000";
my $processing = $new->safe_psql('postgres',
	"SELECT count(*) FROM pay_ledger WHERE status = 'PROCESSING'");
my $stuck = $new->safe_psql('postgres', "SELECT count(*) FROM pay_stuck($older)");
note "$processing payments PROCESSING on the new primary, pay_stuck lists $stuck";
ok($processing > 0, 'payments were left PROCESSING');
is( $new->safe_psql(
		'postgres',
		"SELECT count(*) FROM pay_ledger WHERE status = 'PROCESSING'
		   AND bizno NOT IN (SELECT bizno FROM pay_stuck($older))"),
	0,
	'every PROCESSING payment is on pay_stuck\'s list');
is( $new->safe_psql(
		'postgres',
		"SELECT count(*) FROM pay_stuck($older) WHERE status <> 'PROCESSING'"),
	0,
	'pay_stuck lists nothing but PROCESSING payments');
is($new->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'),
	0, 'the ledger agrees with its journal');
is($new->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/amcheck.sql')),
	0, 'amcheck finds heap and B-trees of ledger and journal intact on the promoted standby');
$new->safe_psql('postgres', slurp_file(dirname(__FILE__) . '/stats_check.sql'));
is($new->safe_psql('postgres', 'SELECT count(*) FROM pay_stats_state'), 1, 'the primary\'s counts are on the promoted standby');
is($new->safe_psql('postgres', 'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT check_stats(); COMMIT;'),
	'equal', "pay_stats on the promoted standby equals a full count (the primary's counts came with it)");

# The bizNos issued before the promotion: the ledger's and the printed ones.
$new->safe_psql(
	'postgres',
	"CREATE TABLE issued_before AS SELECT bizno FROM pay_ledger;\n"
	  . "COPY issued_before FROM STDIN;\n"
	  . join("\n", @printed)
	  . "\n\\.\n");

# The API goes on on the new primary.
my ($old_success) =
  map { $found{$_}{bizno} } sort grep { $state_of->($_) eq $acked{$_} } @acked_success;
my ($old_processing) = map { $found{$_}{bizno} }
  sort grep { $acked{$_} =~ /^PROCESSING/ && $state_of->($_) eq $acked{$_} } keys %acked;
my ($old_opened) = sort keys %opened;
is($new->safe_psql('postgres', "SELECT pay_begin('after-failover', 10, 'EUR')"),
	'PROCEED', 'a new payment begins on the new primary');
is($new->safe_psql('postgres', "SELECT pay_succeed('after-failover', 'BANK-after-failover', 1)"),
	'SUCCESS', 'and succeeds');
is($new->safe_psql('postgres', "SELECT pay_begin('$old_success')"),
	'ALREADY_SUCCEEDED', "a retry of an acknowledged success is answered from the ledger ($old_success)");
is($new->safe_psql('postgres', "SELECT pay_begin('$old_processing')"),
	'IN_PROGRESS', "a retry of a PROCESSING payment is not charged again ($old_processing)");
is( $new->safe_psql(
		'postgres', "SELECT pay_succeed(bizno, 'BANK-RECONCILED', attempt)
		             FROM pay_stuck('0 seconds', 1000000) WHERE bizno = '$old_processing'"),
	'SUCCESS', 'the reconciler settles it, with the attempt pay_stuck lists');
is($new->safe_psql('postgres', "SELECT pay_open('SHOP', '" . substr($old_opened, 5) . "', 10, 'EUR')"),
	$opened{$old_opened}, 'pay_open gives an opened order the bizNo acknowledged before');

# New bizNos, from four sessions at once and from pay_open, equal none issued
# before the promotion.
$new->safe_psql('postgres', 'CREATE TABLE issued_after (bizno text)');
my @issuers;
for my $session (1 .. $workers)
{
	my ($out, $err) = ('', '');
	push @issuers,
	  [
		IPC::Run::start(
			[
				'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $new->connstr('postgres'),
				'-c', "INSERT INTO issued_after SELECT pay_bizno('PAY', 'SAME') FROM generate_series(1, 5000)"
			],
			'>', \$out, '2>', \$err),
		\$err
	  ];
}
for my $issuer (@issuers)
{
	$issuer->[0]->finish or diag ${ $issuer->[1] };
}
$new->safe_psql('postgres',
	"INSERT INTO issued_after SELECT pay_open('SHOP', 'NEW-' || i, 10, 'EUR') FROM generate_series(1, 1000) AS i");
my ($before, $after, $distinct, $valid, $equal) = split /\|/,
  $new->safe_psql(
	'postgres', q{
	SELECT (SELECT count(DISTINCT bizno) FROM issued_before),
	       count(*), count(DISTINCT bizno), count(*) FILTER (WHERE pay_bizno_valid(bizno)),
	       (SELECT count(*) FROM issued_after AS a JOIN issued_before AS b USING (bizno))
	FROM issued_after});
note "$before bizNos issued before the promotion, $after after it, $equal equal";
is($after, 21_000, '21000 bizNos issued after the promotion');
is($distinct, $after, 'all of them distinct');
is($valid, $after, 'all of them valid');
is($equal, 0, 'none equals a bizNo issued before the promotion');
is($new->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'),
	0, 'the ledger still agrees with its journal');

note sprintf 'wall time %.1f s', time - $started;
$new->stop;
$primary->stop;
done_testing();
