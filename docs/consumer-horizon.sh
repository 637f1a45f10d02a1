#!/bin/bash
# How long the live consumer takes to apply 1,000 new events (10 transactions of 100) while a
# write transaction stays open for 60 s in another database of the same server — the README's
# figure for `consume` under a held horizon.
#
#   docs/consumer-horizon.sh BINARY SERVER_URL
#   e.g. docs/consumer-horizon.sh target/debug/replay-ledger postgres://postgres@127.0.0.1:5432
#
# It creates (and drops first) the databases rl_horizon_archive and rl_horizon_other on that
# server, so use a server of your own: the transaction it holds open for a minute delays every
# consumer of the previous version on the whole server.
set -euo pipefail
BIN=$1
SERVER=$2
ARCHIVE=rl_horizon_archive
OTHER=rl_horizon_other
JOBS=$(mktemp -d)
trap 'rm -rf "$JOBS"' EXIT
cat >"$JOBS/effects.yaml" <<'YAML'
notificar-vendedor:
  webhook: { url: "http://127.0.0.1:9/unused" }
  idempotent: true
YAML
cat >"$JOBS/live.yaml" <<'YAML'
name: live
kind: live
effects:
  notificar-vendedor: { mode: suppress }
YAML
for db in $ARCHIVE $OTHER; do
  psql -q "$SERVER/postgres" -c "drop database if exists $db" -c "create database $db"
done
export DATABASE_URL="$SERVER/$ARCHIVE" METRICS_ADDR=127.0.0.1:0
"$BIN" --jobs-dir "$JOBS" migrate >/dev/null
"$BIN" --jobs-dir "$JOBS" consume >"$JOBS/consume.log" 2>&1 &
consumer=$!
sleep 3
psql -q "$SERVER/$OTHER" \
  -c "begin; select pg_current_xact_id(); select pg_sleep(60); commit;" >/dev/null &
holder=$!
sleep 1
start=$(date +%s.%N)
for t in $(seq 0 9); do
  psql -q "$DATABASE_URL" -c "insert into evento_arquivado
      (posicao, id, tipo, pedido_id, versao, payload, ocorrido_em)
    select g, 'evt-' || g, 'pedido.pago', 'ped-' || g, 1,
           jsonb_build_object('valorCentavos', 1000 + g, 'percentual', 5), now()
    from generate_series($t * 100 + 1, $t * 100 + 100) g"
done
until [ "$(psql -Atq "$DATABASE_URL" -c 'select count(*) from comissao')" = 1000 ]; do
  sleep 0.1
done
end=$(date +%s.%N)
open=$(psql -Atq "$DATABASE_URL" -c \
  "select count(*) from pg_stat_activity where datname = '$OTHER' and backend_xid is not null")
kill -TERM $consumer
wait $consumer
python3 -c "print(f'1000 events applied {$end - $start:.1f} s after the first insert; the other transaction still open: {\"yes\" if $open else \"no\"}')"
wait $holder
