#!/usr/bin/env bash
# test/bench/proxy_bench.sh — idempotent_pay through PL/Proxy, run by
# `test/run bench` after bench.sh (or alone with
# BENCH_ONLY=proxy).  The throwaway cluster (PGHOST, PGPORT) is the proxy;
# BENCH_SHARD_PORTS names the ports of four shard clusters on the same
# socket directory, which test/run started with synchronous_commit = off.
#
# 1. One new payment, pay_begin + pay_succeed on a new key (api.pgbench,
# the same script bench.sh measures), by four contenders, side by side,
# ROUNDS times:
#   direct   pgbench connected to a database on shard 1
#   proxy/1  through the proxy, 4 partitions all on shard 1
#   proxy/2  through the proxy, 4 partitions on shards 1 and 2
#   proxy/4  through the proxy, 4 partitions on shards 1 to 4
# The partition count is the same everywhere, so every key lands on the same
# partition number in every layout; only the servers behind them change.
# For each: payments/s (median), pgbench's mean latency, and the machine's
# CPU time per payment (all processes, from /proc/stat).
#
# 2. Batches through the proxy (proxy/4): 1 000 new payments by one
# pay_open_claim_many and one pay_settle_many of its claims (batch.pgbench,
# bench.sh's row 10) against the same payments by pay_open_claim +
# pay_succeed, one call each (open_claim.pgbench), side by side, ROUNDS
# times, every other round in reverse order: payments/s, and the ratio of
# the two rates in each round (the median and the range).
#
# Prints Markdown tables.  BENCH_PROXY_ONLY=batch runs part 2 alone.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${BENCH_ROUNDS:-5}
RUN_SECONDS=${BENCH_SECONDS:-8}
CLIENTS=${BENCH_PROXY_CLIENTS:-4}
PARTITIONS=4
read -r -a SHARD_PORTS <<<"${BENCH_SHARD_PORTS:?names the ports of the shard clusters}"
[ "${#SHARD_PORTS[@]}" -ge 4 ] || { echo "proxy_bench.sh needs 4 shard clusters" >&2; exit 2; }
export PGOPTIONS="-c synchronous_commit=off"

psql_on() {
	local port=$1 db=$2
	shift 2
	psql -X -q -A -t -v ON_ERROR_STOP=1 -p "$port" -d "$db" "$@"
}

# The databases of a contender, as "port database" lines.
declare -A DATABASES

# A proxy database proxy<shards> in front of PARTITIONS partition databases
# b<shards>_p<p>, partition p on shard p % shards.
make_layout() {
	local shards=$1 p port options=()
	DATABASES[proxy/$shards]=""
	for p in $(seq 0 $((PARTITIONS - 1))); do
		port=${SHARD_PORTS[$((p % shards))]}
		psql_on "$port" postgres -c "CREATE DATABASE b${shards}_p$p"
		# the benchmark pays under keys of its own ('A1'), keys of another system
		psql_on "$port" postgres -c "ALTER DATABASE b${shards}_p$p SET idempotent_pay.foreign_keys = accept"
		psql_on "$port" "b${shards}_p$p" -c "SET client_min_messages = warning" \
			-c "CREATE EXTENSION idempotent_pay"
		options+=("p$p 'host=$PGHOST port=$port dbname=b${shards}_p$p'")
		DATABASES[proxy/$shards]+="$port b${shards}_p$p"$'\n'
	done
	psql -X -q -d postgres -c "CREATE DATABASE proxy$shards"
	psql_on "$PGPORT" "proxy$shards" -c "SET client_min_messages = warning" \
		-c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION idempotent_pay_proxy" \
		-c "CREATE SERVER idempotent_pay FOREIGN DATA WRAPPER plproxy OPTIONS ($(IFS=,; echo "${options[*]}"))" \
		-c "CREATE USER MAPPING FOR PUBLIC SERVER idempotent_pay"
}

# "port database" pgbench connects to for a contender.
target_of() {
	case "$1" in
		direct) echo "${SHARD_PORTS[0]} bench_direct" ;;
		proxy/*) echo "$PGPORT proxy${1#proxy/}" ;;
	esac
}

# Busy and total jiffies of the whole machine, from /proc/stat.
cpu_jiffies() {
	awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8 + $9; print busy, busy + $5 + $6; exit }' /proc/stat
}

# One pgbench run of a contender, from the same start (its databases
# vacuumed and analyzed, every shard checkpointed): prints payments/s,
# mean latency in ms and machine CPU microseconds per payment.  The script
# is api.pgbench, or $2, which makes $3 payments a transaction.
run_once() {
	local contender=$1 script=${2:-api.pgbench} per_xact=${3:-1} port db busy0 total0 busy1 total1 out txns
	while read -r port db; do
		[ -n "$port" ] && psql_on "$port" "$db" -c "VACUUM ANALYZE"
	done <<<"${DATABASES[$contender]}"
	for port in "${SHARD_PORTS[@]}"; do psql_on "$port" postgres -c "CHECKPOINT"; done
	read -r port db < <(target_of "$contender")
	read -r busy0 total0 < <(cpu_jiffies)
	out=$(pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$RUN_SECONDS" -p "$port" \
		-f "$HERE/$script" "$db" 2>/dev/null)
	read -r busy1 total1 < <(cpu_jiffies)
	txns=$(awk '/^number of transactions actually processed:/ { print $NF; exit }' <<<"$out")
	[ "${txns:-0}" -gt 0 ] || { echo "pgbench $script through $contender made no transaction" >&2; exit 1; }
	awk -v out="$out" -v txns="$txns" -v n="$per_xact" -v busy=$((busy1 - busy0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {
		k = split(out, line, "\n")
		for (i = 1; i <= k; i++) {
			if (line[i] ~ /^tps = /) { split(line[i], f, " "); tps = f[3] }
			if (line[i] ~ /^latency average = /) { split(line[i], f, " "); latency = f[4] }
		}
		printf "%.0f %s %.0f\n", tps * n, latency, busy / hz * 1e6 / (txns * n)
	}'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "== setting up: a direct database on shard 1, and proxies in front of 1, 2 and 4 shards" >&2
psql_on "${SHARD_PORTS[0]}" postgres -c "CREATE DATABASE bench_direct" \
	-c "ALTER DATABASE bench_direct SET idempotent_pay.foreign_keys = accept"
psql_on "${SHARD_PORTS[0]}" bench_direct -c "SET client_min_messages = warning" \
	-c "CREATE EXTENSION idempotent_pay"
DATABASES[direct]="${SHARD_PORTS[0]} bench_direct"$'\n'
for shards in 1 2 4; do make_layout "$shards"; done

CONTENDERS=(direct proxy/1 proxy/2 proxy/4)
[ "${BENCH_PROXY_ONLY:-}" != batch ] || CONTENDERS=()
declare -A TPS LATENCY CPU
if [ "${#CONTENDERS[@]}" -gt 0 ]; then
	echo "== new payment (pay_begin + pay_succeed), $CLIENTS clients, $ROUNDS rounds of $RUN_SECONDS s" >&2
fi
for round in $(seq "$ROUNDS"); do
	for contender in "${CONTENDERS[@]}"; do
		read -r tps latency cpu < <(run_once "$contender")
		TPS[$contender]+="$tps " LATENCY[$contender]+="$latency " CPU[$contender]+="$cpu "
	done
done

# Part 2: batches of 1 000 through proxy/4 against the single calls
# through it, every other round in reverse order.
BATCH_SIZE=1000
BATCH_CONTENDERS=(batch.pgbench open_claim.pgbench)
declare -A BATCH_PER_XACT=([batch.pgbench]=$BATCH_SIZE [open_claim.pgbench]=1)
declare -A BTPS BLATENCY BCPU
echo "== batches of $BATCH_SIZE through the proxy (4 partitions on 4 shards): pay_open_claim_many +" \
	"pay_settle_many vs pay_open_claim + pay_succeed, $CLIENTS clients, $ROUNDS rounds of $RUN_SECONDS s" >&2
for round in $(seq "$ROUNDS"); do
	order=("${BATCH_CONTENDERS[@]}")
	[ $((round % 2)) -eq 1 ] || order=("${BATCH_CONTENDERS[1]}" "${BATCH_CONTENDERS[0]}")
	for script in "${order[@]}"; do
		read -r tps latency cpu < <(run_once proxy/4 "$script" "${BATCH_PER_XACT[$script]}")
		BTPS[$script]+="$tps " BLATENCY[$script]+="$latency " BCPU[$script]+="$cpu "
	done
done
declare -A TPS_MEDIAN LATENCY_MEDIAN CPU_MEDIAN
for contender in "${CONTENDERS[@]}"; do
	TPS_MEDIAN[$contender]=$(tr ' ' '\n' <<<"${TPS[$contender]}" | grep . | median)
	LATENCY_MEDIAN[$contender]=$(tr ' ' '\n' <<<"${LATENCY[$contender]}" | grep . | median)
	CPU_MEDIAN[$contender]=$(tr ' ' '\n' <<<"${CPU[$contender]}" | grep . | median)
	echo "   $contender: ${TPS[$contender]}payments/s -> median ${TPS_MEDIAN[$contender]};" \
		"latency ${LATENCY[$contender]}ms; CPU ${CPU[$contender]}µs/payment" >&2
done

for script in "${BATCH_CONTENDERS[@]}"; do
	echo "   $script: ${BTPS[$script]}payments/s -> median $(tr ' ' '\n' <<<"${BTPS[$script]}" | grep . | median);" \
		"latency ${BLATENCY[$script]}ms a transaction; CPU ${BCPU[$script]}µs/payment" >&2
done

# Every payment on the partition its route names, and the ledgers sound.
misplaced=0
for shards in 1 2 4; do
	p=0
	while read -r port db; do
		[ -n "$port" ] || continue
		keys=$(psql_on "$port" "$db" -c "SELECT string_agg(quote_literal(bizno), ',') FROM
			(SELECT bizno FROM pay_ledger ORDER BY random() LIMIT 200) AS sample")
		[ -n "$keys" ] && misplaced=$((misplaced + $(psql_on "$PGPORT" "proxy$shards" -c \
			"SELECT count(*) FROM unnest(ARRAY[$keys]) AS k WHERE pay_partition(k) <> $p")))
		p=$((p + 1))
	done <<<"${DATABASES[proxy/$shards]}"
	[ "$(psql_on "$PGPORT" "proxy$shards" -c "SELECT count(*) FROM pay_verify()")" = 0 ] ||
		{ echo "pay_verify() through proxy$shards is not empty" >&2; exit 1; }
done
[ "$misplaced" = 0 ] || { echo "$misplaced sampled payments are on a wrong partition" >&2; exit 1; }

row() {
	local contender=$1 against=$2 what=$3
	echo "| $what | ${TPS_MEDIAN[$contender]} | ${LATENCY_MEDIAN[$contender]} | ${CPU_MEDIAN[$contender]} |" \
		"**$(ratio "${TPS_MEDIAN[$contender]}" "${TPS_MEDIAN[$against]}")×** $against |"
}
if [ "${#CONTENDERS[@]}" -gt 0 ]; then
	echo
	echo "| new payment, $CLIENTS clients (medians of $ROUNDS runs, $RUN_SECONDS s each) | payments/s | latency (ms) | machine CPU per payment (µs) | ratio |"
	echo "|---|---|---|---|---|"
	echo "| direct, one shard database | ${TPS_MEDIAN[direct]} | ${LATENCY_MEDIAN[direct]} | ${CPU_MEDIAN[direct]} | — |"
	row proxy/1 direct "through the proxy, 4 partitions on 1 shard"
	row proxy/2 proxy/1 "through the proxy, 4 partitions on 2 shards"
	row proxy/4 proxy/1 "through the proxy, 4 partitions on 4 shards"
fi

# The batches' table: medians, and the median and range of the rounds'
# ratios batch / single (round i's batch rate over round i's single rate).
batch_median() { tr ' ' '\n' <<<"$1" | grep . | median; }
read -r -a batch_rates <<<"${BTPS[batch.pgbench]}"
read -r -a single_rates <<<"${BTPS[open_claim.pgbench]}"
ratios=()
for i in "${!batch_rates[@]}"; do ratios+=("$(ratio "${batch_rates[$i]}" "${single_rates[$i]}")"); done
echo
echo "| new payments through the proxy (4 partitions on 4 shards), $CLIENTS clients (medians of $ROUNDS runs, $RUN_SECONDS s each) | payments/s | latency (ms a transaction) | machine CPU per payment (µs) | ratio (median of the rounds', range) |"
echo "|---|---|---|---|---|"
echo "| pay_open_claim + pay_succeed, one call each | $(batch_median "${BTPS[open_claim.pgbench]}") |" \
	"$(batch_median "${BLATENCY[open_claim.pgbench]}") | $(batch_median "${BCPU[open_claim.pgbench]}") | — |"
echo "| pay_open_claim_many + pay_settle_many, batches of $BATCH_SIZE | $(batch_median "${BTPS[batch.pgbench]}") |" \
	"$(batch_median "${BLATENCY[batch.pgbench]}") | $(batch_median "${BCPU[batch.pgbench]}") |" \
	"**$(printf '%s\n' "${ratios[@]}" | median)×** single calls ($(printf '%s\n' "${ratios[@]}" | sort -g | head -1)–$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)) |"
