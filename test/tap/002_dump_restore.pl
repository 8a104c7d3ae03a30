# A DBA's standard restore keeps every payment, every journal row and every
# guard, with no special option and no extra step: pg_dump | psql, pg_restore
# serial, with -j 4 and with --single-transaction, pg_dump --inserts, a
# data-only restore into an installed extension (with and without
# --disable-triggers), and a dump taken at 1.1 restored where the default
# version is newer.  Each restored database is compared row for row with its
# source (history untouched: attempt, timestamps, journal seq and content),
# pay_verify() is empty, every guard fires always, and the API goes on.  An
# application role still cannot plant a row in a non-initial state.
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->start;

# Payments in every state, with retries, resets, amount changes and notes,
# a deleted INIT payment whose journal stays, and a guarded user table.
# Amount changes need parameter_change = allow since 1.4.
my $payments = q{
	SET idempotent_pay.parameter_change = allow;
	SELECT pay_begin('D-SUCCESS', 10, 'EUR'), pay_succeed('D-SUCCESS', 'BANK-1', 1);
	SELECT pay_begin('D-FAILED', 20, 'EUR'), pay_fail('D-FAILED', 'declined', 1);
	SELECT pay_begin('D-PROCESSING', 30, 'EUR');
	SELECT pay_begin('D-RETRIED', 40, 'EUR'), pay_fail('D-RETRIED', 'timeout', 1);
	SELECT pay_begin('D-RETRIED', 41, 'EUR'), pay_succeed('D-RETRIED', 'BANK-2', 2);
	SELECT pay_begin('D-RESET', 50, 'EUR'), pay_fail('D-RESET', 'declined', 1);
	SELECT pay_reset('D-RESET', 'customer called');
	SELECT pay_open('SHOP', 'ORDER-1', 60, 'EUR');
	SELECT pay_open('SHOP', 'ORDER-1', 61, 'EUR');
	INSERT INTO pay_ledger (bizno, status) VALUES ('D-DELETED', 'INIT');
	DELETE FROM pay_ledger WHERE bizno = 'D-DELETED';
};

sub make_source
{
	my ($db, $version) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION idempotent_pay VERSION '$version'");
	$node->safe_psql(
		$db, q{
		CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL, amount numeric);
		INSERT INTO orders VALUES (1, 'INIT', 1), (2, 'PROCESSING', 2), (3, 'SUCCESS', 3);
		SELECT pay_protect('orders', 'status', '{amount}');
	});
	$node->safe_psql($db, $payments);
}

my $current = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'idempotent_pay'");
make_source('source', $current);
make_source('source_1_1', '1.1');
# Refunds of D-SUCCESS (10 EUR) that take all of it: one returned (settled
# with the attempt its claim returned), one in flight.
$node->safe_psql(
	'source', q{
	SELECT pay_succeed(refund.bizno, 'BANK-REFUND-1', claim.attempt)
	FROM pay_refund_open('D-SUCCESS', 'R1', 4) AS refund(bizno), pay_claim(refund.bizno) AS claim;
	SELECT pay_claim(pay_refund_open('D-SUCCESS', 'R2', 6));
});

# The ledger's columns of 1.1, which every version has.
my $ledger_1_1 = 'bizno, prefix, biz_id, status, amount, currency, attempt, channel_ref, '
  . 'last_error, created_at, updated_at, processing_since';

# Everything a restore must keep, as text: the ledger, the journal, the
# journal's sequence, the user table.
sub contents
{
	my ($db, $ledger_columns, $journal_columns) = @_;
	$journal_columns //= 'j.*';
	return $node->safe_psql(
		$db, qq{
		SELECT (SELECT string_agg(l::text, E'\\n' ORDER BY l.bizno)
		        FROM (SELECT $ledger_columns FROM pay_ledger AS l) AS l),
		       (SELECT string_agg(j::text, E'\\n' ORDER BY j.seq)
		        FROM (SELECT $journal_columns FROM pay_journal AS j) AS j),
		       (SELECT last_value FROM pay_journal_seq_seq),
		       (SELECT string_agg(o::text, ',' ORDER BY o.id) FROM orders AS o)});
}

my $dump = "$PostgreSQL::Test::Utils::tmp_check/source.dump";
my $dump_1_1 = "$PostgreSQL::Test::Utils::tmp_check/source_1_1.dump";
my $dump_sql = "$PostgreSQL::Test::Utils::tmp_check/source.sql";
my $dump_inserts = "$PostgreSQL::Test::Utils::tmp_check/source_inserts.sql";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('source') ], 'pg_dump -Fc');
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump_1_1, '-d', $node->connstr('source_1_1') ],
	'pg_dump -Fc of a 1.1 database');
$node->command_ok([ 'pg_dump', '-f', $dump_sql, '-d', $node->connstr('source') ], 'pg_dump (plain)');
$node->command_ok([ 'pg_dump', '--inserts', '-f', $dump_inserts, '-d', $node->connstr('source') ],
	'pg_dump --inserts');

# Run a restore command; it must succeed without a single error.
sub restore
{
	my ($name, @command) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(\@command, '>', \$out, '2>', \$err);
	ok($ok && $err !~ /ERROR/, "$name: no error") or diag $err;
}

my %restored = (
	plain_sql => sub {
		restore('pg_dump | psql', 'psql', '-X', '-q', '-d', $node->connstr('plain_sql'), '-f', $dump_sql);
	},
	serial => sub {
		restore('pg_restore', 'pg_restore', '-d', $node->connstr('serial'), $dump);
	},
	parallel => sub {
		restore('pg_restore -j 4', 'pg_restore', '-j', '4', '-d', $node->connstr('parallel'), $dump);
	},
	single_transaction => sub {
		restore('pg_restore --single-transaction',
			'pg_restore', '--single-transaction', '-d', $node->connstr('single_transaction'), $dump);
	},
	inserts => sub {
		restore('pg_dump --inserts | psql',
			'psql', '-X', '-q', '-d', $node->connstr('inserts'), '-f', $dump_inserts);
	},
	data_only => sub {
		restore('pg_restore -s', 'pg_restore', '-s', '-d', $node->connstr('data_only'), $dump);
		restore('pg_restore -a', 'pg_restore', '-a', '-d', $node->connstr('data_only'), $dump);
	},
	data_only_disable_triggers => sub {
		restore('pg_restore -s',
			'pg_restore', '-s', '-d', $node->connstr('data_only_disable_triggers'), $dump);
		# switching the extension's guards off is maintenance, recorded
		local $ENV{PGOPTIONS} = '-c idempotent_pay.maintenance=on';
		restore('pg_restore -a --disable-triggers, in maintenance',
			'pg_restore', '-a', '--disable-triggers',
			'-d', $node->connstr('data_only_disable_triggers'), $dump);
	},);

my $expected = contents('source', 'l.*');
for my $db (sort keys %restored)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$restored{$db}->();
	is(contents($db, 'l.*'), $expected, "$db: ledger, journal, sequence and user table as they were");
	note "$db: "
	  . $node->safe_psql($db,
		"SELECT (SELECT count(*) FROM pay_ledger) || ' ledger rows, ' || (SELECT count(*) FROM pay_journal) || ' journal rows'");
}

$node->safe_psql('postgres', 'CREATE DATABASE from_1_1');
restore('a 1.1 dump into the default version',
	'pg_restore', '-d', $node->connstr('from_1_1'), $dump_1_1);
is($node->safe_psql('from_1_1', "SELECT extversion FROM pg_extension WHERE extname = 'idempotent_pay'"),
	$current, 'from_1_1: the extension is at the default version');
# (the journal of 1.3 has columns of a second charge, which 1.1's lacks)
my $journal_1_1 = 'j.seq, j.bizno, j.attempt, j.from_status, j.to_status, j.amount, j.currency, j.at, '
  . 'j.txid, j.actor, j.note';
is(contents('from_1_1', $ledger_1_1, $journal_1_1), contents('source_1_1', $ledger_1_1, $journal_1_1),
	'from_1_1: ledger, journal, sequence and user table as they were');

for my $db (sort(keys %restored), 'from_1_1')
{
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_verify()'), 0, "$db: pay_verify() is empty");
	is( $node->safe_psql(
			$db, q{SELECT string_agg(table_name || '.' || trigger_name || ' ' || enabled, ', '
			                         ORDER BY table_name::text, trigger_name) FROM pay_guards}),
		join(', ', 'orders.pay_guard always', 'orders.pay_guard_truncate always',
			grep { !/^#/ } split(/\n/, slurp_file(dirname(__FILE__) . '/extension_guards.txt'))),
		"$db: every guard fires always");

	my ($ret, $stdout, $stderr) = $node->psql($db, q{UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'D-SUCCESS'});
	like($stderr, qr/illegal payment status transition from SUCCESS to INIT/, "$db: the ledger is guarded");
	($ret, $stdout, $stderr) = $node->psql($db, q{UPDATE orders SET amount = 5 WHERE id = 2});
	like($stderr, qr/column "amount" is frozen/, "$db: the user table is guarded");
	($ret, $stdout, $stderr) = $node->psql($db, q{DELETE FROM pay_journal});
	like($stderr, qr/DELETE is refused on table "pay_journal"/, "$db: the journal is append-only");

	is( $node->safe_psql(
			$db, q{SELECT pay_begin('D-SUCCESS') || ' ' || pay_begin('D-PROCESSING') || ' '
			       || pay_begin('D-FAILED') || ' ' || pay_begin('D-NEW', 1, 'EUR')}),
		'ALREADY_SUCCEEDED IN_PROGRESS PROCEED PROCEED',
		"$db: the API answers from the restored ledger");
	my $source = $db eq 'from_1_1' ? 'source_1_1' : 'source';
	my $restored_seq = $node->safe_psql($source, 'SELECT max(seq) FROM pay_journal');
	is($node->safe_psql($db, "SELECT min(seq) > $restored_seq FROM pay_journal WHERE bizno = 'D-NEW'"),
		't', "$db: the journal sequence continues after the restored rows");
	if ($db eq 'from_1_1')
	{
		is($node->safe_psql($db, q{SELECT action FROM pay_claim(pay_refund_open('D-SUCCESS', 'R1', 10))}),
			'PROCEED', "$db: a payment of 1.1 is refunded after the restore");
	}
	else
	{
		is($node->safe_psql($db, q{SELECT pay_refund_balance('D-SUCCESS')}),
			'(10,4,6,0)', "$db: the refunds count against the capture as before");
		($ret, $stdout, $stderr) =
		  $node->psql($db, q{SELECT pay_claim(pay_refund_open('D-SUCCESS', 'R3', 0.01))});
		like($stderr, qr/would refund more than was captured/, "$db: the refund limit holds");
	}
	is($node->safe_psql($db, 'SELECT count(*) FROM pay_verify()'), 0, "$db: and stays consistent");
}

# An application role, given what paying needs, cannot plant a row in a
# non-initial state by any route -- not even in the state a restore runs in.
$node->safe_psql('serial', q{CREATE ROLE app LOGIN; SELECT pay_grant('app');
	GRANT SELECT, INSERT, UPDATE ON orders TO app});
my $as_app = 'SET ROLE app; SET row_security = off; SET check_function_bodies = false; ';
my ($ret, $stdout, $stderr) = $node->psql('serial',
	$as_app . q{INSERT INTO pay_ledger (bizno, status, attempt) VALUES ('PLANTED', 'SUCCESS', 1)});
like($stderr, qr/permission denied for table pay_ledger/, 'app: no INSERT into the ledger');
($ret, $stdout, $stderr) = $node->psql('serial',
	$as_app . "COPY pay_ledger (bizno, status) FROM stdin;\nPLANTED\tSUCCESS\n\\.\n");
like($stderr, qr/permission denied for table pay_ledger/, 'app: no COPY into the ledger');
($ret, $stdout, $stderr) = $node->psql('serial',
	$as_app . q{INSERT INTO orders VALUES (9, 'SUCCESS', 9)});
like($stderr, qr/illegal payment status transition from \(new row\) to SUCCESS/,
	'app: its guarded table takes no SUCCESS row either');
is($node->safe_psql('serial', $as_app . q{SELECT pay_begin('APP-1', 5, 'EUR')}),
	'PROCEED', 'app: the API in that state pays as always');
is( $node->safe_psql(
		'serial', q{SELECT status || ' ' || attempt || ' ' || (SELECT count(*) FROM pay_journal WHERE bizno = 'APP-1')
		            FROM pay_ledger WHERE bizno = 'APP-1'}),
	'PROCESSING 1 1', 'app: its payment is recorded and journaled as any other');
is($node->safe_psql('serial', q{SELECT count(*) FROM pay_ledger WHERE bizno = 'PLANTED'}),
	0, 'app: nothing planted');
is($node->safe_psql('serial', 'SELECT count(*) FROM pay_verify()'), 0, 'app: pay_verify() is empty');

$node->stop;
done_testing();
