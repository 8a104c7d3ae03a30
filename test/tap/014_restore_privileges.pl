# A restore gives every role back what it could do.  From every install
# path (a fresh install of the default version, and 1.0, 1.1, 1.2 and 1.3
# updated to it), with an application role and an operator role granted at
# the earliest version that has their grant function and payments made
# before the update, each of pg_dump | psql, pg_dump -Fc | pg_restore and
# pg_dump -Fd | pg_restore, with default options, into a new database: the
# privileges of the application role, of the operator role and of PUBLIC on
# every object of the extension (its members as the catalog lists them, so
# an object a later version adds is compared too, and its schema) are the
# source's, and the API answers each role as in the source.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('restore_privileges');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->start;

$node->safe_psql('postgres', 'CREATE ROLE app; CREATE ROLE ops; CREATE ROLE leaver');

# Payments the application makes under its first version: one settled, one
# failed that the operator resets after the restore.  Every version takes
# the attempt.
my $payments = q{
	SET ROLE app;
	SELECT pay_begin('P-SUCCESS', 10, 'EUR'), pay_succeed('P-SUCCESS', 'BANK-1', 1);
	SELECT pay_begin('P-FAILED', 20, 'EUR'), pay_fail('P-FAILED', 'declined', 1);
};

# Each path: the version created, the grants and payments made there, and
# for an older version the update to 1.2 (where pay_grant_operator first
# is), the operator's grant, a payment in flight, and the update to the
# default version.
my %paths = (
	fresh => [
		q{CREATE EXTENSION idempotent_pay},
		q{SELECT pay_grant('app'), pay_grant_operator('ops')}, $payments,
	],
	'1_0' => [
		q{CREATE EXTENSION idempotent_pay VERSION '1.0'},
		q{SELECT pay_grant('app'), pay_grant('leaver')}, $payments,
		q{ALTER EXTENSION idempotent_pay UPDATE TO '1.2'},
		q{SELECT pay_grant_operator('ops')},
		q{SELECT pay_begin('P-IN-FLIGHT', 30, 'EUR')},
		q{ALTER EXTENSION idempotent_pay UPDATE},
	],
	'1_1' => [
		q{CREATE EXTENSION idempotent_pay VERSION '1.1'},
		q{SELECT pay_grant('app')}, $payments,
		q{ALTER EXTENSION idempotent_pay UPDATE TO '1.2'},
		q{SELECT pay_grant_operator('ops')},
		q{SELECT pay_begin('P-IN-FLIGHT', 30, 'EUR')},
		q{ALTER EXTENSION idempotent_pay UPDATE},
	],
	'1_2' => [
		q{CREATE EXTENSION idempotent_pay VERSION '1.2'},
		q{SELECT pay_grant('app'), pay_grant_operator('ops')}, $payments,
		q{SELECT pay_begin('P-IN-FLIGHT', 30, 'EUR')},
		q{ALTER EXTENSION idempotent_pay UPDATE},
	],
	'1_3' => [
		q{CREATE EXTENSION idempotent_pay VERSION '1.3'},
		q{SELECT pay_grant('app'), pay_grant_operator('ops')}, $payments,
		q{SELECT pay_begin('P-IN-FLIGHT', 30, 'EUR')},
		q{ALTER EXTENSION idempotent_pay UPDATE},
	],);

# The privileges a role (or PUBLIC) holds on the extension's members and
# its schema, one line each: object, privilege, grantor, grant option.  An
# object without an ACL has its kind's default.
sub privileges
{
	my ($db, $role) = @_;
	my $grantee = $role eq 'PUBLIC' ? '0' : "'$role'::regrole::oid";
	return $node->safe_psql(
		$db, qq{
		WITH member AS (
			SELECT d.classid, d.objid
			FROM pg_depend AS d JOIN pg_extension AS e ON e.oid = d.refobjid
			WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
			  AND e.extname = 'idempotent_pay'
			UNION
			SELECT 'pg_namespace'::regclass, e.extnamespace FROM pg_extension AS e
			WHERE e.extname = 'idempotent_pay'
		), acl (object, acl) AS (
			SELECT pg_describe_object(m.classid, m.objid, 0),
			       coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
			                                     c.relowner))
			FROM member AS m JOIN pg_class AS c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
			UNION ALL
			SELECT pg_describe_object(m.classid, m.objid, a.attnum), a.attacl
			FROM member AS m
			JOIN pg_attribute AS a ON m.classid = 'pg_class'::regclass AND a.attrelid = m.objid
			WHERE a.attnum > 0 AND a.attacl IS NOT NULL
			UNION ALL
			SELECT pg_describe_object(m.classid, m.objid, 0), coalesce(p.proacl, acldefault('f', p.proowner))
			FROM member AS m JOIN pg_proc AS p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
			UNION ALL
			SELECT pg_describe_object(m.classid, m.objid, 0), coalesce(t.typacl, acldefault('T', t.typowner))
			FROM member AS m JOIN pg_type AS t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
			UNION ALL
			SELECT pg_describe_object(m.classid, m.objid, 0), coalesce(n.nspacl, acldefault('n', n.nspowner))
			FROM member AS m JOIN pg_namespace AS n ON m.classid = 'pg_namespace'::regclass AND n.oid = m.objid
		)
		SELECT coalesce(string_agg(a.object || ': ' || x.privilege_type || ' from ' || x.grantor::regrole
		                           || CASE WHEN x.is_grantable THEN ' with grant option' ELSE '' END,
		                           E'\\n' ORDER BY a.object, x.privilege_type, x.grantor::regrole::text), '')
		FROM acl AS a, aclexplode(a.acl) AS x
		WHERE x.grantee = $grantee});
}

# Run a restore command; it must succeed without a single error.
sub restore
{
	my ($name, @command) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(\@command, '>', \$out, '2>', \$err);
	ok($ok && $err !~ /ERROR/, "$name: no error") or diag $err;
}

# What each role does after a restore, as that role: the application pays
# a new payment to its end and reads a payment of before the update; the
# operator resets the failed one and reads the statistics.
sub as_role
{
	my ($db, $role, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db, "SET ROLE $role; $sql");
	diag $stderr if $stderr ne '';
	return $stdout;
}

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my %formats = (
	plain => sub {
		my ($source, $target) = @_;
		$node->command_ok([ 'pg_dump', '-f', "$tmp/$source.sql", '-d', $node->connstr($source) ],
			"$source: pg_dump (plain)");
		restore("$target: pg_dump | psql",
			'psql', '-X', '-q', '-d', $node->connstr($target), '-f', "$tmp/$source.sql");
	},
	custom => sub {
		my ($source, $target) = @_;
		$node->command_ok([ 'pg_dump', '-Fc', '-f', "$tmp/$source.dump", '-d', $node->connstr($source) ],
			"$source: pg_dump -Fc");
		restore("$target: pg_restore", 'pg_restore', '-d', $node->connstr($target), "$tmp/$source.dump");
	},
	directory => sub {
		my ($source, $target) = @_;
		$node->command_ok([ 'pg_dump', '-Fd', '-f', "$tmp/$source.dir", '-d', $node->connstr($source) ],
			"$source: pg_dump -Fd");
		restore("$target: pg_restore of a directory",
			'pg_restore', '-d', $node->connstr($target), "$tmp/$source.dir");
	},);

my $current = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'idempotent_pay'");
for my $path (sort keys %paths)
{
	my $source = "source_$path";
	$node->safe_psql('postgres', "CREATE DATABASE $source");
	$node->safe_psql($source, $_) for @{ $paths{$path} };
	# The grants were made: the source has what the restores are held to.
	is( $node->safe_psql(
			$source, q{SELECT extversion
			  || ' ' || has_function_privilege('app', 'pay_succeed(text, text, bigint, jsonb)', 'EXECUTE')
			  || ' ' || has_table_privilege('app', 'pay_ledger', 'SELECT')
			  || ' ' || has_function_privilege('app', 'pay_reset(text, text)', 'EXECUTE')
			  || ' ' || has_function_privilege('ops', 'pay_reset(text, text)', 'EXECUTE')
			  FROM pg_extension WHERE extname = 'idempotent_pay'}),
		"$current true true false true",
		"$source: at the default version, app may settle and read the ledger, ops may reset");
	# A role granted before the updates can still be dropped after them: since
	# PostgreSQL 17 each role an initial privilege names has a shared
	# dependency on it, which DROP OWNED BY leaves once the role is no
	# longer in the initial privileges.
	if ($path eq '1_0')
	{
		my ($ret, $stdout, $stderr) = $node->psql($source, 'DROP OWNED BY leaver; DROP ROLE leaver');
		is($stderr, '', "$source: a role granted at 1.0 is dropped after DROP OWNED BY");
	}
	my %expected = map { $_ => privileges($source, $_) } qw(app ops PUBLIC);

	for my $format (sort keys %formats)
	{
		my $target = "restored_${path}_$format";
		$node->safe_psql('postgres', "CREATE DATABASE $target");
		$formats{$format}->($source, $target);
		for my $role (qw(app ops PUBLIC))
		{
			is(privileges($target, $role), $expected{$role},
				"$target: the privileges of $role on every object of the extension are the source's");
		}
		is( as_role(
				$target, 'app', q{
				SELECT action || ' ' || attempt FROM pay_claim('P-NEW', 5, 'EUR');
				SELECT pay_succeed('P-NEW', 'BANK-NEW', 1);
				SELECT status || ' ' || channel_ref FROM pay_get('P-NEW');
				SELECT status FROM pay_get('P-SUCCESS');}),
			"PROCEED 1\nSUCCESS\nSUCCESS BANK-NEW\nSUCCESS",
			"$target: app claims a new payment, settles it, reads it and one of before");
		is( as_role(
				$target, 'ops', q{
				SELECT pay_reset('P-FAILED', 'customer called');
				SELECT sum(payments) > 0 FROM pay_stats;}),
			"INIT\nt", "$target: ops resets a failed payment and reads the statistics");
	}
}

note 'assertions: ' . Test::More->builder->current_test . ', failed: '
  . grep { !$_ } Test::More->builder->summary;
$node->stop;
done_testing();
