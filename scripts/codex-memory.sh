#!/usr/bin/env bash
# The gateway's peak memory on the subscription (codex) path: REQUESTS sequential non-streaming
# generations of N images each at SIZE, through one codex account on imagegate-sim.
#
# Usage: scripts/codex-memory.sh [GATEWAY_BIN]   (default: target/release/imagegate; build it first
#        with `cargo build --release -p imagegate -p imagegate-sim --bins`)
#   env: N (4), SIZE (3840x2160), REQUESTS (3), SIM_BIN (target/release/imagegate-sim),
#        WRAP (a command to run the gateway under, e.g. "valgrind --tool=massif --massif-out-file=F")
# Prints each answer's status, bytes and seconds, then the gateway's VmHWM. Needs bash and curl.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
gateway=${1:-$root/target/release/imagegate}
sim=${SIM_BIN:-$root/target/release/imagegate-sim}
n=${N:-4}
size=${SIZE:-3840x2160}
requests=${REQUESTS:-3}
sim_port=${SIM_PORT:-18090}
gateway_port=${GATEWAY_PORT:-18080}

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$sim" --listen "127.0.0.1:$sim_port" --refresh-token rt-unused >"$work/sim.log" 2>&1 &
pids+=($!)
"$gateway" --data-dir "$work" users add alice >/dev/null 2>&1
expires=$(($(date +%s) + 3600))
echo "{\"access_token\":\"at-memory\",\"refresh_token\":\"rt-unused\",\"expires_at\":$expires,\"account_id\":\"acct\"}" |
    "$gateway" --data-dir "$work" accounts add --name sub --kind codex --tier pro \
        --base-url "http://127.0.0.1:$sim_port/v1" --main-models gpt-5.5 >/dev/null 2>&1
key=$("$gateway" --data-dir "$work" keys create --user alice --name memory 2>/dev/null | tail -1)
printf '[codex]\ntoken_url = "http://127.0.0.1:%s/oauth/token"\nclient_id = "memory"\n' "$sim_port" >"$work/gateway.toml"
# shellcheck disable=SC2086
${WRAP:-} "$gateway" --data-dir "$work" --config "$work/gateway.toml" serve --listen "127.0.0.1:$gateway_port" \
    >"$work/gateway.log" 2>&1 &
gateway_pid=$!
pids=("$gateway_pid" "${pids[@]}")
for _ in $(seq 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$gateway_port/healthz" && break
    sleep 0.2
done
for i in $(seq "$requests"); do
    curl -s -o /dev/null -w "%{http_code} %{size_download} bytes %{time_total} s\n" \
        "http://127.0.0.1:$gateway_port/v1/images/generations" \
        -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        -d "{\"model\":\"gpt-image-2\",\"prompt\":\"a harbour $i\",\"size\":\"$size\",\"quality\":\"low\",\"n\":$n}"
done
grep VmHWM "/proc/$gateway_pid/status"
