#!/usr/bin/env bash
# Prepares everything the test suite needs on a fresh machine. Idempotent: each step is skipped when its
# result is already there. Called by `cargo xtask test` (the README's test command, which .ci/run runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
OPENAI_SDK_VERSION="3.54.0"

say() { printf '[setup] %s\n' "$*"; }
# Root's steps (apt) run through sudo for another user.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# apt waits for another apt (unattended upgrades on a fresh machine) and retries a failed download.
apt_get() {
  local attempt
  for attempt in 1 2 3; do
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=600 \
      -o Acquire::Retries=3 "$@" && return 0
    say "apt-get $1 failed (attempt $attempt of 3)"
    sleep 10
  done
  return 1
}

# cargo-nextest runs the suite; say so now rather than after a build of many minutes.
if ! cargo nextest --version >/dev/null 2>&1; then
  say "cargo-nextest is needed: cargo install --locked cargo-nextest"
  exit 1
fi

# PostgreSQL at 127.0.0.1:5432 (trust auth) for the store tests.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  say "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 >/dev/null || { say "PostgreSQL is not reachable on 127.0.0.1:5432"; exit 1; }
# The tests make a database of their own per test through the `test` database (see
# crates/testkit/src/postgres.rs); a server with only the default databases gets it here.
if ! psql -h 127.0.0.1 -U postgres -d test -tAc 'SELECT 1' >/dev/null 2>&1; then
  say "creating the PostgreSQL database test"
  createdb -h 127.0.0.1 -U postgres test
fi

# Redis at 127.0.0.1:6379 for the shared pool state tests.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  say "starting Redis"
  redis_dir="${TMPDIR:-/tmp}/imagegate-redis"
  mkdir -p "$redis_dir"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir "$redis_dir" --logfile "$redis_dir/redis.log"
  for _ in $(seq 1 30); do redis-cli ping >/dev/null 2>&1 && break; sleep 1; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { say "Redis is not reachable on 127.0.0.1:6379"; exit 1; }

# Headless Chromium and ChromeDriver for the console's browser tests (Debian packages).
if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
  say "installing chromium and chromium-driver"
  apt_get update
  apt_get install -y chromium chromium-driver >/dev/null
fi

# The official openai Python SDK, for the conformance tests (tests/python/).
venv="$root/.venv"
if ! "$venv/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_SDK_VERSION')" 2>/dev/null; then
  say "installing openai==$OPENAI_SDK_VERSION into .venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai==$OPENAI_SDK_VERSION"
fi
# The official openai Node SDK, for the conformance tests (tests/node/), at the exact version pinned in
# tests/node/package.json and its lockfile.
node_dir="$root/tests/node"
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if ! command -v npm >/dev/null 2>&1 || [ "$node_major" -lt 20 ]; then
  say "Node.js 20 or newer with npm is needed by tests/node (found: $(node --version 2>/dev/null || echo none))"
  exit 1
fi
OPENAI_NODE_SDK_VERSION="$(node -p "require('$node_dir/package.json').dependencies.openai")"
if [ "$(node -p "require('$node_dir/node_modules/openai/package.json').version" 2>/dev/null)" != "$OPENAI_NODE_SDK_VERSION" ]; then
  say "installing openai@$OPENAI_NODE_SDK_VERSION into tests/node/node_modules"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
say "ready: PostgreSQL, Redis, Chromium, openai $OPENAI_SDK_VERSION in .venv, openai@$OPENAI_NODE_SDK_VERSION in tests/node"
