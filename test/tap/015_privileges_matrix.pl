# Who may call what, by calling it: every function of the extension (those
# the catalog records as its members, trigger functions aside) called with
# valid arguments as each kind of role, in a database holding payments in
# every state, refunds settled and in flight, second charges reported and
# confirmed, and archived months kept and dropped.
#
# The roles: an application's (pay_grant), an operator's
# (pay_grant_operator), the monitoring role exactly as doc/monitoring.md
# creates it, and a role granted nothing, which has only what PUBLIC has.
# What each may call is what the documents say: README.md's table of grants
# for the first two, the GRANT lines of doc/monitoring.md's block for the
# third, and for everyone what the install script leaves to PUBLIC (its
# REVOKE ... FROM PUBLIC of section 8 names the rest).  A call a role may
# make must never fail with 42501, whatever else it answers; a call it may
# not make must always fail with 42501.  has_function_privilege alone
# (008_setup.pl) would miss a function that is granted but calls one that is
# not, or that checks privileges of its own.
#
# A function added later has no sample call here and fails the test until
# it gets one: that is how it joins the matrix.
use strict;
use warnings;

use File::Basename;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = dirname(__FILE__) . '/../..';

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot read $path: $!";
	local $/;
	return <$fh>;
}

# README.md's table of grants, parsed as 008_setup.pl parses it: per
# function name, whether the application and the operator role may call it.
my $readme = slurp("$top/README.md");
$readme =~ /<!-- grants: begin -->\n(.*?)<!-- grants: end -->\n\n(.*?)\n\n/s
  or die 'README.md has no block "grants"';
my ($grants_table, $after_table) = ($1, $2);
my %readme;
for my $line (split /\n/, $grants_table)
{
	next unless $line =~ /^\| (`.*?) \| (yes|no) \| (yes|no) \|$/;
	my ($objects, $app, $ops) = ($1, $2, $3);
	$readme{$_} = { application => $app eq 'yes', operator => $ops eq 'yes' }
	  for $objects =~ /`(\w+)`/g;
}
die 'README.md\'s table of grants names no function' unless %readme;

# The sentence after the table: what is everyone's, what the superuser's.
$after_table =~ /^(.*?) are open to\s+everyone/s
  or die 'README.md does not say after the table what is open to everyone';
# (a view it names there is no function: pay_currencies is a view)
(my $open = $1) =~ s/the\s+views?\s+`\w+`//g;
my @readme_everyones = $open =~ /`(\w+)`/g;
$after_table =~ /open to\s+everyone\.\s+(.*?) are the\s+superuser's/s
  or die 'README.md does not say after the table what is the superuser\'s';
my @readme_superusers = $1 =~ /`(\w+)`/g;

# The monitoring role of doc/monitoring.md, as 011_exporter.pl reads it:
# the block to run, and the functions its GRANT lines name.
my $monitoring = slurp("$top/doc/monitoring.md");
$monitoring =~ /<!-- exporter role: begin -->\n\s*```sql\n(.*?)\s*```\n\s*<!-- exporter role: end -->/s
  or die 'doc/monitoring.md has no block "exporter role"';
(my $monitoring_block = $1) =~ s/^   //mg;
$monitoring_block =~ /^CREATE ROLE (\w+)/m
  or die 'the exporter role block of doc/monitoring.md creates no role';
my $monitoring_role = $1;
my %monitoring_grants;
for my $grant ($monitoring_block =~ /^GRANT EXECUTE ON FUNCTION (.*?) TO /mg)
{
	$monitoring_grants{$_} = 1 for $grant =~ /(\w+)\s*\(/g;
}

# The install script's REVOKE ... FROM PUBLIC of functions in "8.
# Privileges", as signatures: every other function is everyone's.
my $control = slurp("$top/idempotent_pay.control");
$control =~ /^default_version = '([\d.]+)'/m or die 'no default_version in idempotent_pay.control';
my $script = slurp("$top/sql/idempotent_pay--$1.sql");
$script =~ m{/\* 8\. Privileges -+ \*/\n(.*?)/\* 9\.}s
  or die 'the install script has no section "8. Privileges"';
my $privileges = $1;
$privileges =~ s/--[^\n]*//g;
my @revoked;
for my $revoke ($privileges =~ /REVOKE ALL ON FUNCTION\s+(.*?)\s+FROM PUBLIC;/sg)
{
	push @revoked, map { s/\@extschema\@\.//gr } $revoke =~ /\@extschema\@\.(\w+\([^)]*\))/g;
}
die 'section 8 of the install script revokes no function from PUBLIC' unless @revoked;

# A valid call of each function, by the signature the catalog gives it.
# %ROLE% is the calling role's name, for keys of its own; %NAME% a value the
# fixture below gave (%INIT%, a bizNo pay_open issued, and the like).  Each
# call is rolled back: what one does, the next never sees.
my %call = (
	'pay_allowed(pay_status,pay_status)' => q{SELECT pay_allowed('INIT', 'PROCESSING')},
	'pay_amount_valid(numeric)' => q{SELECT pay_amount_valid(10.50)},
	'pay_currency_valid(text)' => q{SELECT pay_currency_valid('EUR')},
	'pay_currency_list()' => q{SELECT * FROM pay_currency_list()},
	'pay_bizno(text,text)' => q{SELECT pay_bizno('SHOP', 'BIZNO-%ROLE%')},
	'pay_bizno_valid(text)' => q{SELECT pay_bizno_valid('%INIT%')},
	'pay_bizno_parse(text)' => q{SELECT * FROM pay_bizno_parse('%INIT%')},
	'pay_open(text,text,numeric,text)' => q{SELECT pay_open('SHOP', 'OPEN-%ROLE%', 10, 'EUR')},
	'pay_claim(text,numeric,text)' => q{SELECT pay_claim('M-NEW-%ROLE%', 10, 'EUR')},
	'pay_open_claim(text,text,numeric,text)' => q{SELECT * FROM pay_open_claim('SHOP', 'OPEN-CLAIM-%ROLE%', 10, 'EUR')},
	'pay_begin(text,numeric,text)' => q{SELECT pay_begin('%INIT%', 10, 'EUR')},
	'pay_succeed(text,text,bigint,jsonb)' => q{SELECT pay_succeed('M-PROCESSING', 'BANK-%ROLE%', 1, '{"ok": true}')},
	'pay_fail(text,text,bigint)' => q{SELECT pay_fail('M-PROCESSING', 'declined', 1)},
	'pay_get(text)' => q{SELECT * FROM pay_get('M-SUCCESS')},
	'pay_find(text,text)' => q{SELECT * FROM pay_find('SHOP', 'ORDER-INIT')},
	'pay_stuck(interval,integer)' => q{SELECT * FROM pay_stuck('0 seconds', 10)},
	'pay_refund_open(text,text,numeric,text)' => q{SELECT pay_refund_open('M-SUCCESS', 'R-%ROLE%', 1, 'goodwill')},
	'pay_refund_balance(text)' => q{SELECT * FROM pay_refund_balance('M-REFUNDING')},
	'pay_open_claim_many(text,text[],numeric[],text)' =>
	  q{SELECT * FROM pay_open_claim_many('SHOP', '{MANY-1-%ROLE%,MANY-2-%ROLE%}', '{10,20}', 'EUR')},
	'pay_settle_many(text[],bigint[],pay_status[],text[],text[])' =>
	  q{SELECT * FROM pay_settle_many('{M-PROCESSING}', '{1}', '{SUCCESS}', '{BANK-MANY-%ROLE%}', '{NULL}')},

	'pay_open_authorization(text,text,numeric,text,interval)' =>
	  q{SELECT pay_open_authorization('SHOP', 'AUTH-%ROLE%', 10, 'EUR', '7 days')},
	'pay_capture_open(text,text,numeric,boolean)' => q{SELECT pay_capture_open('%AUTH%', 'C-%ROLE%', 1, false)},
	'pay_void_open(text,text)' => q{SELECT pay_void_open('%AUTH%', 'V-%ROLE%')},
	'pay_increment_open(text,text,numeric)' => q{SELECT pay_increment_open('%AUTH%', 'I-%ROLE%', 1)},
	'pay_authorization_balance(text)' => q{SELECT * FROM pay_authorization_balance('%AUTH%')},
	'pay_reset(text,text)' => q{SELECT pay_reset('M-FAILED', 'the customer retries')},
	'pay_transition(text,pay_status,text)' => q{SELECT pay_transition('M-PROCESSING', 'FAILED', 'declined by phone')},
	'pay_confirm_second_charge(text,text)' => q{SELECT pay_confirm_second_charge('M-DOUBLE', 'BANK-OTHER')},
	'pay_second_charges()' => q{SELECT * FROM pay_second_charges()},
	'pay_verify()' => q{SELECT * FROM pay_verify()},
	'pay_reconcile(regclass,boolean,timestamp with time zone)' => q{SELECT * FROM pay_reconcile('bank_statement', true)},
	'pay_reconcile_rows(jsonb,boolean,timestamp with time zone)' =>
	  q{SELECT * FROM pay_reconcile_rows('[{"bizno": "M-PROCESSING", "amount": 10, "currency": "EUR", "status": "SUCCESS", "channel_ref": "BANK-STMT"}]', true)},
	'pay_archive(timestamp with time zone,integer)' => q{SELECT pay_archive('2025-06-01', 100)},
	'pay_archive_verify()' => q{SELECT * FROM pay_archive_verify()},
	'pay_archive_key_hash(text)' => q{SELECT pay_archive_key_hash('M-NEW-%ROLE%')},
	'pay_archive_key_pack(bigint[])' => q{SELECT pay_archive_key_pack('{1,2,3}')},
	'pay_archive_key_unpack(bigint,bytea)' => q{SELECT pay_archive_key_unpack(%KEYS_LO%, '%KEYS_HASHES%')},
	'pay_archive_add_keys(bigint[])' => q{SELECT pay_archive_add_keys('{12345}')},
	'pay_archive_partitions(date)' => q{SELECT pay_archive_partitions('2025-07-01')},
	'pay_archive_unready(timestamp with time zone,bigint,text[])' =>
	  q{SELECT * FROM pay_archive_unready('2025-06-01', 0, '{M-DOUBLE}')},
	'pay_stats_counters()' => q{SELECT * FROM pay_stats_counters()},
	'pay_stats_reset()' => q{SELECT pay_stats_reset()},
	'pay_stats_refresh(bigint)' => q{SELECT pay_stats_refresh(0)},
	'pay_stats_read()' => q{SELECT * FROM pay_stats_read()},
	'pay_stats_transitions_read()' => q{SELECT * FROM pay_stats_transitions_read()},
	'pay_stats_amounts_read()' => q{SELECT * FROM pay_stats_amounts_read()},
	'pay_stats_holds()' => q{SELECT * FROM pay_stats_holds()},
	'pay_stats_second_charge(text,text,text,bigint,bigint,pg_snapshot)' =>
	  q{SELECT pay_stats_second_charge('M-DOUBLE', 'reported', 'BANK-OTHER', %DOUBLE_SEQ%, 0, pg_current_snapshot())},
	'pay_stats_unfolded(bigint,pg_snapshot)' => q{SELECT * FROM pay_stats_unfolded(0, pg_current_snapshot())},
	'pay_stats_running_transactions()' => q{SELECT pay_stats_running_transactions()},
	'pay_stats_transactions_ended(text[])' => q{SELECT pay_stats_transactions_ended('{}')},
	'pay_stats_subscribed()' => q{SELECT pay_stats_subscribed()},
	'pay_stats_counts_usable(bigint)' => q{SELECT pay_stats_counts_usable(%SYSTEM_IDENTIFIER%)},
	'pay_stats_usable_state()' => q{SELECT pay_stats_usable_state()},
	'pay_stats_counted_snapshot()' => q{SELECT pay_stats_counted_snapshot()},
	'pay_protect(regclass,name,name[])' => q{SELECT pay_protect('orders', 'status', '{amount}')},
	'pay_unprotect(regclass)' => q{SELECT pay_unprotect('guarded_orders')},
	'pay_grant(regrole)' => q{SELECT pay_grant('grantee')},
	'pay_grant_operator(regrole)' => q{SELECT pay_grant_operator('grantee')},
);

my $node = PostgreSQL::Test::Cluster->new('privileges');
$node->init;
# the payments here use keys of their own, keys of another system: accepted
$node->append_conf('postgresql.conf', "idempotent_pay.foreign_keys = accept\n");
# preloaded, as in production: the stats functions then read and reset the
# shared counters rather than answering without them
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotent_pay'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE payments');
$node->safe_psql('payments', 'CREATE EXTENSION idempotent_pay');

my %role = (
	application => 'payment_app',
	operator => 'payment_ops',
	monitoring => $monitoring_role,
	public => 'nobody',
);
$node->safe_psql(
	'payments', q{
	CREATE ROLE payment_app LOGIN;
	SELECT pay_grant('payment_app');
	CREATE ROLE payment_ops LOGIN;
	SELECT pay_grant_operator('payment_ops');
	CREATE ROLE nobody LOGIN;
	CREATE ROLE grantee;
});
$node->safe_psql('payments', $monitoring_block);

# The payments: every state, refunds settled and in flight, a second charge
# reported and one confirmed; then two months archived, the first kept and
# the second's partitions dropped, and a payment of a third month left for
# pay_archive to move.  Made through the API; the dates set with the
# ledger's bookkeeping off, as a replica would write them.
$node->safe_psql(
	'payments', q{
	SELECT pay_open('SHOP', 'ORDER-INIT', 10, 'EUR');
	SELECT pay_claim('M-PROCESSING', 10, 'EUR');
	SELECT pay_claim(k, 10, 'EUR'), pay_succeed(k, 'BANK-' || k, 1)
	FROM unnest(ARRAY['M-SUCCESS', 'M-REFUNDED', 'M-REFUNDING', 'M-DOUBLE', 'M-CONFIRMED',
	                  'M-MARCH', 'M-APRIL', 'M-MAY']) AS k;
	SELECT pay_claim(k, 10, 'EUR'), pay_fail(k, 'declined', 1)
	FROM unnest(ARRAY['M-FAILED', 'M-MARCH-FAILED', 'M-APRIL-FAILED']) AS k;
	SELECT pay_claim(r, 4, 'EUR'), pay_succeed(r, 'BANK-R1', 1)
	FROM pay_refund_open('M-REFUNDED', 'R1', 4) AS r;
	SELECT pay_claim(r, 4, 'EUR') FROM pay_refund_open('M-REFUNDING', 'R1', 4) AS r;
	SELECT pay_succeed('M-DOUBLE', 'BANK-OTHER', 1);
	SELECT pay_succeed('M-CONFIRMED', 'BANK-OTHER', 1);
	SELECT pay_confirm_second_charge('M-CONFIRMED', 'BANK-OTHER');
	-- a held authorization, which the card flow's steps are opened under
	SELECT pay_claim(a), pay_succeed(a, 'HOLD-M', 1)
	FROM pay_open_authorization('SHOP', 'AUTH-HELD', 100, 'EUR') AS a;

	SET session_replication_role = replica;
	UPDATE pay_ledger SET updated_at = '2025-03-10 12:00+00' WHERE bizno LIKE 'M-MARCH%';
	UPDATE pay_ledger SET updated_at = '2025-04-10 12:00+00' WHERE bizno LIKE 'M-APRIL%';
	RESET session_replication_role;
	SELECT pay_stats_refresh();
	SELECT pay_archive('2025-05-01');
	DROP TABLE pay_ledger_archive_2025_04, pay_journal_archive_2025_04;
	SET session_replication_role = replica;
	UPDATE pay_ledger SET updated_at = '2025-05-10 12:00+00' WHERE bizno = 'M-MAY';
	RESET session_replication_role;

	-- a statement to reconcile, which the operators' role must be able to read
	CREATE TABLE bank_statement (bizno text, amount numeric, currency text, status text, channel_ref text);
	INSERT INTO bank_statement VALUES ('M-PROCESSING', 10, 'EUR', 'SUCCESS', 'BANK-STMT'),
	                                  ('M-SUCCESS', 10, 'EUR', 'SUCCESS', 'BANK-M-SUCCESS');
	GRANT SELECT ON bank_statement TO PUBLIC;
	-- a table of the application's own to guard, and one guarded already
	CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL DEFAULT 'INIT', amount numeric);
	CREATE TABLE guarded_orders (id integer PRIMARY KEY, status text NOT NULL DEFAULT 'INIT');
	SELECT pay_protect('guarded_orders');
});
is( $node->safe_psql(
		'payments',
		q{SELECT string_agg(to_char(month, 'YYYY-MM') || ' ' || payments || ' '
		   || (to_regclass('pay_ledger_archive_' || to_char(month, 'YYYY_MM')) IS NOT NULL), ', ' ORDER BY month)
		  FROM pay_archive_months}),
	'2025-03 2 true, 2025-04 2 false',
	'the fixture archived March, kept, and April, dropped');
is( $node->safe_psql(
		'payments',
		q{SELECT string_agg(DISTINCT status::text, ' ' ORDER BY status::text) FROM pay_ledger}),
	'FAILED INIT PROCESSING SUCCESS',
	'the fixture holds payments in every state');

my %value;
($value{INIT}) = $node->safe_psql('payments', q{SELECT bizno FROM pay_find('SHOP', 'ORDER-INIT')});
($value{AUTH}) = $node->safe_psql('payments', q{SELECT bizno FROM pay_find('SHOP', 'AUTH-HELD')});
($value{KEYS_LO}, $value{KEYS_HASHES}) =
  split /\|/, $node->safe_psql('payments', q{SELECT lo, hashes FROM pay_archive_keys ORDER BY lo LIMIT 1});
$value{DOUBLE_SEQ} = $node->safe_psql('payments',
	q{SELECT max(seq) FROM pay_journal WHERE bizno = 'M-DOUBLE' AND note LIKE 'second charge reported: %'});
$value{SYSTEM_IDENTIFIER} = $node->safe_psql('payments', q{SELECT system_identifier FROM pg_control_system()});
ok(!grep({ $_ eq '' } values %value), 'the fixture gave every value the sample calls use');

# The extension's functions, by the signature the catalog gives them (the
# schema is on search_path, so unqualified), and whether each is one the
# install script revoked from PUBLIC.
my $revoked_array = join(',', map { "'$_'::regprocedure" } @revoked);
my @functions = map { [ split /\|/ ] } split /\n/, $node->safe_psql(
	'payments', qq{
	SELECT p.oid::regprocedure, p.proname, p.oid = ANY (ARRAY[$revoked_array])
	FROM pg_depend AS d JOIN pg_proc AS p ON p.oid = d.objid
	WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
	  AND d.refclassid = 'pg_extension'::regclass
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotent_pay')
	  AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
	ORDER BY p.proname, p.oid::regprocedure::text});
cmp_ok(scalar @functions, '>', 40, scalar(@functions) . ' functions of the extension are callable');

# What the README says beside the table agrees with the install script.
my %everyones = map { $_->[1] => 1 } grep { $_->[2] eq 'f' } @functions;
my %superusers = map { $_ => 1 } @readme_superusers;
for my $name (@readme_everyones)
{
	ok($everyones{$name}, "README: $name is open to everyone, and the install script leaves it to PUBLIC");
}
my %readme_everyone = map { $_ => 1 } @readme_everyones;
for my $name (sort keys %everyones)
{
	ok($readme_everyone{$name}, "the install script leaves $name to PUBLIC, and README says so");
}
for my $name (@readme_superusers)
{
	ok( !$everyones{$name} && !$readme{$name} && !$monitoring_grants{$name},
		"README: $name is the superuser's, revoked from PUBLIC and granted to no role");
}

# attempt(role, call): the SQLSTATE of call made as role, with the message
# of an error; the call rolled back whatever it did.  SET LOCAL ROLE inside
# the block's subtransaction makes role the current user, whose privileges
# every function the call reaches is checked against, until the block ends:
# on success by raising, so that it is rolled back like a failure.
$node->safe_psql(
	'payments', q{
	-- the call runs in a subtransaction rolled back on purpose: a claim may
	-- run there
	CREATE FUNCTION attempt(r name, call text) RETURNS text LANGUAGE plpgsql
	SET idempotent_pay.claim_in_transaction = allow AS $$
	DECLARE
		state text;
		message text;
	BEGIN
		BEGIN
			EXECUTE pg_catalog.format('SET LOCAL ROLE %I', r);
			IF current_user <> r THEN
				RAISE EXCEPTION 'SET LOCAL ROLE % left current_user %', r, current_user;
			END IF;
			EXECUTE call;
			state := '00000';
			EXECUTE 'RESET ROLE';
			RAISE EXCEPTION 'roll the call back';
		EXCEPTION WHEN OTHERS THEN
			IF state IS NULL THEN
				GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
			END IF;
		END;
		IF current_user <> session_user THEN
			RAISE EXCEPTION 'the role of the call outlived it: %', current_user;
		END IF;
		RETURN state || coalesce(' ' || pg_catalog.replace(message, E'\n', ' '), '');
	END
	$$;
	REVOKE ALL ON FUNCTION attempt(name, text) FROM PUBLIC;
});

my @kinds = qw(application operator monitoring public);
my (@matrix, @missing);
for my $f (@functions)
{
	my ($signature, $name, $revoked) = @$f;
	unless ($call{$signature})
	{
		push @missing, $signature;
		next;
	}
	for my $kind ('superuser', @kinds)
	{
		my $r = $kind eq 'superuser' ? 'postgres' : $role{$kind};
		(my $sql = $call{$signature}) =~ s/%ROLE%/$r/g;
		$sql =~ s/%(\w+)%/$value{$1} \/\/ die "no value $1 for $signature"/ge;
		push @matrix, [ $signature, $name, $revoked, $kind, $r, $sql ];
	}
}
fail("no sample call for $_: add one") for @missing;
my %unused = %call;
delete $unused{ $_->[0] } for @functions;
fail("a sample call for $_, which is no function of the extension") for sort keys %unused;

# One connection, one transaction: every call in a subtransaction of its
# own, rolled back.
my $values = join(",\n", map { my @q = map { s/'/''/gr } @$_[ 0, 4, 5 ]; "('$q[0]', '$q[1]', '$q[2]')" } @matrix);
my %outcome;
for my $line (split /\n/, $node->safe_psql(
	'payments', qq{
	SELECT signature, r, attempt(r, call)
	FROM (VALUES $values) AS m(signature, r, call)}))
{
	my ($signature, $r, $state) = split /\|/, $line, 3;
	$outcome{$signature}{$r} = $state;
}

my $pairs = 0;
for my $m (@matrix)
{
	my ($signature, $name, $revoked, $kind, $r) = @$m;
	my $state = $outcome{$signature}{$r} // 'no outcome';
	if ($kind eq 'superuser')
	{
		like($state, qr/^00000/, "the sample call of $signature is valid: it succeeds as the superuser")
		  or diag "$signature as the superuser: $state";
		next;
	}
	my $may =
	    $revoked eq 'f' ? 1
	  : $kind eq 'application' ? $readme{$name} && $readme{$name}{application}
	  : $kind eq 'operator' ? $readme{$name} && $readme{$name}{operator}
	  : $kind eq 'monitoring' ? $monitoring_grants{$name}
	  :                         0;
	my $why =
	    $revoked eq 'f' ? "everyone's"
	  : $kind eq 'application' || $kind eq 'operator'
	  ? "README: " . ($may ? 'granted' : 'not granted')
	  : $kind eq 'monitoring' ? "doc/monitoring.md: " . ($may ? 'granted' : 'not granted')
	  :                         'revoked from PUBLIC';
	(my $shown = $state) =~ s/^(\w{5}).*/$1/;
	if ($may)
	{
		unlike($state, qr/^42501/, "$kind role may call $signature ($why): $shown")
		  or diag "$signature as $r: $state";
	}
	else
	{
		like($state, qr/^42501/, "$kind role may not call $signature ($why): $shown")
		  or diag "$signature as $r: $state";
	}
	$pairs++;
}
is($pairs, @functions * @kinds, scalar(@functions) . ' functions × ' . scalar(@kinds) . " roles: $pairs calls checked");

done_testing();
