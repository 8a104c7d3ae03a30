# Scale-out on PL/Proxy: one proxy database with idempotent_pay_proxy in
# front of four shard servers holding eight partitions, one database each
# (partition p on shard p % 4), every one with the default idempotent_pay
# (1.4).  Checked here:
#
#   - routing: pay_route of fixed inputs is a fixed number, asserted
#     literally, and equals the hash doc/scale-out.md writes down, computed again
#     in Perl; every call on a payment reaches the partition pay_partition
#     names, and the payment is there and nowhere else;
#   - the API through the proxy answers, and refuses, as the shard does:
#     the same SQLSTATE, message, detail, hint and constraint name;
#   - retention: pay_archive on each partition; through the proxy a late
#     retry of an archived success is answered from the partition's archive,
#     any other refused as the partition refuses it (55000 pay_archived);
#   - fan-out: pay_stats, pay_verify and pay_reconcile answer what one node
#     holding every payment answers; pay_stats' unanswered_partitions is
#     empty; a role the shards do not grant pay_stats gets their 42501;
#     after card operations on two partitions, pay_stats' card flow counts,
#     pay_stats_amounts and pay_stats_holds() are the sums of the
#     partitions' own;
#   - a concurrent run through the proxy: every bizNo on exactly one shard,
#     the one its route names;
#   - a stopped shard: its partitions' calls fail at once with 08001 naming
#     the partition, the others' succeed, nothing lands on a wrong shard;
#     pay_verify fails as a whole; pay_stats answers at once with the other
#     partitions' counts (those of their ledgers), and so do
#     pay_stats_amounts and pay_stats_holds() with theirs, naming the stopped
#     shard's partitions on every row, and a role without the grant still
#     gets 42501; after the restart every payment is there, pay_stats is
#     complete again and pay_verify() is empty everywhere;
#   - the scripts: the installed ones are what test/proxy_sql.pl writes, and
#     proxies created at 1.2 and 1.3 and updated are the proxy created at
#     1.4, grants and initial privileges included (pay_stats' made by hand
#     granted again with it); a 1.3 proxy pays through 1.4 partitions, a
#     1.4 proxy settles through and reads the monitoring of a partition
#     once it is at 1.4.
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
# (as doc/scale-out.md advises: pay_stats counts duplicate answers only so).
my @shards;
for my $i (0 .. $shard_count - 1)
{
	my $node = PostgreSQL::Test::Cluster->new("shard$i");
	$node->init;
	# the payments here use keys of their own, keys of another system: accepted
	$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
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

# What a client is told of the error a statement raises: its SQLSTATE and
# message, detail, hint, constraint name and context, one line each, as
# psql shows them ("no error" when there is none).
sub error_report_of
{
	my ($node, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql($db, "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err);
	my @lines = grep { /^(?:ERROR|DETAIL|HINT|CONSTRAINT NAME|CONTEXT):/ }
	  map { s/^psql:[^\n]*?: (?=ERROR:)//r } split /\n/, $err;
	return @lines ? join("\n", @lines) : 'no error';
}
sub proxy_report { return error_report_of($proxy, 'proxy', $_[0]); }
sub partition_report { return error_report_of(shard_of($_[0]), "pay_p$_[0]", $_[1]); }

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

# What pay_stats should count over some partitions, from their ledgers:
# "status|payments|refunds" per status, in pay_status order.
sub ledger_counts
{
	my %count = map { $_ => [ 0, 0 ] } qw(INIT PROCESSING SUCCESS FAILED);
	for my $p (@_)
	{
		for (split /\n/,
			partition_sql($p, 'SELECT status, count(*), count(parent) FROM pay_ledger GROUP BY status'))
		{
			my ($status, $payments, $refunds) = split /\|/;
			$count{$status}[0] += $payments;
			$count{$status}[1] += $refunds;
		}
	}
	return map { "$_|$count{$_}[0]|$count{$_}[1]" } qw(INIT PROCESSING SUCCESS FAILED);
}

# Each partition's own answer to a query of its monitoring, added up over
# some partitions: the first $keys columns name a row, the others are
# summed.  The rows "key|sum|...", sorted by key as text.
sub partitions_summed
{
	my ($query, $keys, @partitions) = @_;
	my %sum;
	for my $p (@partitions)
	{
		for (split /\n/, partition_sql($p, $query))
		{
			my @fields = split /\|/, $_, -1;
			my $key = join '|', @fields[ 0 .. $keys - 1 ];
			$sum{$key}[ $_ - $keys ] += $fields[$_] || 0 for $keys .. $#fields;
		}
	}
	return map { join '|', $_, @{ $sum{$_} } } sort keys %sum;
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
# definition in doc/scale-out.md, computed again here (16-bit halves keep every
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
# (1.3: each settlement names the attempt it settles, 1 after the first
# PROCEED.)  R-REFERENCE's statement row names the bank reference callers
# send, bizNo/attempt.
my $scenario = q{
SELECT pay_begin('R-MATCHED', 10, 'EUR'), pay_succeed('R-MATCHED', 'BANK-1', 1);
SELECT pay_begin('R-NOT-IN-BANK', 10, 'EUR'), pay_succeed('R-NOT-IN-BANK', 'BANK-2', 1);
SELECT pay_begin('R-DUPLICATE', 10, 'EUR'), pay_succeed('R-DUPLICATE', 'BANK-3', 1);
SELECT pay_begin('R-AMOUNT', 10, 'EUR'), pay_succeed('R-AMOUNT', 'BANK-4', 1);
SELECT pay_begin('R-CURRENCY', 10, 'EUR'), pay_succeed('R-CURRENCY', 'BANK-5', 1);
SELECT pay_begin('R-FAILED', 10, 'EUR'), pay_fail('R-FAILED', 'timeout', 1);
SELECT pay_begin('R-PENDING', 10, 'EUR');
SELECT pay_begin('R-REFERENCE', 10, 'EUR');
};
my $csv = dirname(__FILE__) . '/../demo/bank_statement.csv';
open my $fh, '<', $csv or die "cannot read $csv: $!";
my (undef, @statement_rows) = <$fh>;
close $fh;
my $load_statement =
	"CREATE TABLE bank_statement (bizno text, amount numeric, currency text, status text, channel_ref text);\n"
  . "COPY bank_statement FROM STDIN WITH (FORMAT csv);\n"
  . join('', @statement_rows)
  . "R-REFERENCE/1,10.00,EUR,SUCCESS,BANK-8\n"
  . "\\.\n";
$shards[0]->safe_psql('single', $scenario . $load_statement);
proxy_sql($scenario . $load_statement);
is( proxy_sql(
		"SELECT count(DISTINCT pay_partition(b)) > 1 FROM unnest(ARRAY['R-MATCHED', 'R-NOT-IN-BANK',
		 'R-DUPLICATE', 'R-AMOUNT', 'R-CURRENCY', 'R-FAILED', 'R-PENDING', 'R-UNKNOWN']) AS b"),
	't', 'the statement\'s payments lie on several partitions');
is( proxy_sql(
		"SELECT pay_partition('R-REFERENCE'), pay_statement_partition('R-REFERENCE/1'),
		        pay_statement_partition('R-REFERENCE'), pay_statement_partition('no such key!/1')"),
	'5|5|5|0',
	'a statement row naming bizNo/attempt is reconciled on the bizNo\'s partition (not partition 0)');

my $report = "SELECT kind, bizno, ledger_status, ledger_amount, bank_amount, bank_rows, detail FROM pay_reconcile('bank_statement')";
my $single_report = $shards[0]->safe_psql('single', $report);
is(proxy_sql($report), $single_report, 'pay_reconcile through the proxy lists what one node lists');
like($single_report, qr/^MISSING_IN_LEDGER\|R-UNKNOWN/m, 'including a statement row no partition holds');
my $settle = "SELECT kind, bizno, ledger_status, detail FROM pay_reconcile('bank_statement', settle => true)";
my $single_settled = $shards[0]->safe_psql('single', $settle);
is(proxy_sql($settle), $single_settled, 'and settles as one node settles');
is(proxy_sql("SELECT status FROM pay_get('R-PENDING')"), 'SUCCESS', 'R-PENDING is settled on its partition');
is(proxy_sql("SELECT status, channel_ref FROM pay_get('R-REFERENCE')"),
	'SUCCESS|BANK-8', 'R-REFERENCE, its row naming R-REFERENCE/1, is settled on its partition');
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

# A claim through the proxy is a statement of its own on its partition,
# committed there before the proxy answers: the caller's transaction on the
# proxy rolling back after the bank call does not undo it, so the retry is
# IN_PROGRESS (the partition never sees the caller's transaction block, and
# need not refuse the claim).
is( proxy_sql(
		"BEGIN; SELECT action || ' ' || attempt FROM pay_claim('TAP-PROXY-TX', 10, 'EUR'); ROLLBACK;"),
	'PROCEED 1', 'a claim inside a transaction on the proxy: PROCEED');
is(proxy_sql("SELECT action || ' ' || attempt FROM pay_claim('TAP-PROXY-TX', 10, 'EUR')"),
	'IN_PROGRESS 1', 'that transaction rolled back: the retry is IN_PROGRESS, the claim stands');
is(proxy_sql("SELECT count(*) FROM pay_get('TAP-UNKNOWN')"), 0, 'pay_get of an unknown key: no row');
is(proxy_sql("SELECT * FROM pay_find('SHOP', 'TAP-1')"),
	partition_sql($home, "SELECT * FROM pay_find('SHOP', 'TAP-1')"),
	'pay_find through the proxy: the row of (prefix, biz_id) from its partition');
is(proxy_sql("SELECT count(*) FROM pay_find('SHOP', 'TAP-NONE')"), 0,
	'pay_find of a business action without a payment: no row');
is(placement()->{'SHOP-TAP-NONE'}, undef, 'and it creates nothing');
is(proxy_sql("SELECT * FROM pay_open_claim('SHOP', 'TAP-2', 5, 'EUR')") =~ /^SHOP-TAP-2-.*\|PROCEED\|1\|PROCESSING\|\|$/
	? 'ok' : 'not', 'ok', 'pay_open_claim');

# (1.3: a settlement naming a later attempt than the current one is
# pay_unclaimed_attempt; a new payment without a currency is 22004.)
for my $call (
	"pay_succeed('$bizno', 'BANK-1', 2)",
	"pay_fail('$bizno', 'too late', 1)",
	"pay_transition('$bizno', 'INIT')",
	"pay_reset('TAP-UNKNOWN', 'no such payment')",
	"pay_begin('TAP-NO-AMOUNT')",
	"pay_open('SHOP', 'TAP-1', 11, 'EUR')")
{
	my $key = $call =~ /pay_open\('SHOP', 'TAP-1'/ ? $bizno : ($call =~ /\('([^']*)'/)[0];
	my $expected = partition_report(proxy_sql("SELECT pay_partition('$key')"), "SELECT $call");
	isnt($expected, 'no error', "the shard refuses $call: " . (split /\n/, $expected)[0]);
	is(proxy_report("SELECT $call"), $expected,
		'the proxy passes the shard\'s SQLSTATE, message, detail, hint and constraint name on');
}

# The refusals a caller tells apart by constraint name.  PL/Proxy passes a
# shard's context on but not its constraint name, so the proxy's call sets
# idempotent_pay.report_constraint in the shard's session, the shard adds
# the name to the context, and the proxy raises the error with it again,
# without a context.  Each refusal here, on the shard directly and through
# the proxy: the same SQLSTATE, message, detail, hint and constraint name.
my $named = proxy_sql("SELECT pay_open('SHOP', 'TAP-NAMED', 10, 'EUR')");
my $named_home = proxy_sql("SELECT pay_partition('$named')");
sub refused_alike
{
	my ($constraint, $call) = @_;
	my $direct = partition_report($named_home, "SELECT $call");
	like($direct, qr/^CONSTRAINT NAME:  \Q$constraint\E$/m, "the shard refuses $call naming $constraint");
	is(proxy_report("SELECT $call"), $direct,
		"through the proxy: the same SQLSTATE, message, detail, hint and constraint name ($constraint)");
}
is(proxy_sql("SELECT action, attempt FROM pay_claim('$named')"), 'PROCEED|1', "$named is claimed");
refused_alike(pay_amount_frozen => "pay_begin('$named', 11, 'EUR')");
refused_alike(pay_currency_frozen => "pay_begin('$named', 10, 'USD')");
unlike(partition_report($named_home, "SELECT pay_begin('$named', 11, 'EUR')"), qr/^CONTEXT:/m,
	'a shard session that did not ask gets no context line');
like( partition_report(
		$named_home, "SET idempotent_pay.report_constraint = on;\nSELECT pay_begin('$named', 11, 'EUR')"),
	qr/^CONTEXT:  idempotent_pay constraint: pay_amount_frozen$/m,
	'one with idempotent_pay.report_constraint on gets the constraint name in the context');
is(proxy_sql("SELECT pay_fail('$named', 'declined', 1)"), 'FAILED', 'attempt 1 is declined');
is(proxy_sql("SELECT action, attempt FROM pay_claim('$named')"), 'PROCEED|2', 'and attempt 2 claimed');
refused_alike(pay_stale_attempt => "pay_succeed('$named', 'BANK-LATE', 1)");
is(proxy_sql("SELECT pay_succeed('$named', 'BANK-NAMED', 2)"), 'SUCCESS', 'attempt 2 succeeds');
my $named_refund = proxy_sql("SELECT pay_refund_open('$named', 'N1', 8)");
is(proxy_sql("SELECT action FROM pay_claim('$named_refund')"), 'PROCEED', 'a refund of 8 of its 10 is claimed');
my $too_much = proxy_sql("SELECT pay_refund_open('$named', 'N2', 5)");
refused_alike(pay_refund_limit => "pay_claim('$too_much')");
like(proxy_error('SELECT * FROM pay_stuck()'), qr/^0A000: pay_stuck runs on each partition/,
	'pay_stuck is refused through the proxy: its row locks need a connection to the partition');
is(proxy_sql("SELECT pay_allowed('FAILED', 'INIT'), pay_bizno_valid('$bizno'), count(*) FROM pay_transitions"),
	't|t|6', 'the pure functions answer on the proxy');

# Refunds route with their payment.
my $refund = proxy_sql("SELECT pay_refund_open('$bizno', 'R1', 4, 'tap')");
is(proxy_sql("SELECT pay_partition('$refund')"), $home, "a refund routes with its payment ($refund)");
is(proxy_sql("SELECT action FROM pay_claim('$refund')"), 'PROCEED', 'and is claimed through the proxy');
is(proxy_sql("SELECT pay_succeed('$refund', 'REFUND-BANK-1', 1)"), 'SUCCESS', 'and settled');
is(proxy_sql("SELECT refunded FROM pay_refund_balance('$bizno')"), 4, 'pay_refund_balance counts it');
proxy_sql("SELECT pay_begin('tap-foreign-1', 10, 'EUR'), pay_succeed('tap-foreign-1', 'BANK-F', 1)");
my $foreign_refund = proxy_sql("SELECT pay_refund_open('tap-foreign-1', 'R1', 3)");
is(proxy_sql("SELECT pay_partition('$foreign_refund') = pay_partition('tap-foreign-1')"),
	't', "a refund of a payment keyed by another system routes with it ($foreign_refund)");
is(proxy_sql("SELECT action FROM pay_claim('$foreign_refund')"), 'PROCEED', 'and is claimed through the proxy');

############################################################################
# Retention: pay_archive runs on each partition (the proxy has no
# pay_archive).  Payments made through the proxy, dated back to March 2025
# on their partitions (with the ledger's bookkeeping off, as a replica
# writes them) are archived there; through the proxy a late retry of an
# archived success is answered from the archive, and any other is refused
# with the partition's SQLSTATE, message, detail, hint and constraint name
# (55000 pay_archived), the month kept or dropped.

proxy_sql(q{
SELECT pay_begin('arc-success', 10, 'EUR'), pay_succeed('arc-success', 'BANK-ARC-1', 1);
SELECT pay_begin('arc-failed', 10, 'EUR'), pay_fail('arc-failed', 'declined', 1);
});
my $arc_paid = proxy_sql("SELECT bizno FROM pay_open_claim('SHOP', 'ARC-PAID', 10, 'EUR')");
proxy_sql("SELECT pay_succeed('$arc_paid', 'BANK-ARC-2', 1)");
my $arc_opened = proxy_sql("SELECT pay_open('SHOP', 'ARC-OPENED', 10, 'EUR')");
my @arc_keys = ('arc-success', 'arc-failed', $arc_paid, $arc_opened);
my %arc_home = map { $_ => proxy_sql("SELECT pay_partition('$_')") } @arc_keys;
note 'the archived payments\' partitions: ' . join(' ', map { $arc_home{$_} } @arc_keys);
partition_sql($arc_home{$_},
	"SET session_replication_role = replica;\n"
	  . "UPDATE pay_ledger SET updated_at = '2025-03-10 12:00+00' WHERE bizno = '$_'")
  for @arc_keys;
my %arc_count;
$arc_count{ $arc_home{$_} }++ for @arc_keys;
is( join(' ', map { partition_sql($_, "SELECT pay_archive('2025-04-01')") } 0 .. $partition_count - 1),
	join(' ', map { $arc_count{$_} // 0 } 0 .. $partition_count - 1),
	'pay_archive on each partition moves its payments of March 2025, and nothing else');
is( join(' ', map { partition_sql($_, q{SELECT count(*) FROM pay_archive_verify() WHERE problem IS NULL AND kept}) }
		sort keys %arc_count),
	join(' ', map { 1 } keys %arc_count),
	'pay_archive_verify on those partitions: March kept, no problem');
# The archived payments (by key or business action) in the ledgers of the
# partitions they route to.
sub arc_in_ledgers
{
	my $n = 0;
	$n += partition_sql($_,
		"SELECT count(*) FROM pay_ledger WHERE bizno IN ('" . join("', '", @arc_keys) . "')"
		  . " OR (prefix, biz_id) IN (('SHOP', 'ARC-PAID'), ('SHOP', 'ARC-OPENED'))")
	  for sort keys %arc_count;
	return $n;
}
is(arc_in_ledgers(), 0, 'their partitions\' ledgers no longer hold them');

sub archived_alike
{
	my ($key, $call, $month) = @_;
	my $direct = partition_report($arc_home{$key}, "SELECT $call");
	like($direct, qr/^ERROR:  55000: (?:.*\n)*CONSTRAINT NAME:  pay_archived$/m,
		"the partition refuses $call ($month): 55000 pay_archived");
	is(proxy_report("SELECT $call"), $direct,
		'through the proxy: the same SQLSTATE, message, detail, hint and constraint name (pay_archived)');
}
is(proxy_sql("SELECT action, attempt, status, channel_ref FROM pay_claim('arc-success')"),
	'ALREADY_SUCCEEDED|1|SUCCESS|BANK-ARC-1',
	'through the proxy a late claim of an archived success is answered from the archive');
is(proxy_sql("SELECT pay_begin('arc-success', 10, 'EUR')"), 'ALREADY_SUCCEEDED', 'and so is a late pay_begin');
is(proxy_sql("SELECT action FROM pay_claim('$arc_paid')"), 'ALREADY_SUCCEEDED', 'and a late claim of a paid order');
is(proxy_sql("SELECT pay_open('SHOP', 'ARC-PAID', 10, 'EUR') || ' ' || pay_open('SHOP', 'ARC-OPENED', 10, 'EUR')"),
	"$arc_paid $arc_opened", 'pay_open through the proxy gives archived orders their archived bizNos');
archived_alike('arc-failed', "pay_claim('arc-failed')", 'kept');
archived_alike('arc-failed', "pay_begin('arc-failed', 10, 'EUR')", 'kept');
archived_alike($arc_opened, "pay_claim('$arc_opened')", 'kept');
archived_alike($arc_opened, "pay_open_claim('SHOP', 'ARC-OPENED', 10, 'EUR')", 'kept');
archived_alike('arc-success', "pay_succeed('arc-success', 'BANK-LATE', 1)", 'kept');
archived_alike('arc-success', "pay_refund_open('arc-success', 'R1', 1)", 'kept');

# March dropped on those partitions: every late retry is refused.
partition_sql($_, 'DROP TABLE pay_ledger_archive_2025_03, pay_journal_archive_2025_03') for sort keys %arc_count;
archived_alike('arc-success', "pay_claim('arc-success')", 'dropped');
archived_alike($arc_paid, "pay_open('SHOP', 'ARC-PAID', 10, 'EUR')", 'dropped');
archived_alike('arc-failed', "pay_begin('arc-failed', 10, 'EUR')", 'dropped');
is(arc_in_ledgers(), 0, 'no late retry put an archived payment back in a ledger');

# An application role and an operator's: granted on the proxy and on
# every shard, one pays and the other repairs, each refused what the other
# does, as on a 1.3 shard; a role granted nothing is refused by the proxy.
for my $p (0 .. $partition_count - 1)
{
	shard_of($p)->safe_psql('postgres',
		'CREATE ROLE payment_app LOGIN; CREATE ROLE payment_ops LOGIN; CREATE ROLE watcher LOGIN')
	  if $p < $shard_count;
	partition_sql($p, "SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops')");
}
$proxy->safe_psql('postgres',
	'CREATE ROLE payment_app LOGIN; CREATE ROLE payment_ops LOGIN; CREATE ROLE stranger LOGIN; '
	  . 'CREATE ROLE watcher LOGIN');
# (watcher: an operator on the proxy, granted nothing on the shards.)
proxy_sql("SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops'), pay_grant_operator('watcher')");
sub error_as
{
	my ($role, $sql) = @_;
	my ($out, $err) = ('', '');
	$proxy->psql('proxy', "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		extra_params => [ '-U', $role ]);
	return $err =~ /ERROR:\s+([0-9A-Z]{5}): ([^\n]*)/ ? "$1: $2" : 'no error';
}
like(error_as(payment_app => "SELECT pay_reset('R-FAILED', 'not mine')"),
	qr/^42501: permission denied for function pay_reset$/,
	'the application role may not pay_reset through the proxy (1.3: an operator\'s call)');
like(error_as(payment_ops => "SELECT pay_claim('TAP-OPS', 1, 'EUR')"),
	qr/^42501: permission denied for function pay_claim$/, 'nor the operator pay_claim');
is( $proxy->safe_psql(
		'proxy', "SELECT pay_reset('R-FAILED', 'the operator retries it')",
		extra_params => [ '-U', 'payment_ops' ]),
	'INIT',
	'the operator resets a failed payment through the proxy');
is( $proxy->safe_psql(
		'proxy', "SELECT count(*) FROM pay_find('SHOP', 'TAP-1')",
		extra_params => [ '-U', 'payment_app' ]),
	1,
	'the application finds a payment through the proxy');
is( $proxy->safe_psql(
		'proxy', "SELECT action FROM pay_open_claim('SHOP', 'TAP-APP', 10, 'EUR')",
		extra_params => [ '-U', 'payment_app' ]),
	'PROCEED',
	'an application role granted on proxy and shards pays through the proxy');
my ($out, $err) = ('', '');
$proxy->psql('proxy', "\\set VERBOSITY verbose\nSELECT pay_begin('tap-stranger', 1, 'EUR')",
	stdout => \$out, stderr => \$err, extra_params => [ '-U', 'stranger' ]);
like($err, qr/ERROR:\s+42501/, 'a role granted nothing is refused (42501)');

# The roles x functions matrix of the proxy, generated from the catalog so
# that a function added later joins it: the application and operator
# roles may run a function of the proxy exactly when a shard grants them
# the function of the same signature (the API), or, for the proxy's own
# plumbing (<name>_on_partition, <name>_of_partitions, ...), when they may
# run the API function it serves.
my $privileges = q{
SELECT p.oid::regprocedure::text,
       has_function_privilege('payment_app', p.oid, 'EXECUTE'),
       has_function_privilege('payment_ops', p.oid, 'EXECUTE')
FROM pg_proc AS p
JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension AS e ON e.oid = d.refobjid AND e.extname = '%s'
ORDER BY 1};
my %on_shard = map { my ($f, @may) = split /\|/; ($f => "@may") } split /\n/,
  partition_sql(0, sprintf($privileges, 'idempotent_pay'));
my %on_proxy = map { my ($f, @may) = split /\|/; ($f => "@may") } split /\n/, proxy_sql(sprintf($privileges, 'idempotent_pay_proxy'));
my ($api, $plumbing, @differ) = (0, 0);
for my $function (sort keys %on_proxy)
{
	my $served;
	if (exists $on_shard{$function}) { $served = $function; $api++; }
	elsif ($function =~ /^(\w+?)_(?:on_partition|of_partitions)\((?:integer, ?)?(.*)$/ && exists $on_proxy{"$1($2"})
	{
		$served = "$1($2";
		$plumbing++;
	}
	elsif ($function =~ /^pay_(stats|verify|reconcile|stats_reset)_on_(?:all_)?partitions?\(/) { next; }
	else { next; }
	my $expected = exists $on_shard{$served} ? $on_shard{$served} : $on_proxy{$served};
	push @differ, "$function: $on_proxy{$function} (expected $expected)" if $on_proxy{$function} ne $expected;
}
note "the proxy's functions: $api of the API, $plumbing of the plumbing of a routed call or a batch";
cmp_ok($api, '>', 25, "the matrix covers $api API functions of the proxy");
is(join("\n", @differ), '',
	'the application and operator roles may run each function of the proxy as a shard grants its API function');

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
is(proxy_sql('SELECT status, payments, refunds FROM pay_stats'),
	join("\n", ledger_counts(0 .. $partition_count - 1)), 'those of the partitions\' ledgers');
is(proxy_sql("SELECT string_agg(DISTINCT unanswered_partitions::text, ' ') FROM pay_stats"),
	'{}', 'every partition answered: unanswered_partitions is empty on every row');
is( $proxy->safe_psql('proxy', 'SELECT count(*) FROM pay_stats', extra_params => [ '-U', 'payment_ops' ]),
	4, 'the operator reads pay_stats through the proxy');
is(error_as(watcher => 'SELECT * FROM pay_stats'), '42501: permission denied for view pay_stats',
	'a role the shards do not grant pay_stats gets their 42501 through the proxy');
my $duplicates = 0;
$duplicates += partition_sql($_, "SELECT duplicate_answers FROM pay_stats WHERE status = 'SUCCESS'")
  for 0 .. $partition_count - 1;
ok($duplicates > 0, "the partitions gave $duplicates ALREADY_SUCCEEDED answers");
is(proxy_sql("SELECT duplicate_answers FROM pay_stats WHERE status = 'SUCCESS'"), $duplicates,
	'pay_stats through the proxy adds them up');

# A second charge reported through the proxy is counted and listed until
# it is confirmed (here by an operator's call through the proxy).
is(proxy_sql("SELECT pay_succeed('$bizno', 'BANK-1-AGAIN', 1)"), 'SECOND_CHARGE',
	'pay_succeed through the proxy answers SECOND_CHARGE for another charge of a success');
my $unconfirmed = 0;
$unconfirmed += partition_sql($_, "SELECT unconfirmed_second_charges FROM pay_stats WHERE status = 'SUCCESS'")
  for 0 .. $partition_count - 1;
is($unconfirmed, 1, 'the partitions count one unconfirmed second charge');
is(proxy_sql("SELECT unconfirmed_second_charges FROM pay_stats WHERE status = 'SUCCESS'"), $unconfirmed,
	'pay_stats through the proxy counts it');
my $second_charges = 0;
$second_charges += partition_sql($_, "SELECT second_charges FROM pay_stats WHERE status = 'SUCCESS'")
  for 0 .. $partition_count - 1;
is(proxy_sql("SELECT second_charges FROM pay_stats WHERE status = 'SUCCESS'"), $second_charges,
	"and every second charge recorded ($second_charges)");
like(proxy_sql('SELECT * FROM pay_verify()'), qr/^\Q$bizno\E\|a second charge under BANK-1-AGAIN/,
	'pay_verify through the proxy lists it');
$proxy->safe_psql('proxy', "SELECT pay_confirm_second_charge('$bizno', 'BANK-1-AGAIN')",
	extra_params => [ '-U', 'payment_ops' ]);
is(proxy_sql("SELECT unconfirmed_second_charges FROM pay_stats WHERE status = 'SUCCESS'"), 0,
	'confirmed through the proxy (pay_confirm_second_charge), it is counted no more');
is(proxy_sql("SELECT captured FROM pay_refund_balance('$bizno')"), 20, 'and counts as captured');
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'pay_verify through the proxy: nothing wrong');

# A journal row that contradicts the ledger, on one partition, written with
# a restore's settings (the journal takes no other row it did not write):
# pay_verify through the proxy reports it as the partition does.  (The
# guard of the journal is switched off by hand to take it back.)
partition_sql($home,
	"SET row_security = off; SET check_function_bodies = false; "
	  . "INSERT INTO pay_journal (bizno, attempt, from_status, to_status) VALUES ('$bizno', 1, 'SUCCESS', 'FAILED')");
my $problem = partition_sql($home, 'SELECT * FROM pay_verify()');
like($problem, qr/^\Q$bizno\E\|the ledger says SUCCESS/, "the partition finds the contradiction");
is(proxy_sql('SELECT * FROM pay_verify()'), $problem, 'pay_verify through the proxy reports it');
partition_sql(
	$home, qq{
SET idempotent_pay.maintenance = on;
ALTER TABLE pay_journal DISABLE TRIGGER pay_journal_guard;
DELETE FROM pay_journal WHERE seq = (SELECT max(seq) FROM pay_journal WHERE bizno = '$bizno');
ALTER TABLE pay_journal ENABLE ALWAYS TRIGGER pay_journal_guard;
});
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'and nothing once it is taken back');

############################################################################
# Batches through the proxy: each split by partition, every part run on its
# partition, the answers merged in input order.  The same batches on one
# node holding every payment (the database single, where the same keys are
# free) answer the same, input by input -- every kind of input: new, the
# same key twice, already paid, in flight, failed, another amount, refused
# by the router (a malformed or NULL biz_id or key), refused by the shard
# (an amount of too many decimals, a stale attempt), a second charge --,
# and leave the same ledger rows and journal.

# What both sides hold before the batches.
my $batch_setup = q{
SELECT bizno AS paid FROM pay_open_claim('BATCH', 'PAID', 10, 'EUR') \gset
SELECT pay_succeed(:'paid', 'BANK-PAID', 1);
SELECT pay_open_claim('BATCH', 'INFLIGHT', 10, 'EUR');
SELECT bizno AS failed FROM pay_open_claim('BATCH', 'FAILED', 10, 'EUR') \gset
SELECT pay_fail(:'failed', 'declined', 1);
SELECT pay_open('BATCH', 'OPENED', 10, 'EUR');
};
proxy_sql($batch_setup);
$shards[0]->safe_psql('single', $batch_setup);

my @batch_inputs = (
	(map { [ "N$_", 10 + $_ ] } 1 .. 16),
	[ 'PAID', 10 ], [ 'INFLIGHT', 10 ], [ 'FAILED', 10 ], [ 'OPENED', 12 ],
	[ 'N3', 13 ], [ 'N5', 99 ], [ 'bad id!', 10 ], [ undef, 10 ], [ 'DECIMALS', '10.005' ], [ 'NEGATIVE', -5 ],
	[ 'N17', undef ]);
my $batch_ids = 'ARRAY[' . join(', ', map { defined $_->[0] ? "'$_->[0]'" : 'NULL' } @batch_inputs) . ']::text[]';
my $batch_amounts = 'ARRAY[' . join(', ', map { $_->[1] // 'NULL' } @batch_inputs) . ']::numeric[]';
my $open_many = "SELECT biz_id, bizno, action, attempt, sqlstate, constraint_name "
  . "FROM pay_open_claim_many('BATCH', $batch_ids, $batch_amounts, 'EUR')";

# A bizNo's head, PREFIX-BIZID: the rest (time, node, uniqueness) differs
# from one database to another.
sub heads { return $_[0] =~ s/\b(BATCH-[A-Za-z0-9]+)-\d{17}-\d{4}-[0-9A-Z]{14}\b/$1-.../gr; }

my $single_open = $shards[0]->safe_psql('single', $open_many);
my $proxy_open = proxy_sql($open_many);
is(heads($proxy_open), heads($single_open),
	'pay_open_claim_many through the proxy answers as on one node, input by input, in input order');
note "the batch's answers:\n" . heads($proxy_open);
my $batch_spread = proxy_sql("SELECT count(DISTINCT pay_partition('BATCH', b)) FROM unnest($batch_ids) AS b WHERE b ~ '^N'");
cmp_ok($batch_spread, '>=', $partition_count - 2, "its new orders lie on $batch_spread of the $partition_count partitions");
like($proxy_open, qr/^N1\|BATCH-N1-\S+\|PROCEED\|1\|\|$/m, 'a new order: PROCEED, attempt 1');
like($proxy_open, qr/^N3\|BATCH-N3-\S+\|IN_PROGRESS\|1\|\|$/m, 'the same key again in the batch: IN_PROGRESS');
like($proxy_open, qr/^N5\|\|\|\|55000\|pay_amount_frozen$/m,
	'and with another amount: refused on its row, with the shard\'s SQLSTATE and constraint name');
like($proxy_open, qr/^OPENED\|\|\|\|55000\|pay_parameter_changed$/m,
	'an opened order under another amount: refused on its row');
like($proxy_open, qr/^bad id!\|\|\|\|22023\|$/m, 'a malformed biz_id: 22023, refused by the router');
like($proxy_open, qr/^\|\|\|\|22004\|$/m, 'a NULL biz_id: 22004');
like($proxy_open, qr/^PAID\|BATCH-PAID-\S+\|ALREADY_SUCCEEDED\|1\|\|$/m, 'a paid order: ALREADY_SUCCEEDED');

# Settle what the batch claimed: most succeed, some fail, plus a stale
# attempt, a second charge, a key no payment can have, a NULL key and an
# unknown bizNo.
sub settle_many_of
{
	my ($node, $db, $claimed) = @_;
	my %bizno_of = map { (split /\|/)[ 0, 1 ] } split /\n/, $claimed;
	my @inputs = (
		(map { [ $bizno_of{"N$_"}, 1, $_ % 5 == 0 ? 'FAILED' : 'SUCCESS', "BANK-N$_", 'declined' ] } 1 .. 16),
		[ $bizno_of{PAID}, 1, 'SUCCESS', 'BANK-PAID-AGAIN', undef ],
		[ $bizno_of{INFLIGHT}, 2, 'SUCCESS', 'BANK-LATE', undef ],
		[ $bizno_of{N1}, 1, 'SUCCESS', 'BANK-N1', undef ],
		[ 'not a key!', 1, 'SUCCESS', 'BANK-X', undef ],
		[ undef, 1, 'SUCCESS', 'BANK-Y', undef ],
		[ 'BATCH-UNKNOWN-20261130065033976-0000-366VRA691WVWE0', 1, 'SUCCESS', 'BANK-Z', undef ]);
	my $array = sub {
		my ($i, $type) = @_;
		return 'ARRAY[' . join(', ', map { defined $_->[$i] ? "'$_->[$i]'" : 'NULL' } @inputs) . "]::$type";
	};
	return $node->safe_psql($db,
		    'SELECT bizno, result, sqlstate, constraint_name FROM pay_settle_many('
		  . join(', ', $array->(0, 'text[]'), $array->(1, 'bigint[]'), $array->(2, 'pay_status[]'),
			$array->(3, 'text[]'), $array->(4, 'text[]'))
		  . ')');
}
my $single_settled_many = settle_many_of($shards[0], 'single', $single_open);
my $proxy_settled_many = settle_many_of($proxy, 'proxy', $proxy_open);
is(heads($proxy_settled_many), heads($single_settled_many),
	'pay_settle_many through the proxy answers as on one node, input by input, in input order');
note "the settlements' answers:\n" . heads($proxy_settled_many);
like($proxy_settled_many, qr/^BATCH-PAID-\S+\|SECOND_CHARGE\|\|$/m, 'another reference for a paid order: SECOND_CHARGE');
like($proxy_settled_many, qr/^not a key!\|\|22P02\|$/m, 'a key no payment can have: 22P02, refused by the router');
# (the second charge, confirmed as a bank statement would, on both sides)
proxy_sql("SELECT pay_confirm_second_charge(bizno, 'BANK-PAID-AGAIN') FROM pay_find('BATCH', 'PAID')");
$shards[0]->safe_psql('single', "SELECT pay_confirm_second_charge(bizno, 'BANK-PAID-AGAIN') FROM pay_find('BATCH', 'PAID')");

# The ledgers and journals the batches left: the same on the partitions as
# on the one node.
my $batch_rows = q{
SELECT biz_id, status, amount, currency, attempt, channel_ref, last_error,
       (SELECT string_agg(coalesce(j.from_status::text, '-') || '>' || j.to_status || ' ' || j.attempt
                          || coalesce(' ' || j.channel_ref, ''), ', ' ORDER BY j.seq)
        FROM pay_journal AS j WHERE j.bizno = l.bizno)
FROM pay_ledger AS l WHERE prefix = 'BATCH' ORDER BY biz_id};
is(join("\n", sort map { split /\n/, partition_sql($_, $batch_rows) } 0 .. $partition_count - 1),
	join("\n", sort split /\n/, $shards[0]->safe_psql('single', $batch_rows)),
	'the partitions\' ledger rows and journals of the batches are those of the one node');
my ($batch_payments, $batch_twice, $batch_wrong) = misplaced();
is($batch_twice + $batch_wrong, 0, 'every payment of the batches on the partition its route names, on no other');

# A batch of keys on one partition alone, a batch with no input, and the
# batches' refusals of the whole call, before any partition is asked: as
# the shard raises them.
is( proxy_sql("SELECT count(*) FROM pay_open_claim_many('BATCH', '{}', '{}', 'EUR')"), 0,
	'an empty batch: no answer');
for my $call (
	"pay_open_claim_many('BATCH', NULL, '{1}', 'EUR')",
	"pay_open_claim_many(NULL, '{A}', '{1}', 'EUR')",
	"pay_open_claim_many('BATCH', '{A,B}', '{1}', 'EUR')",
	"pay_open_claim_many('BATCH', '{{A},{B}}', '{{1},{2}}', 'EUR')",
	"pay_settle_many('{A}', '{1}', '{SUCCESS}', '{R}', NULL)",
	"pay_settle_many('{A}', '{1,2}', '{SUCCESS}', '{R}', '{x}')")
{
	my $expected = partition_report(0, "SELECT * FROM $call");
	like($expected, qr/^ERROR:  22(004|023): /, "the shard refuses $call as a whole: " . (split /\n/, $expected)[0]);
	is(proxy_report("SELECT * FROM $call"), $expected, 'and so does the proxy, alike');
}

# A role the proxy grants the batches but no shard does: every part fails
# on its partition, and every input answers the partition's 42501.
$_->safe_psql('postgres', 'CREATE ROLE proxy_only LOGIN') for $proxy, @shards;
proxy_sql("SELECT pay_grant('proxy_only')");
is( $proxy->safe_psql(
		'proxy',
		"SELECT string_agg(DISTINCT coalesce(action::text, '') || '|' || sqlstate, ' ') "
		  . "FROM pay_open_claim_many('BATCH', ARRAY['R1', 'R2', 'R3', 'R4'], '{1,1,1,1}', 'EUR')",
		extra_params => [ '-U', 'proxy_only' ]),
	'|42501',
	'a role no shard grants the batch: each input answers 42501, no action');

############################################################################
# The card flow through the proxy: an authorization is opened on the
# partition of its (prefix, biz_id); its captures, voids and increments are
# children on the authorization's partition, and every call on their
# bizNos goes there.  Each refusal arrives at the caller with the shard's
# SQLSTATE, message, detail, hint and constraint name.

my $auth = proxy_sql("SELECT pay_open_authorization('CARD', 'A-1', 100, 'EUR')");
my $auth_home = proxy_sql("SELECT pay_partition('$auth')");
is(proxy_sql("SELECT pay_partition('CARD', 'A-1')"), $auth_home,
	"the authorization is opened on the partition of its (prefix, biz_id): $auth_home");
is_deeply(placement()->{$auth}, [$auth_home], 'and is there, nowhere else');
is(proxy_sql("SELECT action FROM pay_claim('$auth')"), 'PROCEED', 'the hold is claimed through the proxy');
is(proxy_sql("SELECT pay_succeed('$auth', 'HOLD-1', 1)"), 'SUCCESS', 'and placed');

# A refusal of the card flow, on the authorization's partition and through
# the proxy: the same report.
# (A step the open refuses is named by a bizNo the ledger never recorded,
# another at each call; and the shard's report has the CONTEXT of the
# ledger's INSERT, which the proxy does not pass on: neither is compared.)
sub card_refused_alike
{
	my ($constraint, $call, $home) = @_;
	my $unrecorded = sub { return $_[0] =~ s/\(step [^)]*\)/(step ...)/gr =~ s/^CONTEXT:  SQL statement .*\n//mgr; };
	my $direct = partition_report($home // $auth_home, "SELECT $call");
	like($direct, qr/^CONSTRAINT NAME:  \Q$constraint\E$/m, "the shard refuses $call naming $constraint");
	is($unrecorded->(proxy_report("SELECT $call")), $unrecorded->($direct),
		"through the proxy: the same SQLSTATE, message, detail, hint and constraint name ($constraint)");
}

my %child;
$child{C1} = proxy_sql("SELECT pay_capture_open('$auth', 'C1', 30, false)");
$child{I1} = proxy_sql("SELECT pay_increment_open('$auth', 'I1', 20)");
is(join(' ', map { proxy_sql("SELECT pay_partition('$child{$_}')") } sort keys %child), "$auth_home $auth_home",
	"a capture and an increment route to the authorization's partition ($child{C1}, $child{I1})");
is(join(' ', map { join ',', @{ placement()->{ $child{$_} } } } sort keys %child), "$auth_home $auth_home",
	'and are there, nowhere else');
is(proxy_sql("SELECT pay_capture_open('$auth', 'C1', 30, false)"), $child{C1}, 'pay_capture_open again: the same bizNo');
card_refused_alike(pay_amount_frozen => "pay_capture_open('$auth', 'C1', 31, false)");
is(proxy_sql("SELECT action FROM pay_claim('$child{I1}')"), 'PROCEED', 'the increment is claimed through the proxy');
is(proxy_sql("SELECT pay_succeed('$child{I1}', 'INC-1', 1)"), 'SUCCESS', 'and succeeds: the hold is 120');
is(proxy_sql("SELECT action FROM pay_claim('$child{C1}')"), 'PROCEED', 'the capture of 30 is claimed');
is(proxy_sql("SELECT pay_succeed('$child{C1}', 'CAP-1', 1)"), 'SUCCESS', 'and succeeds');
card_refused_alike(pay_increment_after_capture => "pay_increment_open('$auth', 'I2', 5)");
my $too_big = proxy_sql("SELECT pay_capture_open('$auth', 'C2', 91, false)");
card_refused_alike(pay_capture_limit => "pay_claim('$too_big')");
is( proxy_sql("SELECT * FROM pay_authorization_balance('$auth')"),
	partition_sql($auth_home, "SELECT * FROM pay_authorization_balance('$auth')"),
	'pay_authorization_balance through the proxy: the partition\'s figures');
is( proxy_sql("SELECT count(*) FROM pay_authorization_balance('$bizno')")
	  . partition_sql($home, "SELECT count(*) FROM pay_authorization_balance('$bizno')"),
	'00', 'pay_authorization_balance of a payment that is no authorization: no row, through the proxy as on its shard');
like(proxy_sql("SELECT authorized, captured, capturable FROM pay_authorization_balance('$auth')"),
	qr/^120(\.0+)?\|30(\.0+)?\|90(\.0+)?$/, 'authorized 120, captured 30, 90 capturable');
$child{V1} = proxy_sql("SELECT pay_void_open('$auth', 'V1')");
is(proxy_sql("SELECT pay_partition('$child{V1}')"), $auth_home, 'a void routes with its authorization');
is(proxy_sql("SELECT action FROM pay_claim('$child{V1}')"), 'PROCEED', 'and is claimed through the proxy');
card_refused_alike(pay_authorization_closed => "pay_claim('$too_big')");
is(proxy_sql("SELECT pay_succeed('$child{V1}', 'VOID-1', 1)"), 'SUCCESS', 'the void succeeds');
is(proxy_sql("SELECT closed_reason FROM pay_authorization_balance('$auth')"), 'voided', 'the authorization is closed');
my $unheld = proxy_sql("SELECT pay_open_authorization('CARD', 'A-2', 50, 'EUR')");
card_refused_alike(pay_authorization_not_held => "pay_capture_open('$unheld', 'C1', 10)",
	proxy_sql("SELECT pay_partition('$unheld')"));
is( proxy_sql("SELECT count(*) FROM pay_verify()"), 0, 'pay_verify through the proxy: the card flow holds');

# The card flow's figures through the proxy: a second authorization, in
# USD, on a partition of another shard -- one of the two authorizations on
# the shard stopped below, the other not, so that with it stopped the
# figures of one go missing.  Each figure through the proxy is the sum of
# the partitions' own.
my $victim = 1;    # the shard stopped below: partitions 1 and 5
my $on_victim = sub { return $_[0] % $shard_count == $victim ? 1 : 0 };
my ($usd_id, $usd_home) = map { split /\|/ } grep {
	my (undef, $p) = split /\|/;
	$p % $shard_count != $auth_home % $shard_count && $on_victim->($p) != $on_victim->($auth_home)
} split /\n/, proxy_sql("SELECT 'B-' || i, pay_partition('CARD', 'B-' || i) FROM generate_series(1, 64) AS i");
my $usd = proxy_sql("SELECT pay_open_authorization('CARD', '$usd_id', 80, 'USD')");
is(proxy_sql("SELECT pay_partition('$usd')"), $usd_home,
	"a second authorization, in USD, on partition $usd_home, of another shard than partition $auth_home");
# each opened once the one before it settled
my $usd_settled = 0;
for my $step ([ "'$usd'", 'HOLD-2' ], [ "pay_increment_open('$usd', 'I1', 10)", 'INC-2' ],
	[ "pay_capture_open('$usd', 'C1', 50, false)", 'CAP-2' ])
{
	my $step_bizno = proxy_sql("SELECT $step->[0]");
	$usd_settled++
	  if proxy_sql("SELECT action FROM pay_claim('$step_bizno')") eq 'PROCEED'
	  && proxy_sql("SELECT pay_succeed('$step_bizno', '$step->[1]', 1)") eq 'SUCCESS';
}
my $usd_final = proxy_sql("SELECT pay_capture_open('$usd', 'C2', 15)");
is($usd_settled . proxy_sql("SELECT action FROM pay_claim('$usd_final')"), '3PROCEED',
	'held, incremented by 10 and captured 50 through the proxy; a final capture of 15 is in flight');

my @card_partitions = grep {
	partition_sql($_, 'SELECT sum(authorizations + captures + voids + increments) FROM pay_stats') > 0
} 0 .. $partition_count - 1;
is(scalar(grep { $_ == $auth_home || $_ == $usd_home } @card_partitions), 2,
	"the card flow's rows are on partitions @card_partitions, the two authorizations' among them");
my $card_stats = 'SELECT status, authorizations, captures, voids, increments FROM pay_stats';
my $by_status_name = ' ORDER BY status::text COLLATE "C"';
is( proxy_sql($card_stats . $by_status_name),
	join("\n", partitions_summed($card_stats, 1, 0 .. $partition_count - 1)),
	'pay_stats through the proxy: authorizations, captures, voids, increments, every partition\'s added up');
is( proxy_sql("SELECT string_agg(format('%s %s/%s/%s/%s', status, authorizations, captures, voids, increments), ', ' "
		  . 'ORDER BY status) FROM pay_stats'),
	'INIT 1/1/0/0, PROCESSING 0/1/0/0, SUCCESS 2/2/1/2, FAILED 0/0/0/0',
	'those of the operations: an authorization not held; a capture refused and one in flight; two holds, '
	  . 'two captures, a void, two increments');
my $amounts = 'SELECT currency, authorized, captured FROM pay_stats_amounts';
is(proxy_sql($amounts), join("\n", partitions_summed($amounts, 1, 0 .. $partition_count - 1)),
	'pay_stats_amounts through the proxy: per currency, every partition\'s added up');
is(proxy_sql($amounts), "EUR|120|30\nUSD|90|50", 'EUR 120 authorized and 30 captured, USD 90 and 50');
my $holds = 'SELECT currency, closed_reason, holds, uncaptured FROM pay_stats_holds()';
is(proxy_sql($holds), join("\n", partitions_summed($holds, 2, 0 .. $partition_count - 1)),
	'pay_stats_holds() through the proxy: per currency and closed_reason, every partition\'s added up');
is(proxy_sql($holds), "EUR|voided|1|90\nUSD|final capture in flight|1|25",
	'the voided hold released 90, the USD hold closing with 25 neither captured nor in flight');
is( proxy_sql(
		"SELECT string_agg(DISTINCT unanswered_partitions::text, ' ') FROM (SELECT unanswered_partitions FROM "
		  . 'pay_stats_amounts UNION ALL SELECT unanswered_partitions FROM pay_stats_holds()) AS u'),
	'{}', 'every partition answered: unanswered_partitions is empty on every row of both');
is( $proxy->safe_psql(
		'proxy', 'SELECT (SELECT count(*) FROM pay_stats_amounts) + (SELECT count(*) FROM pay_stats_holds())',
		extra_params => [ '-U', 'payment_ops' ]),
	4, 'the operator reads them through the proxy');
is( error_as(watcher => 'SELECT * FROM pay_stats_amounts') . ', '
	  . error_as(watcher => 'SELECT * FROM pay_stats_holds()'),
	'42501: permission denied for view pay_stats_amounts, 42501: permission denied for function pay_stats_holds',
	'a role the shards do not grant them gets their 42501 through the proxy');

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
$session->query_safe('SELECT count(*) FROM pay_stats');    # and to every partition
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
		diag "$key on partition $partition: $error" unless exists $refused{$key};
	}
	else
	{
		$paid{$key} = $partition if $error eq 'no error';
		diag "$key on partition $partition: $error" unless exists $paid{$key};
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
	'a call on every partition fails as a whole, naming the database: pay_verify, a partial verify is none');

# pay_stats answers with the partitions that answer, their counts those
# of their ledgers, and names the others on every row.
my @up = grep { !$is_down{$_} } 0 .. $partition_count - 1;
my $unanswered = '{' . join(',', map { "p$_" } @down) . '}';
my $t0 = time;
my $partial = proxy_sql('SELECT status, payments, refunds, unanswered_partitions FROM pay_stats');
my $stats_took = time - $t0;
is($partial, join("\n", map { "$_|$unanswered" } ledger_counts(@up)),
	"pay_stats with a shard stopped: the counts of partitions @up, naming $unanswered on every row");
cmp_ok($stats_took, '<', 2, sprintf('and it does not wait (%.3f s)', $stats_took));
is( proxy_sql('SELECT status, authorizations, captures, voids, increments, unanswered_partitions FROM pay_stats'
		  . $by_status_name),
	join("\n", map { "$_|$unanswered" } partitions_summed($card_stats, 1, @up)),
	"and its card flow's counts those of partitions @up");
is( proxy_sql("SELECT currency, authorized, captured, unanswered_partitions FROM pay_stats_amounts"),
	join("\n", map { "$_|$unanswered" } partitions_summed($amounts, 1, @up)),
	"pay_stats_amounts with the shard stopped: the amounts of partitions @up, naming $unanswered on every row");
is( proxy_sql("SELECT currency, closed_reason, holds, uncaptured, unanswered_partitions FROM pay_stats_holds()"),
	join("\n", map { "$_|$unanswered" } partitions_summed($holds, 2, @up)),
	"pay_stats_holds() with the shard stopped: the holds of partitions @up, naming $unanswered on every row");
is(proxy_sql('SELECT string_agg(currency, \' \') FROM pay_stats_amounts'), $on_victim->($usd_home) ? 'EUR' : 'USD',
	'the authorization on the stopped shard is missing from them, not guessed: one currency left');

# A proxy whose only partition is on the stopped shard: pay_stats_amounts
# and pay_stats_holds() have no row of a partition, and one row names it.
$proxy->safe_psql('postgres', 'CREATE DATABASE proxy_of_down');
$proxy->safe_psql(
	'proxy_of_down', sprintf(q{
CREATE EXTENSION plproxy;
CREATE EXTENSION idempotent_pay_proxy;
CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'host=%s port=%d dbname=pay_p%d');
CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay;
}, shard_of($down[0])->host, shard_of($down[0])->port, $down[0]));
is( $proxy->safe_psql('proxy_of_down',
		'SELECT * FROM pay_stats_amounts; SELECT * FROM pay_stats_holds(); '
		  . "SELECT string_agg(DISTINCT coalesce(payments::text, 'NULL') || ' ' || unanswered_partitions::text, ', ') "
		  . 'FROM pay_stats'),
	"|||{p0}\n||||{p0}\nNULL {p0}",
	'no partition answers: one row of pay_stats_amounts and of pay_stats_holds() names it, every other column '
	  . 'NULL; pay_stats\' four rows do, their counts NULL');
is( $proxy->safe_psql(
		'proxy', 'SELECT string_agg(DISTINCT unanswered_partitions::text, \' \') FROM pay_stats',
		extra_params => [ '-U', 'payment_ops' ]),
	$unanswered, 'the operator reads the same');
is(error_as(watcher => 'SELECT * FROM pay_stats'), '42501: permission denied for view pay_stats',
	'a role without the grant on the shards still gets 42501, not a partial answer');
$session->query("SELECT pay_begin('$early_key')");
like($session->{stderr},
	qr/ERROR:  (08001: |08006: the connection to )partition $down[0] of PL\/Proxy cluster "idempotent_pay"/,
	'a session whose connection to the stopped shard was open is told which partition');
$session->{stderr} = '';

# Batches with the shard stopped: the inputs of its partitions answer
# 08001, action NULL (nothing was sent there), every other input goes
# through, at once; the answers stay in input order.
my @batch_down = map { "DOWN-$_" } 1 .. 40;
my $batch_down_ids = "ARRAY['" . join("', '", @batch_down) . "']";
my %batch_partition = split /[|\n]/,
  proxy_sql("SELECT b, pay_partition('BATCH', b) FROM unnest($batch_down_ids) AS b");
my $open_down = "SELECT biz_id, coalesce(bizno, '-'), coalesce(action::text, '-'), coalesce(sqlstate, '-') "
  . "FROM pay_open_claim_many('BATCH', $batch_down_ids, array_fill(10::numeric, ARRAY[40]), 'EUR')";
$t0 = time;
my @answers = map { [ split /\|/ ] } split /\n/, proxy_sql($open_down);
my $batch_took = time - $t0;
is(join(' ', map { $_->[0] } @answers), join(' ', @batch_down), 'a batch with a shard stopped: every input answered, in input order');
my @answered_down = grep { $is_down{ $batch_partition{ $_->[0] } } } @answers;
cmp_ok(scalar(@answered_down), '>', 0, scalar(@answered_down) . ' of its 40 inputs route to the stopped shard');
is(scalar(grep { $_->[1] eq '-' && $_->[2] eq '-' && $_->[3] eq '08001' } @answered_down), scalar(@answered_down),
	'each of them answers 08001, no bizNo, action NULL');
is(scalar(grep { $_->[2] eq 'PROCEED' && $_->[3] eq '-' } @answers), 40 - @answered_down,
	'every other input PROCEEDs on its partition');
cmp_ok($batch_took, '<', 2, sprintf('and the batch does not wait (%.3f s)', $batch_took));
my @claimed_up = grep { $_->[2] eq 'PROCEED' } @answers;
my @settle_down = ((map { $_->[1] } @claimed_up), sort keys %refused);
my $settle_down_keys = "ARRAY['" . join("', '", @settle_down) . "']";
my $n_down = scalar @settle_down;
my @settled_down = map { [ split /\|/ ] } split /\n/, proxy_sql(
	"SELECT bizno, coalesce(result, '-'), coalesce(sqlstate, '-') FROM pay_settle_many($settle_down_keys, "
	  . "array_fill(1::bigint, ARRAY[$n_down]), array_fill('SUCCESS'::pay_status, ARRAY[$n_down]), "
	  . "array_fill('BANK-DOWN'::text, ARRAY[$n_down]), array_fill(NULL::text, ARRAY[$n_down]))");
is(join(' ', map { "$_->[1]/$_->[2]" } @settled_down),
	join(' ', (map { 'SUCCESS/-' } @claimed_up), map { '-/08001' } sort keys %refused),
	'pay_settle_many with the shard stopped: the claims on the other partitions settle, the keys of the '
	  . 'stopped shard\'s partitions answer 08001');

$shards[$victim]->start;
my %after = map { $_ => partition_sql($_, 'SELECT count(*) FROM pay_ledger') } @down;
is_deeply(\%after, \%before, "after the restart partitions @down hold every payment they held");
is(proxy_sql('SELECT status, payments, refunds, unanswered_partitions FROM pay_stats'),
	join("\n", map { "$_|{}" } ledger_counts(0 .. $partition_count - 1)),
	'pay_stats is complete again, every partition\'s ledger counted, no partition named');
my $retried = 0;
for my $key (sort keys %refused)
{
	$retried++ if proxy_sql("SELECT pay_begin('$key', 10, 'EUR')") eq 'PROCEED';
}
is($retried, scalar(keys %refused), 'the refused calls, retried, proceed');
my $retried_batch = proxy_sql(
	"SELECT string_agg(biz_id || ' ' || coalesce(action::text, sqlstate), ', ' ORDER BY biz_id) "
	  . "FROM pay_open_claim_many('BATCH', $batch_down_ids, array_fill(10::numeric, ARRAY[40]), 'EUR') "
	  . "WHERE action IS DISTINCT FROM 'ALREADY_SUCCEEDED'");
is($retried_batch, join(', ', map { "$_->[0] PROCEED" } sort { $a->[0] cmp $b->[0] } @answered_down),
	'the batch retried: the inputs the stopped shard refused PROCEED, the others are ALREADY_SUCCEEDED');

# The long-lived session, whose connection to the shard broke with the
# stop, gets a complete pay_stats too.
is($session->query("SELECT string_agg(DISTINCT unanswered_partitions::text, ' ') FROM pay_stats"),
	'{}', 'so does a session that held a connection to the stopped shard');
$session->{stderr} = '';

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

# A batch in that session after its connection to the partition broke
# again: that partition's inputs answer 08006 (they may have run there),
# every other input goes through; retried, each is answered from the
# ledger.
$shards[$victim]->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'pay_p$down[0]'");
$shards[$victim]->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'pay_p$down[0]'");
my @broken_batch = map { "BROKEN-$_" } 1 .. 24;
my $broken_ids = "ARRAY['" . join("', '", @broken_batch) . "']";
my $broken_query = "SELECT biz_id || ' ' || coalesce(action::text, sqlstate) || ' ' || pay_partition('BATCH', biz_id) "
  . "FROM pay_open_claim_many('BATCH', $broken_ids, array_fill(10::numeric, ARRAY[24]), 'EUR')";
my @broken = map { [ split / / ] } split /\n/, $session->query($broken_query);
my @broken_down = grep { $_->[2] == $down[0] } @broken;
cmp_ok(scalar(@broken_down), '>', 0, 'some inputs of a batch route to the partition whose connection broke');
is(join(' ', map { $_->[1] } @broken_down), join(' ', map { '08006' } @broken_down),
	'they answer 08006: the connection broke during the call');
is(join(' ', map { $_->[1] } grep { $_->[2] != $down[0] } @broken), join(' ', map { 'PROCEED' } grep { $_->[2] != $down[0] } @broken),
	'the others PROCEED');
my %first_answer = map { $_->[0] => $_->[1] } @broken;
my @again = map { [ split / / ] } split /\n/, $session->query($broken_query);
is(scalar(grep { $first_answer{ $_->[0] } eq 'PROCEED' ? $_->[1] eq 'IN_PROGRESS' : $_->[1] =~ /^(PROCEED|IN_PROGRESS)$/ }
		  @again),
	scalar(@broken_batch),
	'the batch retried: every input answered from its ledger (IN_PROGRESS where it had PROCEEDed), none charged twice');
$session->{stderr} = '';
$session->quit;

($payments, $twice, $wrong) = misplaced();
is($twice, 0, "after the outage no bizNo on two partitions ($payments payments)");
is($wrong, 0, 'and none on a partition its route does not name');
is(proxy_sql('SELECT count(*) FROM pay_verify()'), 0, 'pay_verify() through the proxy is empty');
my $problems = join '', map { partition_sql($_, 'SELECT count(*) FROM pay_verify()') } 0 .. $partition_count - 1;
is($problems, '0' x $partition_count, 'pay_verify() on every partition is empty');

############################################################################
# The scripts: written by test/proxy_sql.pl from one definition per call,
# and the updates from 1.2 and 1.3 give what a 1.4 install gives.

my $extension_dir = $proxy->config_data('--sharedir') . '/extension';
my ($generator_out, $generator_err) = ('', '');
IPC::Run::run([ $^X, dirname(__FILE__) . '/../proxy_sql.pl', '--check', $extension_dir ],
	'<', '/dev/null', '>', \$generator_out, '2>', \$generator_err);
is($generator_out . $generator_err, '', 'the installed scripts are what test/proxy_sql.pl writes');

# Every object of the extension: its definition, its comment, its grants
# (sorted, with a role granted by each of pay_grant and
# pay_grant_operator) and its initial privileges, which pg_dump leaves out
# of a dump.
my $catalog = q{
SELECT pg_describe_object(d.classid, d.objid, 0),
       CASE d.classid
           WHEN 'pg_proc'::regclass THEN
               (SELECT concat_ws(' | ', pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), l.lanname,
                                 p.prosrc, p.probin, p.provolatile, p.proisstrict, p.proparallel, p.prosecdef,
                                 p.proconfig::text, p.prorows, p.procost,
                                 (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(p.proacl) AS a))
                FROM pg_proc AS p JOIN pg_language AS l ON l.oid = p.prolang WHERE p.oid = d.objid)
           WHEN 'pg_class'::regclass THEN
               (SELECT concat_ws(' | ', c.relkind, pg_get_viewdef(c.oid),
                                 (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(c.relacl) AS a))
                FROM pg_class AS c WHERE c.oid = d.objid)
           WHEN 'pg_type'::regclass THEN
               (SELECT concat_ws(' | ', t.typtype, format_type(t.typbasetype, t.typtypmod),
                                 (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                                  FROM pg_enum AS e WHERE e.enumtypid = t.oid),
                                 (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                                                    ORDER BY a.attnum)
                                  FROM pg_attribute AS a
                                  WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                                 (SELECT string_agg(pg_get_constraintdef(c.oid), ', ')
                                  FROM pg_constraint AS c WHERE c.contypid = t.oid))
                FROM pg_type AS t WHERE t.oid = d.objid)
       END,
       obj_description(d.objid, d.classid::regclass::text),
       (SELECT string_agg(a::text, ',' ORDER BY a::text)
        FROM pg_init_privs AS i, unnest(i.initprivs) AS a
        WHERE i.classoid = d.classid AND i.objoid = d.objid) AS initial_privileges
FROM pg_depend AS d
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT e.oid FROM pg_extension AS e WHERE e.extname = 'idempotent_pay_proxy')
ORDER BY 1;
};
$proxy->safe_psql('postgres', 'CREATE ROLE upgrade_app; CREATE ROLE upgrade_ops; CREATE ROLE upgrade_watch');
for my $case ([ proxy_updated => "VERSION '1.2'" ], [ proxy_updated_13 => "VERSION '1.3'" ], [ proxy_created => '' ])
{
	my ($db, $version) = @$case;
	$proxy->safe_psql('postgres', "CREATE DATABASE $db");
	$proxy->safe_psql(
		$db, qq{
CREATE EXTENSION plproxy;
CREATE EXTENSION idempotent_pay_proxy $version;
CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS ($partitions);
CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay;
SELECT pay_grant('upgrade_app'), pay_grant_operator('upgrade_ops');
});
}
my $version_of = "SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay_proxy'";
is($proxy->safe_psql('proxy_created', $version_of), '1.4', 'CREATE EXTENSION idempotent_pay_proxy installs 1.4');
is($proxy->safe_psql('proxy_updated', "SELECT ($version_of), pay_begin('$named')"), '1.2|ALREADY_SUCCEEDED',
	'a proxy at 1.2 in front of 1.4 shards answers pay_begin');
like(error_report_of($proxy, 'proxy_updated', "SELECT pay_begin('$named', 11, 'EUR')"),
	qr/^ERROR:  55000: payment \S+ is SUCCESS: its amount cannot change$/m, 'and refuses as the shard does');
like(error_report_of($proxy, 'proxy_updated', "SELECT pay_succeed('$named', 'BANK-NAMED', 2)"),
	qr/^ERROR:  42846: cannot cast type pay_settlement to pay_status$/m,
	'but cannot read the result of a 1.3 or later shard\'s pay_succeed (a 1.2 proxy is updated before the shards)');
# The order doc/operations.md gives for the update to 1.4: the partitions
# first, the proxy after them.  A 1.3 proxy pays through 1.4 partitions,
# and passes their refusals on with their constraint names.
is( $proxy->safe_psql(
		'proxy_updated_13',
		"SELECT ($version_of), pay_begin('upgrade-13', 10, 'EUR'), pay_succeed('upgrade-13', 'BANK-U13', 1)"),
	'1.3|PROCEED|SUCCESS',
	'a proxy at 1.3 in front of 1.4 shards pays');
is( error_report_of($proxy, 'proxy_updated_13', "SELECT pay_begin('$named', 11, 'EUR')"),
	partition_report($named_home, "SELECT pay_begin('$named', 11, 'EUR')"),
	'and passes their refusals on as they raise them, constraint names included');
# Grants of pay_stats and its functions made by hand, not by
# pay_grant_operator: the update, which creates them again with the card
# flow's columns, grants them again.
my $watch_privileges = q{
SELECT has_table_privilege('upgrade_watch', 'pay_stats', 'SELECT WITH GRANT OPTION'),
       has_function_privilege('upgrade_watch', 'pay_stats_of_partitions()', 'EXECUTE'),
       has_function_privilege('upgrade_watch', 'pay_stats_on_all_partitions()', 'EXECUTE'),
       has_function_privilege('upgrade_watch', 'pay_stats_on_partition(integer)', 'EXECUTE')};
$proxy->safe_psql('proxy_updated_13',
	'GRANT SELECT ON pay_stats TO upgrade_watch WITH GRANT OPTION; GRANT EXECUTE ON FUNCTION '
	  . 'pay_stats_of_partitions(), pay_stats_on_all_partitions(), pay_stats_on_partition(integer) TO upgrade_watch');
$proxy->safe_psql($_, 'ALTER EXTENSION idempotent_pay_proxy UPDATE') for qw(proxy_updated proxy_updated_13);
is($proxy->safe_psql('proxy_updated_13', $watch_privileges), 't|t|t|t',
	'the update from 1.3 grants the new pay_stats and its functions to the roles granted the old ones by hand');
is( $proxy->safe_psql(
		'proxy_updated_13', q{
SELECT has_function_privilege('upgrade_ops', 'pay_stats_holds()', 'EXECUTE'),
       has_table_privilege('upgrade_ops', 'pay_stats_amounts', 'SELECT'),
       has_table_privilege('upgrade_ops', 'pay_stats', 'SELECT')}),
	't|t|t', 'and the roles 1.3\'s pay_grant_operator granted read pay_stats, pay_stats_amounts and pay_stats_holds');
$proxy->safe_psql('proxy_updated_13',
	'REVOKE ALL ON pay_stats FROM upgrade_watch CASCADE; REVOKE ALL ON FUNCTION pay_stats_of_partitions(), '
	  . 'pay_stats_on_all_partitions(), pay_stats_on_partition(integer) FROM upgrade_watch');
is($proxy->safe_psql('proxy_updated', $version_of), '1.4', 'ALTER EXTENSION idempotent_pay_proxy UPDATE reaches 1.4 from 1.2');
is($proxy->safe_psql('proxy_updated_13', $version_of), '1.4', 'and from 1.3');
my $created = $proxy->safe_psql('proxy_created', $catalog);
my $updated = $proxy->safe_psql('proxy_updated', $catalog);
is($updated, $created,
	'the proxy updated from 1.2 is the one created at 1.4: every object, comment, grant and initial privilege');
is($proxy->safe_psql('proxy_updated_13', $catalog), $created, 'and so is the one updated from 1.3');
is( $proxy->safe_psql(
		'proxy_updated', q{
SELECT string_agg(r.role || ' ' || f.signature || ' ' || has_function_privilege(r.role, f.signature, 'EXECUTE'), ', '
                  ORDER BY r.role, f.signature)
FROM unnest(ARRAY['upgrade_app', 'upgrade_ops']) AS r(role),
     unnest(ARRAY['pay_open_claim_many(text,text[],numeric[],text)', 'pay_succeed(text,text,bigint,jsonb)',
                  'pay_authorization_balance(text)']) AS f(signature)}),
	'upgrade_app pay_authorization_balance(text) true, upgrade_app pay_open_claim_many(text,text[],numeric[],text) true, '
	  . 'upgrade_app pay_succeed(text,text,bigint,jsonb) true, upgrade_ops pay_authorization_balance(text) true, '
	  . 'upgrade_ops pay_open_claim_many(text,text[],numeric[],text) false, upgrade_ops pay_succeed(text,text,bigint,jsonb) true',
	'the roles 1.2\'s pay_grant and pay_grant_operator granted hold 1.4\'s grants: the batches, the card flow, '
	  . 'pay_succeed of a bigint attempt');
is( error_report_of($proxy, 'proxy_updated', "SELECT pay_begin('$named', 11, 'EUR')"),
	partition_report($named_home, "SELECT pay_begin('$named', 11, 'EUR')"),
	'the updated proxy passes the constraint name on');

# A 1.4 proxy in front of a partition still at 1.3 (the order reversed)
# claims, but cannot settle there: 1.3 has no pay_succeed of a bigint
# attempt.  Once the partition is updated, it settles.
$shards[0]->safe_psql('postgres', 'CREATE DATABASE pay_old');
$shards[0]->safe_psql('pay_old', "SET client_min_messages = warning; CREATE EXTENSION idempotent_pay VERSION '1.3'");
$proxy->safe_psql('postgres', 'CREATE DATABASE proxy_over_old');
$proxy->safe_psql(
	'proxy_over_old', sprintf(q{
CREATE EXTENSION plproxy;
CREATE EXTENSION idempotent_pay_proxy;
CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS (p0 'host=%s port=%d dbname=pay_old');
CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay;
}, $shards[0]->host, $shards[0]->port));
is($proxy->safe_psql('proxy_over_old', "SELECT pay_begin('old-1', 10, 'EUR')"), 'PROCEED',
	'a 1.4 proxy in front of a partition at 1.3 claims');
like(error_report_of($proxy, 'proxy_over_old', "SELECT pay_succeed('old-1', 'BANK-OLD', 1)"),
	qr/^ERROR:  42883: function public.pay_succeed\(text, text, bigint, jsonb\) does not exist$/m,
	'but cannot settle there: the partitions are updated first');
is( join(' ',
		map { error_report_of($proxy, 'proxy_over_old', "SELECT * FROM $_") =~ /^ERROR:  (\w{5}): /m }
		  qw(pay_stats pay_stats_amounts pay_stats_holds())),
	'42703 42P01 42883',
	'nor read its monitoring: the 1.3 partition has no card flow columns, pay_stats_amounts or pay_stats_holds, '
	  . 'an error (as the shard raises it), not an unanswered partition');
$shards[0]->safe_psql('pay_old', 'ALTER EXTENSION idempotent_pay UPDATE');
is($proxy->safe_psql('proxy_over_old', "SELECT pay_succeed('old-1', 'BANK-OLD', 1)"), 'SUCCESS',
	'and settles once the partition is at 1.4');
is( $proxy->safe_psql('proxy_over_old',
		"SELECT authorizations, unanswered_partitions FROM pay_stats WHERE status = 'SUCCESS'"),
	'0|{}', 'and reads pay_stats');

note sprintf 'wall time %.1f s', time - $started;
$proxy->stop;
$_->stop for @shards;
done_testing();
