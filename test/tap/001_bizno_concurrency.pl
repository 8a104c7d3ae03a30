# Four sessions issue 100 000 bizNos each, at the same time, for the same
# prefix and biz_id: not one duplicate, every one valid, every one carrying
# the node id of the server's configuration -- which a reload changes and no
# session can.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $sessions = 4;
my $per_session = 100_000;

my $node = PostgreSQL::Test::Cluster->new('bizno');
$node->init;
$node->append_conf('postgresql.conf', 'idempotent_pay.node_id = 17');
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION idempotent_pay; CREATE UNLOGGED TABLE issued (session int, bizno text)');

my @runs;
for my $session (1 .. $sessions)
{
	my ($out, $err) = ('', '');
	my $sql = "INSERT INTO issued SELECT $session, pay_bizno('PAY', 'SAME') "
	  . "FROM generate_series(1, $per_session)";
	push @runs,
	  [
		IPC::Run::start(
			[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			'>', \$out, '2>', \$err),
		\$err
	  ];
}
for my $run (@runs)
{
	ok($run->[0]->finish, 'session finished') or diag ${ $run->[1] };
}

my $total = $sessions * $per_session;
is($node->safe_psql('postgres', 'SELECT count(*) FROM issued'), $total, "$total bizNos issued");
is($node->safe_psql('postgres', 'SELECT count(DISTINCT bizno) FROM issued'),
	$total, 'no duplicates');
is($node->safe_psql('postgres', 'SELECT count(*) FROM issued WHERE NOT pay_bizno_valid(bizno)'),
	0, 'every bizNo passes its check character');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM issued WHERE (pay_bizno_parse(bizno)).node_id <> 17'),
	0,
	'every bizNo carries node id 17 of postgresql.conf');

$node->safe_psql('postgres', 'ALTER SYSTEM SET idempotent_pay.node_id = 18');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT current_setting('idempotent_pay.node_id') = '18'")
  or die 'the reload did not bring node id 18';
is( $node->safe_psql('postgres', "SELECT (pay_bizno_parse(pay_bizno('PAY', 'X'))).node_id"),
	18, 'a reload brings a new node id to new sessions');
my ($status, $out, $err) = $node->psql('postgres',
	"SET idempotent_pay.node_id = 19; SELECT (pay_bizno_parse(pay_bizno('PAY', 'X'))).node_id");
like($err, qr/cannot be changed now/, 'a session cannot take another node id');

$node->stop;
done_testing();
