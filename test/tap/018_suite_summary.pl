# test/suite.sh, which prints test/run check's summary, on suites of its
# own: one line per suite with its counts and seconds, a failing suite's
# last lines, everything in the full log, and last the total in the format
# .ci/run reads ("N passed, N failed").
use strict;
use warnings;

use File::Basename;
use File::Temp qw(tempdir);
use IPC::Run;
use Test::More;

my $root = dirname(__FILE__) . '/../..';
my $work = tempdir(CLEANUP => 1);
my $script = <<"BASH";
set -euo pipefail
WORK=$work
RUN_LOG=$work/full.log
SUITE_TAIL=3
. "$root/test/suite.sh"
passing_tap() { printf 'ok 1 - a\\nok 2 - b\\n    ok 1 - a subtest\\n1..2\\n'; }
failing_tap() { printf 'ok 1 - a\\nnot ok 2 - b\\n'; for i in 1 2 3 4 5; do echo "output \$i"; done; return 1; }
named() { echo 'ok - one'; echo 'ok - two'; }
crash() { echo 'Segmentation fault'; return 139; }
suite alpha 'TAP that passes' count_tap passing_tap
suite beta 'TAP that fails' count_tap failing_tap
suite gamma 'named results' count_ok named
suite delta 'a crash, no failing test' count_ok crash
suite epsilon 'an exit status' count_exit true
suite_total
BASH
my $out;
my $ok = IPC::Run::run([ 'bash', '-c', $script ], '>&', \$out);
note $out;
my @lines = split /\n/, $out;

ok(!$ok, 'suite_total fails when a suite failed');
is($lines[-1], '7 passed, 2 failed', 'the last line is the total');
like($lines[-1], qr/^[0-9]+ passed, [0-9]+ failed$/, 'in the format .ci/run reads');
like($lines[-2], qr{^full log: \Q$work\E/full\.log$}, 'after the name of the full log');
like($out, qr/^alpha +3 passed +0 failed +\d+ s +TAP that passes$/m, 'a line for a passing suite, subtests counted');
like($out, qr/^beta +1 passed +1 failed +\d+ s +TAP that fails$/m, 'a line for a failing suite');
like($out, qr/^---- beta failed \(exit 1\).*\n    output 3\n    output 4\n    output 5\n----$/m,
	'and the last lines of its log');
like($out, qr/^delta +0 passed +1 failed/m, 'a suite that crashed without a failing test counts one failure');
like($out, qr/^epsilon +1 passed +0 failed/m, 'count_exit counts the exit status as one test');
unlike($out, qr/a subtest|output 1/, 'nothing else of the suites is printed');
my $full = do { local (@ARGV, $/) = ("$work/full.log"); <> };
like($full, qr/==== alpha: TAP that passes\nok 1 - a\n.*==== beta: .*output 1\n/s, 'the full log holds every suite\'s output');
is(scalar(grep { !/^    |^----/ } @lines), 7, 'one line per suite, then the log and the total');

done_testing();
