# doc/prometheus-queries.yaml, served by the real prometheus-postgres-exporter
# (Debian 12's package): a server with a known workload, then the exporter on
# a free loopback port, once as the read-only role of doc/monitoring.md with
# the exporter's own metrics switched off, once as an operator role
# (pay_grant_operator) with its defaults, after a restart without
# shared_preload_libraries.  The workload pays, fails, resets, refunds and
# charges twice, and runs the card flow (authorizations captured in part
# and in full, voided, raised, left to expire, and one closed and archived).
# Every idempotent_pay_ metric is held to the
# workload by name, labels, type and value, and no other is served.  Skipped
# when the exporter is not installed.
use strict;
use warnings;

use File::Basename;
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The exporter: Debian's name for it, else upstream's, on PATH.
my ($exporter) = grep { -x $_ }
  map { my $dir = $_; map { "$dir/$_" } qw(prometheus-postgres-exporter postgres_exporter) }
  (split(/:/, $ENV{PATH} // ''), '/usr/bin');
plan skip_all => 'prometheus-postgres-exporter is not installed (apt-get install prometheus-postgres-exporter)'
  unless $exporter;

my $doc = dirname(__FILE__) . '/../../doc';
my $queries = "$doc/prometheus-queries.yaml";
-r $queries or die "cannot read $queries";

# The role block of doc/monitoring.md, as written.
open(my $fh, '<', "$doc/monitoring.md") or die "cannot read $doc/monitoring.md: $!";
my $monitoring = do { local $/; <$fh> };
close $fh;
$monitoring =~ /<!-- exporter role: begin -->\n\s*```sql\n(.*?)\s*```\n\s*<!-- exporter role: end -->/s
  or die 'doc/monitoring.md has no block "exporter role"';
(my $role_block = $1) =~ s/^   //mg;

# stuck_after of the exporter's role in this test: the first two PROCESSING
# payments are older, the last one is not.
my $stuck_after = 5;

my $node = PostgreSQL::Test::Cluster->new('exporter');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotent_pay'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE payments');
$node->safe_psql('payments', 'CREATE EXTENSION idempotent_pay');
$node->safe_psql(
	'payments', qq{
	CREATE ROLE payment_app LOGIN;
	SELECT pay_grant('payment_app');
	CREATE ROLE payment_ops LOGIN;
	SELECT pay_grant_operator('payment_ops');
});
$node->safe_psql('payments', $role_block);
$node->safe_psql('payments', "ALTER ROLE prometheus SET idempotent_pay.stuck_after = '${stuck_after}s'");

# SQL as a role, one transaction per statement; what it prints, a line a row.
sub as_role
{
	my ($role, $sql) = @_;
	return $node->safe_psql('payments', "SET client_min_messages = error; SET ROLE $role;\n$sql");
}

# The exporter's role reads the counts and nothing else.
for my $sql ('SELECT count(*) FROM pay_ledger', 'SELECT pay_stats_reset()', "SELECT * FROM pay_get('X')")
{
	my ($ret, $stdout, $stderr) = $node->psql('payments', "SET ROLE prometheus; $sql");
	like($stderr, qr/permission denied/, "the exporter's role may not: $sql");
}

# The workload.  Two payments claimed first, so that they are PROCESSING
# for longer than stuck_after when the exporter reads them.
is(as_role('payment_app', q{SELECT action FROM pay_claim('STUCK-1', 10, 'EUR');
	SELECT action FROM pay_claim('STUCK-2', 20, 'EUR')}), "PROCEED\nPROCEED", 'two payments PROCESSING');

# The card flow, in EUR: A1 authorized 30 and captured in full by a final
# capture, then archived with its capture (the only settled payment yet);
# A2 authorized 50 for a second, left to expire; A3 authorized 80, raised by
# an increment of 20, captured 30, its void FAILED (the hold open again);
# A4 authorized 100, captured 40, voided (60 released).
sub card
{
	my ($sql) = @_;
	return as_role('payment_app', $sql);
}

# Claim and settle a row of the card flow: SUCCESS, or FAILED when $fail.
sub settle
{
	my ($bizno, $ref, $fail) = @_;
	my $settle = $fail ? "pay_fail('$bizno', 'declined', 1)" : "pay_succeed('$bizno', '$ref', 1)";
	return card("SELECT action FROM pay_claim('$bizno'); SELECT $settle");
}
my %card;
$card{A1} = card(q{SELECT pay_open_authorization('SHOP', 'CARD-1', 30, 'EUR')});
is(settle($card{A1}, 'HOLD-1'), "PROCEED
SUCCESS", 'A1 authorized');
$card{F1} = card(qq{SELECT pay_capture_open('$card{A1}', 'all', 30)});
is(settle($card{F1}, 'CAP-F1'), "PROCEED
SUCCESS", 'A1 captured in full by a final capture');
is(as_role('payment_ops', 'SELECT pay_archive(now())'), 1, 'the closed authorization A1 archived, with its capture');
$card{A2} = card(q{SELECT pay_open_authorization('SHOP', 'CARD-2', 50, 'EUR', '1 second')});
is(settle($card{A2}, 'HOLD-2'), "PROCEED
SUCCESS", 'A2 authorized for a second');
$card{A3} = card(q{SELECT pay_open_authorization('SHOP', 'CARD-3', 80, 'EUR')});
is(settle($card{A3}, 'HOLD-3'), "PROCEED
SUCCESS", 'A3 authorized');
$card{I3} = card(qq{SELECT pay_increment_open('$card{A3}', 'tip', 20)});
is(settle($card{I3}, 'INC-3'), "PROCEED
SUCCESS", 'A3 raised by 20');
$card{C3} = card(qq{SELECT pay_capture_open('$card{A3}', 'part', 30, false)});
is(settle($card{C3}, 'CAP-C3'), "PROCEED
SUCCESS", 'A3 captured in part');
$card{V3} = card(qq{SELECT pay_void_open('$card{A3}', 'cancel')});
is(settle($card{V3}, undef, 1), "PROCEED
FAILED", "A3's void failed");
$card{A4} = card(q{SELECT pay_open_authorization('SHOP', 'CARD-4', 100, 'EUR')});
is(settle($card{A4}, 'HOLD-4'), "PROCEED
SUCCESS", 'A4 authorized');
$card{C4} = card(qq{SELECT pay_capture_open('$card{A4}', 'part', 40, false)});
is(settle($card{C4}, 'CAP-C4'), "PROCEED
SUCCESS", 'A4 captured in part');
$card{V4} = card(qq{SELECT pay_void_open('$card{A4}', 'cancel')});
is(settle($card{V4}, 'VOID-4'), "PROCEED
SUCCESS", 'A4 voided');

# Five paid: three opened first (INIT), two claimed at once; two more
# opened, to fail.
my %bizno;
for my $order (qw(ORDER-1 ORDER-2 ORDER-3 FAIL-1 FAIL-2))
{
	$bizno{$order} = as_role('payment_app', "SELECT pay_open('SHOP', '$order', 50, 'EUR')");
}
$bizno{$_} = $_ for qw(PAY-4 PAY-5);
for my $order (qw(ORDER-1 ORDER-2 ORDER-3 PAY-4 PAY-5))
{
	is( as_role(
			'payment_app', qq{SELECT action FROM pay_claim('$bizno{$order}', 50, 'EUR');
			SELECT pay_succeed('$bizno{$order}', 'BANK-$order', 1)}),
		"PROCEED\nSUCCESS",
		"$order paid");
}

# Two failed; an operator resets one.
for my $order (qw(FAIL-1 FAIL-2))
{
	is( as_role(
			'payment_app', qq{SELECT action FROM pay_claim('$bizno{$order}');
			SELECT pay_fail('$bizno{$order}', 'declined', 1)}),
		"PROCEED\nFAILED",
		"$order failed");
}
is(as_role('payment_ops', "SELECT pay_reset('$bizno{'FAIL-1'}', 'customer asked to retry')"),
	'INIT', 'an operator resets FAIL-1');

# The journal so far folded into pay_stats' counts; the rest of the workload
# is read from the journal rows no count includes yet.
is(as_role('payment_ops', 'SELECT pay_stats_refresh()'), 't', 'the counts fold the journal so far');

# Duplicate claims: three of paid payments, two of one in flight.
is( as_role(
		'payment_app', qq{SELECT action FROM pay_claim('$bizno{'ORDER-1'}');
		SELECT action FROM pay_claim('$bizno{'ORDER-1'}');
		SELECT action FROM pay_claim('$bizno{'ORDER-2'}')}),
	"ALREADY_SUCCEEDED\nALREADY_SUCCEEDED\nALREADY_SUCCEEDED",
	'three duplicate claims of paid payments');
is( as_role(
		'payment_app', q{SELECT action FROM pay_claim('STUCK-1');
		SELECT action FROM pay_claim('STUCK-1')}),
	"IN_PROGRESS\nIN_PROGRESS",
	'two duplicate claims of a payment in flight');

# Two refunds: one paid back, one still INIT.
my $refund_1 = as_role('payment_ops', "SELECT pay_refund_open('$bizno{'ORDER-1'}', 'R-1', 5)");
as_role('payment_ops', "SELECT pay_refund_open('$bizno{'ORDER-2'}', 'R-2', 3)");
is( as_role(
		'payment_app', qq{SELECT action FROM pay_claim('$refund_1');
		SELECT pay_succeed('$refund_1', 'BANK-R-1', 1)}),
	"PROCEED\nSUCCESS",
	'a refund paid back');

# Two second charges, one of them confirmed by a statement.
is( as_role(
		'payment_app', qq{SELECT pay_succeed('$bizno{'ORDER-3'}', 'BANK-ORDER-3-AGAIN', 1);
		SELECT pay_succeed('PAY-4', 'BANK-PAY-4-AGAIN', 1)}),
	"SECOND_CHARGE\nSECOND_CHARGE",
	'two second charges reported');
as_role('payment_ops', q{SELECT pay_confirm_second_charge('PAY-4', 'BANK-PAY-4-AGAIN')});

# The first two become stuck; then one more payment, not stuck yet.
$node->poll_query_until('payments',
	"SELECT now() - max(processing_since) > interval '" . ($stuck_after + 1) . " s' FROM pay_ledger
	 WHERE bizno IN ('STUCK-1', 'STUCK-2')")
  or die 'the first payments never became older than stuck_after';
is(as_role('payment_app', q{SELECT action FROM pay_claim('FRESH-1', 30, 'EUR')}),
	'PROCEED', 'a third payment PROCESSING');

# What the workload leaves, as the exporter must serve it (without the
# label "server").  The card flow's rows are payments, its steps also
# refunds (rows with a parent); A1 and F1 are in the archive.
my %expected = (
	'idempotent_pay_payments{status="INIT"}' => 2,          # FAIL-1 reset, refund R-2
	'idempotent_pay_payments{status="PROCESSING"}' => 3,    # STUCK-1, STUCK-2, FRESH-1
	# five payments, refund R-1; A2, A3, I3, C3, A4, C4, V4
	'idempotent_pay_payments{status="SUCCESS"}' => 13,
	'idempotent_pay_payments{status="FAILED"}' => 2,        # FAIL-2, V3
	'idempotent_pay_refunds{status="INIT"}' => 1,
	'idempotent_pay_refunds{status="PROCESSING"}' => 0,
	'idempotent_pay_refunds{status="SUCCESS"}' => 5,        # R-1; I3, C3, C4, V4
	'idempotent_pay_refunds{status="FAILED"}' => 1,         # V3
	# pay_open of five orders, pay_refund_open of two, the card flow's ten rows
	'idempotent_pay_transitions_total{from_status="none",to_status="INIT"}' => 17,
	# pay_claim of STUCK-1, STUCK-2, PAY-4, PAY-5, FRESH-1
	'idempotent_pay_transitions_total{from_status="none",to_status="PROCESSING"}' => 5,
	# pay_claim of the five orders, of refund R-1 and of the card flow's ten rows
	'idempotent_pay_transitions_total{from_status="INIT",to_status="PROCESSING"}' => 16,
	'idempotent_pay_transitions_total{from_status="PROCESSING",to_status="SUCCESS"}' => 15,
	'idempotent_pay_transitions_total{from_status="PROCESSING",to_status="FAILED"}' => 3,
	'idempotent_pay_transitions_total{from_status="FAILED",to_status="INIT"}' => 1,
	# the card flow's rows in the ledger, by kind and status
	(map {
			my ($kind, $status, $n) = @$_;
			("idempotent_pay_card_rows{kind=\"$kind\",status=\"$status\"}" => $n)
		} (
			[ 'AUTHORIZATION', 'SUCCESS', 3 ],    # A2, A3, A4
			[ 'CAPTURE', 'SUCCESS', 2 ],          # C3, C4
			[ 'VOID', 'SUCCESS', 1 ],             # V4
			[ 'VOID', 'FAILED', 1 ],              # V3
			[ 'INCREMENT', 'SUCCESS', 1 ],        # I3
			map {
				my $kind = $_;
				map { [ $kind, $_, 0 ] } ($kind eq 'VOID' ? ('INIT', 'PROCESSING') : ('INIT', 'PROCESSING', 'FAILED'))
			} qw(AUTHORIZATION CAPTURE VOID INCREMENT))),
	# A1 30, A2 50, A3 80, I3 20, A4 100; F1 30, C3 30, C4 40: the archive's too
	'idempotent_pay_card_amount_authorized_total{currency="EUR"}' => 280,
	'idempotent_pay_card_amount_captured_total{currency="EUR"}' => 100,
	# A3: 100 held, 30 captured; A2: expired; A4: voided, 60 released
	'idempotent_pay_card_holds_count{currency="EUR",state="open"}' => 1,
	'idempotent_pay_card_holds_uncaptured{currency="EUR",state="open"}' => 70,
	'idempotent_pay_card_holds_count{currency="EUR",state="expired"}' => 1,
	'idempotent_pay_card_holds_uncaptured{currency="EUR",state="expired"}' => 50,
	'idempotent_pay_card_holds_count{currency="EUR",state="released"}' => 1,
	'idempotent_pay_card_holds_uncaptured{currency="EUR",state="released"}' => 60,
	# (a second charge is journaled SUCCESS -> SUCCESS: no transition)
	'idempotent_pay_duplicate_answers_total{answer="ALREADY_SUCCEEDED"}' => 3,
	'idempotent_pay_duplicate_answers_total{answer="IN_PROGRESS"}' => 2,
	'idempotent_pay_stuck_payments' => 2,
	'idempotent_pay_oldest_processing_age_seconds' => undef,    # checked against the clock
	'idempotent_pay_second_charges_total' => 2,
	'idempotent_pay_second_charges_unconfirmed' => 1,
	'idempotent_pay_resets_total' => 1);
my %type = (
	idempotent_pay_payments => 'gauge',
	idempotent_pay_refunds => 'gauge',
	idempotent_pay_transitions_total => 'counter',
	idempotent_pay_duplicate_answers_total => 'counter',
	idempotent_pay_stuck_payments => 'gauge',
	idempotent_pay_oldest_processing_age_seconds => 'gauge',
	idempotent_pay_second_charges_total => 'counter',
	idempotent_pay_second_charges_unconfirmed => 'gauge',
	idempotent_pay_resets_total => 'counter',
	idempotent_pay_card_rows => 'gauge',
	idempotent_pay_card_amount_authorized_total => 'counter',
	idempotent_pay_card_amount_captured_total => 'counter',
	idempotent_pay_card_holds_count => 'gauge',
	idempotent_pay_card_holds_uncaptured => 'gauge');

# How long the oldest PROCESSING payment has been, by the server's clock.
sub oldest_age
{
	return $node->safe_psql('payments',
		"SELECT extract(epoch FROM now() - min(processing_since)) FROM pay_ledger WHERE status = 'PROCESSING'"
	);
}

my @running;
END { $_->kill_kill for @running; }

my $http = HTTP::Tiny->new(timeout => 10, proxy => undef, http_proxy => undef);

# Start the exporter as $role with @flags, scrape /metrics once it answers,
# stop it; the text of the scrape.
sub scrape
{
	my ($role, @flags) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my ($harness, $log);
	{
		local $ENV{DATA_SOURCE_NAME} =
		  "user=$role host=" . $node->host . ' port=' . $node->port . ' dbname=payments';
		$harness = IPC::Run::start(
			[
				$exporter, "--web.listen-address=127.0.0.1:$port",
				"--extend.query-path=$queries", @flags
			],
			'<', \undef, '>&', \$log);
	}
	push @running, $harness;
	my $response;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$response = $http->get("http://127.0.0.1:$port/metrics");
		last if $response->{success};
		$harness->pump_nb;
		die "the exporter exited:\n$log" unless $harness->pumpable;
		select(undef, undef, undef, 0.1);
	}
	$harness->signal('TERM');
	$harness->finish;
	@running = grep { $_ != $harness } @running;
	note "the exporter as $role:\n$log";
	$response->{success}
	  or die "no scrape from the exporter: $response->{status} $response->{reason}\n$log";
	return $response->{content};
}

# A scrape as { samples => { 'name{label="value",...}' => value }, types =>
# { name => type }, servers => { server label => 1 } }, labels in name order,
# without "server".
sub parse
{
	my ($text) = @_;
	my (%samples, %types, %servers);
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^# TYPE (\S+) (\S+)$/)
		{
			$types{$1} = $2;
			next;
		}
		next if $line =~ /^#/ || $line !~ /\S/;
		$line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
		  or die "not a sample: $line";
		my ($name, $labels, $value) = ($1, $2 // '', $3);
		my %label;
		$label{$1} = $2 while $labels =~ /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g;
		$servers{ delete $label{server} } = 1 if exists $label{server};
		my $key = $name;
		$key .= '{' . join(',', map { qq{$_="$label{$_}"} } sort keys %label) . '}' if %label;
		$samples{$key} = $value;
	}
	return { samples => \%samples, types => \%types, servers => \%servers };
}

# The scrape against %$want: the same idempotent_pay_ samples, each of its
# type, every value equal (the oldest age between the clock's $age_low and
# $age_high); $what names the run.
sub check_scrape
{
	my ($what, $scrape, $want, $age_low, $age_high) = @_;
	my $samples = $scrape->{samples};
	is($samples->{pg_up}, 1, "$what: pg_up is 1");
	is($samples->{pg_exporter_last_scrape_error}, 0, "$what: every query ran");
	my ($load_error) = grep { /^pg_exporter_user_queries_load_error\{/ } keys %$samples;
	ok(defined $load_error && $samples->{$load_error} == 0, "$what: the queries file loaded");
	my @ours = grep { /^idempotent_pay_/ } keys %$samples;
	is_deeply([ sort @ours ], [ sort keys %$want ], "$what: the idempotent_pay_ metrics and labels");
	my %names = map { (my $name = $_) =~ s/\{.*//; ($name => 1) } keys %$want;
	is($scrape->{types}{$_}, $type{$_}, "$what: $_ is a $type{$_}") for sort keys %names;
	for my $key (sort keys %$want)
	{
		my $value = $samples->{$key};
		if (!defined $want->{$key})
		{
			ok( defined $value && $value >= $age_low && $value <= $age_high,
				"$what: $key is the oldest PROCESSING payment's age")
			  or diag "got " . ($value // 'nothing') . ", want $age_low to $age_high";
			next;
		}
		ok(defined $value && $value == $want->{$key}, "$what: $key = $want->{$key}")
		  or diag 'got ' . ($value // 'nothing');
	}
	is_deeply([ keys %{ $scrape->{servers} } ],
		[ $node->host . ':' . $node->port ], "$what: the label server names the server");
}

# 1. The read-only role of doc/monitoring.md, idempotent_pay's metrics alone.
my $age_low = oldest_age();
my $scrape = parse(
	scrape(
		'prometheus', '--disable-default-metrics', '--disable-settings-metrics',
		'--no-collector.database', '--no-collector.bgwriter'));
my $age_high = oldest_age();
is( $node->safe_psql('payments',
		"SELECT now() - processing_since < interval '$stuck_after s' FROM pay_ledger WHERE bizno = 'FRESH-1'"),
	't',
	'the exporter read FRESH-1 before it was stuck');
check_scrape('read-only role', $scrape, \%expected, $age_low, $age_high);
ok(!grep({ /^pg_(settings|stat|locks|database)_/ } keys %{ $scrape->{samples} }),
	'read-only role: no default metrics with --disable-default-metrics');

# 2. After a restart without shared_preload_libraries, an operator role
# (stuck_after at its default, 5 minutes), the exporter's defaults, every
# database discovered: no duplicate answers, no stuck payment, the rest
# unchanged.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->restart;
my %expected_operator = %expected;
delete @expected_operator{ grep { /^idempotent_pay_duplicate_answers_total/ } keys %expected_operator };
$expected_operator{idempotent_pay_stuck_payments} = 0;
$age_low = oldest_age();
$scrape = parse(scrape('payment_ops', '--auto-discover-databases'));
$age_high = oldest_age();
check_scrape('operator role, defaults', $scrape, \%expected_operator, $age_low, $age_high);
ok(exists $scrape->{samples}{'pg_settings_max_connections'}, "operator role, defaults: the exporter's own metrics too");

$node->stop;
done_testing();
