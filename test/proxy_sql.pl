#!/usr/bin/perl
# proxy_sql.pl -- writes idempotent_pay_proxy's scripts from one definition
# per routed call.
#
#   perl test/proxy_sql.pl sql            write sql/idempotent_pay_proxy--1.4.sql
#                                         and sql/idempotent_pay_proxy--1.3--1.4.sql
#   perl test/proxy_sql.pl --check DIR    exit 1 unless both files in DIR are
#                                         what this script writes
#
# Every call the proxy routes to one partition is two functions of one
# shape: <name>_on_partition, the PL/Proxy function that sends it, and
# <name>, the API, which calls it and hands an error to pay_proxy_raise.
# @routed below defines each call once (its arguments, result, route,
# grants); the install script and the upgrade script are both written from
# it, so the two cannot drift apart.  test/tap/007_proxy.pl runs --check
# against the installed scripts and compares proxies updated from 1.2 and
# 1.3 with one created at 1.4.  The scripts of released versions (1.2,
# 1.2 -> 1.3, 1.3) are kept as they were released, no longer written here.
use strict;
use warnings;

my $S = '@extschema@';

# The proxy's composite types: the shards' types of the same names, their
# columns in order (with the version that added a column after 1.3).
# PL/Proxy maps a partition's result columns by name.
my %columns = (
	pay_ledger => [
		[ bizno => 'text' ],
		[ prefix => 'text' ],
		[ biz_id => 'text' ],
		[ status => "$S.pay_status" ],
		[ amount => "$S.pay_amount" ],
		[ currency => "$S.pay_currency" ],
		[ attempt => 'integer' ],
		[ channel_ref => 'text' ],
		[ last_error => 'text' ],
		[ created_at => 'timestamptz' ],
		[ updated_at => 'timestamptz' ],
		[ processing_since => 'timestamptz' ],
		[ note => 'text' ],
		[ parent => 'text' ],
		[ refund_key => 'text' ],
		[ response => 'jsonb' ],
		[ kind => 'text', '1.4' ],
		[ expires_in => 'interval', '1.4' ],
		[ expires_at => 'timestamptz', '1.4' ],
	],
	pay_claim => [
		[ action => "$S.pay_action" ],
		[ attempt => 'integer' ],
		[ status => "$S.pay_status" ],
		[ channel_ref => 'text' ],
		[ response => 'jsonb' ],
	],
);

# pay_stats per partition: the columns of a 1.4 shard's view, in order
# (1.4 added the card flow's four), and how the proxy adds each up over
# the partitions that answered (sum, min, max; duplicate_answers and
# stats_reset only when every partition that answered has them, see the
# view).
my @stats_columns = (
	[ status => "$S.pay_status", 'group' ],
	[ payments => 'bigint', 'sum' ],
	[ stuck => 'bigint', 'sum' ],
	[ oldest_processing_since => 'timestamptz', 'min' ],
	[ resets => 'bigint', 'sum' ],
	[ duplicate_answers => 'bigint', 'sum of all' ],
	[ stats_reset => 'timestamptz', 'max of all' ],
	[ refunds => 'bigint', 'sum' ],
	[ second_charges => 'bigint', 'sum' ],
	[ unconfirmed_second_charges => 'bigint', 'sum' ],
	[ authorizations => 'bigint', 'sum' ],
	[ captures => 'bigint', 'sum' ],
	[ voids => 'bigint', 'sum' ],
	[ increments => 'bigint', 'sum' ],
);

# What the proxy asks every partition for, to add it up: the shards'
# monitoring views and pay_stats_holds, each with its columns (by name, in
# order) and what reads the partitions' rows on the proxy.
my @stats_sources = (
	{ name => 'pay_stats', from => "$S.pay_stats", columns => \@stats_columns },
	{
		name => 'pay_stats_amounts',
		from => "$S.pay_stats_amounts",
		columns => [ [ currency => 'text' ], [ authorized => 'numeric' ], [ captured => 'numeric' ] ],
	},
	{
		name => 'pay_stats_holds',
		from => "$S.pay_stats_holds()",
		columns => [ [ currency => 'text' ], [ closed_reason => 'text' ], [ holds => 'bigint' ], [ uncaptured => 'numeric' ] ],
		reader => 'pay_stats_holds()',
	},
);

# The routed calls.  route: 'parts' (prefix, biz_id, the first two
# arguments) or 'key' (the first argument, a payment key: a payment's
# bizNo, or an authorization's for the calls on its children).  args:
# [name, type, default of the API function].  result: a scalar type,
# 'void', [composite => type], [setof => type], [out => [name, type], ...]
# or [table => [name, type], ...] (RETURNS TABLE: no row, or several).  grant: app (pay_grant) and/or operator (pay_grant_operator), as a
# 1.4 shard grants the shard's function.  since: the version that added
# it; changed: the last version whose arguments or result differ from the
# version before (the upgrade to it drops the call of types_before and
# creates it, and grants it again to the roles that had it).
my @routed = (
	{
		name => 'pay_bizno',
		route => 'parts',
		args => [ [ prefix => 'text' ], [ biz_id => 'text' ] ],
		result => 'text',
		# everyone's on a shard: the operator's too since 1.4
		grant => [qw(app operator)],
		comment => 'A new bizNo, issued by the partition of (prefix, biz_id) with its shard\'\'s node id',
	},
	{
		name => 'pay_open',
		route => 'parts',
		args => [ [ prefix => 'text' ], [ biz_id => 'text' ], [ amount => 'numeric' ], [ currency => 'text', 'NULL' ] ],
		result => 'text',
		grant => [qw(app)],
		comment => 'The bizNo of business action (prefix, biz_id): the recorded one, or a new one recorded as INIT '
		  . '(amount and currency required), on its partition',
	},
	{
		name => 'pay_open_claim',
		route => 'parts',
		args => [ [ prefix => 'text' ], [ biz_id => 'text' ], [ amount => 'numeric' ], [ currency => 'text', 'NULL' ] ],
		result => [
			out => [ bizno => 'text' ],
			[ action => "$S.pay_action" ],
			[ attempt => 'integer' ],
			[ status => "$S.pay_status" ],
			[ channel_ref => 'text' ],
			[ response => 'jsonb' ]
		],
		grant => [qw(app)],
		comment => 'pay_open and pay_claim in one call, on the partition of (prefix, biz_id)',
	},
	{
		name => 'pay_begin',
		route => 'key',
		args => [ [ bizno => 'text' ], [ amount => 'numeric', 'NULL' ], [ currency => 'text', 'NULL' ] ],
		result => "$S.pay_action",
		grant => [qw(app)],
		comment => 'Decide a charge, on the payment\'\'s partition: PROCEED (now PROCESSING), ALREADY_SUCCEEDED, '
		  . 'IN_PROGRESS (never charge again) or NEEDS_RESET',
	},
	{
		name => 'pay_claim',
		route => 'key',
		args => [ [ bizno => 'text' ], [ amount => 'numeric', 'NULL' ], [ currency => 'text', 'NULL' ] ],
		result => [ composite => 'pay_claim' ],
		grant => [qw(app)],
		comment => 'pay_begin\'\'s decision and, in the same round trip, the attempt (the fencing token), status, '
		  . 'channel_ref and stored response, on the payment\'\'s partition',
	},
	{
		name => 'pay_succeed',
		route => 'key',
		args => [
			[ bizno => 'text' ],
			[ channel_ref => 'text', 'NULL' ],
			[ attempt => 'bigint', 'NULL' ],
			[ response => 'jsonb', 'NULL' ]
		],
		result => "$S.pay_settlement",
		changed => '1.4',
		types_before => 'text, text, integer, jsonb',
		grant => [qw(app operator)],
		comment => 'PROCESSING -> SUCCESS under the attempt pay_claim returned, with the bank\'\'s reference (both '
		  . 'required), on the payment\'\'s partition; on SUCCESS a no-op, or SECOND_CHARGE when it brings another reference',
	},
	{
		name => 'pay_fail',
		route => 'key',
		args => [ [ bizno => 'text' ], [ reason => 'text', 'NULL' ], [ attempt => 'bigint', 'NULL' ] ],
		result => "$S.pay_status",
		changed => '1.4',
		types_before => 'text, text, integer',
		grant => [qw(app operator)],
		comment => 'PROCESSING -> FAILED under the attempt pay_claim returned (required), on the payment\'\'s '
		  . 'partition; a no-op on FAILED',
	},
	{
		name => 'pay_reset',
		route => 'key',
		args => [ [ bizno => 'text' ], [ note => 'text' ] ],
		result => "$S.pay_status",
		grant => [qw(operator)],
		comment => 'FAILED -> INIT on the payment\'\'s partition, with a note saying why; a no-op on INIT',
	},
	{
		name => 'pay_transition',
		route => 'key',
		args => [ [ bizno => 'text' ], [ target => "$S.pay_status" ], [ note => 'text', 'NULL' ] ],
		result => "$S.pay_status",
		grant => [qw(operator)],
		comment => 'The generic guarded transition of a payment to target, on its partition',
	},
	{
		name => 'pay_get',
		route => 'key',
		args => [ [ bizno => 'text' ] ],
		result => [ setof => 'pay_ledger' ],
		label => 'STABLE ROWS 1',
		grant => [qw(app operator)],
		comment => 'The ledger row of a bizNo, from its partition; no row when unknown',
	},
	{
		name => 'pay_find',
		route => 'parts',
		args => [ [ prefix => 'text' ], [ biz_id => 'text' ] ],
		result => [ setof => 'pay_ledger' ],
		label => 'STABLE ROWS 1',
		since => '1.3',
		grant => [qw(app operator)],
		comment => 'The ledger row of business action (prefix, biz_id), from its partition; no row when it has '
		  . 'none. Creates nothing',
	},
	{
		name => 'pay_refund_open',
		route => 'key',
		args => [ [ bizno => 'text' ], [ refund_key => 'text' ], [ amount => 'numeric' ], [ reason => 'text', 'NULL' ] ],
		result => 'text',
		grant => [qw(app operator)],
		comment => 'The bizNo of refund refund_key of SUCCESS payment bizno, opened on the payment\'\'s partition; '
		  . 'the refund\'\'s bizNo routes there too',
	},
	{
		name => 'pay_refund_balance',
		route => 'key',
		args => [ [ bizno => 'text' ] ],
		result => [
			out => [ captured => 'numeric' ],
			[ refunded => 'numeric' ],
			[ in_flight => 'numeric' ],
			[ refundable => 'numeric' ]
		],
		label => 'STABLE',
		grant => [qw(app operator)],
		comment => 'What the bank captured for a payment (its success and every second charge a statement '
		  . 'confirmed) and what its refunds took of it, from its partition',
	},
	{
		name => 'pay_confirm_second_charge',
		route => 'key',
		args => [ [ bizno => 'text' ], [ channel_ref => 'text' ] ],
		result => 'void',
		since => '1.3',
		grant => [qw(operator)],
		comment => 'A bank statement shows another charge of SUCCESS payment bizno under channel_ref: journaled '
		  . 'once as confirmed on its partition, from then on counted as captured and refundable',
	},
	# The card flow: an authorization is opened on the partition of its
	# (prefix, biz_id); its captures, voids and increments are ledger rows
	# of their own, issued for the authorization's (prefix, biz_id) as a
	# refund is for its payment's, so that they and every call on their
	# bizNos go where the authorization is.
	{
		name => 'pay_open_authorization',
		route => 'parts',
		args => [
			[ prefix => 'text' ],
			[ biz_id => 'text' ],
			[ amount => 'numeric' ],
			[ currency => 'text' ],
			[ expires_in => 'interval', "'7 days'" ]
		],
		result => 'text',
		since => '1.4',
		grant => [qw(app)],
		comment => 'The bizNo of the authorization of business action (prefix, biz_id), on its partition: found '
		  . 'again, or recorded as INIT; its SUCCESS places the hold, which expires expires_in after it',
	},
	{
		name => 'pay_capture_open',
		route => 'key',
		args => [ [ auth_bizno => 'text' ], [ capture_key => 'text' ], [ amount => 'numeric' ], [ final => 'boolean', 'true' ] ],
		result => 'text',
		since => '1.4',
		grant => [qw(app)],
		comment => 'The bizNo of capture capture_key of a held authorization, opened on the authorization\'\'s '
		  . 'partition, where its bizNo routes too; a final capture closes the authorization once claimed',
	},
	{
		name => 'pay_void_open',
		route => 'key',
		args => [ [ auth_bizno => 'text' ], [ void_key => 'text' ] ],
		result => 'text',
		since => '1.4',
		grant => [qw(app)],
		comment => 'The bizNo of void void_key of a held authorization (releases what is not captured), opened on '
		  . 'the authorization\'\'s partition, where its bizNo routes too',
	},
	{
		name => 'pay_increment_open',
		route => 'key',
		args => [ [ auth_bizno => 'text' ], [ increment_key => 'text' ], [ amount => 'numeric' ] ],
		result => 'text',
		since => '1.4',
		grant => [qw(app)],
		comment => 'The bizNo of increment increment_key of a held authorization before any capture, opened on '
		  . 'the authorization\'\'s partition, where its bizNo routes too',
	},
	{
		name => 'pay_authorization_balance',
		route => 'key',
		args => [ [ auth_bizno => 'text' ] ],
		result => [
			table => [ authorized => 'numeric' ],
			[ captured => 'numeric' ],
			[ capture_in_flight => 'numeric' ],
			[ refunded => 'numeric' ],
			[ refund_in_flight => 'numeric' ],
			[ capturable => 'numeric' ],
			[ refundable => 'numeric' ],
			[ closed_reason => 'text' ],
			[ expires_at => 'timestamptz' ]
		],
		label => 'STABLE ROWS 1',
		since => '1.4',
		grant => [qw(app operator)],
		comment => 'An authorization\'\'s hold, what its captures captured and hold, what its refunds returned '
		  . 'and hold, what may still be captured and refunded, why it is closed (NULL while open) and when '
		  . 'the hold expires, from its partition',
	},
);

# The calls on every partition, and pay_stuck: their functions, as
# pay_grant and pay_grant_operator grant them.
my %fan_out_grants = (
	operator => [
		'pay_reconcile_on_partitions(integer[], jsonb[], boolean, timestamptz)',
		'pay_reconcile(regclass, boolean, timestamptz)',
		(map { ("$_->{name}_on_all_partitions()", "$_->{name}_on_partition(integer)", "$_->{name}_of_partitions()") }
		  @stats_sources),
		'pay_stats_holds()',
		'pay_stats_reset_on_all_partitions()',
		'pay_stats_reset()',
		'pay_verify_on_all_partitions()',
		'pay_verify()',
		'pay_stuck(interval, integer)',
	],
	app => [ 'pay_stuck(interval, integer)', 'pay_bizno_valid(text)', 'pay_bizno_parse(text)' ],
);

############################################################################
# The pieces of a routed call.

sub arg_types { return join ', ', map { $_->[1] } @{ $_[0]{args} }; }

sub out_params
{
	my ($call) = @_;
	my $result = $call->{result};
	return () unless ref $result && $result->[0] eq 'out';
	my (undef, @params) = @$result;
	return @params;
}

# The parameter list: IN arguments (with their defaults for the API), then
# OUT parameters.
sub params
{
	my ($call, $with_defaults) = @_;
	my @in = map {
		"$_->[0] $_->[1]" . ($with_defaults && defined $_->[2] ? " DEFAULT $_->[2]" : '')
	} @{ $call->{args} };
	my @out = map { "OUT $_->[0] $_->[1]" } out_params($call);
	return (@in, @out);
}

# "CREATE FUNCTION name(params)", wrapped as the scripts wrap long lines.
sub head
{
	my ($create, $name, @params) = @_;
	my $line = "$create FUNCTION $S.$name(" . join(', ', @params) . ')';
	return $line if length($line) <= 110;
	my $open = "$create FUNCTION $S.$name(";
	my @in = grep { !/^OUT / } @params;
	my @out = grep { /^OUT / } @params;
	if (@out)
	{
		my $text = $open . join(', ', @in) . ",\n";
		return $text . '    ' . join(', ', @out) . ')' if length('    ' . join(', ', @out)) <= 110;
		my ($line, @lines) = ('    ');
		for my $param (@out)
		{
			if (length("$line$param, ") > 110)
			{
				push @lines, $line;
				$line = '    ';
			}
			$line .= "$param, ";
		}
		push @lines, $line;
		s/ $// for @lines;
		$lines[-1] =~ s/,$/)/;
		return $text . join("\n", @lines);
	}
	my $indent = ' ' x length($open);
	my ($first, @rest) = @in;
	my $text = $open . $first;
	my $current = $text;
	for my $param (@rest)
	{
		if (length("$current, $param") > 110)
		{
			$text .= ",\n$indent$param";
			$current = "$indent$param";
		}
		else
		{
			$text .= ", $param";
			$current .= ", $param";
		}
	}
	return "$text)";
}

sub returns
{
	my ($call) = @_;
	my $result = $call->{result};
	return $result unless ref $result;
	return 'record' if $result->[0] eq 'out';
	if ($result->[0] eq 'table')
	{
		my (undef, @columns) = @$result;
		return 'TABLE (' . column_list('               ', @columns) . ')';
	}
	return "$S.$result->[1]" if $result->[0] eq 'composite';
	return "SETOF $S.$result->[1]";
}

# The columns a partition answers with, by name.
sub result_columns
{
	my ($call) = @_;
	my $result = $call->{result};
	return () unless ref $result;
	return map { $_->[0] } out_params($call) if $result->[0] eq 'out';
	if ($result->[0] eq 'table')
	{
		my (undef, @columns) = @$result;
		return map { $_->[0] } @columns;
	}
	return map { $_->[0] } @{ $columns{ $result->[1] } };
}

# The arguments a call is routed by.
sub route_keys { return $_[0]{route} eq 'parts' ? 'prefix, biz_id' : $_[0]{args}[0][0]; }

sub route_of { return "$S.pay_route(" . route_keys($_[0]) . ')'; }

sub where_it_runs
{
	return $_[0]{route} eq 'parts' ? 'on the partition of (prefix, biz_id)' : 'on the partition of its key';
}

# The PL/Proxy function.  It turns idempotent_pay.report_constraint on in
# the partition's session, then calls the API there; the call's first
# argument depends on set_config's result, so the setting always comes
# first.
sub on_partition
{
	my ($call, $create) = @_;
	my $name = $call->{name};
	my @args = map { $_->[0] } @{ $call->{args} };
	$args[0] = "CASE WHEN s.v IS NOT NULL THEN $args[0] END";
	my @columns = result_columns($call);
	my $select = @columns ? join(', ', map { "r.$_" } @columns) : 'r.result';
	my $alias = @columns ? 'r' : 'r(result)';
	my $from = "LATERAL $S.$name(" . join(', ', @args) . ") AS $alias";
	if (length("         $from;") > 110)
	{
		my $first = shift @args;
		$from = "LATERAL $S.$name($first,\n" . (' ' x length("         LATERAL $S.$name("))
		  . join(', ', @args) . ") AS $alias";
	}
	my $select_line = "    SELECT $select";
	if (length($select_line) > 110)
	{
		my ($line, @lines) = ('    SELECT ');
		for my $column (map { "r.$_" } @columns)
		{
			if (length("$line$column, ") > 110)
			{
				push @lines, $line;
				$line = '           ';
			}
			$line .= "$column, ";
		}
		push @lines, $line;
		s/ $// for @lines;
		$lines[-1] =~ s/,$//;
		$select_line = join "\n", @lines;
	}
	return head($create, "${name}_on_partition", params($call, 0)) . "\n"
	  . 'RETURNS ' . returns($call) . "\n"
	  . "AS \$\$\n"
	  . "    CLUSTER 'idempotent_pay';\n"
	  . '    RUN ON ' . route_of($call) . ";\n"
	  . "$select_line\n"
	  . "    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),\n"
	  . "         $from;\n"
	  . "\$\$\n"
	  . "LANGUAGE plproxy;\n\n"
	  . "COMMENT ON FUNCTION $S.${name}_on_partition(" . arg_types($call) . ") IS\n"
	  . "'PL/Proxy: runs $name " . where_it_runs($call) . ", its constraint names reported; called by $name';\n";
}

# The EXCEPTION block of an API function: the error, its context and the
# keys the call was routed by, to pay_proxy_raise.
sub handler
{
	my ($keys, $indent) = @_;
	$indent //= '';
	my $raise = "PERFORM $S.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context"
	  . ($keys ? ",\n$indent" . (' ' x length("    PERFORM $S.pay_proxy_raise(")) . $keys : '') . ');';
	return join '', map { "$indent$_\n" } (
		'EXCEPTION WHEN OTHERS THEN',
		'    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,',
		'                            error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,',
		'                            error_context = PG_EXCEPTION_CONTEXT;',
		"    $raise");
}

my $error_variables = join '', map { "    error_$_ text;\n" } qw(state message detail hint context);

# The API function.
sub api
{
	my ($call, $create) = @_;
	my $name = $call->{name};
	my $args = join ', ', map { $_->[0] } @{ $call->{args} };
	my $target = "$S.${name}_on_partition($args)";
	my $result = $call->{result};
	my $body;
	if (!ref $result)
	{
		$body = $result eq 'void' ? "PERFORM $target;" : "RETURN $target;";
	}
	elsif ($result->[0] eq 'composite')
	{
		$body = "RETURN $target;";
	}
	elsif ($result->[0] eq 'setof' || $result->[0] eq 'table')
	{
		$body = "RETURN QUERY SELECT * FROM $target;";
	}
	else
	{
		$body = 'SELECT * INTO ' . join(', ', result_columns($call)) . "\n    FROM $target;";
	}
	my $label = $call->{label} // 'VOLATILE';
	return head($create, $name, params($call, 1)) . "\n"
	  . 'RETURNS ' . returns($call) . "\n"
	  . "AS \$\$\n"
	  . "DECLARE\n"
	  . $error_variables
	  . "BEGIN\n"
	  . "    $body\n"
	  . handler(route_keys($call))
	  . "END\n"
	  . "\$\$\n"
	  . "LANGUAGE plpgsql $label SET search_path = $S, pg_temp\n"
	  . "    SET client_min_messages = warning;\n\n"
	  . "COMMENT ON FUNCTION $S.$name(" . arg_types($call) . ") IS\n"
	  . "'$call->{comment}';\n";
}

sub routed_call
{
	my ($call, $create) = @_;
	return on_partition($call, $create) . "\n" . api($call, $create);
}

sub signatures
{
	my ($call) = @_;
	my $types = arg_types($call);
	return ("$call->{name}_on_partition($types)", "$call->{name}($types)");
}

# The functions a role is granted (app, operator), in the order of @routed.
sub granted
{
	my ($role) = @_;
	my @functions;
	for my $call (@routed)
	{
		push @functions, signatures($call) if grep { $_ eq $role } @{ $call->{grant} };
	}
	return (@functions, batch_grants($role), @{ $fan_out_grants{$role} });
}

sub quoted_list
{
	my ($indent, @items) = @_;
	return join ",\n", map { "$indent'$S.$_'" } @items;
}

############################################################################
# Pieces written once.

my $types_and_domains = <<'SQL';
-- Types, identical to the shards': PL/Proxy asks a partition for each
-- result column by name, read as the proxy's type of that name.

CREATE TYPE @extschema@.pay_status AS ENUM ('INIT', 'PROCESSING', 'SUCCESS', 'FAILED');

COMMENT ON TYPE @extschema@.pay_status IS
'The state of a payment: INIT -> PROCESSING -> SUCCESS | FAILED, FAILED -> INIT by reset';

CREATE TYPE @extschema@.pay_action AS ENUM ('PROCEED', 'ALREADY_SUCCEEDED', 'IN_PROGRESS', 'NEEDS_RESET');

COMMENT ON TYPE @extschema@.pay_action IS
'What pay_begin tells the caller: charge now, answer the earlier success, wait or ask the bank, or reset first';

SQL

my $settlement = <<'SQL';
CREATE TYPE @extschema@.pay_settlement AS ENUM ('SUCCESS', 'SECOND_CHARGE');

COMMENT ON TYPE @extschema@.pay_settlement IS
'What pay_succeed answers: SUCCESS, or SECOND_CHARGE when the bank reported another charge of a payment that had succeeded (refund it)';
SQL

my $domains = <<'SQL';
CREATE FUNCTION @extschema@.pay_amount_valid(amount numeric)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_amount_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_amount_valid(numeric) IS
'Whether a number is a payment amount: finite and greater than 0 (not NaN, not Infinity)';

CREATE FUNCTION @extschema@.pay_currency_valid(currency text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_currency_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_currency_valid(text) IS
'Whether a text is an ISO 4217 currency code: three upper-case letters';

CREATE DOMAIN @extschema@.pay_amount AS numeric
    CONSTRAINT pay_amount_check CHECK (@extschema@.pay_amount_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_amount IS
'A payment amount: finite and greater than 0';

CREATE DOMAIN @extschema@.pay_currency AS text
    CONSTRAINT pay_currency_check CHECK (@extschema@.pay_currency_valid(VALUE));

COMMENT ON DOMAIN @extschema@.pay_currency IS
'An ISO 4217 currency code: three upper-case letters';
SQL

sub composite_type
{
	my ($type, $comment) = @_;
	my @columns = @{ $columns{$type} };
	my $width = 0;
	for (@columns) { $width = length $_->[0] if length $_->[0] > $width; }
	$width += 4;
	return "CREATE TYPE $S.$type AS (\n"
	  . join(",\n", map { sprintf "    %-*s%s", $width, $_->[0], $_->[1] } @columns)
	  . "\n);\n\n"
	  . "COMMENT ON TYPE $S.$type IS\n'$comment';\n";
}

my $ledger_comment = 'A payment\'\'s ledger row on its partition, as pay_get and pay_find return it';
my $composites =
	"-- A shard's pay_ledger row, as pay_get and pay_find return it.\n"
  . composite_type('pay_ledger', $ledger_comment)
  . "\n"
  . composite_type('pay_claim',
	'What pay_claim answers: the decision, the attempt to charge under or in flight, the status, and a success\'\'s reference and response'
  );

my $routing = <<'SQL';
-- Routing (src/route.c): the route is a fixed hash, doc/scale-out.md writes it
-- down; PL/Proxy runs a call on partition route & (partitions - 1).

CREATE FUNCTION @extschema@.pay_route(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_route_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_route(text) IS
'The route of a payment key: FNV-1a + fmix32 of a generated bizNo''s PREFIX-BIZID (of BIZID for prefix REFUND), or of another key''s first 64 characters; a key the shards would refuse is refused (22P02)';

CREATE FUNCTION @extschema@.pay_route(prefix text, biz_id text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_route_parts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_route(text, text) IS
'The route of business action (prefix, biz_id), that of every bizNo issued for it: FNV-1a + fmix32 of PREFIX-BIZID (of BIZID for prefix REFUND); bad prefix or biz_id 22023';

CREATE FUNCTION @extschema@.pay_partition_count()
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_count'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition_count() IS
'How many partitions the PL/Proxy cluster idempotent_pay has (its server''s options p0 ... p<N-1>)';

CREATE FUNCTION @extschema@.pay_partition(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_key'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition(text) IS
'The partition that holds the payment of a key: pay_route(bizno) mapped as PL/Proxy maps it';

CREATE FUNCTION @extschema@.pay_partition(prefix text, biz_id text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_partition_parts'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partition(text, text) IS
'The partition that holds the payments of business action (prefix, biz_id)';

SQL

# Changed in 1.3: written by both scripts.
sub statement_partition
{
	my ($create) = @_;
	return <<"SQL";
$create FUNCTION $S.pay_statement_partition(bizno text)
RETURNS integer
AS 'MODULE_PATHNAME', 'pay_statement_partition_1_3'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION $S.pay_statement_partition(text) IS
'The partition a bank statement row is reconciled on: that of its bizNo, or of the bizNo of its reference bizNo/attempt; 0 for one no payment can have';
SQL
}

my $proxy_raise = <<'SQL';
CREATE FUNCTION @extschema@.pay_proxy_raise(sqlstate text, message text, detail text, hint text,
                                            context text DEFAULT NULL, key text DEFAULT NULL,
                                            biz_id text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pay_proxy_raise_1_3'
LANGUAGE C VOLATILE;

COMMENT ON FUNCTION @extschema@.pay_proxy_raise(text, text, text, text, text, text, text) IS
'Raise an error of a routed call as its caller should see it: the shard''s own, with the constraint name its context carries, or 08001/08006 naming the partition that could not be reached';
SQL

my $pure = <<'SQL';
-- Pure functions of their arguments: answered here, by the shards' own C.

CREATE FUNCTION @extschema@.pay_bizno_valid(bizno text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_bizno_valid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_valid(text) IS
'Whether a text is a well-formed bizNo whose check character is right; never raises';

CREATE FUNCTION @extschema@.pay_bizno_parse(bizno text,
    OUT prefix text, OUT biz_id text, OUT issued_at timestamptz, OUT node_id integer)
RETURNS record
AS 'MODULE_PATHNAME', 'pay_bizno_parse'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_bizno_parse(text) IS
'Splits a bizNo into prefix, biz_id, issue time and node id; 22P02 when malformed';

CREATE FUNCTION @extschema@.pay_allowed(from_status @extschema@.pay_status, to_status @extschema@.pay_status)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pay_allowed'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_allowed(@extschema@.pay_status, @extschema@.pay_status) IS
'Whether from -> to is a legal transition (a NULL from is a new row); the same state again is a no-op, not a transition';

CREATE VIEW @extschema@.pay_transitions AS
    SELECT f.from_status, t.to_status
    FROM (SELECT NULL::@extschema@.pay_status AS from_status
          UNION ALL
          SELECT s FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS s) AS f
    CROSS JOIN pg_catalog.unnest(pg_catalog.enum_range(NULL::@extschema@.pay_status)) AS t(to_status)
    WHERE @extschema@.pay_allowed(f.from_status, t.to_status)
    ORDER BY f.from_status NULLS FIRST, t.to_status;

COMMENT ON VIEW @extschema@.pay_transitions IS
'The legal edges of the payment state machine; from_status NULL is a new row';

SQL

my $currencies = <<'SQL';
CREATE FUNCTION @extschema@.pay_currency_list(OUT code text, OUT minor_units integer, OUT name text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pay_currency_list'
LANGUAGE C STABLE STRICT PARALLEL SAFE ROWS 170;

COMMENT ON FUNCTION @extschema@.pay_currency_list() IS
'ISO 4217''s active currency codes with their minor units and names, as the shards'' library knows them; read through pay_currencies';

CREATE VIEW @extschema@.pay_currencies AS
    SELECT c.code, c.minor_units, c.name FROM @extschema@.pay_currency_list() AS c;

COMMENT ON VIEW @extschema@.pay_currencies IS
'The currencies a payment may be in: ISO 4217''s active codes, with the decimals an amount in each may have';

GRANT SELECT ON @extschema@.pay_currencies TO PUBLIC;
SQL

my $routed_intro = <<'SQL';
-- Calls on one business action are routed by (prefix, biz_id), calls on
-- one payment by its key.  pay_bizno goes to the partition too, so that
-- the bizNo carries the node id of the shard that will hold the payment.
-- Each <name>_on_partition sets idempotent_pay.report_constraint in the
-- partition's session before it calls <name> there (set_config's result
-- is in the first argument, so it runs first): the partition then writes
-- an error's constraint name into its context (src/proxied.c), which
-- PL/Proxy passes on, and pay_proxy_raise raises the error with it.
SQL

# The calls on every partition.
sub fan_out
{
	my ($create) = @_;
	my $handler = handler('');
	my $text = <<"SQL";
-- Calls about every payment: run on every partition at once (PL/Proxy
-- sends them in parallel) and answered as one node would.  A partition
-- that cannot be reached fails the whole call (08001 or 08006 naming its
-- database): a partial answer would look like a complete one.  Only
-- pay_stats answers without it, and says so in every row (below).
-- pay_verify, pay_stats and pay_stats_reset refuse nothing a constraint
-- names (a role without the grant gets 42501 from the partition);
-- pay_reconcile_rows, which settles, reports its constraint names as the
-- routed calls do.

$create FUNCTION $S.pay_verify_on_all_partitions()
RETURNS TABLE (bizno text, problem text)
AS \$\$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    TARGET $S.pay_verify;
\$\$
LANGUAGE plproxy;

COMMENT ON FUNCTION $S.pay_verify_on_all_partitions() IS
'PL/Proxy: runs pay_verify on every partition; called by pay_verify';

$create FUNCTION $S.pay_verify()
RETURNS TABLE (bizno text, problem text)
AS \$\$
DECLARE
${error_variables}BEGIN
    RETURN QUERY SELECT * FROM $S.pay_verify_on_all_partitions();
${handler}END
\$\$
LANGUAGE plpgsql STABLE SET search_path = $S, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION $S.pay_verify() IS
'Every violation of the ledger/journal invariants on every partition, second charges no statement confirmed among them; no rows when all hold';

SQL
	$text .= <<"SQL" if $create eq 'CREATE';
${\ stats_functions()}
SQL
	$text .= <<"SQL";
$create FUNCTION $S.pay_stats_reset_on_all_partitions()
RETURNS SETOF boolean
AS \$\$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
    SELECT true AS reset FROM $S.pay_stats_reset();
\$\$
LANGUAGE plproxy;

COMMENT ON FUNCTION $S.pay_stats_reset_on_all_partitions() IS
'PL/Proxy: runs pay_stats_reset on every partition; called by pay_stats_reset';

$create FUNCTION $S.pay_stats_reset()
RETURNS void
AS \$\$
DECLARE
${error_variables}BEGIN
    PERFORM $S.pay_stats_reset_on_all_partitions();
${handler}END
\$\$
LANGUAGE plpgsql VOLATILE SET search_path = $S, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION $S.pay_stats_reset() IS
'Start the counters of pay_stats again from zero on every partition';

-- Reconciliation: the statement is a relation of the proxy database, which
-- no partition can read.  Its rows are sent, each to the partition of its
-- bizNo (of the bizNo its reference bizNo/attempt names), as one JSON
-- array per partition (an empty one where none belongs, so that every
-- partition reports its own MISSING_IN_BANK payments), and each partition
-- reconciles its share with pay_reconcile_rows, settling its own payments
-- with settle => true.
$create FUNCTION $S.pay_reconcile_on_partitions(partitions integer[], shares jsonb[], settle boolean,
                                                        since timestamptz)
RETURNS TABLE (kind text, bizno text, ledger_status $S.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS \$\$
    CLUSTER 'idempotent_pay';
    SPLIT partitions, shares;
    RUN ON partitions;
    SELECT r.kind, r.bizno, r.ledger_status, r.ledger_amount, r.bank_amount, r.bank_rows, r.detail
    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),
         LATERAL $S.pay_reconcile_rows(CASE WHEN s.v IS NOT NULL THEN (shares)[1] END, settle, since) AS r;
\$\$
LANGUAGE plproxy;

COMMENT ON FUNCTION $S.pay_reconcile_on_partitions(integer[], jsonb[], boolean, timestamptz) IS
'PL/Proxy: runs pay_reconcile_rows on every partition named in partitions, with its share of the statement, its constraint names reported; called by pay_reconcile';

$create FUNCTION $S.pay_reconcile(statement regclass, settle boolean DEFAULT false,
                                          since timestamptz DEFAULT NULL)
RETURNS TABLE (kind text, bizno text, ledger_status $S.pay_status, ledger_amount numeric,
               bank_amount numeric, bank_rows integer, detail text)
AS \$\$
DECLARE
    partitions integer[];
    shares jsonb[];
${error_variables}BEGIN
    IF statement IS NULL OR settle IS NULL THEN
        RAISE EXCEPTION 'statement and settle must not be null' USING ERRCODE = '22004';
    END IF;

    EXECUTE pg_catalog.format(\$query\$
        SELECT pg_catalog.array_agg(p.partition ORDER BY p.partition),
               pg_catalog.array_agg(COALESCE(r.share, '[]') ORDER BY p.partition)
        FROM pg_catalog.generate_series(0, $S.pay_partition_count() OPERATOR(pg_catalog.-) 1) AS p(partition)
        LEFT JOIN (SELECT $S.pay_statement_partition(s.bizno::pg_catalog.text) AS partition,
                          pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                              'bizno', s.bizno, 'amount', s.amount, 'currency', s.currency,
                              'status', s.status, 'channel_ref', s.channel_ref)) AS share
                   FROM %s AS s
                   GROUP BY 1) AS r ON r.partition OPERATOR(pg_catalog.=) p.partition
    \$query\$, statement) INTO partitions, shares;

    BEGIN
        RETURN QUERY
            SELECT r.kind, r.bizno, r.ledger_status, r.ledger_amount, r.bank_amount, r.bank_rows, r.detail
            FROM $S.pay_reconcile_on_partitions(partitions, shares, settle, since) AS r
            ORDER BY r.kind, r.bizno;
${\ handler('', '    ')}    END;
END
\$\$
LANGUAGE plpgsql VOLATILE SET search_path = $S, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION $S.pay_reconcile(regclass, boolean, timestamptz) IS
'Compare every partition''s ledger with a bank statement of the proxy database (bizno or bizno/attempt, amount, currency, status, channel_ref), each row on its bizNo''s partition; settle => true settles there and confirms second charges';
SQL
	return $text;
}

# $open followed by "OUT name type, ..." of a source's columns (and @more)
# and ")", wrapped as the scripts wrap long lines.
sub stats_params
{
	my ($source, $open, @more) = @_;
	my @params = ((map { "OUT $_->[0] $_->[1]" } @{ $source->{columns} }), @more);
	my ($line, @lines) = ($open);
	for my $param (@params)
	{
		if (length("$line$param,") > 110)
		{
			push @lines, $line;
			$line = '    ';
		}
		$line .= "$param, ";
	}
	push @lines, $line;
	s/ $// for @lines;
	$lines[-1] =~ s/,$/)/;
	return join "\n", @lines;
}

# The SELECT a partition runs: its view or function, every column by name.
sub stats_select
{
	my ($source) = @_;
	my ($line, @lines) = ('    SELECT ');
	for my $column (map { "s.$_->[0]" } @{ $source->{columns} })
	{
		if (length("$line$column,") > 110)
		{
			push @lines, $line;
			$line = '           ';
		}
		$line .= "$column, ";
	}
	push @lines, $line;
	s/ $// for @lines;
	$lines[-1] =~ s/,$//;
	return join("\n", @lines) . "\n    FROM $source->{from} AS s;";
}

# How the view adds a column up.
sub stats_aggregate
{
	my ($name, $type, $how) = @{ $_[0] };
	return "s.$name" if $how eq 'group';
	return "pg_catalog.sum(p.$name)::bigint AS $name" if $how eq 'sum';
	return "pg_catalog.$how(p.$name) AS $name" if $how eq 'min' || $how eq 'max';
	my $aggregate = $how eq 'sum of all' ? "pg_catalog.sum(p.$name)::bigint" : "pg_catalog.max(p.$name)";
	return "CASE WHEN pg_catalog.count(p.$name) OPERATOR(pg_catalog.=) pg_catalog.count(p.status)\n"
	  . "               THEN $aggregate\n"
	  . "           END AS $name";
}

# The three functions that ask every partition for one of the shards'
# monitoring views or functions: <name>_on_all_partitions and
# <name>_on_partition, PL/Proxy's, and <name>_of_partitions, which answers
# with the rows of the partitions that answered and names the others.
sub stats_fan_out
{
	my ($source) = @_;
	my $name = $source->{name};
	my $intro = $name eq 'pay_stats' ? <<'SQL' : "-- Every partition's $name rows, and one row for each\n-- partition that did not answer, as pay_stats_of_partitions.\n";
-- Every partition's pay_stats rows, and one row for each partition that
-- did not answer: its name (the server option of its connection string,
-- p<N>) in unanswered_partition, every other column NULL.  First every
-- partition at once, in parallel, as every day.  When that fails with a
-- connection error (08: pay_proxy_raise tells PL/Proxy's unreachable
-- partition and broken connection apart from a shard's own errors), each
-- partition is asked again on its own, in order: one that fails with a
-- connection error again is named, any other error (a role without the
-- grant on the shard: 42501) is raised as the shard raised it.  A
-- PL/Proxy call reads its partitions' whole answer before it returns a
-- row, so a failed call has returned none.
SQL
	chomp $intro;
	return stats_params($source, "CREATE FUNCTION $S.${name}_on_all_partitions(") . "\n" . <<"SQL"
RETURNS SETOF record
AS \$\$
    CLUSTER 'idempotent_pay';
    RUN ON ALL;
${\ stats_select($source)}
\$\$
LANGUAGE plproxy;

COMMENT ON FUNCTION $S.${name}_on_all_partitions() IS
'PL/Proxy: runs $name on every partition at once; called by ${name}_of_partitions';

SQL
	  . stats_params($source, "CREATE FUNCTION $S.${name}_on_partition(partition_number integer, ") . "\n" . <<"SQL"
RETURNS SETOF record
AS \$\$
    CLUSTER 'idempotent_pay';
    RUN ON partition_number;
${\ stats_select($source)}
\$\$
LANGUAGE plproxy;

COMMENT ON FUNCTION $S.${name}_on_partition(integer) IS
'PL/Proxy: runs $name on partition partition_number (0 to pay_partition_count() - 1); called by ${name}_of_partitions';

$intro
SQL
	  . stats_params($source, "CREATE FUNCTION $S.${name}_of_partitions(", 'OUT unanswered_partition text') . "\n" . <<"SQL"
RETURNS SETOF record
AS \$\$
DECLARE
    partition_option record;
${error_variables}BEGIN
    BEGIN
        RETURN QUERY SELECT s.*, NULL::pg_catalog.text FROM $S.${name}_on_all_partitions() AS s;
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                error_context = PG_EXCEPTION_CONTEXT;
    END;
    BEGIN
        PERFORM $S.pay_proxy_raise(error_state, error_message, error_detail, error_hint, error_context);
    EXCEPTION WHEN connection_exception THEN
        NULL;
    END;

    FOR partition_option IN
        SELECT o.option_name AS name,
               pg_catalog.substring(o.option_name, '[0-9]+\$')::pg_catalog.int4 AS number
        FROM pg_catalog.pg_foreign_server AS f,
             pg_catalog.pg_options_to_table(f.srvoptions) AS o
        WHERE f.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'
          AND o.option_name OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+\$'
        ORDER BY 2
    LOOP
        BEGIN
            RETURN QUERY SELECT s.*, NULL::pg_catalog.text
                         FROM $S.${name}_on_partition(partition_option.number) AS s;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM $S.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN connection_exception THEN
                -- (nothing assigns the other OUT parameters: they are NULL)
                unanswered_partition := partition_option.name;
                RETURN NEXT;
            END;
        END;
    END LOOP;
END
\$\$
LANGUAGE plpgsql STABLE SET search_path = $S, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION $S.${name}_of_partitions() IS
'Every partition''s $name rows, and a row naming each partition that did not answer; added up by ${\ ($source->{reader} // "the view $name")}';
SQL
}

# unanswered_partitions of the rows p of a source: the partitions that did
# not answer, in partition order; {} when every partition answered.
my $unanswered = "SELECT COALESCE(pg_catalog.array_agg(u.unanswered_partition ORDER BY u.ordinality), '{}')\n"
  . "            FROM p AS u\n"
  . "            WHERE u.unanswered_partition IS NOT NULL";

# The readers of the proxy, over the partitions that answered: pay_stats
# (rewritten in 1.3: the shards' columns changed, and a partition that
# does not answer no longer fails it), and since 1.4 pay_stats_amounts and
# pay_stats_holds.  The upgrade to 1.4 drops pay_stats and its functions,
# whose columns grew, and creates them all again.
sub stats_functions
{
	my $view_columns = join ",\n           ", map { stats_aggregate($_) } @stats_columns;
	return stats_fan_out($stats_sources[0]) . "\n" . <<"SQL"
-- One row per status, always (all counts NULL when no partition
-- answered).  Counts add up over the partitions that answered; the oldest
-- PROCESSING is the oldest of all; duplicate answers are known only when
-- every partition that answered counts them (each preloads the library);
-- stats_reset is the latest reset, since which every one of them has
-- counted.  unanswered_partitions, the same on every row: the partitions
-- whose rows are missing from the counts, in partition order; empty when
-- every partition answered.
CREATE VIEW $S.pay_stats AS
    WITH p AS (SELECT * FROM $S.pay_stats_of_partitions() WITH ORDINALITY AS p)
    SELECT $view_columns,
           ($unanswered) AS unanswered_partitions
    FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::$S.pay_status)) AS s(status)
    LEFT JOIN p ON p.status OPERATOR(pg_catalog.=) s.status
    GROUP BY s.status
    ORDER BY s.status;

COMMENT ON VIEW $S.pay_stats IS
'pay_stats of the partitions that answered, added up: per status payments (refunds included), stuck ones, the oldest PROCESSING, resets, duplicate answers, refunds, second charges and those no statement confirmed, and the card flow''s authorizations, captures, voids and increments; unanswered_partitions names the partitions that did not answer (empty when all did)';

SQL
	  . stats_fan_out($stats_sources[1]) . "\n" . <<"SQL"
-- Per currency, the amounts of the partitions that answered, added up;
-- unanswered_partitions as in pay_stats, on every row.  A currency is a
-- row where a partition that answered has it, so that when none has any
-- and a partition did not answer, one row says so, every other column
-- NULL.
CREATE VIEW $S.pay_stats_amounts AS
    WITH p AS (SELECT * FROM $S.pay_stats_amounts_of_partitions() WITH ORDINALITY AS p)
    SELECT a.currency, a.authorized, a.captured, u.unanswered_partitions
    FROM ($unanswered) AS u(unanswered_partitions)
    LEFT JOIN (SELECT p.currency, pg_catalog.sum(p.authorized) AS authorized, pg_catalog.sum(p.captured) AS captured
               FROM p
               WHERE p.unanswered_partition IS NULL
               GROUP BY p.currency) AS a ON true
    WHERE a.currency IS NOT NULL OR pg_catalog.cardinality(u.unanswered_partitions) OPERATOR(pg_catalog.>) 0
    ORDER BY a.currency;

COMMENT ON VIEW $S.pay_stats_amounts IS
'pay_stats_amounts of the partitions that answered, added up per currency: authorized and captured ever; unanswered_partitions names the partitions that did not answer (empty when all did; a row of its own when no other row comes)';

SQL
	  . stats_fan_out($stats_sources[2]) . "\n" . <<"SQL"
-- Per currency and closed_reason, the holds of the partitions that
-- answered, added up (an authorization and its steps are on one
-- partition: each hold is counted once); unanswered_partitions as in
-- pay_stats_amounts.
CREATE FUNCTION $S.pay_stats_holds(OUT currency text, OUT closed_reason text, OUT holds bigint,
    OUT uncaptured numeric, OUT unanswered_partitions text[])
RETURNS SETOF record
AS \$\$
    WITH p AS (SELECT * FROM $S.pay_stats_holds_of_partitions() WITH ORDINALITY AS p)
    SELECT h.currency, h.closed_reason, h.holds, h.uncaptured, u.unanswered_partitions
    FROM ($unanswered) AS u(unanswered_partitions)
    LEFT JOIN (SELECT p.currency, p.closed_reason, pg_catalog.sum(p.holds)::bigint AS holds,
                      pg_catalog.sum(p.uncaptured) AS uncaptured
               FROM p
               WHERE p.unanswered_partition IS NULL
               GROUP BY p.currency, p.closed_reason) AS h ON true
    WHERE h.currency IS NOT NULL OR pg_catalog.cardinality(u.unanswered_partitions) OPERATOR(pg_catalog.>) 0
    ORDER BY 1, 2 NULLS FIRST
\$\$
LANGUAGE sql STABLE SET search_path = $S, pg_temp;

COMMENT ON FUNCTION $S.pay_stats_holds() IS
'pay_stats_holds of the partitions that answered, added up per currency and closed_reason (NULL: open): how many holds, and what is neither captured nor in flight; unanswered_partitions names the partitions that did not answer (empty when all did; a row of its own when no other row comes)';
SQL
}

# pay_partitions: the partitions of a batch's inputs (1.4).
my $partitions_of_arrays = <<'SQL';
CREATE FUNCTION @extschema@.pay_partitions(biznos text[])
RETURNS integer[]
AS 'MODULE_PATHNAME', 'pay_partitions_keys'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partitions(text[]) IS
'The partition of each payment key, as pay_partition(bizno) names it; NULL for a key no payment can have (pay_route says why)';

CREATE FUNCTION @extschema@.pay_partitions(prefix text, biz_ids text[])
RETURNS integer[]
AS 'MODULE_PATHNAME', 'pay_partitions_parts'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.pay_partitions(text, text[]) IS
'The partition of each business action (prefix, biz_id), as pay_partition(prefix, biz_id) names it; NULL for one the shards refuse (pay_route says why)';
SQL

# The batches (1.4).  Each is three functions: <name>_on_partition, the
# PL/Proxy function that sends one partition its part; <name>_of_partitions,
# which splits the batch, sends each part and answers every input with its
# number in the batch; and <name>, the API, which answers in input order.
my %batch = (
	pay_open_claim_many => {
		args => [ [ prefix => 'text' ], [ biz_ids => 'text[]' ], [ amounts => 'numeric[]' ], [ currency => 'text' ] ],
		# the inputs: an array per input column (and the name of an element),
		# split by partition
		arrays => [ [ biz_ids => 'biz_id' ], [ amounts => 'amount' ] ],
		grant => [qw(app)],
		scalars => [qw(prefix currency)],
		# the partitions of the inputs, and an input the router refuses
		partitions => "$S.pay_partitions(prefix, biz_ids)",
		refusal => "$S.pay_route(prefix, part.biz_ids[i])",
		# what a partition answers for each input: the first column names it
		columns => [
			[ biz_id => 'text' ],
			[ bizno => 'text' ],
			[ action => "$S.pay_action" ],
			[ attempt => 'integer' ],
			[ sqlstate => 'text' ],
			[ constraint_name => 'text' ]
		],
		comment => 'pay_open_claim for each (biz_id, amount) in input order, each on its partition: per input its '
		  . 'bizNo, action and attempt, or the SQLSTATE and constraint name of the refusal pay_open_claim would '
		  . 'raise, or 08001 / 08006 when its partition could not be reached',
	},
	pay_settle_many => {
		args => [
			[ biznos => 'text[]' ],
			[ attempts => 'bigint[]' ],
			[ outcomes => "$S.pay_status[]" ],
			[ channel_refs => 'text[]' ],
			[ reasons => 'text[]' ]
		],
		arrays => [
			[ biznos => 'bizno' ],
			[ attempts => 'attempt' ],
			[ outcomes => 'outcome' ],
			[ channel_refs => 'channel_ref' ],
			[ reasons => 'reason' ]
		],
		grant => [qw(app)],
		scalars => [],
		partitions => "$S.pay_partitions(biznos)",
		refusal => "$S.pay_route(part.biznos[i])",
		columns => [ [ bizno => 'text' ], [ result => 'text' ], [ sqlstate => 'text' ], [ constraint_name => 'text' ] ],
		comment => 'pay_succeed (outcome SUCCESS, with its channel_ref) or pay_fail (outcome FAILED, with its reason) '
		  . 'for each input in input order, each on its partition: per input SUCCESS, SECOND_CHARGE or FAILED, or '
		  . 'the SQLSTATE and constraint name of the refusal that call would raise, or 08001 / 08006 when its '
		  . 'partition could not be reached',
	},
);
my @batches = qw(pay_open_claim_many pay_settle_many);

# "name type, ..." of a batch's columns, wrapped at $indent.
sub column_list
{
	my ($indent, @columns) = @_;
	my ($line, @lines) = ('');
	for my $column (map { "$_->[0] $_->[1]" } @columns)
	{
		if ($line ne '' && length("$indent$line$column, ") > 110)
		{
			push @lines, $line;
			$line = '';
		}
		$line .= "$column, ";
	}
	push @lines, $line;
	s/, $/,/ for @lines;
	$lines[-1] =~ s/,$//;
	return join "\n$indent", @lines;
}

# $start followed by @items joined by ", ", wrapped at 110 characters onto
# lines that begin with $indent.
sub wrapped
{
	my ($start, $indent, @items) = @_;
	my ($line, @lines) = ($start);
	for my $item (@items)
	{
		if ($line ne $start && $line ne $indent && length("$line$item,") > 110)
		{
			$line =~ s/ $//;
			push @lines, $line;
			$line = $indent;
		}
		$line .= "$item, ";
	}
	$line =~ s/, $//;
	return join "\n", @lines, $line;
}

# The three functions of a batch.
sub batch_functions
{
	my ($name) = @_;
	my $batch = $batch{$name};
	my @args = map { $_->[0] } @{ $batch->{args} };
	my @arrays = map { $_->[0] } @{ $batch->{arrays} };
	my @elements = map { $_->[1] } @{ $batch->{arrays} };
	my @columns = @{ $batch->{columns} };
	my @column_names = map { $_->[0] } @columns;
	my $key = $arrays[0];
	my $types = join ', ', map { $_->[1] } @{ $batch->{args} };
	my @params = map { "$_->[0] $_->[1]" } @{ $batch->{args} };

	# the PL/Proxy function
	my @remote_args = @args;
	$remote_args[0] = "CASE WHEN s.v IS NOT NULL THEN $remote_args[0] END";
	my $call = "LATERAL $S.$name(" . join(', ', @remote_args) . ') AS r;';
	my $call_indent = ' ' x length("         LATERAL $S.$name(");
	if (length("         $call") > 110)
	{
		my ($first, @rest) = @remote_args;
		my ($line, @lines) = ("$first, ");
		for my $arg (@rest)
		{
			if (length("$call_indent$line$arg, ") > 110)
			{
				push @lines, $line;
				$line = '';
			}
			$line .= "$arg, ";
		}
		push @lines, $line;
		s/ $// for @lines;
		$lines[-1] =~ s/,$/) AS r;/;
		$call = "LATERAL $S.$name(" . join("\n$call_indent", @lines);
	}
	my $on_partition = head('CREATE', "${name}_on_partition", 'partition_number integer', @params) . "\n"
	  . 'RETURNS TABLE (' . column_list('               ', @columns) . ")\n"
	  . "AS \$\$\n"
	  . "    CLUSTER 'idempotent_pay';\n"
	  . "    RUN ON partition_number;\n"
	  . '    SELECT ' . join(', ', map { "r.$_" } @column_names) . "\n"
	  . "    FROM pg_catalog.set_config('idempotent_pay.report_constraint', 'on', false) AS s(v),\n"
	  . "         $call\n"
	  . "\$\$\n"
	  . "LANGUAGE plproxy;\n\n"
	  . "COMMENT ON FUNCTION $S.${name}_on_partition(integer, $types) IS\n"
	  . "'PL/Proxy: runs $name on partition partition_number with the part of a batch that routes there, its "
	  . "constraint names reported; called by ${name}_of_partitions';\n";

	# the split, each part on its partition, every input answered; first
	# the whole call's refusals, argument by argument as the shards check
	# them (src/api_batch.c), then the arrays' lengths against the first's
	my $checks = '';
	for my $arg (@args)
	{
		if (grep { $_ eq $arg } @arrays)
		{
			$checks .= <<"SQL";
    IF $arg IS NULL THEN
        PERFORM $S.pay_proxy_raise('22004', '$arg must not be null', NULL,
            'Pass an array, empty for no inputs.');
    ELSIF pg_catalog.array_ndims($arg) OPERATOR(pg_catalog.>) 1 THEN
        PERFORM $S.pay_proxy_raise('22023',
            pg_catalog.format('$arg must have one dimension, not %s', pg_catalog.array_ndims($arg)),
            NULL, 'Pass one element per input.');
    END IF;
SQL
		}
		else
		{
			$checks .= <<"SQL";
    IF $arg IS NULL THEN
        PERFORM $S.pay_proxy_raise('22004', '$arg must not be null', NULL,
            'Pass a value for $arg: it applies to every input of the batch.');
    END IF;
SQL
		}
	}
	for my $array (@arrays[ 1 .. $#arrays ])
	{
		$checks .= <<"SQL";
    IF pg_catalog.cardinality($array) OPERATOR(pg_catalog.<>) pg_catalog.cardinality($key) THEN
        PERFORM $S.pay_proxy_raise('22023', '$key and $array differ in length',
            pg_catalog.format('The arrays of a batch hold one element per input, in the same order: '
                              '$key has %s, $array %s.',
                              pg_catalog.cardinality($key), pg_catalog.cardinality($array)),
            'Pass arrays of equal lengths.');
    END IF;
SQL
	}
	my $aggregates = join ",\n",
	  map { "               pg_catalog.array_agg(u.$elements[$_] ORDER BY u.input_number) AS $arrays[$_]" } 0 .. $#arrays;
	my @part_args = map { my $a = $_; (grep { $_ eq $a } @arrays) ? "part.$a" : $a } @args;
	# an input answered by an error: its key, no answer, the SQLSTATE and
	# constraint name
	my @no_answer = map { "NULL::$_->[1]" } @columns[ 1 .. $#columns - 2 ];
	my $refused = wrapped('                RETURN QUERY SELECT ', '                                    ',
		'part.input_numbers[i]::integer', "part.${key}[i]", @no_answer, 'error_state',
		"NULLIF(error_constraint, '')") . ';';
	my $failed = wrapped('            RETURN QUERY SELECT ', '                                ',
		'u.input_number::integer', 'u.key', @no_answer, 'error_state', "NULLIF(error_constraint, '')");
	my $answered = wrapped('                SELECT ', '                       ',
		'part.input_numbers[r.input_number]::integer', map { "r.$_" } @column_names);
	my $sent = wrapped("                FROM $S.${name}_on_partition(", '                         ',
		'part.partition_number', @part_args) . ')';
	my $of_partitions = head('CREATE', "${name}_of_partitions", @params) . "\n"
	  . 'RETURNS TABLE (' . column_list('               ', [ input_number => 'integer' ], @columns) . ")\n"
	  . <<"SQL";
AS \$\$
DECLARE
    part record;
    i integer;
${error_variables}    error_constraint text;
BEGIN
${checks}
    FOR part IN
        SELECT u.partition_number,
               pg_catalog.array_agg(u.input_number ORDER BY u.input_number) AS input_numbers,
$aggregates
        FROM ROWS FROM (${\ join(",\n                        ", map { "pg_catalog.unnest($_)" } @arrays, $batch->{partitions})})
             WITH ORDINALITY AS u(${\ join(', ', @elements)}, partition_number, input_number)
        GROUP BY u.partition_number
    LOOP
        IF part.partition_number IS NULL THEN
            -- inputs the router refuses, each with the shards' own error
            FOR i IN 1 .. pg_catalog.cardinality(part.input_numbers) LOOP
                error_state := NULL;
                error_constraint := NULL;
                BEGIN
                    PERFORM $batch->{refusal};
                EXCEPTION WHEN OTHERS THEN
                    GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE,
                                            error_constraint = CONSTRAINT_NAME;
                END;
$refused
            END LOOP;
            CONTINUE;
        END IF;
        BEGIN
            RETURN QUERY
$answered
$sent
                     WITH ORDINALITY AS r(${\ join(', ', @column_names)}, input_number);
        EXCEPTION WHEN OTHERS THEN
            -- the part failed as a whole: each of its inputs answers the error
            GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT,
                                    error_detail = PG_EXCEPTION_DETAIL, error_hint = PG_EXCEPTION_HINT,
                                    error_context = PG_EXCEPTION_CONTEXT;
            BEGIN
                PERFORM $S.pay_proxy_raise(error_state, error_message, error_detail, error_hint,
                                                    error_context);
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS error_state = RETURNED_SQLSTATE, error_constraint = CONSTRAINT_NAME;
            END;
$failed
                         FROM ROWS FROM (pg_catalog.unnest(part.input_numbers),
                                         pg_catalog.unnest(part.$key)) AS u(input_number, key);
        END;
    END LOOP;
END
\$\$
LANGUAGE plpgsql VOLATILE SET search_path = $S, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION $S.${name}_of_partitions($types) IS
'Splits a batch of $name by partition and runs each part on its partition, one after the other: every input answered, with its number in the batch; called by $name';
SQL

	my $api = head('CREATE', $name, map { "$_->[0] $_->[1]" } @{ $batch->{args} }) . "\n"
	  . 'RETURNS TABLE (' . column_list('               ', @columns) . ")\n"
	  . "AS \$\$\n"
	  . '    SELECT ' . join(', ', map { "a.$_" } @column_names) . "\n"
	  . "    FROM $S.${name}_of_partitions(" . join(', ', @args) . ") AS a\n"
	  . "    ORDER BY a.input_number\n"
	  . "\$\$\n"
	  . "LANGUAGE sql VOLATILE SET search_path = $S, pg_temp;\n\n"
	  . "COMMENT ON FUNCTION $S.$name($types) IS\n'$batch->{comment}';\n";
	return "$on_partition\n$of_partitions\n$api";
}

# The batches' functions a role is granted.
sub batch_grants
{
	my ($role) = @_;
	return map { batch_signatures($_) } grep { grep { $_ eq $role } @{ $batch{$_}{grant} } } @batches;
}

sub batch_signatures
{
	my ($name) = @_;
	my $types = join ', ', map { $_->[1] } @{ $batch{$name}{args} };
	return ("${name}_on_partition(integer, $types)", "${name}_of_partitions($types)", "$name($types)");
}

my $batches_intro = <<'SQL';
-- Batches: pay_open_claim_many and pay_settle_many answer a thousand inputs
-- in one call, each in input order.  The proxy splits a batch by partition
-- and sends each partition its part, one part after the other, each a call
-- of its own there (<name>_on_partition), committed when it returns: the
-- claims of a part are durable before the caller sees them, as a single
-- claim's.  A part that fails as a whole does not fail the batch -- the
-- parts before it have committed, and their answers must reach the caller:
-- its inputs answer the part's error instead (action or result NULL), 08001
-- when the partition could not be reached (nothing was sent), 08006 when
-- the connection broke during the call (it may have run there: retry those
-- inputs, answered from the ledger), else the partition's own SQLSTATE
-- (42501 for a role it does not grant the batch).  PL/Proxy's SPLIT would
-- send the parts at once, but fails such a call as a whole, with the
-- answers of the partitions that did run it.  An input no payment can have
-- (a malformed key, prefix or biz_id) answers the shards' own refusal of
-- it, and no partition is asked; a call the shards refuse as a whole (a
-- NULL array or scalar argument, 22004; arrays of unequal lengths or of
-- more than one dimension, 22023) is refused before any partition is asked.
SQL

my $stuck = <<'SQL';
-- Work queues stay on each partition.

CREATE FUNCTION @extschema@.pay_stuck(older_than interval DEFAULT '1 minute', max_rows integer DEFAULT 100)
RETURNS SETOF @extschema@.pay_ledger
AS $$
BEGIN
    PERFORM @extschema@.pay_proxy_raise('0A000',
        'pay_stuck runs on each partition, not through the proxy',
        'It locks the rows it returns FOR UPDATE SKIP LOCKED until the reconciler''s transaction ends; '
        'PL/Proxy commits every call on a partition at once, so through the proxy the locks would be '
        'gone before the reconciler settles, and two reconcilers would take the same payments.',
        'Connect a reconciler to each partition''s database: BEGIN, pay_stuck, ask the bank, '
        'pay_succeed or pay_fail, COMMIT, all on that connection.');
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp
    SET client_min_messages = warning;

COMMENT ON FUNCTION @extschema@.pay_stuck(interval, integer) IS
'Refused through the proxy (0A000): run pay_stuck on each partition, whose row locks it needs';
SQL

my $grant_functions = <<'SQL';
-- Grant role functions and relations, and USAGE on the cluster's server.
CREATE FUNCTION @extschema@.pay_grant_functions(role regrole, functions regprocedure[],
                                                relations regclass[] DEFAULT '{}')
RETURNS void
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null' USING ERRCODE = '22004';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_foreign_server AS s
                   WHERE s.srvname OPERATOR(pg_catalog.=) 'idempotent_pay') THEN
        RAISE EXCEPTION 'the PL/Proxy cluster "idempotent_pay" is not defined' USING ERRCODE = '42704',
            HINT = 'Define it first: CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS (p0 ''...'', ...).';
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    EXECUTE pg_catalog.format('GRANT USAGE ON FOREIGN SERVER idempotent_pay TO %s', role);
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s',
        (SELECT pg_catalog.string_agg(f::pg_catalog.text, ', ') FROM pg_catalog.unnest(functions) AS f), role);
    IF pg_catalog.cardinality(relations) OPERATOR(pg_catalog.>) 0 THEN
        EXECUTE pg_catalog.format('GRANT SELECT ON %s TO %s',
            (SELECT pg_catalog.string_agg(r::pg_catalog.text, ', ') FROM pg_catalog.unnest(relations) AS r), role);
    END IF;
END
$$
LANGUAGE plpgsql VOLATILE SET search_path = @extschema@, pg_temp;

COMMENT ON FUNCTION @extschema@.pay_grant_functions(regrole, regprocedure[], regclass[]) IS
'Grant role EXECUTE on the functions, SELECT on the relations and USAGE on the schema and on the cluster''s server (pay_grant, pay_grant_operator)';

REVOKE ALL ON FUNCTION @extschema@.pay_grant_functions(regrole, regprocedure[], regclass[]) FROM PUBLIC;

SQL

# pay_grant and pay_grant_operator, from the grants of @routed.
sub grant_functions
{
	my ($create) = @_;
	my $app = quoted_list('        ', granted('app'));
	my $operator = quoted_list('        ', granted('operator'));
	return <<"SQL";
-- Least privilege, as on a 1.4 shard: an application pays, an operator
-- repairs (pay_reset, pay_transition) and reconciles.
$create FUNCTION $S.pay_grant(role regrole)
RETURNS void
AS \$\$
    SELECT $S.pay_grant_functions(role, ARRAY[
$app
    ]::pg_catalog.regprocedure[])
\$\$
LANGUAGE sql VOLATILE SET search_path = $S, pg_temp;

COMMENT ON FUNCTION $S.pay_grant(regrole) IS
'Give an application role what paying through the proxy needs and no more: open, claim, begin, succeed, fail, get, find, refund_open, refund_balance, open_claim_many, settle_many, open_authorization, capture_open, void_open, increment_open, authorization_balance, the bizNo functions, USAGE on the cluster''s server; grant it on every shard too';

$create FUNCTION $S.pay_grant_operator(role regrole)
RETURNS void
AS \$\$
    SELECT $S.pay_grant_functions(role, ARRAY[
$operator
    ]::pg_catalog.regprocedure[], ARRAY['$S.pay_stats', '$S.pay_stats_amounts']::pg_catalog.regclass[])
\$\$
LANGUAGE sql VOLATILE SET search_path = $S, pg_temp;

COMMENT ON FUNCTION $S.pay_grant_operator(regrole) IS
'Give a finance or operations role what repairing, reconciling, refunding and watching through the proxy need: pay_reset, pay_transition, pay_reconcile, pay_confirm_second_charge, pay_authorization_balance, pay_stats, pay_stats_amounts, pay_stats_holds, pay_verify; grant it on every shard too';
SQL
}

############################################################################
# The install script.

sub install_script
{
	my @revoked = ((map { signatures($_) } @routed), (map { batch_signatures($_) } @batches));
	push @revoked, @{ $fan_out_grants{operator} };
	my $revoked = join ",\n", map { "    $S.$_" } @revoked;
	return <<'SQL'
/* idempotent_pay_proxy 1.4: the idempotent_pay API on a PL/Proxy proxy database */

\echo Use "CREATE EXTENSION idempotent_pay_proxy" to load this file. \quit

-- Written by test/proxy_sql.pl from one definition per routed call: change
-- that and run it (test/tap/007_proxy.pl checks the two agree).
--
-- The proxy database holds no payment.  Every call is routed to one
-- partition of the PL/Proxy cluster "idempotent_pay" (the SQL/MED server of
-- that name, doc/scale-out.md shows how to define it), a database with
-- idempotent_pay 1.4 installed in a schema of the same name as this
-- extension's; calls about every payment (pay_stats, pay_verify,
-- pay_reconcile) run on every partition and are added up here, and a
-- batch (pay_open_claim_many, pay_settle_many) is split by partition.
--
-- Each routed call is two functions: <name>_on_partition, the PL/Proxy
-- function that sends the call, and <name>, the API, which calls it and
-- hands an error to pay_proxy_raise (src/route.c) so the caller sees the
-- shard's own error -- SQLSTATE, message, detail, hint and constraint
-- name -- or 08001 / 08006 naming the partition it could not reach,
-- instead of PL/Proxy's XX000 (pay_proxy_raise always raises).
--
-- The API functions run as the caller (not SECURITY DEFINER): PL/Proxy
-- connects to the partitions as the current user, whose grants on each
-- shard decide what it may do.  They run with client_min_messages =
-- warning: after a partition raised an error, or restarted, PL/Proxy drops
-- and remakes its connection with a NOTICE that says nothing to a caller
-- (the shards raise no NOTICE of their own; their WARNINGs pass).

SQL
	  . $types_and_domains
	  . $settlement . "\n"
	  . $domains . "\n"
	  . $composites . "\n"
	  . $routing
	  . $partitions_of_arrays . "\n"
	  . statement_partition('CREATE') . "\n"
	  . $proxy_raise . "\n"
	  . $pure
	  . $currencies . "\n"
	  . $routed_intro . "\n"
	  . join("\n", map { routed_call($_, 'CREATE') } @routed) . "\n"
	  . $batches_intro . "\n"
	  . join("\n", map { batch_functions($_) } @batches) . "\n"
	  . fan_out('CREATE') . "\n"
	  . $stuck . "\n"
	  . "-- Privileges: as on a shard, the API is revoked from PUBLIC; pay_grant and\n"
	  . "-- pay_grant_operator give a role what it needs here, and USAGE on the\n"
	  . "-- cluster's server, without which PL/Proxy does not connect for it.  Each\n"
	  . "-- shard grants the same role its own (pay_grant there): it decides.\n\n"
	  . "REVOKE ALL ON FUNCTION\n$revoked\nFROM PUBLIC;\n"
	  . "REVOKE ALL ON $S.pay_stats, $S.pay_stats_amounts FROM PUBLIC;\n\n"
	  . $grant_functions
	  . grant_functions('CREATE') . "\n"
	  . "REVOKE ALL ON FUNCTION $S.pay_grant(regrole), $S.pay_grant_operator(regrole) FROM PUBLIC;\n";
}

############################################################################
# The upgrade script.

sub upgrade_script
{
	my @changed = grep { ($_->{changed} // '') eq '1.4' } @routed;
	my @new = grep { ($_->{since} // '') eq '1.4' } @routed;
	# calls whose result has a column added in 1.4: their PL/Proxy
	# function asks the partition for it
	my @wider = grep {
		my $result = $_->{result};
		ref $result && $result->[0] ne 'out'
		  && grep { ($_->[2] // '') eq '1.4' } @{ $columns{ $result->[1] } }
	} grep { !$_->{since} || $_->{since} ne '1.4' } @routed;
	my @dropped = map {
		my $call = $_;
		map { "$call->{name}$_($call->{types_before})" } ('_on_partition', '')
	} @changed;
	# pay_stats' functions, whose columns grew: dropped with the view and
	# created again, their grantees noted as those of the routed calls
	my @stats_dropped = ('pay_stats_of_partitions()', 'pay_stats_on_partition(integer)', 'pay_stats_on_all_partitions()');
	my $noted = quoted_list('                                                  ', @dropped, @stats_dropped);
	my $dropped = join '', map { "DROP FUNCTION $S.$_;\n" } @dropped;
	my $stats_dropped = join '', map { "DROP FUNCTION $S.$_;\n" } @stats_dropped;
	my $new_columns = join ",\n", map { "    ADD ATTRIBUTE $_->[0] $_->[1]" } grep { ($_->[2] // '') eq '1.4' } @{ $columns{pay_ledger} };
	my $regranted = join "\n", (
		map {
			my $call = $_;
			map { "                   WHEN '$call->{name}$_' THEN '$S.$call->{name}$_(" . arg_types($call) . ")'" }
			  ('_on_partition', '')
		} @changed),
	  map { my ($name) = /^(\w+)/; "                   WHEN '$name' THEN '$S.$_'" } @stats_dropped;
	my @stats_revoked = (
		(map { ("$_->{name}_on_all_partitions()", "$_->{name}_on_partition(integer)", "$_->{name}_of_partitions()") }
		  @stats_sources),
		'pay_stats_holds()');
	my @revoked = ((map { signatures($_) } @changed, @new), (map { batch_signatures($_) } @batches), @stats_revoked);
	return <<'SQL'
/* idempotent_pay_proxy 1.3 -> 1.4: for shards running idempotent_pay 1.4; batches split by partition, the card flow */

\echo Use "ALTER EXTENSION idempotent_pay_proxy UPDATE TO '1.4'" to load this file. \quit

-- Written by test/proxy_sql.pl, with sql/idempotent_pay_proxy--1.4.sql,
-- from the same definitions (test/tap/007_proxy.pl compares proxies
-- updated from 1.2 and 1.3 with one created at 1.4).  The partitions are
-- updated to idempotent_pay 1.4 before the proxy: a 1.3 proxy pays through
-- 1.4 partitions, while this one calls what only 1.4 has (pay_succeed and
-- pay_fail with a bigint attempt, the batches, the card flow, the ledger's
-- new columns).

-- A ledger row has the card flow's columns.
SQL
	  . "ALTER TYPE $S.pay_ledger\n$new_columns;\n\n"
	  . "-- The partitions of a batch's inputs.\n"
	  . $partitions_of_arrays . "\n"
	  . "-- pay_succeed and pay_fail take the attempt as a bigint, as on a 1.4\n"
	  . "-- shard.  Another argument type makes them new functions: their grantees\n"
	  . "-- are noted and granted them again, PUBLIC and the grant option included.\n"
	  . "CREATE TEMPORARY TABLE pay_proxy_grantees ON COMMIT DROP AS\n"
	  . "    SELECT p.proname::pg_catalog.text AS function_name,\n"
	  . "           CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'\n"
	  . "                ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,\n"
	  . "           a.is_grantable\n"
	  . "    FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a\n"
	  . "    WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[\n$noted\n"
	  . "          ]::pg_catalog.regprocedure[])\n"
	  . "      AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'\n"
	  . "      AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;\n\n"
	  . $dropped . "\n"
	  . "-- pay_stats has the card flow's columns, before unanswered_partitions:\n"
	  . "-- the view and its functions are created again (below), its grantees\n"
	  . "-- noted here.\n"
	  . "CREATE TEMPORARY TABLE pay_proxy_view_grantees ON COMMIT DROP AS\n"
	  . "    SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'\n"
	  . "                ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,\n"
	  . "           a.privilege_type, a.is_grantable\n"
	  . "    FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a\n"
	  . "    WHERE c.oid OPERATOR(pg_catalog.=) '$S.pay_stats'::pg_catalog.regclass\n"
	  . "      AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;\n\n"
	  . "DROP VIEW $S.pay_stats;\n"
	  . $stats_dropped . "\n"
	  . join("\n", map { routed_call($_, 'CREATE') } @changed) . "\n"
	  . "-- pay_get and pay_find ask the partition for the new columns.\n"
	  . join("\n", map { routed_call($_, 'CREATE OR REPLACE') } @wider) . "\n"
	  . "-- The card flow.\n"
	  . join("\n", map { routed_call($_, 'CREATE') } @new) . "\n"
	  . $batches_intro . "\n"
	  . join("\n", map { batch_functions($_) } @batches) . "\n"
	  . "-- pay_stats with the card flow's columns, and the card flow's amounts\n"
	  . "-- and holds over the partitions.\n"
	  . stats_functions() . "\n"
	  . "REVOKE ALL ON FUNCTION\n"
	  . join(",\n", map { "    $S.$_" } @revoked)
	  . "\nFROM PUBLIC;\n"
	  . "REVOKE ALL ON $S.pay_stats, $S.pay_stats_amounts FROM PUBLIC;\n\n"
	  . <<"SQL"
DO \$\$
DECLARE
    noted record;
BEGIN
    FOR noted IN SELECT g.function_name, g.grantee, g.is_grantable FROM pg_temp.pay_proxy_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
                                  CASE noted.function_name
$regranted
                                  END, noted.grantee,
                                  CASE WHEN noted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    FOR noted IN SELECT g.grantee, g.privilege_type, g.is_grantable FROM pg_temp.pay_proxy_view_grantees AS g LOOP
        EXECUTE pg_catalog.format('GRANT %s ON $S.pay_stats TO %s%s', noted.privilege_type, noted.grantee,
                                  CASE WHEN noted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
\$\$;
DROP TABLE pg_temp.pay_proxy_grantees, pg_temp.pay_proxy_view_grantees;

SQL
	  . grant_functions('CREATE OR REPLACE') . "\n"
	  . <<"SQL"
-- The roles 1.3's pay_grant and pay_grant_operator granted get 1.4's: an
-- application's (it could claim) the batches and the card flow, an
-- operator's (it could reconcile) pay_authorization_balance.
DO \$\$
DECLARE
    grantee record;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::pg_catalog.regrole AS role,
               p.oid OPERATOR(pg_catalog.=) '$S.pay_reconcile(regclass, boolean, timestamptz)'::pg_catalog.regprocedure
                   AS operator
        FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                  '$S.pay_open_claim(text, text, numeric, text)',
                  '$S.pay_reconcile(regclass, boolean, timestamptz)']::pg_catalog.regprocedure[])
          AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
          AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
          AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        IF grantee.operator THEN
            PERFORM $S.pay_grant_operator(grantee.role);
        ELSE
            PERFORM $S.pay_grant(grantee.role);
        END IF;
    END LOOP;
END
\$\$;

-- Last: the initial privileges (pg_init_privs) back to what the complete
-- script records, the owner's and PUBLIC's alone.  PostgreSQL records the
-- whole ACL of every object an update script creates, replaces or grants
-- among its initial privileges -- the grants of the DBA's roles with it,
-- on the proxy's functions, its schema and the cluster's server -- and
-- pg_dump leaves those out of a dump: a restored proxy would refuse the
-- application what it was granted.  (This also mends what the update from
-- 1.2 to 1.3 recorded.)
DO \$\$
DECLARE
    entry record;
BEGIN
    FOR entry IN
        SELECT i.classoid, i.objoid, i.objsubid, i.initprivs,
               ARRAY(SELECT k.item
                     FROM pg_catalog.unnest(i.initprivs) WITH ORDINALITY AS k(item, n)
                     WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[k.item]) AS a
                                   WHERE a.grantee OPERATOR(pg_catalog.=) 0
                                      OR a.grantee OPERATOR(pg_catalog.=) a.grantor)
                     ORDER BY k.n) AS kept,
               (SELECT pg_catalog.acldefault('f', p.proowner) FROM pg_catalog.pg_proc AS p
                WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND p.oid OPERATOR(pg_catalog.=) i.objoid) AS function_default
        FROM pg_catalog.pg_init_privs AS i
        WHERE EXISTS (SELECT FROM pg_catalog.pg_depend AS d, pg_catalog.pg_extension AS e
                      WHERE d.classid OPERATOR(pg_catalog.=) i.classoid
                        AND d.objid OPERATOR(pg_catalog.=) i.objoid
                        AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                        AND d.deptype OPERATOR(pg_catalog.=) 'e'
                        AND e.extname OPERATOR(pg_catalog.=) 'idempotent_pay_proxy')
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) '$S'::pg_catalog.regnamespace)
           OR (i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass
               AND i.objoid OPERATOR(pg_catalog.=) (SELECT s.oid FROM pg_catalog.pg_foreign_server AS s
                                                    WHERE s.srvname OPERATOR(pg_catalog.=) 'idempotent_pay'))
    LOOP
        CONTINUE WHEN entry.kept OPERATOR(pg_catalog.=) entry.initprivs;
        -- a function's default privileges are what the complete script
        -- leaves where it grants and revokes nothing: no entry
        IF pg_catalog.cardinality(entry.kept) OPERATOR(pg_catalog.=) 0
           OR entry.kept OPERATOR(pg_catalog.=) entry.function_default THEN
            DELETE FROM pg_catalog.pg_init_privs AS i
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        ELSE
            UPDATE pg_catalog.pg_init_privs AS i SET initprivs = entry.kept
            WHERE i.classoid OPERATOR(pg_catalog.=) entry.classoid AND i.objoid OPERATOR(pg_catalog.=) entry.objoid
              AND i.objsubid OPERATOR(pg_catalog.=) entry.objsubid;
        END IF;
        DELETE FROM pg_catalog.pg_shdepend AS s
        WHERE s.dbid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                             WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
          AND s.classid OPERATOR(pg_catalog.=) entry.classoid AND s.objid OPERATOR(pg_catalog.=) entry.objoid
          AND s.objsubid OPERATOR(pg_catalog.=) entry.objsubid
          AND s.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
          AND s.deptype OPERATOR(pg_catalog.=) 'i'
          AND NOT s.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT a.grantee FROM pg_catalog.aclexplode(entry.kept) AS a
                                                               UNION ALL
                                                               SELECT a.grantor FROM pg_catalog.aclexplode(entry.kept) AS a));
    END LOOP;
END
\$\$;
SQL
}

############################################################################

my %scripts = (
	'idempotent_pay_proxy--1.4.sql' => \&install_script,
	'idempotent_pay_proxy--1.3--1.4.sql' => \&upgrade_script,
);

my $check = @ARGV && $ARGV[0] eq '--check' ? shift @ARGV : undef;
my $dir = shift @ARGV or die "usage: $0 [--check] DIR\n";
my $differ = 0;
for my $file (sort keys %scripts)
{
	my $text = $scripts{$file}->();
	my $path = "$dir/$file";
	if ($check)
	{
		open my $fh, '<', $path or die "cannot read $path: $!\n";
		local $/;
		my $have = <$fh>;
		close $fh;
		if ($have ne $text)
		{
			print "$path is not what test/proxy_sql.pl writes\n";
			$differ = 1;
		}
	}
	else
	{
		open my $fh, '>', $path or die "cannot write $path: $!\n";
		print $fh $text;
		close $fh;
	}
}
exit $differ;
