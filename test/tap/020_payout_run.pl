# The payout run of doc/guide.md, its three blocks run as written: the
# claim and the settlement as the application role, the reconciliation as
# the operator, each a psql of its own in the directory where the files
# are, with a bank in between that pays most payouts, fails some and loses
# the answers of others, then writes its statement of the day.  Once on a
# database of its own, once through idempotent_pay_proxy in front of two
# partitions (when PL/Proxy is installed): the same answers, and after the
# run every payout settled as the bank settled it, charged once, and
# pay_verify empty.  Then the claim block again, the next night: only the
# failed payouts PROCEED, under attempt 2.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $guide_path = dirname(__FILE__) . '/../../doc/guide.md';
open(my $fh, '<', $guide_path) or die "cannot read $guide_path: $!";
my $guide = do { local $/; <$fh> };
close $fh;

# The fenced block between "<!-- NAME: begin -->" and "<!-- NAME: end -->".
sub block
{
	my ($name) = @_;
	$guide =~ /<!-- \Q$name\E: begin -->\n```\w*\n(.*?)```\n<!-- \Q$name\E: end -->/s
	  or die "doc/guide.md has no block \"$name\"";
	return $1;
}

my $payouts = 1000;

# A block run as written by psql as $user on $connstr, in directory $dir,
# stopping at the first error: its standard output.
sub run_block
{
	my ($name, $connstr, $user, $dir) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', "$connstr user=$user" ],
		'<', \block($name), '>', \$out, '2>', \$err,
		init => sub { chdir $dir or die "cannot chdir to $dir: $!" });
	ok($ok, "the guide's block \"$name\" runs as written, as $user") or diag $err;
	unlike($err, qr/ERROR/, "and raises no error");
	return $out;
}

# The bank: reads the payout file, pays every payout but the 20th ones
# (account closed), loses the answers of every 25th from the first (paid
# all the same), writes its answer file and its statement of the day, and
# returns what it did: reference => [status, channel_ref, seller].
sub bank
{
	my ($dir) = @_;
	open my $file, '<', "$dir/payouts.csv" or die "cannot read $dir/payouts.csv: $!";
	my (undef, @rows) = <$file>;
	close $file;
	my %done;
	open my $answers, '>', "$dir/answers.csv" or die;
	open my $statement, '>', "$dir/statement.csv" or die;
	print $answers "reference,status,channel_ref,reason\n";
	print $statement "bizno,amount,currency,status,channel_ref\n";
	my $i = 0;
	for my $row (@rows)
	{
		chomp $row;
		my ($reference, $amount, $currency, $seller) = split /,/, $row;
		$i++;
		my $status = $i % 20 == 0 ? 'FAILED' : 'SUCCESS';
		my $channel_ref = $status eq 'SUCCESS' ? "BANK-$seller" : '';
		$done{$reference} = [ $status, $channel_ref, $seller ];
		print $answers "$reference,$status,$channel_ref," . ($status eq 'FAILED' ? 'account closed' : '') . "\n"
		  unless $i % 25 == 1;
		print $statement "$reference,$amount,$currency,$status,$channel_ref\n";
	}
	close $answers;
	close $statement;
	return \%done;
}

# The three steps on one target; $ledger_rows gives "seller|status|
# channel_ref" of every payout held, sorted.
sub payout_run
{
	my ($what, $connstr, $ledger_rows, $verify) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;

	my $claimed = run_block('payout run: claim', $connstr, 'payment_app', $dir);
	like($claimed, qr/^ PROCEED +\| +\| +$payouts$/m, "$what: the $payouts payouts are claimed, PROCEED");
	my $done = bank($dir);
	is(scalar(keys %$done), $payouts, "$what: the bank file holds them, once each");

	my $settled = run_block('payout run: settle', $connstr, 'payment_app', $dir);
	like($settled, qr/^ FAILED +\| +\| +\| +50$/m, "$what: the answers settle 50 payouts FAILED");
	like($settled, qr/^ SUCCESS +\| +\| +\| +910$/m, "$what: and 910 SUCCESS (the answers of 40 were lost)");

	my $reconciled = run_block('payout run: reconcile', $connstr, 'payment_ops', $dir);
	like($reconciled, qr/^ PROCESSING +\| +40$/m, "$what: 40 payouts in flight before the statement");
	like($reconciled, qr/^ UNRESOLVED_PROCESSING +\| +40$/m, "$what: the statement settles them");
	like($reconciled, qr/^ PROCESSING +\| +0$/m, "$what: none in flight after it");

	my $expected = join "\n", sort map { "$done->{$_}[2]|$done->{$_}[0]|$done->{$_}[1]" } keys %$done;
	is($ledger_rows->(), $expected,
		"$what: every payout settled as the bank settled it, under the bank's reference");
	is($verify->(), '0', "$what: pay_verify finds nothing");

	# The next night: the same run claims again only what failed.
	my $next_dir = PostgreSQL::Test::Utils::tempdir;
	my $again = run_block('payout run: claim', $connstr, 'payment_app', $next_dir);
	like($again, qr/^ ALREADY_SUCCEEDED +\| +\| +950$/m, "$what, the next night: 950 payouts are paid already");
	like($again, qr/^ PROCEED +\| +\| +50$/m, "$what: the 50 that failed PROCEED again");
	open my $file, '<', "$next_dir/payouts.csv" or die;
	my (undef, @rows) = <$file>;
	close $file;
	is(scalar(grep { m{^[^,]+/2,} } @rows), 50, "$what: its bank file holds those 50 alone, under attempt 2");
}

# Directly: one database.
my $node = PostgreSQL::Test::Cluster->new('payout');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE payments');
$node->safe_psql('payments', q{
SET client_min_messages = warning;
CREATE EXTENSION idempotent_pay;
CREATE ROLE payment_app LOGIN;
CREATE ROLE payment_ops LOGIN;
SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops');
});
my $payout_rows = q{SELECT biz_id, status, coalesce(channel_ref, '') FROM pay_ledger WHERE prefix = 'PAYOUT' ORDER BY 1};
payout_run(
	'directly',
	$node->connstr('payments'),
	sub { return join "\n", sort split /\n/, $node->safe_psql('payments', $payout_rows); },
	sub { return $node->safe_psql('payments', 'SELECT count(*) FROM pay_verify()'); });

# Through the proxy: two partitions on one shard server.
SKIP:
{
	skip 'PL/Proxy is not installed', 1
	  unless -e $node->config_data('--sharedir') . '/extension/plproxy.control';

	my $shard = PostgreSQL::Test::Cluster->new('payout_shard');
	$shard->init;
	$shard->append_conf('postgresql.conf', "idempotent_pay.node_id = 1\n");
	$shard->start;
	$shard->safe_psql('postgres', 'CREATE ROLE payment_app LOGIN; CREATE ROLE payment_ops LOGIN');
	for my $p (0, 1)
	{
		$shard->safe_psql('postgres', "CREATE DATABASE pay_p$p");
		$shard->safe_psql("pay_p$p",
			'SET client_min_messages = warning; CREATE EXTENSION idempotent_pay; '
			  . "SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops')");
	}
	my $proxy = PostgreSQL::Test::Cluster->new('payout_proxy');
	$proxy->init;
	$proxy->start;
	$proxy->safe_psql('postgres', 'CREATE DATABASE proxy');
	$proxy->safe_psql(
		'proxy', sprintf(q{
SET client_min_messages = warning;
CREATE EXTENSION plproxy;
CREATE EXTENSION idempotent_pay_proxy;
CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS (
    p0 'host=%s port=%d dbname=pay_p0', p1 'host=%s port=%d dbname=pay_p1');
CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay;
CREATE ROLE payment_app LOGIN;
CREATE ROLE payment_ops LOGIN;
SELECT pay_grant('payment_app'), pay_grant_operator('payment_ops');
}, $shard->host, $shard->port, $shard->host, $shard->port));
	payout_run(
		'through the proxy',
		$proxy->connstr('proxy'),
		sub {
			return join "\n", sort map { split /\n/, $shard->safe_psql("pay_p$_", $payout_rows) } 0, 1;
		},
		sub { return $proxy->safe_psql('proxy', 'SELECT count(*) FROM pay_verify()'); });
	isnt($shard->safe_psql('pay_p0', "SELECT count(*) FROM pay_ledger WHERE prefix = 'PAYOUT'"), '0',
		'the payouts lie on both partitions');
	isnt($shard->safe_psql('pay_p1', "SELECT count(*) FROM pay_ledger WHERE prefix = 'PAYOUT'"), '0',
		'on each of them');
}

done_testing();
