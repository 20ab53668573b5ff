#!/usr/bin/env bash
# The whole system on this machine, no Azure needed: `orderstatus-dev dev` runs the
# custom handler exactly as the Functions host does, with an in-memory
# Service Bus and Azurite (started on a free port), plays the built-in demo
# workload, prints a summary and keeps serving GetOrder and Metrics on
# http://127.0.0.1:7071 until Ctrl-C.
#
# `make run` checks first that the front's address is free
# (scripts/check-run-port.sh: another clone's run may hold 7071; then run
# this one with make run ARGS="--http-addr 127.0.0.1:PORT"), then builds
# bin/handler and installs Azurite, then calls this.
# Arguments go to `orderstatus-dev dev` (see `bin/orderstatus-dev dev -h`), for example:
#   scripts/run-local.sh --scenario my-workload.jsonl --exit-when-idle
# With --exit-when-idle the run ends when the work is done, skipping idle
# time (a message scheduled 30 minutes ahead is handled at once), and a
# busy 7071 is replaced by a free port unless --http-addr names one.
# The handler's own JSON logs go to .run/handler.log, started afresh
# (--handler-log FILE elsewhere). A second run next to a serving one must
# be --exit-when-idle (bin/orderstatus-dev dev refuses otherwise, with one line);
# it leaves the first one's .run/devhost.json alone and writes its handler
# log to .run/handler-<pid>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x bin/orderstatus-dev ]; then
  echo "run-local: bin/orderstatus-dev is missing; run 'make run' (or 'make build' first)" >&2
  exit 1
fi
mkdir -p .run
exec bin/orderstatus-dev dev --handler-log .run/handler.log "$@"
