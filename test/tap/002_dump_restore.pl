# The ledger, the journal and a guarded user table survive pg_dump and
# pg_restore (under the replica role, as README says), with every guard
# still working in the restored database.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE source');
$node->safe_psql(
	'source', q{
	CREATE EXTENSION idempotent_pay;
	CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL, amount numeric);
	INSERT INTO orders VALUES (1, 'INIT', 1), (2, 'PROCESSING', 2), (3, 'SUCCESS', 3);
	SELECT pay_protect('orders', 'status', '{amount}');
	SELECT pay_begin('D-1', 10, 'EUR'), pay_succeed('D-1');
	SELECT pay_begin('D-2'), pay_fail('D-2', 'declined');
	SELECT pay_begin('D-3');
});
my $journal_rows = $node->safe_psql('source', 'SELECT count(*) FROM pay_journal');

my $dump = "$PostgreSQL::Test::Utils::tmp_check/source.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('source') ], 'pg_dump');

$node->safe_psql('postgres', 'CREATE DATABASE plain');
my ($restore_out, $restore_err) = ('', '');
IPC::Run::run([ 'pg_restore', '-d', $node->connstr('plain'), $dump ],
	'>', \$restore_out, '2>', \$restore_err);
like($restore_err, qr/illegal payment status transition from \(new row\) to SUCCESS/,
	'a restore outside the replica role is refused by the guard');

$node->safe_psql('postgres', 'CREATE DATABASE restored');
{
	local $ENV{PGOPTIONS} = '-c session_replication_role=replica';
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
		'pg_restore under the replica role');
}

my $restored_seq = $node->safe_psql('restored', 'SELECT max(seq) FROM pay_journal');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_ledger'), 3, 'the ledger is restored');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_journal'), $journal_rows, 'the journal is restored');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_verify()'), 0, 'ledger and journal agree');
is( $node->safe_psql(
		'restored', q{SELECT status_column || ' ' || frozen_columns::text || ' ' || enabled
		               FROM pay_guards WHERE table_name = 'orders'::regclass AND trigger_name = 'pay_guard'}),
	'status {amount} always',
	'the guard of the user table is restored, firing always');

my ($ret, $stdout, $stderr) = $node->psql('restored', q{UPDATE orders SET status = 'INIT' WHERE id = 3});
like($stderr, qr/illegal payment status transition from SUCCESS to INIT/, 'the user table is guarded');
($ret, $stdout, $stderr) = $node->psql('restored', q{UPDATE orders SET amount = 5 WHERE id = 2});
like($stderr, qr/column "amount" is frozen/, 'its frozen column too');
($ret, $stdout, $stderr) = $node->psql('restored', q{UPDATE pay_ledger SET status = 'INIT' WHERE bizno = 'D-1'});
like($stderr, qr/illegal payment status transition from SUCCESS to INIT/, 'the ledger is guarded');
($ret, $stdout, $stderr) = $node->psql('restored', q{DELETE FROM pay_journal});
like($stderr, qr/DELETE is refused on table "pay_journal"/, 'the journal is append-only');

is($node->safe_psql('restored', q{SELECT pay_begin('D-1')}), 'ALREADY_SUCCEEDED', 'a restored SUCCESS answers');
is($node->safe_psql('restored', q{SELECT pay_begin('D-3')}), 'IN_PROGRESS', 'a restored PROCESSING waits');
is($node->safe_psql('restored', q{SELECT pay_begin('D-2')}), 'PROCEED', 'a restored FAILED is retried');
is( $node->safe_psql(
		'restored', "SELECT min(seq) > $restored_seq FROM pay_journal WHERE bizno = 'D-2' AND attempt = 2"),
	't', 'the journal sequence continues after the restored rows');
is($node->safe_psql('restored', 'SELECT count(*) FROM pay_verify()'), 0, 'and stays consistent');

$node->stop;
done_testing();
