#!/usr/bin/env bash
# Fails at once, with one line, when the address `orderstatus-dev dev` is to serve
# its front on is taken (another `make run`, from this clone or another),
# so that `make run` stops before it installs Azurite or builds anything.
# It takes `orderstatus-dev dev`'s arguments (make run's ARGS) and reads only
# --http-addr (default 127.0.0.1:7071) and --exit-when-idle, with which a
# busy default address is replaced by a free port, so nothing is checked.
# Anything it cannot read (a bad address, "off", port 0) is left to
# `orderstatus-dev dev`, which says what is wrong with it.
set -euo pipefail

addr=127.0.0.1:7071
named=false
idle=false
while [ $# -gt 0 ]; do
  case "$1" in
    --http-addr | -http-addr)
      addr="${2:-}"
      named=true
      [ $# -gt 1 ] && shift
      ;;
    --http-addr=* | -http-addr=*)
      addr="${1#*=}"
      named=true
      ;;
    --exit-when-idle | -exit-when-idle | --exit-when-idle=true | -exit-when-idle=true)
      idle=true
      ;;
    --exit-when-idle=* | -exit-when-idle=*)
      idle=false
      ;;
  esac
  shift
done

if [ "$idle" = true ] && [ "$named" = false ]; then
  exit 0
fi
host="${addr%:*}"
port="${addr##*:}"
case "$port" in
  '' | *[!0-9]* | 0) exit 0 ;;
esac
host="${host#[}"
host="${host%]}"
case "$host" in
  '' | 0.0.0.0) host=127.0.0.1 ;;
  ::) host=::1 ;;
esac

# A connection accepted there means the address is taken. Bash opens the
# connection itself (/dev/tcp); timeout, where there is one, bounds a host
# that does not answer.
connect='exec 3<>"/dev/tcp/$1/$2"'
if command -v timeout >/dev/null 2>&1; then
  timeout 2 bash -c "$connect" _ "$host" "$port" 2>/dev/null || exit 0
else
  bash -c "$connect" _ "$host" "$port" 2>/dev/null || exit 0
fi

# This clone's own serving run (its .run/devhost.json names the address and
# a live pid): a second one here must be a workload run next to it.
run_file="$(cd "$(dirname "$0")/.." && pwd)/.run/devhost.json"
if [ -f "$run_file" ] && grep -Fq "\"httpAddr\": \"$addr\"" "$run_file"; then
  pid="$(grep -Eo '"pid": *[0-9]+' "$run_file" | grep -Eo '[0-9]+$' || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo "make run: this clone's make run (pid $pid) serves on $addr; nothing was installed or started: stop it first (Ctrl-C in its terminal), or run a workload next to it with make run ARGS=\"--exit-when-idle --scenario FILE\"" >&2
    exit 1
  fi
fi
echo "make run: $addr is in use (another make run, from another clone?); nothing was installed or started: run this one on another address, make run ARGS=\"--http-addr 127.0.0.1:PORT\" with a free PORT, or stop the other one first" >&2
exit 1
