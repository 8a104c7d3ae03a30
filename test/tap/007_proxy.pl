# Scale-out on PL/Proxy (SPEC section 13): one proxy database with
# idempotent_pay_proxy in front of four shard servers holding eight
# partitions, one database each (partition p on shard p % 4).  Checked here:
#
#   - routing: pay_route of fixed inputs is a fixed number, asserted
#     literally, and equals the hash README.md writes down, computed again
#     in Perl; every call on a payment reaches the partition pay_partition
#     names, and the payment is there and nowhere else;
#   - the API through the proxy answers, and refuses, as the shard does;
#   - fan-out: pay_stats, pay_verify and pay_reconcile answer what one node
#     holding every payment answers;
#   - a concurrent run through the proxy: every bizNo on exactly one shard,
#     the one its route names;
#   - a stopped shard: its partitions' calls fail at once with 08001 naming
#     the partition, the others' succeed, nothing lands on a wrong shard;
#     after the restart every payment is there and pay_verify() is empty
#     everywhere.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $started = time;
my $shard_count = 4;
my $partition_count = 8;

# The shards, each a full idempotent_pay with its own node id, preloaded
# (as README.md advises: pay_stats counts duplicate answers only so).
my @shards;
for my $i (0 .. $shard_count - 1)
{
	my $node = PostgreSQL::Test::Cluster->new("shard$i");
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'idempotent_pay'\nidempotent_pay.node_id = "
		  . ($i + 1) . "\nlog_statement = none\n");
	$node->start;
	push @shards, $node;
}
sub shard_of { return $shards[ $_[0] % $shard_count ]; }

sub create_shard_database
{
	my ($node, $db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'SET client_min_messages = warning; CREATE EXTENSION idempotent_pay');
}

for my $p (0 .. $partition_count - 1)
{
	create_shard_database(shard_of($p), "pay_p$p");
}

# The proxy: PL/Proxy, idempotent_pay_proxy and the cluster, a SQL/MED server.
my $proxy = PostgreSQL::Test::Cluster->new('proxy');
$proxy->init;
$proxy->append_conf('postgresql.conf', "log_statement = none\n");
$proxy->start;
$proxy->safe_psql('postgres', 'CREATE DATABASE proxy');
my $partitions = join ",\n",
  map {
	sprintf "p%d 'host=%s port=%d dbname=pay_p%d'", $_, shard_of($_)->host, shard_of($_)->port, $_
  } 0 .. $partition_count - 1;
$proxy->safe_psql(
	'proxy', qq{
CREATE EXTENSION plproxy;
CREATE EXTENSION idempotent_pay_proxy;
CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS ($partitions);
CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay;
});

sub proxy_sql { return $proxy->safe_psql('proxy', $_[0]); }

sub partition_sql
{
	my ($p, $sql) = @_;
	return shard_of($p)->safe_psql("pay_p$p", $sql);
}

# "SQLSTATE: message" of the error a statement raises, or "no error".
sub error_of
{
	my ($node, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql($db, "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err);
	return $err =~ /^(?:psql:[^\n]*?)?ERROR:\s+([0-9A-Z]{5}): ([^\n]*)/m ? "$1: $2" : 'no error';
}
sub proxy_error { return error_of($proxy, 'proxy', $_[0]); }
sub partition_error { return error_of(shard_of($_[0]), "pay_p$_[0]", $_[1]); }

# Where each payment is: bizNo => [partitions holding it].
sub placement
{
	my %where;
	for my $p (0 .. $partition_count - 1)
	{
		push @{ $where{$_} }, $p for split /\n/, partition_sql($p, 'SELECT bizno FROM pay_ledger');
	}
	return \%where;
}

# The bizNos held by a partition its route does not name, or by more than one.
sub misplaced
{
	my $where = placement();
	my @twice = grep { @{ $where->{$_} } > 1 } keys %$where;
	my $rows = join "\n", map { "$where->{$_}[0]\t$_" } keys %$where;
	my $wrong = $proxy->safe_psql(
		'proxy', qq{
CREATE TEMPORARY TABLE placed (partition integer, bizno text);
COPY placed FROM STDIN;
$rows
\\.
SELECT count(*) FROM placed WHERE pay_partition(bizno) <> partition;
});
	return (scalar(keys %$where), scalar(@twice), $wrong);
}

############################################################################
# Routing: the hash, literally.

# FNV-1a over the bytes, then MurmurHash3's fmix32, as a signed int4: the
# definition in README.md, computed again here (16-bit halves keep every
# product exact).
sub mul32
{
	my ($a, $b) = @_;
	return ($a * ($b & 0xffff) + ((($a * ($b >> 16)) & 0xffff) << 16)) & 0xffffffff;
}

sub route_of_string
{
	my $h = 2166136261;
	for my $byte (unpack 'C*', $_[0])
	{
		$h = mul32($h ^ $byte, 16777619);
	}
	$h ^= $h >> 16;
	$h = mul32($h, 0x85ebca6b);
	$h ^= $h >> 13;
	$h = mul32($h, 0xc2b2ae35);
	$h ^= $h >> 16;
	return $h >= 2**31 ? $h - 2**32 : $h;
}

my $readme_bizno = 'PAY-ORD001-20261130065033976-0000-366VRA691WVWE0';
is( proxy_sql(
		"SELECT pay_route('SHOP', 'ORDER-1'), pay_route('PAY', 'ORD001'), pay_route('$readme_bizno'),
		        pay_route('order-42'), pay_route('REFUND', 'order-42'), pay_route('R-DUPLICATE'),
		        pay_route(repeat('k', 100)), pay_route('a')"),
	'435314100|577359979|577359979|779839703|779839703|1182750002|-968559089|444641715',
	'pay_route of fixed inputs: fixed values (a change of the hash cannot slip in)');
is(proxy_sql('SELECT pay_partition_count()'), $partition_count, 'the cluster has 8 partitions');
is( proxy_sql(
		"SELECT pay_partition('SHOP', 'ORDER-1'), pay_partition('$readme_bizno'), pay_partition('order-42'),
		        pay_partition('R-DUPLICATE'), pay_partition(repeat('k', 100))"),
	'4|3|7|2|7',
	'pay_partition of fixed inputs: route & 7, as PL/Proxy masks it');

my @keys = map { "key-$_-" . ('x' x ($_ % 70)) } 1 .. 200;
my @routes = split /\n/,
  proxy_sql("SELECT pay_route(k) FROM unnest(ARRAY['" . join("','", @keys) . "']) WITH ORDINALITY AS u(k, i) ORDER BY i");
my $hash_differs = grep { $routes[$_] != route_of_string(substr($keys[$_], 0, 64)) } 0 .. $#keys;
is($hash_differs, 0, 'pay_route is FNV-1a + fmix32 of a foreign key\'s first 64 characters (200 keys)');
is(proxy_sql("SELECT pay_route('SHOP', 'ORDER-1') = " . route_of_string('SHOP-ORDER-1')),
	't', 'pay_route(prefix, biz_id) is the hash of PREFIX-BIZID');

my $generated = proxy_sql("SELECT pay_bizno('SHOP', 'ORDER-1')");
is(proxy_sql("SELECT pay_route('$generated') = pay_route('SHOP', 'ORDER-1')"),
	't', "a bizNo routes with its (prefix, biz_id): $generated");

# A key the shard refuses is refused by the router with the shard's error.
for my $case (
	[ "pay_begin('bad key!', 1, 'EUR')", "pay_route('bad key!')" ],
	[ "pay_begin('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1', 1, 'EUR')",
		"pay_begin('PAY-ORD001-20261130065033976-0000-366VRA691WVWE1', 1, 'EUR')" ],
	[ "pay_begin(NULL, 1, 'EUR')", "pay_begin(NULL, 1, 'EUR')" ],
	[ "pay_bizno('shop', 'X')", "pay_open('shop', 'X', 1, 'EUR')" ])
{
	my ($direct, $routed) = @$case;
	my $expected = partition_error(0, "SELECT $direct");
	like($expected, qr/^22(P02|004|023): /, "the shard refuses $direct: $expected");
	is(proxy_error("SELECT $routed"), $expected, "the proxy refuses $routed alike, before any partition");
}

############################################################################
# Reconciliation first, while the partitions hold only its payments, so
# that one node holding the same payments answers the same rows.

create_shard_database($shards[0], 'single');
my $scenario = q{
SELECT pay_begin('R-MATCHED', 10, 'EUR'), pay_succeed('R-MATCHED', 'BANK-1');
SELECT pay_begin('R-NOT-IN-BANK', 10, 'EUR'), pay_succeed('R-NOT-IN-BANK', 'BANK-2');
SELECT pay_begin('R-DUPLICATE', 10, 'EUR'), pay_succeed('R-DUPLICATE', 'BANK-3');
SELECT pay_begin('R-AMOUNT', 10, 'EUR'), pay_succeed('R-AMOUNT', 'BANK-4');
SELECT pay_begin('R-CURRENCY', 10, 'EUR'), pay_succeed('R-CURRENCY', 'BANK-5');
SELECT pay_begin('R-FAILED', 10, 'EUR'), pay_fail('R-FAILED', 'timeout');
SELECT pay_begin('R-PENDING', 10, 'EUR');
};
my $csv = dirname(__FILE__) . '/../demo/bank_statement.csv';
open my $fh, '<', $csv or die "cannot read $csv: $!";
my (undef, @statement_rows) = <$fh>;
close $fh;
my $load_statement =
	"CREATE TABLE bank_statement (bizno text, amount numeric, currency text, status text, channel_ref text);\n"
  . "COPY bank_statement FROM STDIN WITH (FORMAT csv);\n"
  . join('', @statement_rows) . "\\.\n";
$shards[0]->safe_psql('single', $scenario . $load_statement);
proxy_sql($scenario . $load_statement);
is( proxy_sql(
		"SELECT count(DISTINCT pay_partition(b)) > 1 FROM unnest(ARRAY['R-MATCHED', 'R-NOT-IN-BANK',
		 'R-DUPLICATE', 'R-AMOUNT', 'R-CURRENCY', 'R-FAILED', 'R-PENDING', 'R-UNKNOWN']) AS b"),
	't', 'the statement\'s payments lie on several partitions');

my $report = "SELECT kind, bizno, ledger_status, ledger_amount, bank_amount, bank_rows, detail FROM pay_reconcile('bank_statement')";
my $single_report = $shards[0]->safe_psql('single', $report);
is(proxy_sql($report), $single_report, 'pay_reconcile through the proxy lists what one node lists');
like($single_report, qr/^MISSING_IN_LEDGER\|R-UNKNOWN/m, 'including a statement row no partition holds');
my $settle = "SELECT kind, bizno, ledger_status, detail FROM pay_reconcile('bank_statement', settle => true)";
my $single_settled = $shards[0]->safe_psql('single', $settle);
is(proxy_sql($settle), $single_settled, 'and settles as one node settles');
is(proxy_sql("SELECT status FROM pay_get('R-PENDING')"), 'SUCCESS', 'R-PENDING is settled on its partition');
my $pending_partition = proxy_sql("SELECT pay_partition('R-PENDING')");
is( partition_sql(
		$pending_partition,
		"SELECT note FROM pay_journal WHERE bizno = 'R-PENDING' ORDER BY seq DESC LIMIT 1"),
	'settled by reconciliation',
	"the partition journaled the settlement (pay_p$pending_partition)");

############################################################################
# The API through the proxy.

my $bizno = proxy_sql("SELECT pay_open('SHOP', 'TAP-1', 10, 'EUR')");
my $home = proxy_sql("SELECT pay_partition('$bizno')");
is(proxy_sql("SELECT pay_partition('SHOP', 'TAP-1')"), $home, 'pay_open and its bizNo route alike');
is_deeply(placement()->{$bizno}, [$home], "the payment is on partition $home and nowhere else");
is(proxy_sql("SELECT node_id FROM pay_bizno_parse('$bizno')"),
	($home % $shard_count) + 1, 'issued by the shard that holds it (its node id)');
is(proxy_sql("SELECT pay_open('SHOP', 'TAP-1', 10, 'EUR')"), $bizno, 'pay_open again: the same bizNo');
is(proxy_sql("SELECT action, attempt, status FROM pay_claim('$bizno')"),
	'PROCEED|1|PROCESSING', 'pay_claim: PROCEED, attempt 1');
is(proxy_sql("SELECT pay_begin('$bizno')"), 'IN_PROGRESS', 'a retry is IN_PROGRESS, never charged again');
is(proxy_sql("SELECT pay_succeed('$bizno', 'BANK-1', 1, '{\"ok\": true}')"), 'SUCCESS', 'pay_succeed');
is(proxy_sql("SELECT action, channel_ref, response FROM pay_claim('$bizno')"),
	'ALREADY_SUCCEEDED|BANK-1|{"ok": true}', 'a later claim replays the first answer');
is(proxy_sql("SELECT * FROM pay_get('$bizno')"),
	partition_sql($home, "SELECT * FROM pay_get('$bizno')"), 'pay_get through the proxy: the partition\'s row');
is(proxy_sql("SELECT count(*) FROM pay_get('TAP-UNKNOWN')"), 0, 'pay_get of an unknown key: no row');
is(proxy_sql("SELECT * FROM pay_open_claim('SHOP', 'TAP-2', 5, 'EUR')") =~ /^SHOP-TAP-2-.*\|PROCEED\|1\|PROCESSING\|\|$/
	? 'ok' : 'not', 'ok', 'pay_open_claim');

for my $call (
	"pay_succeed('$bizno', 'BANK-1', 2)",
	"pay_fail('$bizno', 'too late', 1)",
	"pay_transition('$bizno', 'INIT')",
	"pay_reset('TAP-UNKNOWN', 'no such payment')",
	"pay_begin('TAP-NO-AMOUNT')",
	"pay_open('SHOP', 'TAP-1', 11, 'EUR')")
{
	my $key = $call =~ /pay_open\('SHOP', 'TAP-1'/ ? $bizno : ($call =~ /\('([^']*)'/)[0];
	my $expected = partition_error(proxy_sql("SELECT pay_partition('$key')"), "SELECT $call");
	isnt($expected, 'no error', "the shard refuses $call: $expected");
	is(proxy_error("SELECT $call"), $expected, 'the proxy passes the shard\'s SQLSTATE and message on');
}
like(proxy_error('SELECT * FROM pay_stuck()'), qr/^0A000: pay_stuck runs on each partition/,
	'pay_stuck is refused through the proxy: its row locks need a connection to the partition');
is(proxy_sql("SELECT pay_allowed('FAILED', 'INIT'), pay_bizno_valid('$bizno'), count(*) FROM pay_transitions"),
	't|t|6', 'the pure functions answer on the proxy');

# Refunds route with their payment.
my $refund = proxy_sql("SELECT pay_refund_open('$bizno', 'R1', 4, 'tap')");
is(proxy_sql("SELECT pay_partition('$refund')"), $home, "a refund routes with its payment ($refund)");
is(proxy_sql("SELECT action FROM pay_claim('$refund')"), 'PROCEED', 'and is claimed through the proxy');
is(proxy_sql("SELECT pay_succeed('$refund', 'REFUND-BANK-1')"), 'SUCCESS', 'and settled');
is(proxy_sql("SELECT refunded FROM pay_refund_balance('$bizno')"), 4, 'pay_refund_balance counts it');
proxy_sql("SELECT pay_begin('tap-foreign-1', 10, 'EUR'), pay_succeed('tap-foreign-1', 'BANK-F')");
my $foreign_refund = proxy_sql("SELECT pay_refund_open('tap-foreign-1', 'R1', 3)");
is(proxy_sql("SELECT pay_partition('$foreign_refund') = pay_partition('tap-foreign-1')"),
	't', "a refund of a payment keyed by another system routes with it ($foreign_refund)");
is(proxy_sql("SELECT action FROM pay_claim('$foreign_refund')"), 'PROCEED', 'and is claimed through the proxy');

# An application role: granted on the proxy and on every shard, it pays;
# a role granted nothing is refused by the proxy.
for my $p (0 .. $partition_count - 1)
{
	shard_of($p)->safe_psql('postgres', 'CREATE ROLE payment_app LOGIN') if $p < $shard_count;
	partition_sql($p, "SELECT pay_grant('payment_app')");
}
$proxy->safe_psql('postgres', 'CREATE ROLE payment_app LOGIN; CREATE ROLE stranger LOGIN');
proxy_sql("SELECT pay_grant('payment_app')");
is( $proxy->safe_psql(
		'proxy', "SELECT action FROM pay_open_claim('SHOP', 'TAP-APP', 10, 'EUR')",
		extra_params => [ '-U', 'payment_app' ]),
	'PROCEED',
	'an application role granted on proxy and shards pays through the proxy');
my ($out, $err) = ('', '');
$proxy->psql('proxy', "\\set VERBOSITY verbose\nSELECT pay_begin('tap-stranger', 1, 'EUR')",
	stdout => \$out, stderr => \$err, extra_params => [ '-U', 'stranger' ]);
like($err, qr/ERROR:\s+42501/, 'a role granted nothing is refused (42501)');

############################################################################
# Fan-out: pay_stats and pay_verify answer what one node would.

my %direct_stats;
for my $p (0 .. $partition_count - 1)
{
	for (split /\n/, partition_sql($p, 'SELECT status, payments, refunds FROM pay_stats'))
	{
		my ($status, $payments, $refunds) = split /\|/;
		$direct_stats{$status}[0] += $payments;
		$direct_stats{$status}[1] += $refunds;
	}
}
is(proxy_sql('SELECT status, payments, refunds FROM pay_stats'),
	join("\n", map { "$_|$direct_stats{$_}[0]|$direct_stats{$_}[1]" } qw(INIT PROCESSING SUCCESS FAILED)),
	'pay_stats through the proxy: every partition\'s counts added up');
my $duplicates = 0;
$duplicates += partition_sql($_, "SELECT duplicate_answers FROM pay_stats WHERE status = 'SUCCESS'")
  for 0 .. $partition_count - 1;
ok($duplicates > 0, "the partitions gave $duplicates ALREADY_SUCCEEDED answers");
is(proxy_sql("SELECT duplicate_answers FROM pay_stats WHERE status = 'SUCCESS'"), $duplicates,
	'pay_stats through the proxy adds them up');
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'pay_verify through the proxy: nothing wrong');

# A journal row that contradicts the ledger, on one partition: pay_verify
# through the proxy reports it as the partition does.  (The guard of the
# journal is switched off by hand to take it back.)
partition_sql($home,
	"INSERT INTO pay_journal (bizno, attempt, from_status, to_status) VALUES ('$bizno', 1, 'SUCCESS', 'FAILED')");
my $problem = partition_sql($home, 'SELECT * FROM pay_verify()');
like($problem, qr/^\Q$bizno\E\|the ledger says SUCCESS/, "the partition finds the contradiction");
is(proxy_sql('SELECT * FROM pay_verify()'), $problem, 'pay_verify through the proxy reports it');
partition_sql(
	$home, qq{
ALTER TABLE pay_journal DISABLE TRIGGER pay_journal_guard;
DELETE FROM pay_journal WHERE seq = (SELECT max(seq) FROM pay_journal WHERE bizno = '$bizno');
ALTER TABLE pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard;
});
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'and nothing once it is taken back');

############################################################################
# A concurrent run through the proxy: four clients, 150 orders each, paid
# in two calls (pay_open_claim, pay_succeed); every fourth order keyed by
# another system (pay_begin, pay_succeed).

my $clients = 4;
my $orders = 150;
my $scripts = PostgreSQL::Test::Utils::tempdir;
my @runs;
for my $client (1 .. $clients)
{
	my $file = "$scripts/client$client.sql";
	open my $script, '>', $file or die "cannot write $file: $!";
	for my $i (1 .. $orders)
	{
		if ($i % 4 == 0)
		{
			print $script "SELECT pay_begin('ext-$client-$i', 10, 'EUR');\n"
			  . "SELECT pay_succeed('ext-$client-$i', 'BANK-E$client-$i', 1);\n";
			next;
		}
		print $script "SELECT bizno FROM pay_open_claim('LOAD', 'C$client-$i', 10, 'EUR') \\gset\n"
		  . "SELECT pay_succeed(:'bizno', 'BANK-$client-$i', 1);\n";
	}
	close $script;
	my $run = { out => '', err => '' };
	$run->{harness} = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $proxy->connstr('proxy'), '-f', $file ],
		'<', '/dev/null', '>', \$run->{out}, '2>', \$run->{err});
	push @runs, $run;
}
my $failed_clients = 0;
for my $run (@runs)
{
	$run->{harness}->finish;
	$failed_clients++ if $run->{harness}->result(0) != 0;
	diag $run->{err} if $run->{err} ne '';
}
is($failed_clients, 0, "$clients clients paid $orders orders each through the proxy");
my ($payments, $twice, $wrong) = misplaced();
is($twice, 0, "no bizNo on two partitions ($payments payments)");
is($wrong, 0, 'every bizNo on the partition its route names');
my $load = join '',
  map { partition_sql($_, "SELECT count(*) FROM pay_ledger WHERE (prefix = 'LOAD' OR bizno LIKE 'ext-%') AND status = 'SUCCESS'") . ' ' }
  0 .. $partition_count - 1;
note "the run's payments per partition: $load";
my $sum = 0;
$sum += $_ for split ' ', $load;
is($sum, $clients * $orders, 'every order of the run is SUCCESS');
is(scalar(grep { $_ > 0 } split ' ', $load), $partition_count, 'every partition holds some of them');

############################################################################
# A stopped shard.

my $victim = 1;    # holds partitions 1 and 5
my @down = grep { $_ % $shard_count == $victim } 0 .. $partition_count - 1;
my %is_down = map { $_ => 1 } @down;
my @keys_tried = map { "down-$_" } 1 .. 40;
my %partition_of = split /[|\n]/,
  proxy_sql("SELECT k, pay_partition(k) FROM unnest(ARRAY['" . join("','", @keys_tried) . "']) AS k");
my ($early_key) = grep { $partition_of{$_} == $down[0] } @keys_tried;

# A session that has used the partition before the shard stops: PL/Proxy
# keeps its connection open.
my $session = $proxy->background_psql('proxy', on_error_stop => 0);
$session->query_safe('\set VERBOSITY verbose');
$session->query_safe("SELECT pay_begin('$early_key', 10, 'EUR')");
my %before = map { $_ => partition_sql($_, 'SELECT count(*) FROM pay_ledger') } @down;
$shards[$victim]->stop('fast');

my (%refused, %paid, $slowest);
for my $key (grep { $_ ne $early_key } @keys_tried)
{
	my $partition = $partition_of{$key};
	my $t0 = time;
	my $error = proxy_error("SELECT pay_begin('$key', 10, 'EUR')");
	my $took = time - $t0;
	$slowest = $took if !defined $slowest || $took > $slowest;
	if ($is_down{$partition})
	{
		$refused{$key} = $partition
		  if $error eq "08001: partition $partition of PL/Proxy cluster \"idempotent_pay\""
		  . " (database \"pay_p$partition\") is unreachable";
		diag "$key on partition $partition: $error" unless $refused{$key};
	}
	else
	{
		$paid{$key} = $partition if $error eq 'no error';
		diag "$key on partition $partition: $error" unless $paid{$key};
	}
}
my $routed_down = grep { $_ ne $early_key && $is_down{ $partition_of{$_} } } @keys_tried;
note "of 39 keys, $routed_down route to partitions @down of the stopped shard";
cmp_ok($routed_down, '>', 0, 'some keys route to the stopped shard');
is(scalar(keys %refused), $routed_down, 'each of their calls fails with 08001 naming its partition and database');
is(scalar(keys %paid), 39 - $routed_down, 'each call for another partition succeeds');
cmp_ok($slowest, '<', 2, sprintf('no call waits (slowest %.3f s)', $slowest));
like(proxy_error('SELECT count(*) FROM pay_verify()'),
	qr/^08001: partition database "pay_p[15]" of PL\/Proxy cluster "idempotent_pay" is unreachable$/,
	'a call on every partition fails as a whole, naming the database');
$session->query("SELECT pay_begin('$early_key')");
like($session->{stderr},
	qr/ERROR:  (08001: |08006: the connection to )partition $down[0] of PL\/Proxy cluster "idempotent_pay"/,
	'a session whose connection to the stopped shard was open is told which partition');
$session->{stderr} = '';

$shards[$victim]->start;
my %after = map { $_ => partition_sql($_, 'SELECT count(*) FROM pay_ledger') } @down;
is_deeply(\%after, \%before, "after the restart partitions @down hold every payment they held");
my $retried = 0;
for my $key (sort keys %refused)
{
	$retried++ if proxy_sql("SELECT pay_begin('$key', 10, 'EUR')") eq 'PROCEED';
}
is($retried, scalar(keys %refused), 'the refused calls, retried, proceed');

# The long-lived session goes on; then its connection to the partition
# breaks while idle (the shard ends the backend): the next call is told
# that the connection broke (08006: it may have run there), and a retry
# is answered from the ledger.
my $answer = $session->query("SELECT pay_begin('$early_key')");
$answer = $session->query("SELECT pay_begin('$early_key')") if $session->{stderr} ne '';
$session->{stderr} = '';
is($answer, 'IN_PROGRESS', 'the long-lived session goes on against the restarted shard');
$shards[$victim]->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'pay_p$down[0]'");
$shards[$victim]->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'pay_p$down[0]'");
$session->query("SELECT pay_begin('$early_key')");
like($session->{stderr},
	qr/ERROR:  08006: the connection to partition $down[0] of PL\/Proxy cluster "idempotent_pay" \(database "pay_p$down[0]"\) broke during the call/,
	'a connection that broke under the proxy is 08006, naming the partition');
like($session->{stderr}, qr/HINT:  The call may or may not have been applied there/,
	'and says the call may have run');
$session->{stderr} = '';
is($session->query("SELECT pay_begin('$early_key')"), 'IN_PROGRESS', 'the retry is answered from the ledger');
$session->quit;

($payments, $twice, $wrong) = misplaced();
is($twice, 0, "after the outage no bizNo on two partitions ($payments payments)");
is($wrong, 0, 'and none on a partition its route does not name');
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'pay_verify() through the proxy is empty');
my $problems = join '', map { partition_sql($_, 'SELECT count(*) FROM pay_verify()') } 0 .. $partition_count - 1;
is($problems, '0' x $partition_count, 'pay_verify() on every partition is empty');

note sprintf 'wall time %.1f s', time - $started;
$proxy->stop;
$_->stop for @shards;
done_testing();
