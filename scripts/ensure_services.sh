#!/usr/bin/env bash
# Start PostgreSQL (127.0.0.1:5432, trust auth, database `test`) and Redis (127.0.0.1:6379)
# when they are not already running. Used by `make test` and .ci/run.
set -u
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "starting PostgreSQL"
  (service postgresql start || pg_ctlcluster 15 main start) >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  (service redis-server start || redis-server --daemonize yes --bind 127.0.0.1 --port 6379) >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432"; exit 1; }
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis is not reachable on 127.0.0.1:6379"; exit 1; }
psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test" >/dev/null
