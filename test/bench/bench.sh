#!/usr/bin/env bash
# test/bench/bench.sh — the benchmarks of BENCHMARKS.md, run by
# `test/run bench` against its throwaway cluster (PGHOST, PGPORT set).
# Every comparison runs its contenders side by side, ROUNDS times, and
# reports the medians and the median of the ratios paired round by round
# (contenders of one round share the machine's state of the moment: the
# checkpoint under way, autovacuum, the page cache).  Prints a Markdown
# table.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DB=bench
ROUNDS=${BENCH_ROUNDS:-7}
RUN_SECONDS=${BENCH_SECONDS:-8}
CLIENTS=2
LARGE_LEDGER=${BENCH_LARGE_LEDGER:-10000000}
CPU_PAYMENTS=${BENCH_CPU_PAYMENTS:-20000}
export PGOPTIONS="-c synchronous_commit=off"

sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

# Transactions per second of one pgbench script, excluding connection time,
# each run from the same start: vacuumed, analyzed, checkpointed.
# A run that fails shows pgbench's errors and ends the benchmark.
# PGBENCH_DEFINES: pgbench's -D options for the scripts that read variables.
PGBENCH_DEFINES=()
tps() {
	local out errors wal0 wal1
	sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
	wal0=$(sql -F ' ' -c "SELECT wal_bytes, wal_fpi FROM pg_stat_wal")
	errors=$(mktemp)
	if ! out=$(pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$RUN_SECONDS" \
		"${PGBENCH_DEFINES[@]}" -f "$HERE/$1" "$DB" 2>"$errors"); then
		echo "pgbench $1 failed:" >&2
		cat "$errors" >&2
		rm -f "$errors"
		return 1
	fi
	rm -f "$errors"
	# the WAL a transaction wrote (the cluster's, the run alone on it), to stderr
	sleep 1
	wal1=$(sql -F ' ' -c "SELECT wal_bytes, wal_fpi FROM pg_stat_wal")
	awk -v a="$wal0" -v b="$wal1" -v db="$DB" -v script="$1" '
		/^number of transactions actually processed: / { n = $6 }
		END { split(a, x, " "); split(b, y, " ")
		      if (n > 0) printf "   %s:%s: %.0f WAL bytes, %.2f full-page images a transaction\n",
		                        db, script, (y[1] - x[1]) / n, (y[2] - x[2]) / n }' <<<"$out" >&2
	awk '/^tps = / { print $3; exit }' <<<"$out"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Run contenders side by side, ROUNDS times, every other round in reverse
# order, so that no contender always runs right after the same one; a
# contender is a pgbench script, run in $DB, or "<database>:<script>".  Set
# MEDIAN[contender] and RUNS[contender] (the rounds' rates, in round order).
declare -A MEDIAN RUNS
compare() {
	local round contender order
	for contender in "$@"; do RUNS[$contender]=''; done
	for round in $(seq "$ROUNDS"); do
		order=("$@")
		if [ $((round % 2)) -eq 0 ]; then
			order=()
			for contender in "$@"; do order=("$contender" "${order[@]}"); done
		fi
		for contender in "${order[@]}"; do
			if [[ $contender == *:* ]]; then
				RUNS[$contender]+="$(DB=${contender%%:*} tps "${contender#*:}") "
			else
				RUNS[$contender]+="$(tps "$contender") "
			fi
		done
	done
	for contender in "$@"; do
		MEDIAN[$contender]=$(median_of "${RUNS[$contender]}")
		echo "   $contender: ${RUNS[$contender]}-> median ${MEDIAN[$contender]} tps" >&2
	done
}

# "<median>× <what> (rounds <least>–<greatest>)": the median over the rounds
# of script $1's rate divided by script $2's in the same round.
paired() {
	local a=($1) b=($2) what=$3 i ratios=()
	for i in "${!a[@]}"; do ratios+=("$(ratio "${a[$i]}" "${b[$i]}")"); done
	printf '%s× %s (rounds %s–%s)' "$(printf '%s\n' "${ratios[@]}" | median)" "$what" \
		"$(printf '%s\n' "${ratios[@]}" | sort -g | head -1)" \
		"$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)"
}

ROWS=()
row() { ROWS+=("| $1 | $2 | **$3** | $4 |"); }
table() {
	echo
	echo "Server: ${BENCH_CONFIGURATION:-as started}"
	echo
	echo "| comparison | figures (medians of $ROUNDS runs, $RUN_SECONDS s each, $CLIENTS clients) | ratio (median of the rounds' ratios) | target |"
	echo "|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
}

# Row 7, durable commits: the server's fsync = on with synchronous_commit = on
# for the sessions, so that every commit that wrote WAL returns only once its
# WAL is on disk (the other rows run with synchronous_commit = off).  At each
# client count of DURABLE_CLIENTS, DURABLE_ROUNDS rounds of DURABLE_SECONDS s
# of a new payment by the C path and the floor, and of a duplicate retry and
# the primary-key SELECT; every other round runs the contenders in reverse
# order.  Beside them the disk's flush rate under the data directory, by
# pg_test_fsync, for the server's wal_sync_method.
DURABLE_ROUNDS=${BENCH_DURABLE_ROUNDS:-5}
DURABLE_SECONDS=${BENCH_DURABLE_SECONDS:-5}
DURABLE_CLIENTS=${BENCH_DURABLE_CLIENTS:-1 8 32}
FSYNC_SECONDS=${BENCH_FSYNC_SECONDS:-2}
DURABLE_SCRIPTS=(api.pgbench floor.pgbench duplicate.pgbench pk_select.pgbench)

# "<tps> <WAL flushes per transaction> <WAL bytes per transaction>" of one
# pgbench run of script $1 with $2 clients, from the same start as tps():
# flushes are pg_stat_wal's wal_sync (every process's fsync of WAL), bytes the
# WAL insert position, both around the run.
durable_run() {
	local script=$1 clients=$2 out errors syncs0 lsn0 xacts
	sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
	read -r syncs0 lsn0 < <(sql -F ' ' -c "SELECT wal_sync, pg_current_wal_insert_lsn() FROM pg_stat_wal")
	errors=$(mktemp)
	if ! out=$(pgbench -n -M prepared -c "$clients" -j "$clients" -T "$DURABLE_SECONDS" \
		-f "$HERE/$script" "$DB" 2>"$errors"); then
		echo "pgbench $script failed:" >&2
		cat "$errors" >&2
		rm -f "$errors"
		return 1
	fi
	rm -f "$errors"
	# pgbench's backends add their WAL counters to pg_stat_wal as they exit
	sql >/dev/null <<'SQL'
DO $$
BEGIN
    FOR i IN 1 .. 200 LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity
                              WHERE backend_type = 'client backend' AND pid <> pg_backend_pid());
        PERFORM pg_sleep(0.05);
    END LOOP;
    PERFORM pg_sleep(0.2);
END $$;
SQL
	xacts=$(awk '/^number of transactions actually processed: / { sub(/\/.*/, "", $6); print $6; exit }' <<<"$out")
	printf '%s ' "$(awk '/^tps = / { print $3; exit }' <<<"$out")"
	sql -F ' ' -c "SELECT round((wal_sync - $syncs0)::numeric / $xacts, 2),
	                      round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn0') / $xacts)
	               FROM pg_stat_wal"
}

# pg_test_fsync's rate of the server's wal_sync_method for one 8 kB write, on
# a file in the data directory (pg_wal's filesystem here); sets FSYNC_RATE
# (empty when it cannot be measured) and FSYNC_NOTE.
fsync_rate() {
	local data method out
	data=$(sql -c "SHOW data_directory")
	method=$(sql -c "SHOW wal_sync_method")
	FSYNC_RATE=''
	if ! command -v pg_test_fsync >/dev/null; then
		FSYNC_NOTE="pg_test_fsync not found: no flush rate of the disk"
		return
	fi
	echo "== pg_test_fsync -f $data/bench_fsync.tmp -s $FSYNC_SECONDS" >&2
	out=$(pg_test_fsync -f "$data/bench_fsync.tmp" -s "$FSYNC_SECONDS" 2>&1) || true
	rm -f "$data/bench_fsync.tmp"
	FSYNC_RATE=$(awk -v m="$method" '/using one 8kB write/ { one = 1; next }
		/using two 8kB writes/ { exit }
		one && $1 == m && $2 ~ /^[0-9.]+$/ { printf "%.0f", $2; exit }' <<<"$out")
	if [ -z "$FSYNC_RATE" ]; then
		echo "$out" >&2
		FSYNC_NOTE="pg_test_fsync gave no rate for $method"
		return
	fi
	echo "   $method: $FSYNC_RATE flushes/s" >&2
	FSYNC_NOTE="pg_test_fsync on the data directory's filesystem, one 8 kB write, $FSYNC_SECONDS s: $method (the server's wal_sync_method) $FSYNC_RATE flushes/s, so at most about $((FSYNC_RATE / 2)) new payments/s (two flushed commits each) from one client"
}

median_of() { echo "$1" | tr ' ' '\n' | grep . | median; }

DURABLE_ROWS=()
DURABLE_SERVER=''
durable() {
	local clients round script order run tps flushes bytes
	local -A DRUNS DMEDIAN DFLUSH DBYTES
	if [ "$(sql -c "SHOW fsync")" != on ]; then
		echo "== 7. durable commits: skipped, the server runs with fsync = off" >&2
		DURABLE_SERVER="skipped: the server runs with fsync = off (BENCH_LAB=1?)"
		return
	fi
	local PGOPTIONS="-c synchronous_commit=on"
	export PGOPTIONS
	DURABLE_SERVER="fsync $(sql -c "SHOW fsync"), synchronous_commit $(sql -c "SHOW synchronous_commit")"
	DURABLE_SERVER+=", wal_sync_method $(sql -c "SHOW wal_sync_method"), autovacuum $(sql -c "SHOW autovacuum")"
	DURABLE_SERVER+=", shared_buffers $(sql -c "SHOW shared_buffers"), commit_delay $(sql -c "SHOW commit_delay")"
	echo "== 7. durable commits ($DURABLE_SERVER): clients $DURABLE_CLIENTS" >&2
	sql -c "CHECKPOINT"
	fsync_rate
	for clients in $DURABLE_CLIENTS; do
		for script in "${DURABLE_SCRIPTS[@]}"; do
			DRUNS[$script]='' DFLUSH[$script]='' DBYTES[$script]=''
		done
		for round in $(seq "$DURABLE_ROUNDS"); do
			order=("${DURABLE_SCRIPTS[@]}")
			if [ $((round % 2)) -eq 0 ]; then
				order=()
				for script in "${DURABLE_SCRIPTS[@]}"; do order=("$script" "${order[@]}"); done
			fi
			for script in "${order[@]}"; do
				run=$(durable_run "$script" "$clients")
				read -r tps flushes bytes <<<"$run"
				DRUNS[$script]+="$tps " DFLUSH[$script]+="$flushes " DBYTES[$script]+="$bytes "
			done
		done
		for script in "${DURABLE_SCRIPTS[@]}"; do
			echo "   $clients clients, $script: ${DRUNS[$script]}tps; WAL flushes ${DFLUSH[$script]}bytes ${DBYTES[$script]}a transaction" >&2
			DMEDIAN[$script]=$(printf %.0f "$(median_of "${DRUNS[$script]}")")
			DFLUSH[$script]=$(median_of "${DFLUSH[$script]}")
			DBYTES[$script]=$(median_of "${DBYTES[$script]}")
			echo "     medians ${DMEDIAN[$script]} tps, ${DFLUSH[$script]} flushes, ${DBYTES[$script]} bytes" >&2
		done
		DURABLE_ROWS+=("| 7. durable new payment (payments/s) | $clients | C ${DMEDIAN[api.pgbench]}, bare SQL floor ${DMEDIAN[floor.pgbench]} | C ${DFLUSH[api.pgbench]}, floor ${DFLUSH[floor.pgbench]} | C ${DBYTES[api.pgbench]}, floor ${DBYTES[floor.pgbench]} | **$(paired "${DRUNS[api.pgbench]}" "${DRUNS[floor.pgbench]}" floor)** | ≥ 0.95× |")
		DURABLE_ROWS+=("| 7. durable duplicate retry (calls/s) | $clients | pay_begin ${DMEDIAN[duplicate.pgbench]}, PK SELECT ${DMEDIAN[pk_select.pgbench]} | pay_begin ${DFLUSH[duplicate.pgbench]}, PK SELECT ${DFLUSH[pk_select.pgbench]} | pay_begin ${DBYTES[duplicate.pgbench]}, PK SELECT ${DBYTES[pk_select.pgbench]} | **$(paired "${DRUNS[duplicate.pgbench]}" "${DRUNS[pk_select.pgbench]}" 'PK SELECT')** | — |")
	done
}
durable_table() {
	echo
	echo "Server (row 7): $DURABLE_SERVER"
	[ -z "${FSYNC_NOTE:-}" ] || { echo; echo "$FSYNC_NOTE"; }
	[ ${#DURABLE_ROWS[@]} -gt 0 ] || return 0
	echo
	echo "| comparison | clients | figures (medians of $DURABLE_ROUNDS runs, $DURABLE_SECONDS s each) | WAL flushes per payment or call | WAL bytes per payment or call | ratio (median of the rounds' ratios) | target |"
	echo "|---|---|---|---|---|---|---|"
	printf '%s\n' "${DURABLE_ROWS[@]}"
}

echo "== setting up" >&2
psql -X -q -d postgres -c "CREATE DATABASE $DB"
# the benchmarks pay under keys of their own ('A1'), keys of another system
psql -X -q -d postgres -c "ALTER DATABASE $DB SET idempotent_pay.foreign_keys = accept"
sql -c "CREATE EXTENSION idempotent_pay" -f "$HERE/plpgsql_pay.sql" -f "$HERE/floor.sql" \
	-f "$HERE/lean_pay.sql" >/dev/null
sql >/dev/null <<'SQL'
CREATE FUNCTION bench_ms(query text) RETURNS double precision LANGUAGE plpgsql AS $$
DECLARE started timestamptz := clock_timestamp();
BEGIN
    EXECUTE query;
    RETURN extract(epoch FROM clock_timestamp() - started) * 1000;
END $$;
CREATE FUNCTION bench_calls(payments integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. payments LOOP
        PERFORM pay_begin('MEM-' || i, 10, 'EUR');
        PERFORM pay_succeed('MEM-' || i, 'bank-ref', 1);
    END LOOP;
END $$;
-- every contender starts from 100k settled payments (and the same plans)
SET session_replication_role = replica;
-- and a restore's settings, under which the journal takes rows it did not write
SET row_security = off;
SET check_function_bodies = false;
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency)
    SELECT 'D' || g, 'SUCCESS', 1, 10, 'EUR' FROM generate_series(1, 100000) AS g;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status)
    SELECT 'D' || g, 1, NULL, 'SUCCESS' FROM generate_series(1, 100000) AS g;
INSERT INTO plpgsql_pay.ledger SELECT * FROM pay_ledger;
INSERT INTO plpgsql_pay.journal (bizno, attempt, from_status, to_status)
    SELECT bizno, attempt, from_status, to_status FROM pay_journal;
INSERT INTO floor_pay.ledger SELECT * FROM pay_ledger;
INSERT INTO floor_pay.journal (bizno, attempt, from_status, to_status)
    SELECT bizno, attempt, from_status, to_status FROM pay_journal;
INSERT INTO lean_pay.ledger SELECT * FROM pay_ledger;
INSERT INTO lean_pay.journal (bizno, attempt, from_status, to_status)
    SELECT bizno, attempt, from_status, to_status FROM pay_journal;
RESET session_replication_role;
RESET row_security;
RESET check_function_bodies;
CREATE TABLE bench_guarded (id integer PRIMARY KEY, status text NOT NULL, amount numeric);
CREATE TABLE bench_unguarded (LIKE bench_guarded INCLUDING ALL);
CREATE TABLE bench_plpgsql_guarded (LIKE bench_guarded INCLUDING ALL);
INSERT INTO bench_guarded SELECT g, 'INIT', 10 FROM generate_series(1, 100000) AS g;
INSERT INTO bench_unguarded SELECT * FROM bench_guarded;
INSERT INTO bench_plpgsql_guarded SELECT * FROM bench_guarded;
SELECT pay_protect('bench_guarded', 'status', '{amount}');
CREATE TRIGGER guard BEFORE UPDATE ON bench_plpgsql_guarded
    FOR EACH ROW EXECUTE FUNCTION plpgsql_pay.status_guard();
VACUUM ANALYZE;
SQL

# LARGE_LEDGER more SUCCESS payments, each with its journal row, written
# with the ledger's triggers off (their journal rows written alongside), as
# a restore would.
load_large_ledger() {
	sql >/dev/null <<SQL
SET session_replication_role = replica;
-- and a restore's settings, under which the journal takes rows it did not write
SET row_security = off;
SET check_function_bodies = false;
SET maintenance_work_mem = '1GB';
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency, channel_ref)
    SELECT 'L' || g, 'SUCCESS', 1, 10, 'EUR', 'BANK-L' || g FROM generate_series(1, $LARGE_LEDGER) AS g;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status)
    SELECT 'L' || g, 1, 'PROCESSING', 'SUCCESS' FROM generate_series(1, $LARGE_LEDGER) AS g;
RESET session_replication_role;
RESET row_security;
RESET check_function_bodies;
VACUUM ANALYZE pay_ledger;
VACUUM ANALYZE pay_journal;
SQL
}

# Milliseconds of one statement, by psql's \timing.
statement_ms() {
	sql -c '\timing on' -c "$1" | awk '/^Time: / { print $2 }' | tail -n 1
}

# Row 8, pay_stats on the large ledger, in one session as a dashboard or an
# exporter reads it: the average of STATS_READS reads with the counts folded,
# and with 200 journal rows not folded yet (100 payments), which each reader
# adds; one read that folds 800 (it finds 250 or more); a full count per
# status of the same ledger (what pay_stats did before it kept counts); and
# the first fold, which counts the ledger and the journal once.
STATS_READS=${BENCH_STATS_READS:-200}
stats_reads() {
	local count fold read read_unfolded read_folding ledger_rows
	echo "== 8. pay_stats with $LARGE_LEDGER more ledger rows" >&2
	ledger_rows=$(sql -c 'SELECT count(*) FROM pay_ledger')
	count=$(statement_ms "SELECT status, count(*), count(*) FILTER (WHERE parent IS NOT NULL) FROM pay_ledger GROUP BY status")
	sql -c 'DELETE FROM pay_stats_state' >/dev/null
	fold=$(statement_ms 'SELECT pay_stats_refresh()')
	echo 'SELECT * FROM pay_stats;' >"$STATS_SCRIPT"
	read=$(stats_latency)
	pay_some 100
	read_unfolded=$(stats_latency)
	sql -c 'SELECT pay_stats_refresh()' >/dev/null
	read_folding=$(sql -c 'SELECT count(*) FROM pay_stats' -c "$(pay_some_sql 400)" -c '\timing on' \
		-c 'SELECT count(*) FROM pay_stats' | awk '/^Time: / { print $2 }' | tail -n 1)
	echo "   full count $count ms, first fold $fold ms, read $read ms, with 200 rows unfolded $read_unfolded ms, folding 800 $read_folding ms" >&2
	STATS_ROWS+=("| 8. \`pay_stats\` with $ledger_rows ledger rows (ms) | read $read; with 200 journal rows not folded yet $read_unfolded; a full count per status $count | read in **1/$(ratio "$count" "$read")** of the full count's time | ≤ 5 ms |")
	STATS_ROWS+=("| 8. a read that folds 800 journal rows first | $read_folding ms | — | — |")
	STATS_ROWS+=("| 8. the first fold (after install, update or restore) | $fold ms | — | — |")
}
# The average latency in ms of STATS_READS reads of pay_stats in one session.
stats_latency() {
	pgbench -n -c 1 -t "$STATS_READS" -f "$STATS_SCRIPT" "$DB" 2>/dev/null |
		awk '/^latency average = / { print $4 }'
}
pay_some_sql() {
	echo "SELECT count(*) FROM (SELECT pay_begin(k, 10, 'EUR'), pay_succeed(k, 'BANK-' || k, 1)
	      FROM (SELECT 'STATS-' || gen_random_uuid() AS k FROM generate_series(1, $1)) AS keys) AS paid"
}
pay_some() { sql -c "$(pay_some_sql "$1")" >/dev/null; }
STATS_SCRIPT=$(mktemp)
trap 'rm -f "$STATS_SCRIPT"' EXIT
stats_table() {
	[ "${#STATS_ROWS[@]}" -gt 0 ] || return 0
	echo
	echo "| pay_stats (row 8, $STATS_READS reads each, 1 client) | figures | ratio | target |"
	echo "|---|---|---|---|"
	printf '%s\n' "${STATS_ROWS[@]}"
}
STATS_ROWS=()

# One new payment of each contender of row 1 as two prepared statements
# ($1 the key), which rows 1b, 1d and 9b run outside pgbench.
declare -A BEGIN_STEP=(
	[api]="SELECT pay_begin(\$1, 100.00, 'CNY')"
	[lean]="SELECT lean_pay.pay_begin(\$1, 100.00, 'CNY')"
	[plpgsql]="SELECT plpgsql_pay.pay_begin(\$1, 100.00, 'CNY')"
	[floor]="WITH l AS (INSERT INTO floor_pay.ledger (bizno, status, amount, currency, attempt, processing_since) VALUES (\$1, 'PROCESSING', 100.00, 'CNY', 1, now()) RETURNING bizno, attempt, status, amount, currency) INSERT INTO floor_pay.journal (bizno, attempt, from_status, to_status, amount, currency) SELECT bizno, attempt, NULL, status, amount, currency FROM l"
)
declare -A SUCCEED_STEP=(
	[api]="SELECT pay_succeed(\$1, 'bank-ref', 1)"
	[lean]="SELECT lean_pay.pay_succeed(\$1, 'bank-ref')"
	[plpgsql]="SELECT plpgsql_pay.pay_succeed(\$1, 'bank-ref')"
	[floor]="WITH l AS (UPDATE floor_pay.ledger SET status = 'SUCCESS', channel_ref = 'bank-ref', updated_at = now() WHERE bizno = \$1 RETURNING bizno, attempt, amount, currency) INSERT INTO floor_pay.journal (bizno, attempt, from_status, to_status, amount, currency) SELECT bizno, attempt, 'PROCESSING', 'SUCCESS', amount, currency FROM l"
)

# The statements of $2 new payments of contender $1, keys $3<1..$2>: the
# two prepared, then executed, a statement a line (a transaction each, in
# psql and in a single-user backend alike).
payments() {
	local contender=$1 count=$2 key=$3 i
	echo "PREPARE pay_begin_step(text) AS ${BEGIN_STEP[$contender]};"
	echo "PREPARE pay_succeed_step(text) AS ${SUCCEED_STEP[$contender]};"
	for i in $(seq "$count"); do
		echo "EXECUTE pay_begin_step('$key$i');"
		echo "EXECUTE pay_succeed_step('$key$i');"
	done
}

# Backend CPU microseconds and WAL bytes per payment of contender $1 (keys
# $2<i>): CPU_PAYMENTS payments in one session through prepared statements,
# measured by the backend itself (/proc/self/schedstat: nanoseconds on a
# CPU) and by the WAL insert position.
cpu_and_wal() {
	local contender=$1 key=$2
	sql -c "CHECKPOINT"
	{
		echo "SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1) AS cpu0,"
		echo "       pg_current_wal_insert_lsn() AS wal0 \\gset"
		payments "$contender" "$CPU_PAYMENTS" "$key"
		echo "SELECT round((split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::numeric - :cpu0)"
		echo "             / 1000 / $CPU_PAYMENTS, 1),"
		echo "       round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'wal0') / $CPU_PAYMENTS);"
	} | sql -F ' ' | tail -n 1
}

# Rows 1d and 9c, instructions: what one backend executes for a new
# payment, counted by valgrind's callgrind, the same count in every run
# where a rate or the CPU time moves with the machine's other work.  A
# cluster of their own (fsync off, a single-user backend needs the server
# stopped): database instr with row 1's contenders, INSTR_PAYMENTS settled
# payments each; instr_archived, the API's tables alike and ten million
# random hashes in pay_archive_keys, packed in rows of 512 as pay_archive
# packs them.  A contender makes INSTR_PAYMENTS new payments in one
# single-user backend and three times as many in another: the difference
# over the extra payments is one payment's, without the backend's start or
# its first calls' caching.  Left out: the single-user backend's printing of
# result rows (debugStartup, debugtup: some 12k instructions a payment for a
# contender whose calls return a row), which a client's backend does not run
# (it sends the row instead).
INSTR_PAYMENTS=${BENCH_INSTR_PAYMENTS:-1000}
INSTR_HASHES=${BENCH_INSTR_HASHES:-10000000}
INSTR_DIR=''
instr_sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$INSTR_DIR" -U "$(id -un)" -d "$@"; }

# The instructions a single-user backend of database $1 executes for $2
# payments of contender $3, keys $4<i>.
instr_count() {
	local db=$1 count=$2 contender=$3 key=$4 log=$INSTR_DIR/callgrind.log
	payments "$contender" "$count" "$key" |
		valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			--toggle-collect=debugStartup --toggle-collect=debugtup --collect-atstart=yes \
			postgres --single -D "$INSTR_DIR/data" -c synchronous_commit=off \
			-c idempotent_pay.foreign_keys=accept "$db" >"$log" 2>&1
	# the backend writes its log line prefix (time, pid) before the level
	if grep -q -E '(^|\] )(ERROR|FATAL|PANIC):' "$log"; then
		echo "callgrind of $contender in $db:" >&2
		grep -m 3 -E '(^|\] )(ERROR|FATAL|PANIC):' "$log" >&2
		return 1
	fi
	sed -n 's/^==[0-9]*== Collected : //p' "$log"
}

# The instructions of one new payment of contender $2 in database $1.
instr_per_payment() {
	local db=$1 contender=$2 few many
	few=$(instr_count "$db" "$INSTR_PAYMENTS" "$contender" "I1-$contender-")
	many=$(instr_count "$db" $((3 * INSTR_PAYMENTS)) "$contender" "I3-$contender-")
	awk -v a="$few" -v b="$many" -v n="$INSTR_PAYMENTS" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }'
}
kilo() { awk -v n="$1" 'BEGIN { printf "%.1fk", n / 1000 }'; }

instructions() {
	local contender
	declare -A IR
	echo "== 1d, 9c. instructions per new payment (callgrind, a single-user backend)" >&2
	INSTR_DIR=$(mktemp -d)
	initdb -D "$INSTR_DIR/data" -A trust >/dev/null
	pg_ctl -D "$INSTR_DIR/data" -l "$INSTR_DIR/server.log" -w \
		-o "-c listen_addresses='' -k $INSTR_DIR -c fsync=off" start >/dev/null
	instr_sql postgres -c "CREATE DATABASE instr" -c "CREATE DATABASE instr_archived"
	# keys of their own ('W-api-1'), keys of another system, as $DB's; a
	# single-user backend applies no database's settings, so instr_count
	# passes it on its command line too
	instr_sql postgres -c "ALTER DATABASE instr SET idempotent_pay.foreign_keys = accept" \
		-c "ALTER DATABASE instr_archived SET idempotent_pay.foreign_keys = accept"
	instr_sql instr -c "CREATE EXTENSION idempotent_pay" -f "$HERE/plpgsql_pay.sql" \
		-f "$HERE/floor.sql" -f "$HERE/lean_pay.sql" >/dev/null
	instr_sql instr_archived -c "CREATE EXTENSION idempotent_pay" >/dev/null
	instr_sql instr_archived >/dev/null <<SQL
SET work_mem = '1GB';
INSERT INTO pay_archive_keys (lo, hi, hashes)
SELECT r.lo, COALESCE(lead(r.lo) OVER (ORDER BY r.lo) - 1, 9223372036854775807), r.packed
FROM (SELECT (array_agg(h ORDER BY h))[1] AS lo, pay_archive_key_pack(array_agg(h ORDER BY h)) AS packed
      FROM (SELECT h, (row_number() OVER (ORDER BY h) - 1) / 512 AS row_of
            FROM (SELECT DISTINCT (random() * 18446744073709551615 - 9223372036854775808)::bigint AS h
                  FROM generate_series(1, $INSTR_HASHES)) AS drawn) AS numbered
      GROUP BY row_of) AS r;
SQL
	for contender in api lean plpgsql floor; do
		payments "$contender" "$INSTR_PAYMENTS" "W-$contender-" | instr_sql instr >/dev/null
	done
	payments api "$INSTR_PAYMENTS" "W-api-" | instr_sql instr_archived >/dev/null
	instr_sql instr -c "VACUUM ANALYZE"
	instr_sql instr_archived -c "VACUUM ANALYZE"
	pg_ctl -D "$INSTR_DIR/data" -m fast -w stop >/dev/null
	for contender in api lean plpgsql floor; do
		IR[$contender]=$(instr_per_payment instr "$contender")
	done
	IR[archived]=$(instr_per_payment instr_archived api)
	rm -rf "$INSTR_DIR"
	echo "   C ${IR[api]}, lean ${IR[lean]}, full ${IR[plpgsql]}, floor ${IR[floor]}; C with $INSTR_HASHES hashes archived ${IR[archived]}" >&2
	row "1d. instructions per new payment (callgrind, one backend: a count, not a rate)" \
		"C $(kilo "${IR[api]}"), lean PL/pgSQL $(kilo "${IR[lean]}"), full PL/pgSQL $(kilo "${IR[plpgsql]}"), floor $(kilo "${IR[floor]}")" \
		"$(ratio "${IR[floor]}" "${IR[api]}")× floor, $(ratio "${IR[lean]}" "${IR[api]}")× lean (fewer: faster)" "—"
	ARCHIVE_INSTR_ROW="| 9c. instructions per new payment with $INSTR_HASHES hashes in pay_archive_keys (callgrind, one backend) | archived $(kilo "${IR[archived]}"), nothing archived $(kilo "${IR[api]}") | **$(ratio "${IR[api]}" "${IR[archived]}")× nothing archived (fewer: faster)** | — |"
}

# Row 9, retention: what archiving ARCHIVE_PAYMENTS settled payments and
# dropping their month costs and saves, in two databases of the cluster
# built alike:
#   bench_live      the live set alone: ARCHIVE_LIVE settled payments of now
#                   (keys D1 .., as pk_select.pgbench reads), nothing archived;
#   bench_archived  first ARCHIVE_PAYMENTS settled payments of March 2025
#                   (keys O1 ..), then the same live set, so that the
#                   archived rows are the oldest in the files, as they are
#                   on a server that archives its oldest month.
# Every payment has its two journal rows (NULL -> PROCESSING -> SUCCESS), as
# pay_begin + pay_succeed leave them, written with the triggers off as
# load_large_ledger writes its; both databases are vacuumed, analyzed and
# folded into pay_stats' counts (the first fold, timed apart) before
# bench_archived's old payments are archived with pay_archive('2025-04-01',
# ARCHIVE_BATCH) until it returns 0, each call its own transaction (the
# archive's throughput).  Then, the month kept, a late retry of a random
# archived key (pay_claim, ALREADY_SUCCEEDED from the archive) against the
# PK SELECT of a live row, in bench_archived; then the month's two
# partitions are dropped (a claim of an archived key must then fail with
# 55000), both databases vacuumed, and the sizes of pay_ledger and
# pay_journal (pg_total_relation_size: heap, indexes, TOAST) compared with
# bench_live's: a plain VACUUM leaves the archived rows' space in the
# files, free for new payments but not given back.  A new payment
# (api.pgbench) in each database then, ROUNDS paired rounds, every other
# round in reverse order.  Then the space given back as doc/operations.md
# gives it back while payments go on: pg_repack of pay_ledger, pay_journal
# and pay_archive_keys, in both databases alike (bench_live's repacked
# tables are the live set's size); the sizes compared again, and
# pay_archive_keys' per archived payment (after the plain VACUUM and after
# pg_repack), and a new payment in each database again, as a rate and in
# backend CPU.
# BENCH_ARCHIVE_PAYMENTS (or ARCHIVE_PAYMENTS) and BENCH_ARCHIVE_BATCH scale it.
ARCHIVE_PAYMENTS=${BENCH_ARCHIVE_PAYMENTS:-${ARCHIVE_PAYMENTS:-10000000}}
ARCHIVE_BATCH=${BENCH_ARCHIVE_BATCH:-${ARCHIVE_BATCH:-1000000}}
ARCHIVE_LIVE=100000
ARCHIVE_AT="'2025-03-10 12:00+00'::timestamptz"
ARCHIVE_MONTH=2025_03
ARCHIVE_BEFORE=2025-04-01
ARCHIVE_DBS=(bench_live bench_archived)

# $2 settled payments with keys $1<1..$2>, last changed at $3 (an SQL
# expression), each with its two journal rows, into database $DB.
archive_load() {
	local key=$1 count=$2 at=$3
	sql >/dev/null <<SQL
SET session_replication_role = replica;
-- and a restore's settings, under which the journal takes rows it did not write
SET row_security = off;
SET check_function_bodies = false;
SET maintenance_work_mem = '1GB';
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency, channel_ref,
                        created_at, updated_at, processing_since)
    SELECT '$key' || g, 'SUCCESS', 1, 10, 'EUR', 'BANK-$key' || g, $at, $at, $at
    FROM generate_series(1, $count) AS g;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, at)
    SELECT '$key' || (i + 1) / 2, 1,
           CASE WHEN i % 2 = 0 THEN 'PROCESSING' END::pay_status,
           CASE WHEN i % 2 = 0 THEN 'SUCCESS' ELSE 'PROCESSING' END::pay_status,
           10, 'EUR', $at
    FROM generate_series(1, 2 * $count::bigint) AS i;
RESET session_replication_role;
RESET row_security;
RESET check_function_bodies;
SQL
}

# "<pay_ledger bytes> <pay_journal bytes> <ledger rows>" of database $DB
archive_sizes() {
	sql -F ' ' -c "SELECT pg_total_relation_size('pay_ledger'), pg_total_relation_size('pay_journal'),
	                      (SELECT count(*) FROM pay_ledger)"
}
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# The SQLSTATE of a claim of key $1 (amount 10 EUR) in database $DB, or its
# action when it succeeds.  The claim runs in the handler's subtransaction,
# where claims are refused by default; it commits with the statement.
claim_outcome() {
	sql -c "SET idempotent_pay.claim_in_transaction = allow" -c "DO \$\$
	        DECLARE answer pay_claim;
	        BEGIN
	            answer := pay_claim('$1', 10, 'EUR');
	            RAISE NOTICE 'outcome %', answer.action;
	        EXCEPTION WHEN OTHERS THEN
	            RAISE NOTICE 'outcome %', SQLSTATE;
	        END \$\$" 2>&1 | sed -n 's/^NOTICE:  outcome //p'
}

archive_bench() {
	local DB db out n ms batches=0 archived=0 total_ms=0 batch_ms=() fold_ms=0 outcome started
	local live_ledger live_journal live_rows arch_ledger arch_journal arch_rows
	local keys_bytes keys_live hashes
	local claim_row new_row cpu_row size_row keys_row archive_row round cpu wal cpu_archived cpu_live
	local wal_archived wal_live vacuumed_row repacked_row keys_vacuumed_row keys_vacuumed_bytes
	local started_repack repack_s
	echo "== 9. retention: $ARCHIVE_PAYMENTS payments archived in batches of $ARCHIVE_BATCH, their month dropped" >&2
	started=$SECONDS
	for db in "${ARCHIVE_DBS[@]}"; do
		psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" \
			-c "ALTER DATABASE $db SET idempotent_pay.foreign_keys = accept"
		DB=$db sql -c "CREATE EXTENSION idempotent_pay"
	done
	DB=bench_archived
	archive_load O "$ARCHIVE_PAYMENTS" "$ARCHIVE_AT"
	for db in "${ARCHIVE_DBS[@]}"; do
		DB=$db
		archive_load D "$ARCHIVE_LIVE" "now()"
		sql -c "VACUUM ANALYZE"
		fold_ms=$(statement_ms "SELECT pay_stats_refresh()")
		echo "   $db loaded, vacuumed, first fold of pay_stats $fold_ms ms ($((SECONDS - started)) s so far)" >&2
	done

	# the archive, batch by batch, each call its own transaction
	DB=bench_archived
	while :; do
		out=$(sql -c '\timing on' -c "SELECT pay_archive('$ARCHIVE_BEFORE', $ARCHIVE_BATCH)")
		n=$(grep -E '^[0-9]+$' <<<"$out" | head -n 1)
		ms=$(awk '/^Time: / { print $2 }' <<<"$out")
		total_ms=$(awk -v a="$total_ms" -v b="$ms" 'BEGIN { print a + b }')
		[ "$n" -gt 0 ] || break
		batches=$((batches + 1)) archived=$((archived + n))
		batch_ms+=("$ms")
		echo "   pay_archive: batch $batches, $n payments in $ms ms" >&2
		if [ "$batches" -gt $((ARCHIVE_PAYMENTS / ARCHIVE_BATCH + 2)) ]; then
			echo "pay_archive goes on past the $ARCHIVE_PAYMENTS payments loaded" >&2
			return 1
		fi
	done
	echo "   pay_archive: $archived payments in $batches batches, $total_ms ms with the last call's (0)" >&2
	n=$(sql -c "SELECT count(*) FROM pay_ledger")
	if [ "$archived" -ne "$ARCHIVE_PAYMENTS" ] || [ "$n" -ne "$ARCHIVE_LIVE" ]; then
		echo "pay_archive archived $archived of $ARCHIVE_PAYMENTS payments and left $n in the ledger (expected $ARCHIVE_LIVE)" >&2
		return 1
	fi
	archive_row="| 9. pay_archive (payments/s) | $archived payments in $batches batches of $ARCHIVE_BATCH: $(awk -v t="$total_ms" 'BEGIN { printf "%.1f", t / 1000 }') s (a batch $(printf '%s\n' "${batch_ms[@]}" | sort -g | head -n 1 | awk '{ printf "%.1f", $1 / 1000 }')–$(printf '%s\n' "${batch_ms[@]}" | sort -g | tail -n 1 | awk '{ printf "%.1f", $1 / 1000 }') s), after a first fold of pay_stats of $(awk -v t="$fold_ms" 'BEGIN { printf "%.1f", t / 1000 }') s (not included) | **$(awk -v n="$archived" -v t="$total_ms" 'BEGIN { printf "%.0f", n / t * 1000 }') payments/s** | — |"

	# a late retry while the month is kept
	outcome=$(claim_outcome O1)
	if [ "$outcome" != ALREADY_SUCCEEDED ]; then
		echo "a claim of an archived payment, its month kept, answered $outcome, not ALREADY_SUCCEEDED" >&2
		return 1
	fi
	echo "== 9. a late retry of an archived payment (its month kept) vs the PK SELECT of a live row" >&2
	PGBENCH_DEFINES=(-D "archived=$ARCHIVE_PAYMENTS")
	compare bench_archived:archived_claim.pgbench bench_archived:pk_select.pgbench
	PGBENCH_DEFINES=()
	claim_row="| 9. late retry of an archived payment, its month kept (calls/s) | pay_claim (ALREADY_SUCCEEDED from the archive) $(printf %.0f "${MEDIAN[bench_archived:archived_claim.pgbench]}"), PK SELECT of a live row $(printf %.0f "${MEDIAN[bench_archived:pk_select.pgbench]}") | **$(paired "${RUNS[bench_archived:archived_claim.pgbench]}" "${RUNS[bench_archived:pk_select.pgbench]}" 'PK SELECT')** | — |"

	# the month dropped, as a DBA drops it, and vacuumed
	sql -c "DROP TABLE pay_ledger_archive_$ARCHIVE_MONTH, pay_journal_archive_$ARCHIVE_MONTH"
	outcome=$(claim_outcome O1)
	if [ "$outcome" != 55000 ]; then
		echo "a claim of an archived payment, its month dropped, answered $outcome, not 55000" >&2
		return 1
	fi
	for db in "${ARCHIVE_DBS[@]}"; do DB=$db sql -c "VACUUM ANALYZE"; done
	DB=bench_archived
	read -r arch_ledger arch_journal arch_rows < <(archive_sizes)
	read -r live_ledger live_journal live_rows < <(DB=bench_live archive_sizes)
	keys_vacuumed_bytes=$(sql -c "SELECT pg_total_relation_size('pay_archive_keys')")
	echo "   after the drop and VACUUM: pay_ledger $arch_ledger vs $live_ledger bytes, pay_journal $arch_journal vs $live_journal; pay_archive_keys $keys_vacuumed_bytes bytes" >&2
	size_row="| 9. ledger after the archive, the drop and a plain VACUUM (MB) | pay_ledger $(mb "$arch_ledger") vs $(mb "$live_ledger") with the live set alone, pay_journal $(mb "$arch_journal") vs $(mb "$live_journal") ($arch_rows ledger rows each)$(awk -v a="$arch_ledger" -v b="$live_ledger" 'BEGIN { if (a > 1.1 * b) printf ": the archived rows\x27 space is free in the files for new payments, not given back" }') | **$(ratio "$arch_ledger" "$live_ledger")× pay_ledger, $(ratio "$arch_journal" "$live_journal")× pay_journal** | — |"

	echo "== 9. a new payment right after the archive (plain VACUUM) vs nothing archived" >&2
	compare bench_archived:api.pgbench bench_live:api.pgbench
	vacuumed_row="| 9. new payment right after $ARCHIVE_PAYMENTS payments were archived and their month dropped, a plain VACUUM (payments/s) | archived $(printf %.0f "${MEDIAN[bench_archived:api.pgbench]}"), nothing archived $(printf %.0f "${MEDIAN[bench_live:api.pgbench]}") | **$(paired "${RUNS[bench_archived:api.pgbench]}" "${RUNS[bench_live:api.pgbench]}" 'nothing archived')** | — |"

	# the space given back as doc/operations.md does it, while payments could
	# go on: pg_repack of the ledger, the journal and the hashes; the live
	# set's size is that of bench_live's tables repacked alike
	for db in "${ARCHIVE_DBS[@]}"; do
		DB=$db sql -c "CREATE EXTENSION IF NOT EXISTS pg_repack"
		started_repack=$(date +%s.%N)
		if ! out=$(pg_repack -d "$db" -t pay_ledger -t pay_journal -t pay_archive_keys 2>&1); then
			echo "pg_repack failed: $out" >&2
			return 1
		fi
		[ "$db" = bench_archived ] && repack_s=$(awk -v a="$started_repack" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		DB=$db sql -c "VACUUM ANALYZE"
	done
	DB=bench_archived
	read -r arch_ledger arch_journal arch_rows < <(archive_sizes)
	read -r live_ledger live_journal live_rows < <(DB=bench_live archive_sizes)
	read -r keys_bytes keys_live hashes < <(sql -F ' ' -c "SELECT pg_total_relation_size('pay_archive_keys'),
		(SELECT sum(pg_column_size(k.*)) FROM pay_archive_keys AS k),
		(SELECT sum(cardinality(pay_archive_key_unpack(k.lo, k.hashes))) FROM pay_archive_keys AS k)")
	echo "   after pg_repack ($repack_s s): pay_ledger $arch_ledger vs $live_ledger bytes, pay_journal $arch_journal vs $live_journal; pay_archive_keys $keys_bytes bytes ($keys_live in its rows), $hashes hashes" >&2
	repacked_row="| 9. ledger after the archive, the drop and pg_repack (MB) | pay_ledger $(mb "$arch_ledger") vs $(mb "$live_ledger") with the live set alone (repacked alike), pay_journal $(mb "$arch_journal") vs $(mb "$live_journal") ($arch_rows and $live_rows ledger rows); pg_repack took $repack_s s | **$(ratio "$arch_ledger" "$live_ledger")× pay_ledger, $(ratio "$arch_journal" "$live_journal")× pay_journal** | ≤ 1.1× |"
	keys_row="| 9. pay_archive_keys per archived payment (bytes) | $keys_bytes bytes after pg_repack, its index included, for $hashes hashes of $archived payments; its rows $keys_live bytes, $(awk -v b="$keys_live" -v n="$hashes" 'BEGIN { printf "%.1f", b / n }') a hash | **$(awk -v b="$keys_bytes" -v n="$archived" 'BEGIN { printf "%.1f", b / n }') bytes/payment** | ≤ 16 |"
	keys_vacuumed_row="| 9. pay_archive_keys per archived payment after a plain VACUUM (bytes) | $keys_vacuumed_bytes bytes, its index included: each pay_archive writes again the rows its hashes fall in, and the space of the rows replaced stays in the file | **$(awk -v b="$keys_vacuumed_bytes" -v n="$archived" 'BEGIN { printf "%.1f", b / n }') bytes/payment** | — |"

	echo "== 9. a new payment with $ARCHIVE_PAYMENTS payments archived and dropped, after pg_repack, vs nothing archived" >&2
	compare bench_archived:api.pgbench bench_live:api.pgbench
	new_row="| 9. new payment with $ARCHIVE_PAYMENTS payments archived, their month dropped and the ledger repacked (payments/s) | archived $(printf %.0f "${MEDIAN[bench_archived:api.pgbench]}"), nothing archived $(printf %.0f "${MEDIAN[bench_live:api.pgbench]}") (two databases, $ARCHIVE_LIVE live payments each at the start) | **$(paired "${RUNS[bench_archived:api.pgbench]}" "${RUNS[bench_live:api.pgbench]}" 'nothing archived')** | ≥ 0.95× |"
	# the same in backend CPU (as row 1b), which the machine's other work
	# disturbs less than a rate
	echo "== 9b. backend CPU per new payment, $CPU_PAYMENTS payments in one session, in each database" >&2
	cpu_archived='' cpu_live='' wal_archived='' wal_live=''
	for round in $(seq "$ROUNDS"); do
		for db in "${ARCHIVE_DBS[@]}"; do
			DB=$db sql -c "VACUUM ANALYZE"
			read -r cpu wal < <(DB=$db cpu_and_wal api "C9-$round-")
			if [ "$db" = bench_live ]; then
				cpu_live+="$cpu " wal_live+="$wal "
			else
				cpu_archived+="$cpu " wal_archived+="$wal "
			fi
		done
	done
	echo "   archived: ${cpu_archived}µs, ${wal_archived}WAL bytes; nothing archived: ${cpu_live}µs, ${wal_live}WAL bytes" >&2
	cpu_row="| 9b. backend CPU per new payment with $ARCHIVE_PAYMENTS payments archived and dropped, after pg_repack (µs, one session) | archived $(median_of "$cpu_archived"), nothing archived $(median_of "$cpu_live"); WAL archived $(median_of "$wal_archived"), nothing archived $(median_of "$wal_live") bytes a payment | **$(paired "$cpu_live" "$cpu_archived" 'nothing archived (speed)')** | ≥ 0.95× |"

	ROWS+=("$new_row" "$cpu_row")
	[ -z "${ARCHIVE_INSTR_ROW:-}" ] || ROWS+=("$ARCHIVE_INSTR_ROW")
	ROWS+=("$vacuumed_row" "$repacked_row" "$size_row" "$keys_row" "$keys_vacuumed_row" "$claim_row" "$archive_row")
	echo "   row 9 took $((SECONDS - started)) s" >&2
}

# Row 10, batches: payments/s of pay_open_claim_many + pay_settle_many in
# batches of BATCH_SIZE (test/bench/batch.pgbench) against pay_open_claim +
# pay_succeed one call each (open_claim.pgbench), side by side as compare()
# runs them; and the WAL each writes a payment, by one client from a fresh
# checkpoint, over BATCH_WAL_PAYMENTS payments.
BATCH_SIZE=1000
BATCH_WAL_PAYMENTS=${BENCH_BATCH_WAL_PAYMENTS:-10000}

# WAL bytes a payment of script $1, which makes $2 payments a transaction.
batch_wal() {
	local script=$1 per_xact=$2 lsn0
	sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
	lsn0=$(sql -c "SELECT pg_current_wal_insert_lsn()")
	pgbench -n -M prepared -c 1 -j 1 -t $((BATCH_WAL_PAYMENTS / per_xact)) -f "$HERE/$script" "$DB" \
		>/dev/null 2>&1 || { echo "pgbench $script failed" >&2; return 1; }
	sql -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn0') / $BATCH_WAL_PAYMENTS)"
}

batch_bench() {
	local batch_rates='' i wal_single wal_batch
	echo "== 10. batches of $BATCH_SIZE: pay_open_claim_many + pay_settle_many vs pay_open_claim + pay_succeed" >&2
	compare batch.pgbench open_claim.pgbench
	# a batch transaction is BATCH_SIZE payments
	for i in ${RUNS[batch.pgbench]}; do
		batch_rates+="$(awk -v r="$i" -v n="$BATCH_SIZE" 'BEGIN { printf "%.0f", r * n }') "
	done
	wal_single=$(batch_wal open_claim.pgbench 1)
	wal_batch=$(batch_wal batch.pgbench "$BATCH_SIZE")
	echo "   batch payments/s: ${batch_rates}; WAL a payment: batch $wal_batch, single $wal_single bytes" >&2
	row "10. new payments in batches of $BATCH_SIZE (payments/s; WAL bytes a payment)" \
		"batches $(printf %.0f "$(median_of "$batch_rates")"), single calls $(printf %.0f "${MEDIAN[open_claim.pgbench]}"); WAL batches $wal_batch, single calls $wal_single" \
		"$(paired "$batch_rates" "${RUNS[open_claim.pgbench]}" 'single calls'); WAL $(ratio "$wal_batch" "$wal_single")×" \
		"≥ 5×; WAL ≤ 1×"
}

# BENCH_ONLY=batch: row 10 alone
if [ "${BENCH_ONLY:-}" = batch ]; then
	batch_bench
	table
	exit 0
fi

# Row 11, the card flow: a capture's three calls (pay_capture_open,
# pay_claim, pay_succeed) against a refund's same three (pay_refund_open,
# pay_claim, pay_succeed), the path captures were built on, and a new
# payment's two (api.pgbench), side by side.  Each capture takes 1.00 of one
# of CARD_HOLDS held authorizations, each refund 1.00 of one of as many
# SUCCESS payments, all of 1 000 000 EUR and written as a restore writes
# them (the ledger's triggers off, their journal rows alongside), so that
# no run meets a limit and a step's checks sum few siblings.
CARD_HOLDS=${BENCH_CARD_HOLDS:-100000}
card_load() {
	cat <<SQL
SET session_replication_role = replica;
SET row_security = off;
SET check_function_bodies = false;
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency, channel_ref, kind, expires_in, expires_at)
    SELECT 'CA' || g, 'SUCCESS', 1, 1000000, 'EUR', 'HOLD-CA' || g, 'AUTHORIZATION', '7 days', now() + '7 days'
    FROM generate_series(1, $CARD_HOLDS) AS g;
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency, channel_ref)
    SELECT 'RP' || g, 'SUCCESS', 1, 1000000, 'EUR', 'BANK-RP' || g FROM generate_series(1, $CARD_HOLDS) AS g;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status, amount, currency, channel_ref)
    SELECT p || g, 1, 'PROCESSING', 'SUCCESS', 1000000, 'EUR', 'BANK-' || p || g
    FROM generate_series(1, $CARD_HOLDS) AS g, (VALUES ('CA'), ('RP')) AS k (p);
RESET session_replication_role;
RESET row_security;
RESET check_function_bodies;
VACUUM ANALYZE pay_ledger;
VACUUM ANALYZE pay_journal;
SQL
}

# Row 11d, instructions per step, counted as row 1d counts a payment:
# CARD_INSTR_STEPS steps of a contender in one single-user backend and three
# times as many in another, the difference over the extra steps.  A
# single-user backend cannot pass the bizNo an opener returns on to the next
# statement: the claim and the settlement of a capture or refund find it by
# (parent, refund_key), an index probe each that a caller holding the bizNo
# does not make, the same for both.
CARD_INSTR_STEPS=${BENCH_CARD_INSTR_STEPS:-300}
card_steps() {
	local contender=$1 count=$2 key=$3 parent=CA i
	if [ "$contender" = api ]; then
		payments api "$count" "$key"
		return
	fi
	if [ "$contender" = capture ]; then
		echo "PREPARE open_step(text, text) AS SELECT pay_capture_open(\$1, \$2, 1.00, false);"
	else
		parent=RP
		echo "PREPARE open_step(text, text) AS SELECT pay_refund_open(\$1, \$2, 1.00);"
	fi
	echo "PREPARE claim_step(text, text) AS SELECT action FROM pay_claim((SELECT bizno FROM pay_ledger WHERE parent = \$1 AND refund_key = \$2));"
	echo "PREPARE succeed_step(text, text) AS SELECT pay_succeed((SELECT bizno FROM pay_ledger WHERE parent = \$1 AND refund_key = \$2), 'bank-ref', 1);"
	for i in $(seq "$count"); do
		echo "EXECUTE open_step('$parent$((i % CARD_HOLDS + 1))', '$key$i');"
		echo "EXECUTE claim_step('$parent$((i % CARD_HOLDS + 1))', '$key$i');"
		echo "EXECUTE succeed_step('$parent$((i % CARD_HOLDS + 1))', '$key$i');"
	done
}
card_instr_count() {
	local count=$1 contender=$2 key=$3 log=$INSTR_DIR/callgrind.log
	card_steps "$contender" "$count" "$key" |
		valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			--toggle-collect=debugStartup --toggle-collect=debugtup --collect-atstart=yes \
			postgres --single -D "$INSTR_DIR/data" -c synchronous_commit=off \
			-c idempotent_pay.foreign_keys=accept instr >"$log" 2>&1
	if grep -q -E '(^|\] )(ERROR|FATAL|PANIC):' "$log"; then
		echo "callgrind of $contender:" >&2
		grep -m 3 -E '(^|\] )(ERROR|FATAL|PANIC):' "$log" >&2
		return 1
	fi
	sed -n 's/^==[0-9]*== Collected : //p' "$log"
}
card_instructions() {
	local contender few many
	declare -A IR
	echo "== 11d. instructions per step (callgrind, a single-user backend)" >&2
	INSTR_DIR=$(mktemp -d)
	initdb -D "$INSTR_DIR/data" -A trust >/dev/null
	pg_ctl -D "$INSTR_DIR/data" -l "$INSTR_DIR/server.log" -w \
		-o "-c listen_addresses='' -k $INSTR_DIR -c fsync=off" start >/dev/null
	instr_sql postgres -c "CREATE DATABASE instr" \
		-c "ALTER DATABASE instr SET idempotent_pay.foreign_keys = accept"
	instr_sql instr -c "CREATE EXTENSION idempotent_pay" >/dev/null
	card_load | instr_sql instr >/dev/null
	pg_ctl -D "$INSTR_DIR/data" -m fast -w stop >/dev/null
	for contender in capture refund api; do
		few=$(card_instr_count "$CARD_INSTR_STEPS" "$contender" "I1-$contender-")
		many=$(card_instr_count $((3 * CARD_INSTR_STEPS)) "$contender" "I3-$contender-")
		IR[$contender]=$(awk -v a="$few" -v b="$many" -v n="$CARD_INSTR_STEPS" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }')
	done
	rm -rf "$INSTR_DIR"
	echo "   capture ${IR[capture]}, refund ${IR[refund]}, new payment ${IR[api]}" >&2
	row "11d. instructions per step (callgrind, one backend: a count, not a rate)" \
		"capture $(kilo "${IR[capture]}"), refund $(kilo "${IR[refund]}"), new payment $(kilo "${IR[api]}")" \
		"$(ratio "${IR[refund]}" "${IR[capture]}")× refund, $(ratio "${IR[api]}" "${IR[capture]}")× new payment (fewer: faster)" "—"
}

card_bench() {
	echo "== 11. the card flow: capture vs refund vs new payment ($CARD_HOLDS authorizations and payments)" >&2
	card_load | sql >/dev/null
	PGBENCH_DEFINES=(-D "holds=$CARD_HOLDS")
	compare card_capture.pgbench card_refund.pgbench api.pgbench
	PGBENCH_DEFINES=()
	row "11. card capture: open, claim, succeed (steps/s)" \
		"capture $(printf %.0f "${MEDIAN[card_capture.pgbench]}"), refund $(printf %.0f "${MEDIAN[card_refund.pgbench]}")" \
		"$(paired "${RUNS[card_capture.pgbench]}" "${RUNS[card_refund.pgbench]}" 'refund, the same three calls')" "≥ 0.9×"
	row "11. card capture vs a new payment (steps/s)" \
		"capture $(printf %.0f "${MEDIAN[card_capture.pgbench]}"), new payment (pay_begin + pay_succeed) $(printf %.0f "${MEDIAN[api.pgbench]}")" \
		"$(paired "${RUNS[card_capture.pgbench]}" "${RUNS[api.pgbench]}" 'new payment')" "≥ 0.6×"
	card_instructions
}

# BENCH_ONLY=card: row 11 alone
if [ "${BENCH_ONLY:-}" = card ]; then
	card_bench
	table
	exit 0
fi

# BENCH_ONLY=instructions: rows 1d and 9c alone
if [ "${BENCH_ONLY:-}" = instructions ]; then
	instructions
	ROWS+=("$ARCHIVE_INSTR_ROW")
	table
	exit 0
fi

# BENCH_ONLY=archive: row 9 alone
if [ "${BENCH_ONLY:-}" = archive ]; then
	instructions
	archive_bench
	table
	exit 0
fi

# BENCH_ONLY=stats: row 8 alone
if [ "${BENCH_ONLY:-}" = stats ]; then
	load_large_ledger
	stats_reads
	stats_table
	exit 0
fi

# BENCH_ONLY=durable: row 7 alone
if [ "${BENCH_ONLY:-}" = durable ]; then
	durable
	durable_table
	exit 0
fi

echo "== 1. pay_begin + pay_succeed on new bizNos" >&2
compare api.pgbench lean.pgbench plpgsql.pgbench floor.pgbench
api_empty=${MEDIAN[api.pgbench]}
row "1. new payment (payments/s)" \
	"C ${MEDIAN[api.pgbench]}, bare SQL floor ${MEDIAN[floor.pgbench]}" \
	"$(paired "${RUNS[api.pgbench]}" "${RUNS[floor.pgbench]}" floor)" "≥ 0.95×"
row "1. new payment (payments/s)" \
	"C ${MEDIAN[api.pgbench]}, lean PL/pgSQL ${MEDIAN[lean.pgbench]}" \
	"$(paired "${RUNS[api.pgbench]}" "${RUNS[lean.pgbench]}" 'lean PL/pgSQL')" "≥ 1.3×"
row "1. new payment (payments/s)" \
	"C ${MEDIAN[api.pgbench]}, full PL/pgSQL ${MEDIAN[plpgsql.pgbench]}" \
	"$(paired "${RUNS[api.pgbench]}" "${RUNS[plpgsql.pgbench]}" 'full PL/pgSQL')" "—"
instructions
# BENCH_ONLY=new-payment: this row alone (as another major runs it)
if [ "${BENCH_ONLY:-}" = new-payment ]; then
	table
	exit 0
fi

# row 7 here, while every contender's tables hold as many payments as row 1 left
durable

echo "== 1b. backend CPU and WAL per payment, $CPU_PAYMENTS payments in one session" >&2
declare -A CPU WAL
for contender in api lean plpgsql floor; do CPU[$contender]=''; done
for round in $(seq "$ROUNDS"); do
	sql -c "VACUUM ANALYZE"
	for contender in api lean plpgsql floor; do
		read -r cpu wal < <(cpu_and_wal "$contender" "C$contender$round-")
		CPU[$contender]+="$cpu " WAL[$contender]=$wal
	done
done
declare -A CPU_MEDIAN
for contender in api lean plpgsql floor; do
	CPU_MEDIAN[$contender]=$(echo "${CPU[$contender]}" | tr ' ' '\n' | grep . | median)
	echo "   $contender: ${CPU[$contender]}-> median ${CPU_MEDIAN[$contender]} µs, ${WAL[$contender]} WAL bytes" >&2
done
row "1b. backend CPU per payment (µs, one session)" \
	"C ${CPU_MEDIAN[api]}, lean PL/pgSQL ${CPU_MEDIAN[lean]}, full PL/pgSQL ${CPU_MEDIAN[plpgsql]}, floor ${CPU_MEDIAN[floor]}" \
	"$(ratio "${CPU_MEDIAN[floor]}" "${CPU_MEDIAN[api]}")× floor, $(ratio "${CPU_MEDIAN[lean]}" "${CPU_MEDIAN[api]}")× lean (speed)" "—"
row "1c. WAL per payment (bytes)" \
	"C ${WAL[api]}, lean PL/pgSQL ${WAL[lean]}, full PL/pgSQL ${WAL[plpgsql]}, floor ${WAL[floor]}" \
	"$(ratio "${WAL[api]}" "${WAL[floor]}")× floor" "—"

echo "== 2. pay_begin on a SUCCESS bizNo vs a primary-key SELECT" >&2
compare duplicate.pgbench pk_select.pgbench
row "2. duplicate retry (calls/s)" \
	"pay_begin ${MEDIAN[duplicate.pgbench]}, PK SELECT ${MEDIAN[pk_select.pgbench]}" \
	"$(paired "${RUNS[duplicate.pgbench]}" "${RUNS[pk_select.pgbench]}" 'PK SELECT')" "≥ 0.9×"

echo "== 3. status UPDATE on a user table" >&2
compare update_guarded.pgbench update_unguarded.pgbench update_plpgsql_guarded.pgbench
row "3. status UPDATE on a user table (updates/s)" \
	"pay_guard ${MEDIAN[update_guarded.pgbench]}, none ${MEDIAN[update_unguarded.pgbench]}, PL/pgSQL ${MEDIAN[update_plpgsql_guarded.pgbench]}" \
	"$(paired "${RUNS[update_guarded.pgbench]}" "${RUNS[update_unguarded.pgbench]}" unguarded)" "≥ 0.95×"

echo "== 4. pay_bizno vs gen_random_uuid()::text, 1M ids" >&2
bizno_runs='' uuid_runs=''
for round in $(seq "$ROUNDS"); do
	bizno_runs+="$(sql -c "SELECT bench_ms('SELECT count(pay_bizno(''PAY'', ''X'')) FROM generate_series(1, 1000000)')") "
	uuid_runs+="$(sql -c "SELECT bench_ms('SELECT count(gen_random_uuid()::text) FROM generate_series(1, 1000000)')") "
done
bizno_ms=$(echo "$bizno_runs" | tr ' ' '\n' | grep . | median)
uuid_ms=$(echo "$uuid_runs" | tr ' ' '\n' | grep . | median)
echo "   pay_bizno: $bizno_runs-> $bizno_ms ms; uuid: $uuid_runs-> $uuid_ms ms" >&2
row "4. 1M ids in one statement (ms)" "pay_bizno $(printf %.0f "$bizno_ms"), gen_random_uuid()::text $(printf %.0f "$uuid_ms")" \
	"$(ratio "$uuid_ms" "$bizno_ms")× as fast" "≥ 1×"

card_bench

echo "== 6. backend memory around 1M API calls in one session" >&2
memory=$(sql <<'SQL'
SELECT bench_calls(1000);
SELECT sum(total_bytes) AS before FROM pg_backend_memory_contexts \gset
SELECT bench_calls(500000);
SELECT sum(total_bytes) - :before FROM pg_backend_memory_contexts;
SQL
)
memory=$(echo "$memory" | tail -n 1)
echo "   growth: $memory bytes" >&2

echo "== 5. pay_begin + pay_succeed with $LARGE_LEDGER more ledger rows" >&2
load_large_ledger
compare api.pgbench
row "5. pay_begin + pay_succeed with $(sql -c 'SELECT count(*) FROM pay_ledger') ledger rows (payments/s)" \
	"${MEDIAN[api.pgbench]} vs $api_empty before loading" \
	"$(ratio "${MEDIAN[api.pgbench]}" "$api_empty")×" "≥ 0.9×"
row "6. backend memory growth after 1M API calls in one session" \
	"$memory bytes" "$(awk -v b="$memory" 'BEGIN { printf "%.3f MB", b / 1048576 }')" "< 1 MB"

stats_reads
archive_bench
batch_bench
table
durable_table
stats_table
