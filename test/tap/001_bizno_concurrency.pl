# Four sessions issue 100 000 bizNos each, at the same time, for the same
# prefix and biz_id: not one duplicate, every one valid.
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

$node->stop;
done_testing();
