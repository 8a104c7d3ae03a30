# pgaudit (Debian's postgresql-15-pgaudit) sees every write of the ledger
# and the journal that the API makes: with another module hooking the
# executor's permission checks, the API's writes go through SQL statements,
# which the hook sees, instead of straight into heap and indexes.
#
# pgaudit logs the statements inside a SECURITY DEFINER function only when
# its owner calls it (it logs the call itself for everyone else, with
# pgaudit.log = 'function'): so the writes are asserted for the extension's
# owner, and an application role's API calls as function calls.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('audit');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pgaudit'
pgaudit.log = 'write, function'
pgaudit.log_relation = on
});
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION pgaudit;
	CREATE EXTENSION idempotent_pay;
	CREATE ROLE payment_app LOGIN;
	SELECT pay_grant('payment_app');
});

# The lines pgaudit wrote while $sql ran as $user.
sub audited
{
	my ($sql, $user) = @_;
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', $sql, extra_params => [ '-U', $user ]);
	my $log = slurp_file($node->logfile, $offset);
	return join("\n", grep { /AUDIT: / } split /\n/, $log);
}

my $owner = $node->safe_psql('postgres', 'SELECT current_user');
my $claim = audited(
	q{SELECT bizno FROM pay_open_claim('SHOP', 'AUDIT-1', 10.00, 'EUR')}, $owner);
like($claim, qr/WRITE,INSERT,TABLE,public\.pay_ledger/, 'a new payment\'s ledger INSERT is audited');
like($claim, qr/WRITE,INSERT,TABLE,public\.pay_journal/, 'its journal row is audited');

my $bizno = $node->safe_psql('postgres', q{SELECT bizno FROM pay_find('SHOP', 'AUDIT-1')});
my $settle = audited(qq{SELECT pay_succeed('$bizno', 'BANK-1', 1)}, $owner);
like($settle, qr/WRITE,UPDATE,TABLE,public\.pay_ledger/, 'the settling UPDATE is audited');
like($settle, qr/WRITE,INSERT,TABLE,public\.pay_journal/, 'the settlement\'s journal row is audited');

my $claim2 = audited(q{SELECT action FROM pay_claim('PSP-AUDIT-2', 5.00, 'EUR')}, $owner);
like($claim2, qr/WRITE,INSERT,TABLE,public\.pay_ledger/, 'a claim of a new key is audited');

my $app = audited(q{SELECT action FROM pay_claim('PSP-AUDIT-3', 5.00, 'EUR')}, 'payment_app');
like($app, qr/FUNCTION,EXECUTE,FUNCTION,public\.pay_claim/,
	'an application role\'s API call is audited as a function call');

is($node->safe_psql('postgres', 'SELECT count(*) FROM pay_verify()'), 0, 'ledger and journal agree');
is( $node->safe_psql(
		'postgres', q{SELECT string_agg(status::text, ',' ORDER BY bizno) FROM pay_ledger}),
	'PROCESSING,PROCESSING,SUCCESS',
	'the audited writes were made');

done_testing();
