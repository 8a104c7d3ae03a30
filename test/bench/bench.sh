#!/usr/bin/env bash
# test/bench/bench.sh — the benchmarks of SPEC section 10, run by
# `test/run bench` against its throwaway cluster (PGHOST, PGPORT set).
# Every comparison runs its contenders side by side, ROUNDS times, and
# reports the medians and their ratio.  Prints a Markdown table.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DB=bench
ROUNDS=${BENCH_ROUNDS:-5}
RUN_SECONDS=${BENCH_SECONDS:-8}
CLIENTS=2
LARGE_LEDGER=${BENCH_LARGE_LEDGER:-10000000}
export PGOPTIONS="-c synchronous_commit=off"

sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" "$@"; }

# Transactions per second of one pgbench script, excluding connection time,
# each run from the same start: vacuumed, analyzed, checkpointed.
tps() {
	sql -c "VACUUM ANALYZE" -c "CHECKPOINT"
	pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$RUN_SECONDS" -f "$HERE/$1" "$DB" 2>/dev/null |
		awk '/^tps = / { print $3; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Run scripts side by side, ROUNDS times; set MEDIAN[script].
declare -A MEDIAN
compare() {
	local round script
	declare -A runs=()
	for round in $(seq "$ROUNDS"); do
		for script in "$@"; do
			runs[$script]+="$(tps "$script") "
		done
	done
	for script in "$@"; do
		MEDIAN[$script]=$(echo "${runs[$script]}" | tr ' ' '\n' | grep . | median)
		echo "   $script: ${runs[$script]}-> median ${MEDIAN[$script]} tps" >&2
	done
}

ROWS=()
row() { ROWS+=("| $1 | $2 | **$3** | $4 |"); }

echo "== setting up" >&2
psql -X -q -d postgres -c "CREATE DATABASE $DB"
sql -c "CREATE EXTENSION idempotent_pay" -f "$HERE/plpgsql_pay.sql" -f "$HERE/floor.sql" >/dev/null
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
        PERFORM pay_begin('MEM-' || i);
        PERFORM pay_succeed('MEM-' || i);
    END LOOP;
END $$;
-- every contender starts from 100k settled payments (and the same plans)
SET session_replication_role = replica;
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
RESET session_replication_role;
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

echo "== 1. pay_begin + pay_succeed on new bizNos" >&2
compare api.pgbench plpgsql.pgbench floor.pgbench
api_empty=${MEDIAN[api.pgbench]}
row "1. pay_begin + pay_succeed, new bizNo (payments/s)" \
	"C ${MEDIAN[api.pgbench]}, bare SQL ${MEDIAN[floor.pgbench]}" \
	"$(ratio "${MEDIAN[api.pgbench]}" "${MEDIAN[floor.pgbench]}")× floor" "≥ 0.95×"
row "1. pay_begin + pay_succeed, new bizNo (payments/s)" \
	"C ${MEDIAN[api.pgbench]}, PL/pgSQL ${MEDIAN[plpgsql.pgbench]}" \
	"$(ratio "${MEDIAN[api.pgbench]}" "${MEDIAN[plpgsql.pgbench]}")× PL/pgSQL" "≥ 1.3×"

echo "== 2. pay_begin on a SUCCESS bizNo vs a primary-key SELECT" >&2
compare duplicate.pgbench pk_select.pgbench
row "2. duplicate retry (calls/s)" \
	"pay_begin ${MEDIAN[duplicate.pgbench]}, PK SELECT ${MEDIAN[pk_select.pgbench]}" \
	"$(ratio "${MEDIAN[duplicate.pgbench]}" "${MEDIAN[pk_select.pgbench]}")×" "≥ 0.9×"

echo "== 3. status UPDATE on a user table" >&2
compare update_guarded.pgbench update_unguarded.pgbench update_plpgsql_guarded.pgbench
row "3. status UPDATE on a user table (updates/s)" \
	"pay_guard ${MEDIAN[update_guarded.pgbench]}, none ${MEDIAN[update_unguarded.pgbench]}, PL/pgSQL ${MEDIAN[update_plpgsql_guarded.pgbench]}" \
	"$(ratio "${MEDIAN[update_guarded.pgbench]}" "${MEDIAN[update_unguarded.pgbench]}")× unguarded" "≥ 0.95×"

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
sql >/dev/null <<SQL
SET session_replication_role = replica;
SET maintenance_work_mem = '1GB';
INSERT INTO pay_ledger (bizno, status, attempt, amount, currency)
    SELECT 'L' || g, 'SUCCESS', 1, 10, 'EUR' FROM generate_series(1, $LARGE_LEDGER) AS g;
INSERT INTO pay_journal (bizno, attempt, from_status, to_status)
    SELECT 'L' || g, 1, 'PROCESSING', 'SUCCESS' FROM generate_series(1, $LARGE_LEDGER) AS g;
RESET session_replication_role;
VACUUM ANALYZE pay_ledger;
VACUUM ANALYZE pay_journal;
SQL
compare api.pgbench
row "5. pay_begin + pay_succeed with $(sql -c 'SELECT count(*) FROM pay_ledger') ledger rows (payments/s)" \
	"${MEDIAN[api.pgbench]} vs $api_empty before loading" \
	"$(ratio "${MEDIAN[api.pgbench]}" "$api_empty")×" "≥ 0.9×"
row "6. backend memory growth after 1M API calls in one session" \
	"$memory bytes" "$(awk -v b="$memory" 'BEGIN { printf "%.3f MB", b / 1048576 }')" "< 1 MB"

echo
echo "| comparison | figures (medians of $ROUNDS runs, $RUN_SECONDS s each, $CLIENTS clients) | ratio | target |"
echo "|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
