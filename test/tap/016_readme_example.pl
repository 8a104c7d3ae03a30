# README.md's application example (the Python block between
# "<!-- example: begin -->" and "<!-- example: end -->"), run as written by
# test/clients/python/readme_example.py against a bank that loses 30% of its
# answers: 240 orders, each paid twice at once, in rounds with a reconciler
# between them; 0 orders charged twice, every order SUCCESS under its one
# charge.  Then the same block edited as a caller might get it wrong must
# fail the same run: without the commit of the claim (the autocommit line
# deleted), and settling without the claimed attempt (under attempt 1).
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = dirname(__FILE__) . '/../..';
open(my $fh, '<', "$root/README.md") or die "cannot read README.md: $!";
my $readme = do { local $/; <$fh> };
close $fh;
$readme =~ /<!-- example: begin -->\n```python\n(.*?)```\n<!-- example: end -->/s
  or die 'README.md has no Python block "example"';
my $example = $1;

my $node = PostgreSQL::Test::Cluster->new('example');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE ROLE payment_app LOGIN');

my $database = 0;

# The harness over a version of the example, in a new database as README's
# setup leaves one; returns its exit status and output.
sub run_example
{
	my ($source, %env) = @_;
	my $db = 'shop' . ++$database;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION idempotent_pay; SELECT pay_grant('payment_app')");
	my $file = PostgreSQL::Test::Utils::tempdir() . '/example.py';
	open(my $out, '>', $file) or die "cannot write $file: $!";
	print $out $source;
	close $out;
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = $db;
	local $ENV{PGUSER} = 'payment_app';
	local $ENV{PGOPTIONS} = $env{PGOPTIONS} // '';
	my $output;
	IPC::Run::run([ '/usr/bin/python3', "$root/test/clients/python/readme_example.py", $file, 240 ],
		'>&', \$output);
	return ($? >> 8, $output);
}

my ($status, $output) = run_example($example);
note $output;
is($status, 0, "README's example pays 240 orders, each twice at once, with 30% of answers lost");
like($output, qr/^orders charged twice 0$/m, 'no order is charged twice');
like($output, qr/^orders not SUCCESS under their one charge 0$/m,
	'every order is SUCCESS under the one charge the bank booked');
like($output, qr/, [1-9]\d* answers lost/, 'the bank lost answers');
like($output, qr/pending [1-9]/, 'some calls answered pending (IN_PROGRESS or a lost answer)');

# Without the commit of the claim: psycopg2 then opens a transaction.
(my $no_commit = $example) =~ s/^.*\.autocommit = True.*\n//m;
isnt($no_commit, $example, 'the example sets autocommit, which the first mutation deletes');
($status, $output) = run_example($no_commit);
note $output;
isnt($status, 0, 'without the commit of the claim the run fails');
like($output, qr/ActiveSqlTransaction: pay_open_claim cannot run inside a transaction block/,
	'as the claim is refused inside the transaction block (25001)');
($status, $output) =
  run_example($no_commit, PGOPTIONS => '-c idempotent_pay.claim_in_transaction=allow');
note $output;
like($output, qr/^orders charged twice [1-9]/m,
	'where claims in a transaction are allowed, the claim rolled back charges orders twice');

# Settling without the claimed attempt: under attempt 1, always.
(my $no_attempt = $example) =~ s/, attempt\)\)/, 1))/g;
isnt($no_attempt, $example, 'the example settles with the attempt, which the second mutation replaces');
($status, $output) = run_example($no_attempt);
note $output;
isnt($status, 0, 'settling under attempt 1 fails the run');
like($output, qr/^charges answered to pay_order and left unsettled [1-9]/m,
	'as a retry\'s answer is refused as a late one, and its paid order left PROCESSING');

$node->stop;
done_testing();
