# The setup and the quick start of README.md, run as written on a fresh
# server with nothing preloaded and no setting of ours in its
# configuration: the setup block as the superuser, the quick start as the
# application role it creates.  Then the README's table of what each role
# may call is held against the catalog, row by row.
use strict;
use warnings;

use File::Basename;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme_path = dirname(__FILE__) . '/../../README.md';
open(my $fh, '<', $readme_path) or die "cannot read $readme_path: $!";
my $readme = do { local $/; <$fh> };
close $fh;

# The fenced block between "<!-- NAME: begin -->" and "<!-- NAME: end -->".
sub block
{
	my ($name) = @_;
	$readme =~ /<!-- \Q$name\E: begin -->\n(.*?)<!-- \Q$name\E: end -->/s
	  or die "README.md has no block \"$name\"";
	my $block = $1;
	$block =~ s/^```\w*\n//;
	$block =~ s/```\n?\z//;
	return $block;
}

my $node = PostgreSQL::Test::Cluster->new('setup');
$node->init;
$node->start;
is($node->safe_psql('postgres', "SHOW shared_preload_libraries"), '', 'nothing is preloaded');

$node->safe_psql('postgres', 'CREATE DATABASE payments');

# psql as a user would run it: the block on standard input, stop at the
# first error.
sub run_block
{
	my ($name, $user) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('payments') . " user=$user" ],
		'<', \block($name), '>', \$stdout, '2>', \$stderr);
	return ($ok, $stdout, $stderr);
}

my ($ok, $out, $err) = run_block('setup', $node->safe_psql('postgres', 'SELECT current_user'));
ok($ok, 'the setup block runs as written') or diag $err;
unlike($err, qr/ERROR/, 'the setup block raises no error');

is($node->safe_psql('payments', "SELECT (pay_bizno_parse(pay_bizno('SHOP', 'X'))).node_id"),
	1, 'a new session issues bizNos under the node id the setup set');

($ok, $out, $err) = run_block('quick start', 'payment_app');
ok($ok, 'the quick start runs as written, as the application role') or diag $err;
like($out, qr/^PROCEED 1$/m, 'the first claim answers PROCEED under attempt 1');
like($out, qr/IN_PROGRESS/, 'the retry while the charge is in flight answers IN_PROGRESS');
like($out, qr/^ SUCCESS$/m, 'the settlement answers SUCCESS');
like($out, qr/ALREADY_SUCCEEDED \| BANK-7781/, 'a later claim answers from the ledger');
is( $node->safe_psql(
		'payments',
		"SELECT string_agg(coalesce(from_status::text, '-') || '>' || to_status, ' ' ORDER BY seq) "
		  . "FROM pay_journal WHERE bizno IN (SELECT bizno FROM pay_find('SHOP', 'ORDER-42'))"),
	'->INIT INIT>PROCESSING PROCESSING>SUCCESS',
	'the journal holds the quick start payment\'s history');

# The README's table of grants, against what the roles of the setup may do.
my %role = (application => 'payment_app', operator => 'payment_ops');
my $rows = 0;
for my $line (split /\n/, block('grants'))
{
	next unless $line =~ /^\| ((?:SELECT )?`.*?) \| (yes|no) \| (yes|no) \|$/;
	my ($objects, %may) = ($1, application => $2, operator => $3);
	my $select = $objects =~ s/^SELECT //;
	for my $object ($objects =~ /`(\w+)`/g)
	{
		for my $kind (sort keys %role)
		{
			my $check =
			  $select
			  ? "has_table_privilege('$role{$kind}', '$object', 'SELECT')"
			  : "bool_or(has_function_privilege('$role{$kind}', p.oid, 'EXECUTE')) "
			  . "FROM pg_proc AS p WHERE p.proname = '$object'";
			is($node->safe_psql('payments', "SELECT $check"),
				$may{$kind} eq 'yes' ? 't' : 'f',
				"README: $kind role " . ($may{$kind} eq 'yes' ? 'may' : 'may not') . " use $object");
			$rows++;
		}
	}
}
cmp_ok($rows, '>', 30, "the README's grants table names $rows role and object pairs");

# Every function the extension gives an application role is in the table.
my @listed = block('grants') =~ /`(pay_\w+)`/g;
my $unlisted = $node->safe_psql(
	'payments', q{
	SELECT string_agg(DISTINCT p.proname, ', ')
	FROM pg_proc AS p
	WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'pay\_%'
	  AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
	  AND (has_function_privilege('payment_app', p.oid, 'EXECUTE')
	       OR has_function_privilege('payment_ops', p.oid, 'EXECUTE'))
	  AND NOT p.proname = ANY (string_to_array('} . join(',', @listed) . q{', ','))});
is($unlisted, '', 'every function a role of the setup may call is in the table');

# The card flow's quick start of doc/guide.md, run as written as the
# application role, in the database the README's setup made.
my $guide_path = dirname(__FILE__) . '/../../doc/guide.md';
open($fh, '<', $guide_path) or die "cannot read $guide_path: $!";
my $guide = do { local $/; <$fh> };
close $fh;
$guide =~ /<!-- card quick start: begin -->\n```\w*\n(.*?)```\n<!-- card quick start: end -->/s
  or die "doc/guide.md has no block \"card quick start\"";
my $card_block = $1;
my ($card_out, $card_err);
$ok = IPC::Run::run(
	[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('payments') . " user=payment_app" ],
	'<', \$card_block, '>', \$card_out, '2>', \$card_err);
ok($ok, "the guide's card quick start runs as written, as the application role") or diag $card_err;
like($card_out, qr/^hold PROCEED 1$/m, 'the hold is claimed under attempt 1');
like($card_out, qr/^capture PROCEED 1$/m, 'the capture is claimed under attempt 1');
like($card_out, qr/^ t$/m, 'the capture opened again is the same capture');
like($card_out, qr/^ ALREADY_SUCCEEDED$/m, 'its retry sends nothing');
like(
	$card_out,
	qr/^ +120\.00 \| +70\.00 \| +30\.00 \| +0 \| +40\.00 \| voided$/m,
	'the balance: 120.00 held, 70.00 captured, 30.00 refunded, closed by the void');
is( $node->safe_psql(
		'payments',
		"SELECT string_agg(coalesce(kind, 'REFUND') || ':' || refund_key || ':' || status, ' ' ORDER BY created_at, bizno) "
		  . "FROM pay_ledger WHERE parent IN (SELECT bizno FROM pay_find('SHOP', 'ORDER-77'))"),
	'CAPTURE:SHIP-1:SUCCESS VOID:RELEASE:SUCCESS REFUND:RETURN-1:SUCCESS',
	"the ledger holds the quick start's capture, void and refund under its authorization");
is($node->safe_psql('payments', 'SELECT count(*) FROM pay_verify()'), '0', 'pay_verify finds nothing');

done_testing();
