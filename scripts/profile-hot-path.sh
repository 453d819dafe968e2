#!/usr/bin/env bash
# Counts the gateway's CPU instructions per small request with callgrind.
#
# Starts `imagegate-sim --tiny-images` (32x32 images, so bodies are a few kilobytes), sets up a data
# directory with one user, one key and one OpenAI-compatible account pointing at the simulator, runs
# `imagegate serve` under `valgrind --tool=callgrind`, sends WARMUP then N sequential non-streaming
# POST /v1/images/generations over one keep-alive connection, zeroes the counters between the two batches
# and dumps them after the second, then prints instructions per request and the top inclusive functions.
#
# Usage: scripts/profile-hot-path.sh [OUT_DIR]
#   env: BIN_DIR (target/$PROFILE), N (1000), WARMUP (200), TOP (25), PROFILE (profiling: the cargo profile whose binaries to use),
#        IMAGEGATE_LOG (info, the gateway's default).
# Build first: cargo build --profile profiling -p imagegate -p imagegate-sim --bins
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
profile="${PROFILE:-profiling}"
bin="${BIN_DIR:-$root/target/$profile}"
n="${N:-1000}"
warmup="${WARMUP:-200}"
top="${TOP:-25}"
out="${1:-$(mktemp -d /tmp/imagegate-profile.XXXXXX)}"
mkdir -p "$out"
data="$out/data"
rm -rf "$data" && mkdir -p "$data"

for tool in valgrind callgrind_control callgrind_annotate python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
for b in imagegate imagegate-sim; do
    [ -x "$bin/$b" ] || { echo "missing $bin/$b (cargo build --profile $profile -p imagegate -p imagegate-sim --bins)" >&2; exit 1; }
done

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits for "PREFIX http://ADDR" on the first lines of FILE and prints the URL.
wait_url() {
    local file="$1" prefix="$2"
    for _ in $(seq 1 600); do
        local line
        line="$(grep -m1 "^$prefix" "$file" 2>/dev/null || true)"
        if [ -n "$line" ]; then echo "${line##* }"; return 0; fi
        sleep 0.1
    done
    echo "timed out waiting for '$prefix' in $file" >&2
    return 1
}

"$bin/imagegate-sim" --listen 127.0.0.1:0 --tiny-images >"$out/sim.out" 2>"$out/sim.err" &
pids+=("$!")
sim_url="$(wait_url "$out/sim.out" "listening on")"

ig() { "$bin/imagegate" --data-dir "$data" "$@"; }
export IMAGEGATE_LOG="${IMAGEGATE_LOG:-info}"
ig users add bench >/dev/null 2>&1
echo "sk-upstream-bench" | ig accounts add --name bench --kind openai --base-url "$sim_url/v1" >/dev/null 2>&1
key="$(ig keys create --user bench --name profile 2>/dev/null | tr -d '[:space:]')"

valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$out/callgrind.out.%p" \
    "$bin/imagegate" --data-dir "$data" serve --listen 127.0.0.1:0 >"$out/gateway.out" 2>"$out/gateway.err" &
gateway_pid="$!"
pids+=("$gateway_pid")
gateway_url="$(wait_url "$out/gateway.out" "imagegate listening on")"
echo "sim $sim_url, gateway $gateway_url (callgrind pid $gateway_pid), out $out"

# Sends COUNT sequential requests over one connection; fails on any non-200.
send() {
    python3 - "$gateway_url" "$key" "$1" <<'PY'
import http.client, json, sys, urllib.parse
url, key, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
parts = urllib.parse.urlsplit(url)
conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
body = json.dumps({"model": "gpt-image-2", "prompt": "bench", "size": "1024x1024", "quality": "low"})
headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
for i in range(count):
    conn.request("POST", "/v1/images/generations", body, headers)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        sys.exit(f"request {i}: HTTP {response.status}: {data[:300]!r}")
conn.close()
PY
}

# callgrind_control acts when the valgrind scheduler next runs; a request wakes an idle gateway.
control() {
    callgrind_control "$@" "$gateway_pid" >/dev/null &
    local ctl="$!"
    for _ in $(seq 1 50); do
        kill -0 "$ctl" 2>/dev/null || { wait "$ctl"; return 0; }
        sleep 0.2
    done
    curl -s -o /dev/null "$gateway_url/healthz" || true
    wait "$ctl"
}

send "$warmup"
control -z
start=$(date +%s.%N)
send "$n"
end=$(date +%s.%N)
control -d
kill -TERM "$gateway_pid"
wait "$gateway_pid" || true

# The dump requested with -d is the numbered file; the final one (at exit) holds only the shutdown.
dump="$(ls -1 "$out"/callgrind.out."$gateway_pid".* 2>/dev/null | sort -t. -k3 -n | tail -1 || true)"
[ -n "$dump" ] || dump="$out/callgrind.out.$gateway_pid"
total="$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')"
echo "requests measured: $n (after $warmup warm-up), wall under callgrind: $(echo "$end - $start" | bc) s"
echo "total Ir: $total"
echo "Ir per request: $((total / n))"
echo
echo "top $top functions by inclusive Ir (per request = Ir / $n):"
callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null \
    | awk -v n="$n" -v top="$top" '
        /^-+$/ { dashes++; next }
        dashes >= 3 && NF >= 2 && count < top {
            ir = $1; gsub(",", "", ir);
            if (ir ~ /^[0-9]+$/) { $1 = ""; $2 = ""; printf "%12d  %s\n", ir / n, substr($0, 3); count++ }
        }'
echo
echo "full annotation: callgrind_annotate --inclusive=yes $dump"
