# Retention as a DBA runs it: pay_archive scheduled with pg_cron as an
# operator role, archives restored with default options, and what outlives
# a dropped month.
#
# 1. pg_cron (Debian's postgresql-15-cron; skipped where the server's major
#    has none): a job of the operator role archives every minute what was
#    settled over 30 days ago.  Its first run moves exactly the old settled
#    payments with their refunds and journal rows; an old PROCESSING
#    payment, one whose refund is in flight and a recent one stay;
#    pay_archive_verify and pay_verify find nothing wrong; the same job of
#    an application role is refused pay_archive.
# 2. pg_dump -Fc | pg_restore and pg_dump | psql, default options: the
#    month partitions come back with their rows (the counts
#    pay_archive_months recorded), pay_archive_keys with the same hashes,
#    and late retries answer as before the dump (ALREADY_SUCCEEDED from the
#    archive, 55000 for an archived FAILED or INIT key, pay_open's archived
#    bizNo, PROCEED for a new key), as do pay_get and pay_find (the archived
#    row, 55000 once its month is dropped).  Once a month's partitions are dropped
#    each of its keys is refused with 55000, also after another dump and
#    restore: the hashes are dumped, not the partitions.  amcheck finds the
#    restored ledger, journal and archive intact.
# 3. Where every payment was archived and its month dropped, the ledger is
#    empty, but DROP EXTENSION is still refused (2BP01): the hashes in
#    pay_archive_keys are what refuses a late retry, and would go with it.
# 4. The space given back while the application pays: pg_repack (Debian's
#    postgresql-15-repack; skipped where the server's major has none) of
#    pay_ledger, pay_journal and pay_archive_keys after a month of 20,000
#    payments was archived and dropped, 500 of this month staying.  Every
#    payment made meanwhile is
#    settled and journaled, the files shrink to within 1.1x those of a
#    database where the same payments were made and nothing archived, the
#    triggers and guards are as before, an archived key is still refused,
#    pay_verify is empty and amcheck finds the three intact.
#
# Every expectation is derived from the payments made here (which were old,
# settled, refunded), and the journal rows they wrote, never from what
# pay_archive reports.
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use List::Util qw(sum0);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $dir = PostgreSQL::Test::Utils::tempdir;
my $major = $ENV{PG_MAJOR} // 'this major';

my $node = PostgreSQL::Test::Cluster->new('archive');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
my $pg_cron = -f $node->config_data('--pkglibdir') . '/pg_cron.so';
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE payments');
if ($pg_cron)
{
	# pg_cron runs each job in a background worker of the job's database,
	# as the job's user: no connection to authenticate (over libpq, its
	# default, a non-superuser's job needs a password or trust in pg_hba).
	$node->append_conf(
		'postgresql.conf', q{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'payments'
cron.use_background_workers = on
});
	$node->restart;
}

# The README's roles, the application's and the operators', granted in
# each database of payments.
$node->safe_psql('postgres', 'CREATE ROLE payment_app LOGIN; CREATE ROLE payment_ops LOGIN;');
my $grants = q{SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops')};

# outcome(call): the first column of call's result, else its SQLSTATE and
# the constraint the error names.  It catches the error in a subtransaction,
# where a claim is refused by default; the claims it runs commit with the
# statement, so the session allows them (a plain SET: an application role
# may not name a setting of a library not loaded yet in a function's SET).
my $outcome = q{
	SET idempotent_pay.claim_in_transaction = allow;
	CREATE FUNCTION pg_temp.outcome(call text) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE
		result text;
		state text;
		name text;
	BEGIN
		EXECUTE call INTO result;
		RETURN result;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, name = CONSTRAINT_NAME;
		RETURN state || ' ' || name;
	END
	$$;
};

# A payment of $p (key, or prefix and biz_id for a business action of
# pay_open; amount, state, retried once; refunds, each key, amount, state)
# made through the API; returns its bizNo.
sub pay
{
	my ($db, $p) = @_;
	my $bizno = $p->{key};
	if ($p->{biz_id})
	{
		$bizno = $node->safe_psql($db,
			"SELECT pay_open('$p->{prefix}', '$p->{biz_id}', $p->{amount}, 'EUR')");
	}
	elsif ($p->{state} eq 'INIT')
	{
		die "an INIT payment is a business action here: $bizno";
	}
	if ($p->{state} ne 'INIT')
	{
		$node->safe_psql($db,
			"SELECT pay_begin('$bizno', $p->{amount}, 'EUR'), pay_fail('$bizno', 'timeout', 1)")
		  if $p->{retried};
		$node->safe_psql($db, "SELECT pay_begin('$bizno', $p->{amount}, 'EUR')");
		my $attempt = $p->{retried} ? 2 : 1;
		$node->safe_psql($db, "SELECT pay_succeed('$bizno', 'BANK-$bizno', $attempt)")
		  if $p->{state} eq 'SUCCESS';
		$node->safe_psql($db, "SELECT pay_fail('$bizno', 'declined', $attempt)")
		  if $p->{state} eq 'FAILED';
	}
	$p->{bizno} = $bizno;
	for my $r (@{ $p->{refunds} // [] })
	{
		my ($key, $amount, $state) = @$r{qw(key amount state)};
		$r->{bizno} = $node->safe_psql($db, "SELECT pay_refund_open('$bizno', '$key', $amount)");
		$node->safe_psql($db, "SELECT pay_claim('$r->{bizno}')");
		$node->safe_psql($db, "SELECT pay_succeed('$r->{bizno}', 'BANK-$r->{bizno}', 1)")
		  if $state eq 'SUCCESS';
	}
	return $bizno;
}

# Make the payments of @$ps look last changed when their "at" says, with the
# ledger's bookkeeping off (a refund has an "at" of its own, else its
# payment's).
sub age
{
	my ($db, $ps) = @_;
	my @updates;
	for my $p (grep { $_->{at} } @$ps)
	{
		push @updates, "UPDATE pay_ledger SET updated_at = '$p->{at}' WHERE bizno = '$p->{bizno}';";
		push @updates,
		  "UPDATE pay_ledger SET updated_at = '" . ($_->{at} // $p->{at}) . "' WHERE bizno = '$_->{bizno}';"
		  for @{ $p->{refunds} // [] };
	}
	$node->safe_psql($db,
		join("\n", 'SET session_replication_role = replica;', @updates, 'RESET session_replication_role;'));
}

# What pay_archive(before) must move of @$ps, by the rules: a payment not
# PROCESSING, last changed before the horizon, with every refund settled
# before it too; it goes with its refunds into the month (UTC) of the
# latest change of them all.  Returns { month => { payments => [..],
# ledger => [bizNos] } }.
sub archivable
{
	my ($ps, $horizon) = @_;
	my %months;
	for my $p (@$ps)
	{
		next if !$p->{at} || $p->{at} ge $horizon || $p->{state} eq 'PROCESSING';
		my @refunds = @{ $p->{refunds} // [] };
		next if grep { $_->{state} ne 'SUCCESS' || ($_->{at} // $p->{at}) ge $horizon } @refunds;
		my ($month) = sort { $b cmp $a } map { substr($_, 0, 7) } $p->{at},
		  map { $_->{at} // $p->{at} } @refunds;
		push @{ $months{$month}{payments} }, $p;
		push @{ $months{$month}{ledger} }, $p->{bizno}, map { $_->{bizno} } @refunds;
	}
	return \%months;
}

sub sql_list
{
	return join(', ', map { "'$_'" } @_);
}

# The journal rows of these bizNos, counted in $db now.
sub journal_rows
{
	my ($db, @biznos) = @_;
	return $node->safe_psql($db, 'SELECT count(*) FROM pay_journal WHERE bizno IN (' . sql_list(@biznos) . ')');
}

# Run a restore command; it must succeed without a single error.
sub restore
{
	my ($name, @command) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(\@command, '>', \$out, '2>', \$err);
	ok($ok && $err !~ /ERROR/, "$name: no error") or diag $err;
}

###########################################################################
# 1. pay_archive scheduled with pg_cron, as the operators' role.
###########################################################################
SKIP:
{
	skip "pg_cron is not installed for PostgreSQL $major (apt-get install postgresql-$major-cron; Debian has it for 15 alone)",
	  14
	  unless $pg_cron;

	my $db = 'payments';
	$node->safe_psql($db, 'CREATE EXTENSION pg_cron');
	$node->safe_psql($db, 'CREATE EXTENSION idempotent_pay');
	$node->safe_psql($db, $grants);

	my $old = '2025-03-10 12:00:00+00';
	my @payments = (
		{ key => 'CRONJOB-SUCCESS', amount => 10, state => 'SUCCESS', at => $old },
		{ key => 'CRONJOB-FAILED', amount => 11, state => 'FAILED', at => $old },
		{ prefix => 'CRON', biz_id => 'ORDER-INIT', amount => 12, state => 'INIT', at => $old },
		{ prefix => 'CRON', biz_id => 'ORDER-PAID', amount => 13, state => 'SUCCESS', at => $old },
		{ key => 'CRONJOB-PROCESSING', amount => 14, state => 'PROCESSING', at => $old },
		{
			key => 'CRONJOB-REFUNDED', amount => 15, state => 'SUCCESS', at => $old,
			refunds => [ { key => 'R1', amount => 5, state => 'SUCCESS' } ]
		},
		{
			key => 'CRONJOB-REFUNDING', amount => 16, state => 'SUCCESS', at => $old,
			refunds => [ { key => 'R1', amount => 6, state => 'PROCESSING' } ]
		},
		{ key => 'CRONJOB-RECENT', amount => 17, state => 'SUCCESS' },);
	pay($db, $_) for @payments;
	age($db, \@payments);

	my $horizon = $node->safe_psql($db, q{SELECT to_char((now() - interval '30 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS+00')});
	my $expected = archivable(\@payments, $horizon);
	my @moved = map { @{ $expected->{$_}{ledger} } } sort keys %$expected;
	my @moved_payments = map { $_->{bizno} } map { @{ $expected->{$_}{payments} } } sort keys %$expected;
	my %moved = map { $_ => 1 } @moved;
	my @staying = grep { !$moved{$_} }
	  map { ($_->{bizno}, map { $_->{bizno} } @{ $_->{refunds} // [] }) } @payments;
	my $ledger_before = $node->safe_psql($db,
		'SELECT string_agg(bizno || \' \' || status, \',\' ORDER BY bizno) FROM pay_ledger WHERE bizno IN ('
		  . sql_list(@staying) . ')');
	my %journal = map { $_ => journal_rows($db, @{ $expected->{$_}{ledger} }) } keys %$expected;

	# The fold the operations guide schedules beside the archive.  Without
	# one, the job's pay_archive folds first itself, and a first fold while
	# another transaction runs (the application's job, started in the same
	# second) counts no journal row: the archive would leave every payment
	# for a later run.
	is($node->safe_psql($db, 'SELECT pay_stats_refresh()'), 't', 'pay_stats folded the journal before the job runs');

	# pg_cron lets a role schedule jobs, which run as that role, once it may
	# use the schema cron.
	my $schedule = q{SELECT cron.schedule('pay-archive', '* * * * *', $$SELECT pay_archive(now() - interval '30 days')$$)};
	my ($ret, $stdout, $stderr) = $node->psql($db, $schedule, extra_params => [ '-U', 'payment_ops' ]);
	like($stderr, qr/permission denied for schema cron/, 'pg_cron: an operator needs USAGE on schema cron to schedule');
	$node->safe_psql($db, 'GRANT USAGE ON SCHEMA cron TO payment_ops, payment_app');
	my $job = $node->safe_psql($db, $schedule, extra_params => [ '-U', 'payment_ops' ]);
	my $app_job = $node->safe_psql($db,
		q{SELECT cron.schedule('pay-archive-app', '* * * * *', $$SELECT pay_archive(now() - interval '30 days')$$)},
		extra_params => [ '-U', 'payment_app' ]);
	is( $node->safe_psql($db,
			"SELECT string_agg(jobname || ' ' || username, ', ' ORDER BY jobname) FROM cron.job WHERE jobid IN ($job, $app_job)"),
		'pay-archive payment_ops, pay-archive-app payment_app',
		'pg_cron: each job runs as the role that scheduled it');

	# The first minute's runs: both jobs done, by the next minute at most.
	my $start = time;
	my $done = 0;
	while (time - $start < 90)
	{
		$done = $node->safe_psql($db,
			"SELECT count(DISTINCT jobid) FROM cron.job_run_details WHERE jobid IN ($job, $app_job) AND status IN ('succeeded', 'failed')");
		last if $done == 2;
		sleep 0.5;
	}
	is($done, 2, sprintf('pg_cron ran both jobs (after %.0f s)', time - $start));
	$node->safe_psql($db, q{SELECT cron.unschedule('pay-archive')}, extra_params => [ '-U', 'payment_ops' ]);
	$node->safe_psql($db, q{SELECT cron.unschedule('pay-archive-app')}, extra_params => [ '-U', 'payment_app' ]);

	is( $node->safe_psql($db,
			"SELECT status || ' ' || return_message || ' ' || username FROM cron.job_run_details WHERE jobid = $job ORDER BY runid LIMIT 1"),
		'succeeded SELECT 1 payment_ops',
		"pg_cron: the operator's job succeeded");
	like( $node->safe_psql($db,
			"SELECT status || ' ' || return_message FROM cron.job_run_details WHERE jobid = $app_job ORDER BY runid LIMIT 1"),
		qr/^failed .*permission denied for function pay_archive/,
		"pg_cron: the application's job is refused pay_archive");
	is( $node->safe_psql($db,
			'SELECT payments || \' \' || ledger_rows || \' \' || journal_rows || \' \' || actor FROM pay_archive_runs ORDER BY run'),
		join(' ', scalar(@moved_payments), scalar(@moved), sum0(values %journal), 'payment_ops'),
		'the run moved the old settled payments, their refunds and journal rows, as the operator');

	is( $node->safe_psql($db,
			'SELECT string_agg(bizno, \',\' ORDER BY bizno) FROM pay_ledger_archive'),
		join(',', sort @moved),
		'the archive holds exactly the old settled payments and their refunds');
	is( $node->safe_psql($db,
			'SELECT count(*) FROM pay_ledger WHERE bizno IN (' . sql_list(@moved) . ')') . ' '
		  . journal_rows($db, @moved),
		'0 0', 'the ledger and the journal hold none of them any more');
	is( $node->safe_psql($db,
			'SELECT string_agg(bizno || \' \' || status, \',\' ORDER BY bizno) FROM pay_ledger WHERE bizno IN ('
			  . sql_list(@staying) . ')'),
		$ledger_before,
		'PROCESSING, a payment with its refund in flight, and a recent one stay as they were');
	is( $node->safe_psql($db,
			q{SELECT string_agg(to_char(month, 'YYYY-MM') || ' ' || payments || ' ' || ledger_rows || ' ' || journal_rows
			                    || ' ' || kept || ' ' || coalesce(problem, 'none'), ', ' ORDER BY month)
			  FROM pay_archive_verify()}),
		join(', ',
			map { "$_ " . scalar(@{ $expected->{$_}{payments} }) . ' ' . scalar(@{ $expected->{$_}{ledger} }) . " $journal{$_} true none" }
			  sort keys %$expected),
		'pay_archive_verify: each month as archived, no problem');
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_verify()'), 0, 'pay_verify() is empty');
	is( $node->safe_psql($db, $outcome . q{SELECT pg_temp.outcome($$SELECT pay_begin('CRONJOB-SUCCESS', 10, 'EUR')$$)
		|| ', ' || pg_temp.outcome($$SELECT pay_begin('CRONJOB-FAILED', 11, 'EUR')$$)}),
		'ALREADY_SUCCEEDED, 55000 pay_archived',
		'late retries of archived keys: answered from the archive, or refused');
	is($node->safe_psql($db, 'SELECT count(*) FROM cron.job'), 0, 'pg_cron: both jobs unscheduled');
}

###########################################################################
# 2. Dump and restore with default options, before and after a month is
#    dropped.
###########################################################################
my $march = '2025-03-10 12:00:00+00';
my $april = '2025-04-20 12:00:00+00';
my @payments = (
	{ key => 'D-SUCCESS', amount => 10, state => 'SUCCESS', at => $march },
	{ key => 'D-FAILED', amount => 11, state => 'FAILED', at => $march },
	{ key => 'D-RETRIED', amount => 12, state => 'SUCCESS', at => $march, retried => 1 },
	{ prefix => 'SHOP', biz_id => 'ORDER-INIT', amount => 13, state => 'INIT', at => $march },
	{
		prefix => 'SHOP', biz_id => 'ORDER-PAID', amount => 14, state => 'SUCCESS', at => $march,
		refunds => [ { key => 'R1', amount => 4, state => 'SUCCESS' } ]
	},
	{
		key => 'D-REFUNDED', amount => 20, state => 'SUCCESS', at => $march,
		refunds => [ { key => 'R1', amount => 5, state => 'SUCCESS' } ]
	},
	# last changed in April by its refund: April's
	{
		key => 'D-REFUNDED-LATER', amount => 21, state => 'SUCCESS', at => $march,
		refunds => [ { key => 'R1', amount => 6, state => 'SUCCESS', at => $april } ]
	},
	{ key => 'D-APRIL-SUCCESS', amount => 15, state => 'SUCCESS', at => $april },
	{ key => 'D-APRIL-FAILED', amount => 16, state => 'FAILED', at => $april },
	{ prefix => 'SHOP', biz_id => 'ORDER-APRIL', amount => 17, state => 'SUCCESS', at => $april },
	{ key => 'D-PROCESSING', amount => 18, state => 'PROCESSING', at => $march },
	{ key => 'D-RECENT', amount => 19, state => 'SUCCESS' },);

$node->safe_psql('postgres', 'CREATE DATABASE source');
$node->safe_psql('source', 'CREATE EXTENSION idempotent_pay');
$node->safe_psql('source', $grants);
pay('source', $_) for @payments;
age('source', \@payments);

my $horizon = $node->safe_psql('source',
	q{SELECT to_char((now() - interval '30 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS+00')});
my $expected = archivable(\@payments, $horizon);
my @months = sort keys %$expected;
is(join(' ', @months), '2025-03 2025-04', 'the payments to archive fall in two months');
my %journal = map { $_ => journal_rows('source', @{ $expected->{$_}{ledger} }) } @months;
my @moved = map { @{ $expected->{$_}{ledger} } } @months;
my @moved_payments = map { @{ $expected->{$_}{payments} } } @months;

# The hashes that must outlive the archive, one a payment's identity: of
# its business action (prefix, biz_id) for a bizNo of pay_open, which its
# refunds' bizNos carry too; else of its key, and of "REFUND key" for its
# refunds.
my @identities;
for my $p (@moved_payments)
{
	if ($p->{biz_id})
	{
		push @identities, "$p->{prefix} $p->{biz_id}";
	}
	else
	{
		push @identities, $p->{key};
		push @identities, "REFUND $p->{key}" if @{ $p->{refunds} // [] };
	}
}
my $expected_hashes = $node->safe_psql('source',
	'SELECT string_agg(h::text, \',\' ORDER BY h) FROM (SELECT DISTINCT hashtextextended(k COLLATE "C", 0) AS h FROM unnest(ARRAY['
	  . sql_list(@identities) . ']) AS k) AS hashes');

# What the month's partitions and pay_archive_months must say: per month,
# payments, ledger rows and journal rows.
my $expected_months = join(', ',
	map { "$_ " . scalar(@{ $expected->{$_}{payments} }) . ' ' . scalar(@{ $expected->{$_}{ledger} }) . " $journal{$_}" }
	  @months);

# The application's role may not archive; the operators' archives in
# batches of 3 until nothing is left.
is( $node->safe_psql('source',
		$outcome . q{SET ROLE payment_app; SELECT pg_temp.outcome($$SELECT pay_archive(now() - interval '30 days')$$)}),
	'42501 ', 'pay_archive is refused to the application role');
my ($batches, $archived) = (0, 0);
while (1)
{
	my $n = $node->safe_psql('source', q{SELECT pay_archive(now() - interval '30 days', 3)},
		extra_params => [ '-U', 'payment_ops' ]);
	last if $n == 0 || ++$batches > 10;
	$archived += $n;
}
is($archived, scalar(@moved_payments), "the operator archived the old settled payments in $batches batches");

# Everything the archive keeps, as text, with the partition of each row.
sub archive_contents
{
	my ($db) = @_;
	return $node->safe_psql(
		$db, q{
		SELECT (SELECT string_agg(a.tableoid::regclass || ' ' || a::text, E'\n' ORDER BY a.bizno) FROM pay_ledger_archive AS a),
		       (SELECT string_agg(a.tableoid::regclass || ' ' || a::text, E'\n' ORDER BY a.seq) FROM pay_journal_archive AS a),
		       (SELECT string_agg(k::text, E'\n' ORDER BY k.lo) FROM pay_archive_keys AS k),
		       (SELECT string_agg(m::text, E'\n' ORDER BY m.month) FROM pay_archive_months AS m),
		       (SELECT string_agg(r::text, E'\n' ORDER BY r.run) FROM pay_archive_runs AS r),
		       (SELECT string_agg(c::text, E'\n' ORDER BY c::text) FROM pay_archive_counts AS c),
		       (SELECT string_agg(l::text, E'\n' ORDER BY l.bizno) FROM pay_ledger AS l),
		       (SELECT string_agg(j::text, E'\n' ORDER BY j.seq) FROM pay_journal AS j)});
}

# The partitions of the archive, and per month the rows they hold.
sub partitions
{
	my ($db) = @_;
	return $node->safe_psql($db,
		q{SELECT string_agg(inhrelid::regclass::text, ' ' ORDER BY inhrelid::regclass::text) FROM pg_inherits
		  WHERE inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)});
}

sub partition_rows
{
	my ($db) = @_;
	return join(
		', ',
		map {
			my $suffix = $_ =~ s/-/_/r;
			"$_ "
			  . $node->safe_psql($db,
				"SELECT (SELECT count(DISTINCT bizno) FILTER (WHERE parent IS NULL) || ' ' || count(*) FROM pay_ledger_archive_$suffix)"
				  . " || ' ' || (SELECT count(*) FROM pay_journal_archive_$suffix)")
		} @months);
}

sub expected_partitions
{
	my (%dropped) = @_;
	return join(' ',
		sort('pay_journal_archive_default', 'pay_ledger_archive_default',
			map { ("pay_ledger_archive_$_", "pay_journal_archive_$_") } map { s/-/_/r } grep { !$dropped{$_} } @months));
}

sub months_verified
{
	my ($db) = @_;
	return $node->safe_psql($db,
		q{SELECT string_agg(to_char(month, 'YYYY-MM') || ' ' || payments || ' ' || ledger_rows || ' ' || journal_rows
		                    || ' ' || kept || ' ' || coalesce(problem, 'none'), ', ' ORDER BY month)
		  FROM pay_archive_verify()});
}

sub expected_verified
{
	my (%dropped) = @_;
	return join(', ',
		map { "$_ " . scalar(@{ $expected->{$_}{payments} }) . ' ' . scalar(@{ $expected->{$_}{ledger} }) . " $journal{$_} "
			  . ($dropped{$_} ? 'false' : 'true') . ' none' } @months);
}

sub hashes
{
	my ($db) = @_;
	return $node->safe_psql($db,
		q{SELECT string_agg(h::text, ',' ORDER BY h) FROM pay_archive_keys, unnest(pay_archive_key_unpack(lo, hashes)) AS h});
}

# Late retries of every archived payment, refund and business action, of
# the one left PROCESSING, and of a new key: each call and its outcome.
# With them the look-ups a caller makes before it pays (pay_get, and
# pay_find of a business action): the archived row while its month is
# kept, 55000 once dropped -- never no row.
my $new_keys = 0;
my @late_calls;
sub lookup_call
{
	my ($from) = @_;
	return "SELECT coalesce((SELECT status || ' ' || attempt FROM $from), 'no row')";
}
for my $month (@months)
{
	for my $p (@{ $expected->{$month}{payments} })
	{
		my $attempts = $p->{state} eq 'INIT' ? 0 : $p->{retried} ? 2 : 1;
		push @late_calls, [ $month, lookup_call("pay_get('$p->{bizno}')"), "$p->{state} $attempts", 'lookup' ];
		push @late_calls,
		  [ $month, lookup_call("pay_find('$p->{prefix}', '$p->{biz_id}')"), "$p->{state} $attempts", 'lookup' ]
		  if $p->{biz_id};
		push @late_calls, [ $month, lookup_call("pay_get('$_->{bizno}')"), "$_->{state} 1", 'lookup' ]
		  for @{ $p->{refunds} // [] };
		push @late_calls, [ $month, "SELECT pay_begin('$p->{bizno}', $p->{amount}, 'EUR')", $p->{state} ];
		push @late_calls,
		  [ $month, "SELECT (pay_claim('$p->{bizno}', $p->{amount}, 'EUR')).action", $p->{state} ];
		# pay_open answers the archived bizNo; a claim of another bizNo of
		# the same business action is refused
		push @late_calls,
		  [ $month, "SELECT pay_open('$p->{prefix}', '$p->{biz_id}', $p->{amount}, 'EUR')", $p->{bizno} ],
		  [ $month, "SELECT (pay_claim(pay_bizno('$p->{prefix}', '$p->{biz_id}'), $p->{amount}, 'EUR')).action", 'refused' ]
		  if $p->{biz_id};
		push @late_calls, [ $month, "SELECT (pay_claim('$_->{bizno}', $_->{amount}, 'EUR')).action", $_->{state} ]
		  for @{ $p->{refunds} // [] };
	}
}

sub late_retries
{
	my ($db, $new) = @_;
	my @calls = (
		(map { $_->[1] } @late_calls),
		"SELECT pay_begin('D-PROCESSING', 18, 'EUR')",
		"SELECT pay_begin('$new', 1, 'EUR')");
	return $node->safe_psql($db,
		    $outcome
		  . 'SELECT string_agg(c.call || \' => \' || pg_temp.outcome(c.call), E\'\n\' ORDER BY c.n) FROM (VALUES '
		  . join(', ', map { '($q$' . $calls[$_] . '$q$, ' . $_ . ')' } 0 .. $#calls)
		  . ') AS c(call, n)');
}

sub expected_late_retries
{
	my ($new, %dropped) = @_;
	return join("\n",
		(map {
			my ($month, $call, $answer, $lookup) = @$_;
			"$call => "
			  . ($dropped{$month} ? '55000 pay_archived'
				: $lookup ? $answer
				: $answer =~ /^(FAILED|INIT|refused)$/ ? '55000 pay_archived'
				: $answer eq 'SUCCESS' ? 'ALREADY_SUCCEEDED'
				: $answer)
		} @late_calls),
		"SELECT pay_begin('D-PROCESSING', 18, 'EUR') => IN_PROGRESS",
		"SELECT pay_begin('$new', 1, 'EUR') => PROCEED");
}

sub check_late_retries
{
	my ($db, $name, %dropped) = @_;
	my $new = 'D-NEW-' . ++$new_keys;
	is(late_retries($db, $new), expected_late_retries($new, %dropped), $name);
}

# amcheck over the ledger and the journal (amcheck.sql), then over every
# partition of the archive and pay_archive_keys: heap problems found.
sub amcheck
{
	my ($db) = @_;
	my $ledger = $node->safe_psql($db, slurp_file(dirname(__FILE__) . '/amcheck.sql'));
	my $archive = $node->safe_psql(
		$db, q{
		SET client_min_messages = warning;
		CREATE EXTENSION IF NOT EXISTS amcheck;
		CREATE TEMPORARY TABLE archive_tables AS
		SELECT inhrelid AS rel FROM pg_inherits
		WHERE inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)
		UNION ALL SELECT 'pay_archive_keys'::regclass;
		SELECT count(bt_index_parent_check(i.indexrelid, heapallindexed => true)) >= 0 AS indexes_checked
		FROM pg_index AS i
		JOIN pg_class AS c ON c.oid = i.indexrelid
		JOIN pg_am AS am ON am.oid = c.relam
		WHERE i.indrelid IN (SELECT rel FROM archive_tables) AND am.amname = 'btree' \gset
		SELECT sum((SELECT count(*) FROM verify_heapam(rel))) FROM archive_tables;});
	return "$ledger $archive";
}

my $source = archive_contents('source');
is(partitions('source'), expected_partitions(), 'source: a partition of each table per month');
is(partition_rows('source'), $expected_months, "source: each month's partitions hold its payments, refunds and journal rows");
is(hashes('source'), $expected_hashes, 'source: pay_archive_keys holds the hash of each key and business action moved');

my $dump = "$dir/source.dump";
my $dump_sql = "$dir/source.sql";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('source') ], 'pg_dump -Fc');
$node->command_ok([ 'pg_dump', '-f', $dump_sql, '-d', $node->connstr('source') ], 'pg_dump (plain)');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->safe_psql('postgres', 'CREATE DATABASE restored_plain');
restore('pg_restore', 'pg_restore', '-d', $node->connstr('restored'), $dump);
restore('pg_dump | psql', 'psql', '-X', '-q', '-d', $node->connstr('restored_plain'), '-f', $dump_sql);

for my $db ('source', 'restored', 'restored_plain')
{
	if ($db ne 'source')
	{
		is(archive_contents($db), $source, "$db: archive, its bookkeeping, ledger and journal as they were");
		is(partitions($db), expected_partitions(), "$db: every partition attached");
		is(partition_rows($db), $expected_months, "$db: each month's partitions hold its rows");
		is(hashes($db), $expected_hashes, "$db: pay_archive_keys holds the same hashes");
	}
	is( $node->safe_psql($db, 'SELECT string_agg(to_char(month, \'YYYY-MM\') || \' \' || payments || \' \' || ledger_rows || \' \' || journal_rows, \', \' ORDER BY month) FROM pay_archive_months'),
		$expected_months, "$db: pay_archive_months records what was moved");
	is(months_verified($db), expected_verified(), "$db: pay_archive_verify finds each month kept, no problem");
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_verify()'), 0, "$db: pay_verify() is empty");
	# a partition's TRUNCATE guard is its own, dumped and restored with it
	is( $node->safe_psql(
			$db, q{SELECT count(*) FILTER (WHERE t.tgenabled = 'A') || ' of ' || count(*)
			       FROM pg_inherits AS i LEFT JOIN pg_trigger AS t
			         ON t.tgrelid = i.inhrelid AND t.tgtype & 32 <> 0
			       WHERE i.inhparent IN ('pay_ledger_archive'::regclass, 'pay_journal_archive'::regclass)}),
		(2 * @months + 2) . ' of ' . (2 * @months + 2),
		"$db: every partition of the archive refuses TRUNCATE, always");
	check_late_retries($db, "$db: late retries answer from the archive or are refused");
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_ledger WHERE bizno IN (' . sql_list(@moved) . ')'),
		0, "$db: no archived key is back in the ledger");
	is(amcheck($db), '0 0', "$db: amcheck finds ledger, journal and archive intact") if $db ne 'source';
}

# A month dropped, then the other: each archived key of a dropped month is
# refused, however it is retried; the other month's still answer.
my %dropped;
for my $month (@months)
{
	my $suffix = $month =~ s/-/_/r;
	$node->safe_psql('restored', "DROP TABLE pay_ledger_archive_$suffix, pay_journal_archive_$suffix");
	$dropped{$month} = 1;
	is(months_verified('restored'), expected_verified(%dropped), "restored, $month dropped: pay_archive_verify says so, no problem");
	check_late_retries('restored', "restored, $month dropped: its keys are refused with 55000", %dropped);
}
is(hashes('restored'), $expected_hashes, 'restored, every month dropped: the hashes are kept');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_verify()'), 0, 'restored, every month dropped: pay_verify() is empty');

# Dumped and restored once more: the hashes come back without the partitions.
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/dropped.dump", '-d', $node->connstr('restored') ],
	'pg_dump -Fc after the drop');
$node->safe_psql('postgres', 'CREATE DATABASE after_drop');
restore('pg_restore after the drop', 'pg_restore', '-d', $node->connstr('after_drop'), "$dir/dropped.dump");
is(partitions('after_drop'), expected_partitions(%dropped), 'after_drop: only the default partitions');
is(hashes('after_drop'), $expected_hashes, 'after_drop: pay_archive_keys holds the same hashes');
is(months_verified('after_drop'), expected_verified(%dropped), 'after_drop: pay_archive_verify finds every month dropped, no problem');
check_late_retries('after_drop', 'after_drop: every archived key is refused with 55000, a new one proceeds', %dropped);
is($node->safe_psql('after_drop', 'SELECT count(*) FROM pay_verify()'), 0, 'after_drop: pay_verify() is empty');
is(amcheck('after_drop'), '0 0', 'after_drop: amcheck finds ledger, journal and archive intact');

###########################################################################
# 3. Every payment archived, its month dropped: the ledger is empty, the
#    hashes are not, and DROP EXTENSION is refused.
###########################################################################
my @all = (
	{ key => 'E-SUCCESS', amount => 10, state => 'SUCCESS' },
	{ key => 'E-FAILED', amount => 11, state => 'FAILED' },
	{ prefix => 'SHOP', biz_id => 'ORDER-E', amount => 12, state => 'INIT' },
	{
		key => 'E-REFUNDED', amount => 13, state => 'SUCCESS',
		refunds => [ { key => 'R1', amount => 3, state => 'SUCCESS' } ]
	},);
$node->safe_psql('postgres', 'CREATE DATABASE emptied');
$node->safe_psql('emptied', 'CREATE EXTENSION idempotent_pay');
$node->safe_psql('emptied', $grants);
pay('emptied', $_) for @all;
is($node->safe_psql('emptied', 'SELECT pay_archive(now())', extra_params => [ '-U', 'payment_ops' ]),
	scalar(@all), 'emptied: every payment archived');
my @emptied_months = split /\n/, $node->safe_psql('emptied', q{SELECT to_char(month, 'YYYY_MM') FROM pay_archive_months});
$node->safe_psql('emptied', "DROP TABLE pay_ledger_archive_$_, pay_journal_archive_$_") for @emptied_months;
is( $node->safe_psql('emptied',
		'SELECT (SELECT count(*) FROM pay_ledger) || \' \' || (SELECT count(*) FROM pay_journal) || \' \' || (SELECT count(*) FROM pay_ledger_archive)'),
	'0 0 0', 'emptied: the ledger, the journal and the archive hold nothing');
for my $drop ('DROP EXTENSION idempotent_pay', 'DROP EXTENSION idempotent_pay CASCADE')
{
	my ($ret, $stdout, $stderr) = $node->psql('emptied', "\\set VERBOSITY verbose\n$drop");
	like($stderr, qr/ERROR:  2BP01: .*pay_archive_keys/, "emptied: $drop is refused (2BP01), naming pay_archive_keys");
}
is($node->safe_psql('emptied', q{SELECT count(*) FROM pg_extension WHERE extname = 'idempotent_pay'}),
	1, 'emptied: the extension stays');
is( $node->safe_psql('emptied',
		$outcome . q{SELECT pg_temp.outcome($$SELECT pay_begin('E-SUCCESS', 10, 'EUR')$$)}),
	'55000 pay_archived', 'emptied: and refuses a late retry');

###########################################################################
# 4. pg_repack after the archive, while the application pays.
###########################################################################
my $pg_repack = $node->config_data('--bindir') . '/pg_repack';
SKIP:
{
	skip "pg_repack is not installed for PostgreSQL $major (apt-get install postgresql-$major-repack)", 15
	  unless -x $pg_repack && -f $node->config_data('--pkglibdir') . '/pg_repack.so';
	my $db = 'repacked';
	my $old = 20000;
	my $live = 4000;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION idempotent_pay; CREATE EXTENSION pg_repack;');
	$node->safe_psql($db, $grants);
	# a month of old settled payments, each with its two journal rows, as
	# pay_begin and pay_succeed leave them (written with the bookkeeping off,
	# to date them, and with a restore's settings, under which the journal
	# takes rows it did not write); archived and dropped
	$node->safe_psql(
		$db, qq{
		SET session_replication_role = replica;
		SET row_security = off;
		SET check_function_bodies = false;
		INSERT INTO pay_ledger (bizno, status, attempt, amount, currency, channel_ref,
		                        created_at, updated_at, processing_since)
		    SELECT 'OLD-' || g, 'SUCCESS', 1, 10, 'EUR', 'BANK-OLD-' || g,
		           '2025-03-10 12:00+00', '2025-03-10 12:00+00', '2025-03-10 12:00+00'
		    FROM generate_series(1, $old) AS g;
		INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, at)
		    SELECT 'OLD-' || (i + 1) / 2, 1,
		           CASE WHEN i % 2 = 0 THEN 'PROCESSING' END::pay_status,
		           CASE WHEN i % 2 = 0 THEN 'SUCCESS' ELSE 'PROCESSING' END::pay_status,
		           10, 'EUR', '2025-03-10 12:00+00'
		    FROM generate_series(1, 2 * $old) AS i;
		RESET session_replication_role;});
	# and after them in the files, the payments of this month
	$node->safe_psql($db, "SELECT pay_begin('NOW-' || g, 5, 'EUR') FROM generate_series(1, 500) AS g");
	$node->safe_psql($db, "SELECT pay_succeed('NOW-' || g, 'BANK-NOW-' || g, 1) FROM generate_series(1, 500) AS g");
	is($node->safe_psql($db, q{SELECT pay_archive('2025-04-01', 100000)}, extra_params => [ '-U', 'payment_ops' ]),
		$old, "$db: the old month archived");
	$node->safe_psql($db, 'DROP TABLE pay_ledger_archive_2025_03, pay_journal_archive_2025_03');
	$node->safe_psql($db, 'VACUUM pay_ledger, pay_journal, pay_archive_keys');
	my $sizes = q{SELECT pg_total_relation_size('pay_ledger') || ' ' || pg_total_relation_size('pay_journal')
	                     || ' ' || pg_total_relation_size('pay_archive_keys')};
	my $triggers = q{SELECT string_agg(tgrelid::regclass || ' ' || tgname || ' ' || tgenabled::text, ', ' ORDER BY 1)
	                 FROM pg_trigger WHERE tgrelid IN ('pay_ledger'::regclass, 'pay_journal'::regclass)};
	my @before = split / /, $node->safe_psql($db, $sizes);
	my $triggers_before = $node->safe_psql($db, $triggers);

	# the application pays, each call its own transaction, while pg_repack
	# rewrites the three tables
	my $script = "$dir/repack_payments.sql";
	open my $fh, '>', $script or die "cannot write $script: $!";
	print $fh "SELECT pay_begin('LIVE-$_', 5, 'EUR');\nSELECT pay_succeed('LIVE-$_', 'BANK-LIVE-$_', 1);\n"
	  for 1 .. $live;
	close $fh;
	my ($app_out, $app_err) = ('', '');
	my $app = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-U', 'payment_app',
			'-d', $node->connstr($db), '-f', $script
		],
		'<', '/dev/null', '>', \$app_out, '2>', \$app_err);
	my $paid = q{SELECT count(*) FROM pay_ledger WHERE bizno LIKE 'LIVE-%'};
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	sleep(0.05) while $node->safe_psql($db, $paid) < 100 && time < $deadline;
	my $paid_at_start = $node->safe_psql($db, $paid);
	my ($repack_out, $repack_err) = ('', '');
	my $repacked = IPC::Run::run(
		[
			$pg_repack, '-h', $node->host, '-p', $node->port, '-d', $db,
			'-t', 'pay_ledger', '-t', 'pay_journal', '-t', 'pay_archive_keys'
		],
		'<', '/dev/null', '>', \$repack_out, '2>', \$repack_err);
	my $paid_at_end = $node->safe_psql($db, $paid);
	ok($repacked, "$db: pg_repack of pay_ledger, pay_journal and pay_archive_keys succeeds")
	  or diag $repack_err;
	ok($paid_at_start < $live && $paid_at_end > $paid_at_start,
		"$db: the application paid while pg_repack ran ($paid_at_start payments before, $paid_at_end after)");
	ok($app->finish, "$db: every call of the application succeeded") or diag $app_err;

	# the live set's size: the same payments, made the same way, in a
	# database that never held more; both vacuumed
	my $never = 'never_archived';
	$node->safe_psql('postgres', "CREATE DATABASE $never");
	$node->safe_psql($never, 'CREATE EXTENSION idempotent_pay');
	$node->safe_psql($never, $grants);
	$node->safe_psql($never, "SELECT pay_begin('NOW-' || g, 5, 'EUR') FROM generate_series(1, 500) AS g");
	$node->safe_psql($never, "SELECT pay_succeed('NOW-' || g, 'BANK-NOW-' || g, 1) FROM generate_series(1, 500) AS g");
	my ($never_out, $never_err) = ('', '');
	IPC::Run::run(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-U', 'payment_app',
			'-d', $node->connstr($never), '-f', $script
		],
		'<', '/dev/null', '>', \$never_out, '2>', \$never_err)
	  or die "the payments in $never failed: $never_err";
	$node->safe_psql($_, 'VACUUM pay_ledger, pay_journal') for $db, $never;
	my @after = split / /, $node->safe_psql($db, $sizes);
	my @live_set = split / /, $node->safe_psql($never, $sizes);
	ok( $before[0] > 2 * $live_set[0]
		  && $after[0] <= 1.1 * $live_set[0]
		  && $before[1] > 2 * $live_set[1]
		  && $after[1] <= 1.1 * $live_set[1],
		"$db: pay_ledger $before[0] -> $after[0] bytes, pay_journal $before[1] -> $after[1]: "
		  . "within 1.1x a database's that never archived ($live_set[0], $live_set[1])");
	ok($after[2] <= $before[2], "$db: pay_archive_keys $before[2] -> $after[2] bytes");
	is( $node->safe_psql(
			$db, q{SELECT count(*) FILTER (WHERE status = 'SUCCESS') || ' ' || count(*)
			       || ' ' || (SELECT count(*) FROM pay_journal WHERE bizno LIKE 'LIVE-%')
			       FROM pay_ledger WHERE bizno LIKE 'LIVE-%'}),
		"$live $live " . 2 * $live,
		"$db: every payment of the application settled, with its two journal rows");
	is($node->safe_psql($db, $triggers), $triggers_before, "$db: the triggers of ledger and journal as before");
	is($node->safe_psql($db, q{SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'repack%'}),
		0, "$db: pg_repack left no trigger behind");
	is( $node->safe_psql($db, $outcome . q{SELECT pg_temp.outcome($$SELECT pay_claim('OLD-7', 10, 'EUR')$$)},
			extra_params => [ '-U', 'payment_app' ]),
		'55000 pay_archived', "$db: an archived key is still refused");
	is( $node->safe_psql($db, $outcome . q{SELECT pg_temp.outcome($$DELETE FROM pay_ledger WHERE bizno = 'LIVE-1'$$)}),
		'23514 pay_protected_row', "$db: the guard still refuses to delete a settled payment");
	is($node->safe_psql($db, q{SELECT pay_begin('AFTER-1', 5, 'EUR')}, extra_params => [ '-U', 'payment_app' ]),
		'PROCEED', "$db: a new payment after the repack");
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_verify()'), 0, "$db: pay_verify() is empty");
	is(months_verified($db), "2025-03 $old $old " . 2 * $old . ' false none',
		"$db: pay_archive_verify finds the month dropped, no problem");
	is(amcheck($db), '0 0', "$db: amcheck finds ledger, journal, archive and pay_archive_keys intact");
}

$node->stop;
done_testing();
