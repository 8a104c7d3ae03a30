# README's "What it costs" table is the one test/bench/figures.pl writes from
# the last full `test/run bench` recorded in BENCHMARKS.md, and BENCHMARKS.md
# holds the same: a table edited by hand, or a run recorded without the
# table rewritten, fails here.
use strict;
use warnings;

use File::Basename;
use Test::More;

my $root = dirname(__FILE__) . '/../..';
my $out = `perl $root/test/bench/figures.pl --check $root 2>&1`;
is($?, 0, 'README.md and BENCHMARKS.md hold the figures table of the last recorded run') or diag $out;

my $table = `perl $root/test/bench/figures.pl $root`;
my $rows = () = $table =~ /^\| (?!measure|---)/mg;
is($rows, 8, 'one row per measure: new payment, duplicate retry, guarded UPDATE, durable at 1, 8 '
	  . 'and 32 clients, pay_stats, archived lookup');
like($table, qr/^\| new payment \(payments\/s\) \| [\d ]+ \| [\d ]+ \| [\d ]+ \| [\d.]+× floor, [\d.]+× PL\/pgSQL \|$/m,
	'the new payment row has all four figures');
like($table, qr/^From the run of \d{4}-\d\d-\d\d .*commit \w+/m, 'the configuration line names the run');

# bench.sh's own output (a scaled-down run of every row, test/bench/figures_sample.md) gives
# every figure of every row: the rows of a full run are all read.
my $sample = `perl $root/test/bench/figures.pl $root $root/test/bench/figures_sample.md`;
is($?, 0, "the table of bench.sh's output of every row");
my @measured = $sample =~ /^\| (?!measure|---)[^|]+\| ([^|]+) \| ([^|]+) \|/mg;
is(scalar(@measured), 16, 'eight rows, each with the extension\'s figure and the floor\'s');
is(scalar(grep { /—/ } @measured), 0, 'none of them missing');

done_testing();
