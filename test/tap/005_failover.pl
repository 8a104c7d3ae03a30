# Failover to a synchronous standby under load: four clients pay on the
# primary, the primary is shut down immediately, the standby is promoted.  On
# the new primary every payment is in the state its acknowledged calls left
# it in -- or, for the one call per client that was in flight, in the state
# that call would have left -- so every acknowledged SUCCESS is SUCCESS; every
# PROCESSING payment is on pay_stuck's list; the ledger agrees with its
# journal (pay_verify); the API goes on; and no bizNo issued after the
# promotion equals one issued before it.
#
# Retention, in a database of its own (so that the load's database keeps
# counts a full count of its journal equals): payments settled in March and
# April 2025 are archived before the load, and an archive of the May ones
# is still open when the primary dies.  On the new primary the archive is
# the old primary's, partition for partition, row for row and hash for hash,
# nothing of the open archive is left, late retries of archived payments
# are answered from the archive or refused (55000 pay_archived), never
# charged, and pay_archive goes on there: it archives May, a month is
# dropped, and its payments' retries are refused.
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
# the payments here use keys of their own, keys of another system: accepted
$primary->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
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

# Retention's database: its payments by name (a refund as "refund of" its
# payment, an order as SHOP/biz_id), each with [the month of 2025 it is
# dated back to, whether pay_archive may move it]: PROCESSING stays, as does
# a payment whose refund is in flight; R-RECENT is of today.
$primary->safe_psql('postgres', 'CREATE DATABASE retention');
$primary->safe_psql('retention', 'CREATE EXTENSION idempotent_pay');
my $name_sql = q{CASE WHEN prefix = 'SHOP' THEN 'SHOP/' || biz_id
                      WHEN parent IS NOT NULL THEN 'refund of ' || parent ELSE bizno END};
my %retained = (
	'R-MAR-SUCCESS' => [ '03', 1 ],
	'R-MAR-FAILED' => [ '03', 1 ],
	'R-MAR-REFUNDED' => [ '03', 1 ],
	'refund of R-MAR-REFUNDED' => [ '03', 1 ],
	'SHOP/R-MAR-PAID' => [ '03', 1 ],
	'SHOP/R-MAR-OPENED' => [ '03', 1 ],
	'R-APR-SUCCESS' => [ '04', 1 ],
	'R-APR-RETRIED' => [ '04', 1 ],
	'R-APR-PROCESSING' => [ '04', 0 ],
	'R-APR-REFUNDING' => [ '04', 0 ],
	'refund of R-APR-REFUNDING' => [ '04', 0 ],
	'R-MAY-SUCCESS' => [ '05', 1 ],
	'R-MAY-FAILED' => [ '05', 1 ],
	'R-RECENT' => [ undef, 0 ]);
$primary->safe_psql(
	'retention', q{
SELECT pay_begin('R-MAR-SUCCESS', 10, 'EUR'), pay_succeed('R-MAR-SUCCESS', 'BANK-R-MAR-SUCCESS', 1);
SELECT pay_begin('R-MAR-FAILED', 10, 'EUR'), pay_fail('R-MAR-FAILED', 'declined', 1);
SELECT pay_begin('R-MAR-REFUNDED', 10, 'EUR'), pay_succeed('R-MAR-REFUNDED', 'BANK-R-MAR-REFUNDED', 1);
SELECT pay_refund_open('R-MAR-REFUNDED', 'R1', 4) AS refund \gset
SELECT pay_claim(:'refund', 4, 'EUR'), pay_succeed(:'refund', 'BANK-REFUND-1', 1);
SELECT bizno FROM pay_open_claim('SHOP', 'R-MAR-PAID', 10, 'EUR') \gset
SELECT pay_succeed(:'bizno', 'BANK-R-MAR-PAID', 1);
SELECT pay_open('SHOP', 'R-MAR-OPENED', 10, 'EUR');
SELECT pay_begin('R-APR-SUCCESS', 10, 'EUR'), pay_succeed('R-APR-SUCCESS', 'BANK-R-APR-SUCCESS', 1);
SELECT pay_begin('R-APR-RETRIED', 10, 'EUR'), pay_fail('R-APR-RETRIED', 'timeout', 1);
SELECT pay_begin('R-APR-RETRIED', 10, 'EUR'), pay_succeed('R-APR-RETRIED', 'BANK-R-APR-RETRIED', 2);
SELECT pay_begin('R-APR-PROCESSING', 10, 'EUR');
SELECT pay_begin('R-APR-REFUNDING', 10, 'EUR'), pay_succeed('R-APR-REFUNDING', 'BANK-R-APR-REFUNDING', 1);
SELECT pay_refund_open('R-APR-REFUNDING', 'R1', 4) AS refund \gset
SELECT pay_claim(:'refund', 4, 'EUR');
SELECT pay_begin('R-MAY-SUCCESS', 10, 'EUR'), pay_succeed('R-MAY-SUCCESS', 'BANK-R-MAY-SUCCESS', 1);
SELECT pay_begin('R-MAY-FAILED', 10, 'EUR'), pay_fail('R-MAY-FAILED', 'declined', 1);
SELECT pay_begin('R-RECENT', 10, 'EUR'), pay_succeed('R-RECENT', 'BANK-R-RECENT', 1);
});
# Dated back with the ledger's bookkeeping off, as a replica writes them.
$primary->safe_psql(
	'retention', qq{
SET session_replication_role = replica;
UPDATE pay_ledger
SET updated_at = CASE substring($name_sql FROM '-(MAR|APR|MAY)-')
                 WHEN 'MAR' THEN timestamptz '2025-03-10 12:00+00'
                 WHEN 'APR' THEN timestamptz '2025-04-10 12:00+00'
                 WHEN 'MAY' THEN timestamptz '2025-05-10 12:00+00' END
WHERE $name_sql ~ '-(MAR|APR|MAY)-';
});
my %retained_bizno = split /[|\n]/,
  $primary->safe_psql('retention', "SELECT $name_sql, bizno FROM pay_ledger");
is(join(' ', sort keys %retained_bizno), join(' ', sort keys %retained),
	'retention: every payment is in the ledger before archiving');

# What the archive must hold, per month: payments, ledger rows, journal
# rows (counted in the journal before it moves).
my %journal_rows = split /[|\n]/,
  $primary->safe_psql('retention',
	"SELECT $name_sql, count(*) FROM pay_journal JOIN pay_ledger USING (bizno) GROUP BY 1");
my $verify_sql = q{SELECT string_agg(concat_ws('|', month, payments, ledger_rows, journal_rows, kept,
                                                 coalesce(problem, 'no problem')), E'\n' ORDER BY month)
                    FROM pay_archive_verify()};
sub archive_months
{
	my (@months) = @_;
	return join "\n", map {
		my $month = $_;
		my @in = grep { ($retained{$_}[0] // '') eq $month && $retained{$_}[1] } keys %retained;
		my $journal = 0;
		$journal += $journal_rows{$_} for @in;
		sprintf '2025-%s-01|%d|%d|%d|t|no problem', $month, scalar(grep { !/^refund of / } @in),
		  scalar(@in), $journal
	} @months;
}
my @archived_first =
  sort grep { $retained{$_}[1] && ($retained{$_}[0] // '') =~ /^0[34]$/ } keys %retained;
is( $primary->safe_psql('retention', "SELECT pay_archive('2025-05-01')"),
	scalar(grep { !/^refund of / } @archived_first),
	'retention: pay_archive on the primary moves the settled payments of March and April');
my $archive_sql = "SELECT string_agg(a::text, E'\\n' ORDER BY a.bizno, a.month) FROM pay_ledger_archive AS a";
my $journal_archive_sql = "SELECT string_agg(a::text, E'\\n' ORDER BY a.seq) FROM pay_journal_archive AS a";
my $hashes_sql = "SELECT string_agg(h::text, ',' ORDER BY h) FROM pay_archive_keys, unnest(pay_archive_key_unpack(lo, hashes)) AS h";
my %archived_on_primary = map { $_ => $primary->safe_psql('retention', $_) }
  $archive_sql, $journal_archive_sql, $hashes_sql;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('retention', 'SELECT * FROM pay_archive_verify()'),
	$primary->safe_psql('retention', 'SELECT * FROM pay_archive_verify()'),
	'retention: the synchronous standby has the archive before the load');
# A look-up on the hot standby answers an archived payment from the archive,
# as the primary does: never no row.
my $lookup_sql = q{SELECT count(*) || E'\n' || string_agg(g::text, E'\n' ORDER BY g.bizno)
                   FROM pay_ledger_archive AS a, LATERAL pay_get(a.bizno) AS g};
is($standby->safe_psql('retention', $lookup_sql),
	$primary->safe_psql('retention', $lookup_sql),
	'retention: pay_get on the standby answers each archived payment and refund from the archive, as on the primary');
like($standby->safe_psql('retention', $lookup_sql), qr/^@{[scalar @archived_first]}\n/,
	'retention: ... every one of them');

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
				# the claim commits with its settlement, so it may run in the transaction
				"BEGIN;\nSET LOCAL idempotent_pay.claim_in_transaction = allow;\n"
				  . "SELECT pay_begin('$key', 10, 'EUR');\nSELECT pay_succeed('$key', 'BANK-$key', 1);\nCOMMIT;\n");
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

# An archive of the May payments, its transaction still open when the
# primary dies.
my ($archiving_out, $archiving_err) = ('', '');
my $archiving_file = "$scripts/archiving.sql";
open my $archiving_fh, '>', $archiving_file or die "cannot write $archiving_file: $!";
print $archiving_fh "BEGIN;\nSELECT pay_archive('2025-06-01');\nSELECT pg_sleep(600);\n";
close $archiving_fh;
my $archiving = IPC::Run::start(
	[
		'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $primary->connstr('retention'),
		'-f', $archiving_file
	],
	'<', '/dev/null', '>', \$archiving_out, '2>', \$archiving_err);
my $archiving_deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while ($archiving_out !~ /^\d+$/m && $archiving->pumpable && time < $archiving_deadline)
{
	$archiving->pump_nb;
	usleep(20_000);
}
is($archiving_out =~ /^(\d+)$/m ? $1 : "nothing: $archiving_err", 2,
	'retention: an archive of the two May payments is open when the primary dies');

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
$archiving->finish;
isnt($archiving->result(0), 0, 'and the open archive with it') or diag $archiving_err;

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

############################################################################
# Retention on the new primary.

# One session, each statement its own transaction, as a client's.
my $retention = $new->background_psql('retention', on_error_stop => 0);
$retention->query_safe('\\set VERBOSITY verbose');
sub retained_sql { return $retention->query_safe($_[0]); }

# A statement's output, or "SQLSTATE constraint" of the error it raises.
sub retained_answer
{
	my ($out, $failed) = $retention->query($_[0]);
	my $err = $retention->{stderr};
	$retention->{stderr} = '';
	return $out unless $failed;
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	my ($constraint) = $err =~ /^CONSTRAINT NAME:\s+(\S+)$/m;
	return join ' ', grep { defined } $state // "error ($err)", $constraint;
}

my $partitions_sql = q{
	SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_inherits AS i
	JOIN pg_class AS c ON c.oid = i.inhrelid
	WHERE i.inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)};
sub partitions_of
{
	return join ' ', sort map { ("pay_journal_archive_$_", "pay_ledger_archive_$_") } @_;
}
is(retained_sql($partitions_sql), partitions_of('2025_03', '2025_04', 'default'),
	'retention: the archive\'s partitions of March and April are on the new primary, none of May');
is(retained_sql($archive_sql), $archived_on_primary{$archive_sql},
	'retention: the archived payments are the old primary\'s, row for row');
is(retained_sql($journal_archive_sql), $archived_on_primary{$journal_archive_sql},
	'retention: and so are their archived journal rows');
is( retained_sql(
		"SELECT string_agg($name_sql || ' ' || tableoid::regclass, ', ' ORDER BY $name_sql COLLATE \"C\")
		 FROM pay_ledger_archive"),
	join(', ', map { "$_ pay_ledger_archive_2025_$retained{$_}[0]" } @archived_first),
	'retention: each in the partition of its month');
my %is_archived = map { $_ => 1 } @archived_first;
my @left = sort grep { !$is_archived{$_} } keys %retained;
is(retained_sql("SELECT string_agg($name_sql, ' ' ORDER BY $name_sql COLLATE \"C\") FROM pay_ledger"),
	join(' ', @left), 'retention: the ledger holds the others, the May payments of the open archive among them');
is( retained_sql(
		'SELECT count(*) FROM pay_journal AS j WHERE j.bizno IN (SELECT bizno FROM pay_ledger_archive)'),
	0, 'retention: no journal row of an archived payment is left in the journal');
is(retained_sql($hashes_sql), $archived_on_primary{$hashes_sql},
	'retention: pay_archive_keys is the old primary\'s, hash for hash');
# One hash a ledger row: of the business action of a bizNo of pay_bizno,
# else of the key (the definition in doc/reference.md, computed here).
my $identity_sql = q{CASE WHEN pay_bizno_valid(a.bizno)
	THEN (SELECT hashtextextended((p.prefix || ' ' || p.biz_id) COLLATE "C", 0) FROM pay_bizno_parse(a.bizno) AS p)
	ELSE hashtextextended(a.bizno COLLATE "C", 0) END};
my $hashes_check_sql = qq{
	SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT FROM pay_archive_keys AS k
	                                          WHERE x.h = ANY (pay_archive_key_unpack(k.lo, k.hashes)))),
	       count(DISTINCT x.h),
	       (SELECT sum(cardinality(pay_archive_key_unpack(lo, hashes))) FROM pay_archive_keys)
	FROM pay_ledger_archive AS a CROSS JOIN LATERAL (SELECT $identity_sql AS h) AS x};
is(retained_sql($hashes_check_sql), '0|' . scalar(@archived_first) . '|' . scalar(@archived_first),
	'retention: the hash of every archived payment and refund is kept, and nothing else');
is( retained_sql($verify_sql),
	archive_months('03', '04'),
	'retention: pay_archive_verify on the new primary: each month as archived, no problem');
is(retained_sql('SELECT count(*) FROM pay_verify()'), 0, 'retention: pay_verify() is empty on the new primary');

# Late retries: a success is answered from the archive; everything else
# archived is refused; nothing is charged again.
my $archived_keys = "SELECT count(*) FROM pay_ledger WHERE bizno IN ('"
  . join("', '", map { $retained_bizno{$_} } @archived_first)
  . "') OR (prefix, biz_id) IN (('SHOP', 'R-MAR-PAID'), ('SHOP', 'R-MAR-OPENED'))";
for my $case (
	[ "SELECT action, channel_ref FROM pay_claim('R-MAR-SUCCESS', 10, 'EUR')", 'ALREADY_SUCCEEDED|BANK-R-MAR-SUCCESS' ],
	[ "SELECT pay_begin('R-APR-RETRIED')", 'ALREADY_SUCCEEDED' ],
	[ "SELECT action, attempt FROM pay_claim('$retained_bizno{'SHOP/R-MAR-PAID'}')", 'ALREADY_SUCCEEDED|1' ],
	[ "SELECT pay_open('SHOP', 'R-MAR-PAID', 10, 'EUR')", $retained_bizno{'SHOP/R-MAR-PAID'} ],
	[ "SELECT pay_open('SHOP', 'R-MAR-OPENED', 10, 'EUR')", $retained_bizno{'SHOP/R-MAR-OPENED'} ],
	[ "SELECT pay_claim('$retained_bizno{'SHOP/R-MAR-OPENED'}')", '55000 pay_archived' ],
	[ "SELECT pay_begin('R-MAR-FAILED', 10, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_claim('R-MAR-FAILED')", '55000 pay_archived' ],
	[ "SELECT pay_succeed('R-APR-SUCCESS', 'BANK-LATE', 1)", '55000 pay_archived' ],
	[ "SELECT pay_refund_open('R-MAR-REFUNDED', 'R2', 1)", '55000 pay_archived' ])
{
	my ($call, $expected) = @$case;
	is(retained_answer($call), $expected, "retention, kept: $call answers $expected");
}
is(retained_sql($archived_keys), 0, 'retention: no late retry put an archived payment back in the ledger');

# pay_archive goes on on the new primary: May, which the open archive
# never moved.
my $first_run = grep { !/^refund of / } @archived_first;
is(retained_sql("SELECT pay_archive('2025-06-01')"), 2,
	'retention: pay_archive on the new primary moves the two May payments');
is(retained_sql($partitions_sql), partitions_of('2025_03', '2025_04', '2025_05', 'default'),
	'retention: in partitions of May it creates');
is(retained_sql('SELECT string_agg(payments::text, \' \' ORDER BY run) FROM pay_archive_runs'),
	"$first_run 2", 'retention: pay_archive_runs records the run before the failover and this one, not the open one');
is( retained_sql($verify_sql),
	archive_months('03', '04', '05'),
	'retention: pay_archive_verify: three months, no problem');

is( retained_sql(
		q{SELECT count(*) FROM pay_stats AS s
		  WHERE s.payments <> (SELECT count(*) FROM pay_ledger AS l WHERE l.status = s.status)}),
	0, 'retention: pay_stats counts the live ledger\'s payments');
is( retained_sql(
		q{SELECT (SELECT sum(transitions) FROM pay_stats_transitions)
		       - (SELECT count(*) FROM pay_journal WHERE from_status IS DISTINCT FROM to_status)
		       - (SELECT count(*) FROM pay_journal_archive WHERE from_status IS DISTINCT FROM to_status)}),
	0, 'retention: and every transition of the journal and of the archive');

# March dumped elsewhere and dropped: its payments are refused, however
# late; April still answers.
retained_sql('DROP TABLE pay_ledger_archive_2025_03, pay_journal_archive_2025_03');
is( retained_sql("SELECT kept, problem IS NULL FROM pay_archive_verify() WHERE month = '2025-03-01'"),
	'f|t', 'retention: March dropped: pay_archive_verify shows it not kept, without a problem');
for my $case (
	[ "SELECT pay_claim('R-MAR-SUCCESS', 10, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_begin('$retained_bizno{'SHOP/R-MAR-PAID'}')", '55000 pay_archived' ],
	[ "SELECT pay_open('SHOP', 'R-MAR-PAID', 10, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_open_claim('SHOP', 'R-MAR-OPENED', 10, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_claim('$retained_bizno{'refund of R-MAR-REFUNDED'}', 4, 'EUR')", '55000 pay_archived' ],
	[ "SELECT pay_begin('R-APR-SUCCESS')", 'ALREADY_SUCCEEDED' ],
	[ "SELECT pay_begin('R-MAY-FAILED', 10, 'EUR')", '55000 pay_archived' ])
{
	my ($call, $expected) = @$case;
	is(retained_answer($call), $expected, "retention, March dropped: $call answers $expected");
}
is(retained_sql($archived_keys), 0, 'retention: still no archived payment back in the ledger');
is(retained_sql("SELECT action FROM pay_claim('R-NEW', 10, 'EUR')"), 'PROCEED',
	'retention: a key never archived proceeds');
is(retained_sql('SELECT count(*) FROM pay_verify()'), 0, 'retention: pay_verify() is empty');

# amcheck over the archive's partitions and pay_archive_keys, as over the
# ledger and the journal (which it runs on here too).
is($new->safe_psql('retention', slurp_file(dirname(__FILE__) . '/amcheck.sql')),
	0, 'retention: amcheck finds heap and B-trees of ledger and journal intact');
my ($relations, $indexes, $heap_problems) = split /\|/, retained_sql(
	q{WITH r AS (SELECT inhrelid AS oid FROM pg_inherits
	             WHERE inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)
	             UNION ALL SELECT 'pay_archive_keys'::regclass)
	  SELECT (SELECT count(*) FROM r),
	         (SELECT count(bt_index_parent_check(i.indexrelid, heapallindexed => true))
	          FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid JOIN pg_am AS am ON am.oid = c.relam
	          WHERE i.indrelid IN (SELECT oid FROM r) AND am.amname = 'btree'),
	         (SELECT count(*) FROM r, verify_heapam(r.oid::regclass))});
note "amcheck checked $relations relations of the archive and $indexes B-trees";
my @archive_relations = ((split / /, partitions_of('2025_04', '2025_05', 'default')), 'pay_archive_keys');
is("$relations $heap_problems", scalar(@archive_relations) . ' 0',
	'retention: amcheck finds heap and B-trees of the archive\'s partitions and pay_archive_keys intact');

$retention->quit;

note sprintf 'wall time %.1f s', time - $started;
$new->stop;
$primary->stop;
done_testing();
