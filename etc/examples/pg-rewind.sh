#!/bin/bash
# Resynchronises a former primary as a streaming standby of the new primary, with pg_rewind,
# so that a failback can follow (docs/steps/postgres.md, "Failback"). Run it on the host of
# the former primary, from an exec step or by hand:
#
#   pg-rewind.sh --pgdata /var/lib/postgresql/15/main \
#                --source 'host=10.0.0.2 port=5432 user=rewind dbname=postgres' \
#                [--primary-conninfo 'host=10.0.0.2 port=5432 user=replicator ...'] \
#                [--stop 'pg_ctlcluster 15 main stop -m fast'] \
#                [--start 'pg_ctlcluster 15 main start'] \
#                [--pg-bin /usr/lib/postgresql/15/bin] [--user postgres]
#
# Steps: stop the former primary (fast; pg_rewind needs it stopped), CHECKPOINT on the new
# primary (otherwise pg_rewind may see the old timeline and wrongly decide no rewind is
# needed), pg_rewind from the new primary, standby.signal + primary_conninfo, start.
# Requirements (RECIPES.md §4): wal_log_hints = on or data checksums; enough WAL kept on the
# former primary (wal_keep_size) to reach the last common checkpoint; per-node settings such
# as the port outside the data directory (pg_rewind copies postgresql.conf and
# postgresql.auto.conf from the source). Passwords: use a pgpass file
# (passfile=... in the conninfo strings), never a password in argv.
# Exit codes: 0 done (the standby then catches up on its own), 2 usage, 1 any step failed.
set -euo pipefail

pgdata="" source="" primary_conninfo="" stop_cmd="" start_cmd=""
pg_bin=/usr/lib/postgresql/15/bin
os_user=postgres

usage() {
  sed -n '2,22p' "$0" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --pgdata) pgdata=${2:?}; shift 2 ;;
    --source) source=${2:?}; shift 2 ;;
    --primary-conninfo) primary_conninfo=${2:?}; shift 2 ;;
    --stop) stop_cmd=${2:?}; shift 2 ;;
    --start) start_cmd=${2:?}; shift 2 ;;
    --pg-bin) pg_bin=${2:?}; shift 2 ;;
    --user) os_user=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "pg-rewind.sh: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$pgdata" ] && [ -n "$source" ] || usage
[ -d "$pgdata" ] || { echo "pg-rewind.sh: $pgdata is not a directory" >&2; exit 1; }
[ -n "$primary_conninfo" ] || primary_conninfo=$source

# PostgreSQL tools refuse to run as root: run them as the data directory's owner.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$os_user" -- "$@"
  else
    "$@"
  fi
}
log() { echo "pg-rewind.sh: $*"; }

# 1. Stop the former primary (it must not run during pg_rewind).
if [ -n "$stop_cmd" ]; then
  log "stopping: $stop_cmd"
  bash -c "$stop_cmd"
elif as_owner "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
  log "stopping the server in $pgdata"
  as_owner "$pg_bin/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop
fi
if as_owner "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
  echo "pg-rewind.sh: the server in $pgdata is still running" >&2
  exit 1
fi

# 2. Make the new timeline visible in the source's control file.
log "CHECKPOINT on the new primary"
as_owner "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -d "$source" -c CHECKPOINT

# 3. Rewind (after a crash, pg_rewind first runs crash recovery in single-user mode).
log "pg_rewind from the new primary"
as_owner "$pg_bin/pg_rewind" --target-pgdata="$pgdata" --source-server="$source" --progress

# 4. Follow the new primary. Our primary_conninfo line goes last: the last one wins. The
# fence (default_transaction_read_only) is dropped: postgresql.auto.conf now comes from the
# source, and on a standby it would be harmless anyway.
log "configuring $pgdata as a standby"
as_owner touch "$pgdata/standby.signal"
escaped=${primary_conninfo//\\/\\\\}
escaped=${escaped//\'/\\\'}
printf "primary_conninfo = '%s'\n" "$escaped" | as_owner tee -a "$pgdata/postgresql.auto.conf" >/dev/null

# 5. Start it; it streams from the new primary and catches up by itself.
if [ -n "$start_cmd" ]; then
  log "starting: $start_cmd"
  bash -c "$start_cmd"
else
  log "starting the server in $pgdata"
  as_owner "$pg_bin/pg_ctl" -D "$pgdata" -l "$pgdata/rewind-start.log" -w -t 60 start
fi
log "done: $pgdata is a standby of the new primary"
