#!/usr/bin/perl
# test/bench/figures.pl — README's "What it costs" table, from the figures of
# the last full `test/run bench`.
#
#   figures.pl ROOT [RESULTS]        print the table the last run gives (or
#                                    the results file RESULTS)
#   figures.pl --record ROOT RESULTS record a run: RESULTS is what bench.sh
#                                    printed, its first line the run's
#                                    "Run: ..." line (test/run bench writes
#                                    it); it becomes BENCHMARKS.md's last run
#                                    (the previous one stays below, as
#                                    history), then as --write
#   figures.pl --write ROOT          write the table into BENCHMARKS.md and
#                                    README.md, between "<!-- figures: begin -->"
#                                    and "<!-- figures: end -->"
#   figures.pl --check ROOT          exit 1 unless both files hold the table
#                                    the last run gives (test/tap/017_figures.pl)
#
# The last run is the block of BENCHMARKS.md between "<!-- last run: begin -->"
# and "<!-- last run: end -->": bench.sh's tables as it printed them.  The
# table is never edited by hand: a run rewrites it.
use strict;
use warnings;

my $mode = $ARGV[0] =~ /^--/ ? shift @ARGV : '--print';
my $root = shift @ARGV or die "usage: figures.pl [--record|--write|--check] ROOT [RESULTS]\n";

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot read $path: $!\n";
	local $/;
	return <$fh>;
}

sub spit
{
	my ($path, $text) = @_;
	open(my $fh, '>', "$path.new") or die "cannot write $path.new: $!\n";
	print $fh $text;
	close $fh or die "cannot write $path.new: $!\n";
	rename("$path.new", $path) or die "cannot replace $path: $!\n";
}

my $benchmarks = slurp("$root/BENCHMARKS.md");

if ($mode eq '--record')
{
	my $results = slurp(shift @ARGV // die "--record needs the results file\n");
	$results =~ /\ARun: (.*?)\n/ or die "the results file does not start with its Run: line\n";
	my $title = $1;
	$title =~ s/;.*//;
	# the previous last run stays, as history
	$benchmarks =~ s/<!-- last run: (?:begin|end) -->\n//g;
	my $section = "## Last full run ($title)\n\n<!-- last run: begin -->\n$results<!-- last run: end -->\n\n";
	$benchmarks =~ s/^(## (?:Last full run|Results|Row|Rows) )/$section$1/m
	  or die "BENCHMARKS.md has no results section to put the new run before\n";
	$mode = '--write';
}

$benchmarks =~ /<!-- last run: begin -->\n(.*?)<!-- last run: end -->/s
  or die "BENCHMARKS.md has no last run (<!-- last run: begin --> ... <!-- last run: end -->)\n";
my $run = $1;
$run = slurp($ARGV[0]) if $mode eq '--print' && @ARGV;

# A number as the table shows it: rounded, thin groups of thousands.
sub n
{
	my ($v, $decimals) = @_;
	return '—' unless defined $v;
	my $s = sprintf("%.*f", $decimals // 0, $v);
	1 while $s =~ s/^(\d+)(\d{3})/$1 $2/;
	return $s;
}
sub x { my ($r, $what) = @_; return defined $r ? sprintf($r >= 100 ? '%.0f× %s' : '%.2f× %s', $r, $what) : () }

my ($run_line) = $run =~ /\ARun: (.*?)\n/ or die "the last run does not start with its Run: line\n";
my @rows;

# 1. a new payment: pay_begin + pay_succeed, the floor, the lean PL/pgSQL peer
my ($c, $floor, $to_floor) = $run =~ /^\| 1\. new payment \(payments\/s\) \| C ([\d.]+), bare SQL floor ([\d.]+) \| \*\*([\d.]+)×/m;
my ($lean, $to_lean) = $run =~ /^\| 1\. new payment \(payments\/s\) \| C [\d.]+, lean PL\/pgSQL ([\d.]+) \| \*\*([\d.]+)×/m;
push @rows, [ 'new payment (payments/s)', n($c), n($floor), n($lean), join(', ', x($to_floor, 'floor'), x($to_lean, 'PL/pgSQL')) ];

# 2. a duplicate retry: pay_begin on a SUCCESS bizNo, a primary-key SELECT
my ($dup, $pk, $to_pk) = $run =~ /^\| 2\. duplicate retry \(calls\/s\) \| pay_begin ([\d.]+), PK SELECT ([\d.]+) \| \*\*([\d.]+)×/m;
push @rows, [ 'duplicate retry (calls/s)', n($dup), n($pk) . ' (a primary-key SELECT)', '—', join(', ', x($to_pk, 'floor')) ];

# 3. a status UPDATE of your own table under pay_guard, unguarded, under a PL/pgSQL trigger
my ($guard, $none, $plpgsql, $to_none) = $run =~ /^\| 3\. status UPDATE on a user table \(updates\/s\) \| pay_guard ([\d.]+), none ([\d.]+), PL\/pgSQL ([\d.]+) \| \*\*([\d.]+)×/m;
push @rows, [ 'guarded UPDATE of your own table (updates/s)', n($guard), n($none) . ' (unguarded)', n($plpgsql),
	join(', ', x($to_none, 'floor'), x($plpgsql && $guard / $plpgsql, 'PL/pgSQL')) ];

# 7. a durable new payment (synchronous_commit = on) at 1, 8, 32 clients:
# bench.sh's row per client count, or the run's rows condensed into one
my %durable;
while ($run =~ /^\| 7\. durable new payment \(payments\/s\) \| (\d+) \| C ([\d.]+), bare SQL floor ([\d.]+) \|.*?\*\*([\d.]+)× floor/mg)
{
	$durable{$1} = [ $2, $3, $4 ];
}
if ($run =~ /^\| 7\. durable new payment, ([\d \/]+) clients \| C ([\d \/]+), floor ([\d \/]+) \| \*\*([\d.× \/]+) floor\*\*/m)
{
	my @clients = split m{ / }, $1;
	my @c = split m{ / }, $2;
	my @f = split m{ / }, $3;
	my @r = map { s/×//r } split m{ / }, $4;
	$durable{ $clients[$_] } = [ $c[$_], $f[$_], $r[$_] ] for 0 .. $#clients;
}
for my $clients (1, 8, 32)
{
	my ($dc, $df, $dr) = @{ $durable{$clients} // [] };
	push @rows, [ "durable new payment, $clients client" . ($clients > 1 ? 's' : '') . ' (payments/s)',
		n($dc), n($df), '—', join(', ', x($dr, 'floor')) ];
}

# 8. pay_stats at a 10M-row ledger against a full count of the ledger
my ($ledger, $read, $count) = $run =~ /^\| 8\. `pay_stats` with ([\d ]+) ledger rows \(ms\) \| read ([\d.]+);.*?a full count (?:per status )?([\d.]+)/m;
push @rows, [ '`pay_stats`' . (defined $ledger ? ', ' . n($ledger =~ s/ //gr) . ' ledger rows' : '') . ' (reads/s)',
	defined $read ? n(1000 / $read) : '—', defined $count ? n(1000 / $count, 2) . ' (a full count)' : '—', '—',
	join(', ', x($read && $count / $read, 'floor')) ];

# 9. a late retry of an archived payment, answered from the archive
my ($archived, $live, $to_live) = $run =~ /^\| 9\. late retry of an archived payment, its month kept \(calls\/s\) \| pay_claim \(ALREADY_SUCCEEDED from the archive\) ([\d.]+), PK SELECT of a live row ([\d.]+) \| \*\*([\d.]+)×/m;
push @rows, [ 'late retry of an archived payment (calls/s)', n($archived), defined $live ? n($live) . ' (a primary-key SELECT of a live row)' : '—', '—',
	join(', ', x($to_live, 'floor')) ];

my $table = "<!-- figures: begin -->\n"
  . "| measure | this extension | bare SQL floor | hand-written PL/pgSQL | ratio |\n"
  . "|---|---|---|---|---|\n"
  . join('', map { '| ' . join(' | ', map { $_ eq '' ? '—' : $_ } @$_) . " |\n" } @rows)
  . "\nFrom the run of $run_line. Ratio: the median of the rounds' ratios, the contenders side by side in "
  . "each round (against PL/pgSQL for the UPDATE, and for `pay_stats`: the medians' ratio); —: not measured "
  . "in that run. Written by `test/run bench` (`test/bench/figures.pl`), never by hand; earlier runs: "
  . "[BENCHMARKS.md](BENCHMARKS.md).\n"
  . "<!-- figures: end -->\n";

if ($mode eq '--print')
{
	print $table;
	exit 0;
}

my $readme = slurp("$root/README.md");
my $pattern = qr/<!-- figures: begin -->\n.*?<!-- figures: end -->\n/s;
if ($mode eq '--check')
{
	my $ok = 1;
	for ([ 'README.md', $readme ], [ 'BENCHMARKS.md', $benchmarks ])
	{
		my ($name, $text) = @$_;
		my ($held) = $text =~ /($pattern)/;
		next if defined $held && $held eq $table;
		print STDERR "$name: " . (defined $held ? "its figures table is not the one BENCHMARKS.md's last run gives"
			: 'no figures table') . "\n";
		$ok = 0;
	}
	exit($ok ? 0 : 1);
}
die "unknown mode $mode\n" unless $mode eq '--write';
for ([ 'README.md', \$readme ], [ 'BENCHMARKS.md', \$benchmarks ])
{
	my ($name, $text) = @$_;
	$$text =~ s/$pattern/$table/ or die "$name has no <!-- figures: begin --> ... <!-- figures: end --> block\n";
	spit("$root/$name", $$text);
}
