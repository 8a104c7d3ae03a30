# doc/reference.md against the code, with no server: every named refusal
# of src/reason.c on a row of the refusal table with its SQLSTATE, every
# constraint and unique index of the install script, every setting the
# library defines, every function the install script (or the chain of
# install and upgrade scripts) creates, every function of the proxy
# extension, and every SQLSTATE the code raises in the SQLSTATE table.
use strict;
use warnings;

use File::Basename;
use Test::More;

my $root = dirname(__FILE__) . '/../..';

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot read $path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

my $doc = slurp("$root/doc/reference.md");

# The section of the reference under "## <title>", up to the next "## ".
sub section
{
	my ($title) = @_;
	$doc =~ /^## \Q$title\E[^\n]*\n(.*?)(?=^## |\z)/ms
	  or die "doc/reference.md has no section \"$title\"";
	return $1;
}

# The rows of the Markdown table whose header matches $header, as lists of
# cells (a "\|" inside a cell is a pipe, not a border).
sub table_rows
{
	my ($header) = @_;
	my @lines = split /\n/, $doc;
	my $i = 0;
	$i++ while $i < @lines && $lines[$i] !~ $header;
	die "doc/reference.md has no table headed $header" if $i == @lines;
	my @rows;
	for ($i += 2; $i < @lines && $lines[$i] =~ /^\|/; $i++)
	{
		my $line = $lines[$i];
		$line =~ s/^\|//;
		$line =~ s/\|\s*$//;
		push @rows, [ map { s/^\s+|\s+$//gr } split /(?<!\\)\|/, $line ];
	}
	return @rows;
}

# SQLSTATEs by ERRCODE_ name, from the server's utils/errcodes.h.
my $pg_config = $ENV{PG_CONFIG} || 'pg_config';
chomp(my $includedir = `$pg_config --includedir-server` // '');
my %sqlstate;
if ($includedir ne '' && open(my $fh, '<', "$includedir/utils/errcodes.h"))
{
	while (<$fh>)
	{
		$sqlstate{$1} = join('', $2, $3, $4, $5, $6)
		  if /^#define (ERRCODE_\w+)\s+MAKE_SQLSTATE\('(.)',\s*'(.)',\s*'(.)',\s*'(.)',\s*'(.)'\)/;
	}
	close $fh;
}
cmp_ok(scalar(keys %sqlstate), '>', 200,
	"utils/errcodes.h of $pg_config maps ERRCODE_ names to SQLSTATEs");

my @c_files = sort glob("$root/src/*.c");
my %c_source = map { $_ => slurp($_) } @c_files;

# --- the refusal table -----------------------------------------------------

my %documented;    # constraint name => { SQLSTATE => 1 }
for my $row (table_rows(qr/^\|\s*constraint name\s*\|\s*SQLSTATE\s*\|/))
{
	my ($names, $state) = @$row;
	my ($code) = ($state // '') =~ /^`?([0-9A-Z]{5})`?$/;
	$documented{$_}{ $code // '?' } = 1 for ($names // '') =~ /`(pay_\w+)`/g;
}
cmp_ok(scalar(keys %documented), '>', 20, 'doc/reference.md has a refusal table');

# The named refusals of the C code: src/reason.c's table, or before it
# existed every name handed to PG_DIAG_CONSTRAINT_NAME.
my @reasons;    # [ name, SQLSTATE or undef ]
if (-e "$root/src/reason.c")
{
	my $reason_c = $c_source{"$root/src/reason.c"};
	while ($reason_c =~ /^\s*\[\w+\]\s*=\s*\{\s*"(pay_\w+)"\s*,\s*(ERRCODE_\w+)\s*,/mg)
	{
		my ($name, $errcode) = ($1, $2);
		ok(defined $sqlstate{$errcode}, "src/reason.c: $errcode of $name is a SQLSTATE");
		push @reasons, [ $name, $sqlstate{$errcode} ];
	}
	cmp_ok(scalar(@reasons), '>', 0, 'src/reason.c: its table of refusals parses');
}
else
{
	my %seen;
	for my $source (values %c_source)
	{
		# each statement that names a constraint, or hands one to a Raise...()
		for my $statement (split /;/, $source)
		{
			next unless $statement =~ /PG_DIAG_CONSTRAINT_NAME|\bRaise\w*\s*\(/;
			$seen{$1} = 1 while $statement =~ /"(pay_[a-z_]+)"/g;
		}
	}
	push @reasons, [ $_, undef ] for sort keys %seen;
	cmp_ok(scalar(@reasons), '>', 0, 'src/*.c: the constraint names of PG_DIAG_CONSTRAINT_NAME');
}

my %reason_name;
for my $reason (@reasons)
{
	my ($name, $code) = @$reason;
	$reason_name{$name} = 1;
	if (defined $code)
	{
		ok($documented{$name}{$code}, "refusal $name ($code) is in the refusal table with that SQLSTATE");
	}
	else
	{
		ok($documented{$name}, "refusal $name is in the refusal table");
	}
}

# --- the install script ----------------------------------------------------

sub control_version
{
	my ($extension) = @_;
	slurp("$root/$extension.control") =~ /^default_version\s*=\s*'([^']+)'/m
	  or die "$extension.control has no default_version";
	return $1;
}

# The scripts that make the default version: its full script, or a full
# script and the upgrades from it.
sub install_scripts
{
	my ($extension) = @_;
	my $version = control_version($extension);
	return ("$root/sql/$extension--$version.sql") if -e "$root/sql/$extension--$version.sql";
	my (%full, %upgrade);
	for my $file (glob("$root/sql/$extension--*.sql"))
	{
		my $base = basename($file, '.sql');
		if ($base =~ /^\Q$extension\E--([^-]+)--([^-]+)$/) { $upgrade{$1}{$2} = $file; }
		elsif ($base =~ /^\Q$extension\E--([^-]+)$/) { $full{$1} = $file; }
	}
	for my $start (sort keys %full)
	{
		my @queue = ([ $start, $full{$start} ]);
		my %visited = ($start => 1);
		while (my $path = shift @queue)
		{
			my ($at, @files) = @$path;
			return @files if $at eq $version;
			for my $next (sort keys %{ $upgrade{$at} || {} })
			{
				next if $visited{$next}++;
				push @queue, [ $next, @files, $upgrade{$at}{$next} ];
			}
		}
	}
	die "no script or chain of scripts installs $extension $version";
}

sub script_text
{
	my @scripts = @_;
	# full-line comments say things, they do not create them
	return join "\n", map { slurp($_) =~ s/^\s*--[^\n]*$//mgr } @scripts;
}

my @scripts = install_scripts('idempotent_pay');
my $script = script_text(@scripts);
note 'install scripts: ' . join(', ', map { basename($_) } @scripts);

# Constraints and unique indexes, in the order the scripts make and drop
# them; and the primary keys PostgreSQL names <table>_pkey.
my %constraint;
while ($script =~
	/\b(?:(DROP|VALIDATE)\s+)?CONSTRAINT\s+(?:=\s*')?(pay_\w+)|\bCREATE\s+UNIQUE\s+INDEX\s+(pay_\w+)|\bDROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(?:\@extschema\@\.)?(pay_\w+)|\bCREATE\s+TABLE\s+(?:\@extschema\@\.)?(pay_\w+)\s*\(((?:[^()]++|\((?-1)\))*)\)/gi
  )
{
	my ($verb, $name, $index, $dropped_index, $table, $columns) = ($1, $2, $3, $4, $5, $6);
	if (defined $name)
	{
		if (!defined $verb) { $constraint{$name} = 1; }
		elsif (uc $verb eq 'DROP') { delete $constraint{$name}; }
	}
	elsif (defined $index) { $constraint{$index} = 1; }
	elsif (defined $dropped_index) { delete $constraint{$dropped_index}; }
	elsif (defined $table)
	{
		$constraint{"${table}_pkey"} = 1 if $columns =~ /\bPRIMARY\s+KEY\b/i;
		# the constraints a table's definition names
		$constraint{$1} = 1 while $columns =~ /\bCONSTRAINT\s+(pay_\w+)/gi;
	}
}
cmp_ok(scalar(keys %constraint), '>', 0, 'the install script names constraints');
ok($documented{$_}, "constraint $_ of the install script is in the refusal table")
  for sort keys %constraint;

# No row of the refusal table names what the code does not have.
for my $name (sort keys %documented)
{
	ok($reason_name{$name} || $constraint{$name}, "refusal table: $name is a refusal of the code");
}

# --- functions ---------------------------------------------------------------

sub created_functions
{
	my ($text) = @_;
	my %function;
	while ($text =~
		/\b(CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION|DROP\s+FUNCTION(?:\s+IF\s+EXISTS)?)\s+(?:\@extschema\@\.)?(\w+)\s*\(/gi)
	{
		my ($verb, $name) = ($1, $2);
		if ($verb =~ /^CREATE/i) { $function{$name} = 1; }
		else { delete $function{$name}; }
	}
	return sort keys %function;
}

my $functions_section = section('Functions');
my %function_row = map { $_ => 1 } $functions_section =~ /^\|\s*`(\w+)\(/mg;
my @functions = created_functions($script);
cmp_ok(scalar(@functions), '>', 30, 'the install script creates ' . scalar(@functions) . ' functions');
ok($function_row{$_}, "function $_ has a row in the reference's Functions section") for @functions;

my %function = map { $_ => 1 } @functions;
for my $name (sort keys %function_row)
{
	ok($function{$name}, "Functions section: $name is a function of the install script");
}

my @proxy_scripts = install_scripts('idempotent_pay_proxy');
my @proxy_functions = created_functions(script_text(@proxy_scripts));
my $proxy_section = section('The proxy extension');
cmp_ok(scalar(@proxy_functions), '>', 30, 'the proxy script creates ' . scalar(@proxy_functions) . ' functions');
ok($proxy_section =~ /`\Q$_\E[`(]/, "proxy function $_ is in the reference's proxy section")
  for @proxy_functions;

# --- settings ----------------------------------------------------------------

my %setting_row = map { ($_->[0] // '') =~ /`(idempotent_pay\.\w+)`/ ? ($1 => 1) : () }
  table_rows(qr/^\|\s*setting\s*\|\s*default\s*\|\s*context\s*\|/);
my @settings;
for my $file (@c_files)
{
	push @settings, $c_source{$file} =~ /DefineCustom\w+Variable\(\s*"(idempotent_pay\.\w+)"/g;
}
cmp_ok(scalar(@settings), '>', 0, 'the library defines settings');
ok($setting_row{$_}, "setting $_ is in the settings table") for sort @settings;
my %setting = map { $_ => 1 } @settings;
ok($setting{$_}, "settings table: $_ is defined by the library") for sort keys %setting_row;

# --- SQLSTATEs ---------------------------------------------------------------

my %sqlstate_row = map { ($_->[0] // '') =~ /^`([0-9A-Z]{5})`$/ ? ($1 => 1) : () }
  table_rows(qr/^\|\s*SQLSTATE\s*\|\s*condition\s*\|/);
my %raised;
for my $source (values %c_source)
{
	for my $errcode ($source =~ /\berrcode\(\s*(ERRCODE_\w+)\s*\)/g,
		$source =~ /\{\s*"pay_\w+"\s*,\s*(ERRCODE_\w+)\s*,/g,
		$source =~ /\bRaise\w*\([^;]*?\b(ERRCODE_\w+)/g)
	{
		$raised{ $sqlstate{$errcode} // $errcode } = 1;
	}
}
for my $text ($script, script_text(@proxy_scripts))
{
	$raised{$1} = 1 while $text =~ /\bERRCODE\s*=\s*'([0-9A-Z]{5})'/g;
	$raised{$1} = 1 while $text =~ /\bpay_proxy_raise\(\s*'([0-9A-Z]{5})'/g;
}
cmp_ok(scalar(keys %raised), '>', 10, 'the code raises SQLSTATEs');
ok($sqlstate_row{$_}, "SQLSTATE $_ the code raises is in the SQLSTATE table") for sort keys %raised;
for my $reason (grep { defined $_->[1] } @reasons)
{
	ok($sqlstate_row{ $reason->[1] }, "SQLSTATE $reason->[1] of $reason->[0] is in the SQLSTATE table");
}

done_testing();
