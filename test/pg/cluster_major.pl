# Run first among the TAP tests on a major other than Debian's 15 (test/run
# with PG=17 or PG=18), with Debian 15's PostgreSQL::Test modules when that
# major's installation has none: that those modules drive that major's
# programs -- initdb, the server, psql, pg_dump, pg_basebackup, pg_config --
# and none of 15's, and that a node they start loads the extension.  Every
# TAP test after it then tests that major.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $major = $ENV{PG_MAJOR} or BAIL_OUT('PG_MAJOR is not set');

# "psql (PostgreSQL) 17.5" -> 17
sub program_major
{
	my ($program) = @_;
	my $out = `$program --version`;
	return $out =~ /\(PostgreSQL\) (\d+)/ ? $1 : "none ($out)";
}

my $node = PostgreSQL::Test::Cluster->new('major');
$node->init;
$node->start;

is($node->safe_psql('postgres', "SELECT current_setting('server_version_num')::int / 10000"),
	$major, "the node is a PostgreSQL $major server");
is($node->pg_version->major, $major, "the modules see PostgreSQL $major (pg_config)");
is(program_major($_), $major, "$_ on PATH is of PostgreSQL $major")
  for qw(initdb postgres pg_ctl psql pg_dump pg_restore pg_basebackup);
is($node->safe_psql('postgres',
		'CREATE EXTENSION idempotent_pay; SELECT pay_bizno_valid(pay_bizno(\'PAY\', \'X\'))'),
	't', 'the node loads idempotent_pay and issues a valid bizNo');
note 'data checksums: ' . $node->safe_psql('postgres', 'SHOW data_checksums');

$node->stop;
done_testing();
