#!/usr/bin/env bash
# Memory rig for issue #8: the gateway's peak RSS (VmHWM) under
#   1. 64 concurrent non-streaming 3840x2160 generations, and
#   2. 8 concurrent edits, each with two ~20 MB PNG inputs (~40 MB per request).
#
# Usage: scripts/memory-rig.sh [BIN_DIR]   (default: target/release; build it first with
#        `cargo build --release -p imagegate -p imagegate-sim --bins`)
#
# Starts imagegate-sim and imagegate from BIN_DIR on loopback ports with a fresh SQLite data
# directory, one simulator account able to take every request at once, and one key. Each scenario
# runs against a freshly started gateway, so each VmHWM is that scenario's own peak. Needs bash,
# curl and python3 (standard library only, to write the noise PNGs).
set -euo pipefail

BIN_DIR=${1:-target/release}
GENERATIONS=${GENERATIONS:-64}
EDITS=${EDITS:-8}
GEN_SIZE=${GEN_SIZE:-3840x2160}
# Every generation takes this long in the simulator, so all requests are in flight together.
SIM_LATENCY_MS=${SIM_LATENCY_MS:-3000}
# 2592x2592 RGB noise, stored uncompressed: ~20.2 MB per PNG.
EDIT_SIDE=${EDIT_SIDE:-2592}

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Waits for "listening on http://..." in a process's stdout file and prints the URL.
wait_url() {
    local file=$1
    for _ in $(seq 1 600); do
        if grep -q 'listening on http://' "$file" 2>/dev/null; then
            grep -o 'http://[0-9.:]*' "$file" | head -n1
            return 0
        fi
        sleep 0.1
    done
    echo "no listening line in $file" >&2
    return 1
}

requests=()
wait_requests() {
    for pid in "${requests[@]}"; do wait "$pid" || true; done
    requests=()
}

peak_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

"$BIN_DIR/imagegate-sim" --listen 127.0.0.1:0 --latency-ms "$SIM_LATENCY_MS" >"$work/sim.out" 2>/dev/null &
pids+=("$!")
sim_url=$(wait_url "$work/sim.out")

admin() { "$BIN_DIR/imagegate" --data-dir "$work/data" "$@" 2>/dev/null; }
admin users add rig >/dev/null
echo "sk-rig" | admin accounts add --name rig --kind openai --base-url "$sim_url/v1" \
    --tier pro --concurrency-standard 128 --concurrency-large 128 >/dev/null
key=$(admin keys create --user rig --name rig | tr -d '[:space:]')

start_gateway() {
    IMAGEGATE_LOG=error "$BIN_DIR/imagegate" --data-dir "$work/data" serve --listen 127.0.0.1:0 \
        >"$work/gw.out" 2>"$work/gw.err" &
    gw_pid=$!
    pids+=("$gw_pid")
    gw_url=$(wait_url "$work/gw.out")
}

stop_gateway() {
    kill -TERM "$gw_pid" 2>/dev/null || true
    wait "$gw_pid" 2>/dev/null || true
    : >"$work/gw.out"
}

# Counts "200" lines in a status file; fails loudly when any request did not succeed.
check_statuses() {
    local file=$1 expected=$2 ok
    ok=$(grep -c '^200$' "$file" || true)
    if [ "$ok" != "$expected" ]; then
        echo "only $ok of $expected requests succeeded:" >&2
        sort "$file" | uniq -c >&2
        exit 1
    fi
}

# Warm the simulator's render cache, so scenario 1 measures relaying rather than rendering.
start_gateway
curl -sf -o /dev/null -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"model\":\"gpt-image-2\",\"prompt\":\"memory rig\",\"size\":\"$GEN_SIZE\",\"quality\":\"low\"}" \
    "$gw_url/v1/images/generations"
idle_kb=$(rss_kb "$gw_pid")
stop_gateway

# Scenario 1: concurrent large generations.
start_gateway
body_bytes=$(curl -s -o "$work/one.json" -w '%{size_download}' -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' \
    -d "{\"model\":\"gpt-image-2\",\"prompt\":\"memory rig\",\"size\":\"$GEN_SIZE\",\"quality\":\"low\"}" \
    "$gw_url/v1/images/generations")
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["data"][0]["b64_json"]' "$work/one.json"
: >"$work/gen.status"
for _ in $(seq 1 "$GENERATIONS"); do
    curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $key" \
        -H 'Content-Type: application/json' \
        -d "{\"model\":\"gpt-image-2\",\"prompt\":\"memory rig\",\"size\":\"$GEN_SIZE\",\"quality\":\"low\"}" \
        "$gw_url/v1/images/generations" >>"$work/gen.status" &
    requests+=("$!")
done
wait_requests
check_statuses "$work/gen.status" "$GENERATIONS"
gen_kb=$(peak_kb "$gw_pid")
stop_gateway

# Scenario 2: concurrent edits with two ~20 MB inputs each.
python3 - "$work" "$EDIT_SIDE" <<'PY'
import os, struct, sys, zlib
work, side = sys.argv[1], int(sys.argv[2])
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
for name in ("a", "b"):
    row = side * 3
    raw = b"".join(b"\x00" + os.urandom(row) for _ in range(side))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")
    with open(os.path.join(work, name + ".png"), "wb") as f:
        f.write(png)
PY
image_bytes=$(stat -c %s "$work/a.png")
start_gateway
: >"$work/edit.status"
for _ in $(seq 1 "$EDITS"); do
    curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $key" \
        -F model=gpt-image-2 -F prompt='memory rig edit' -F size=1024x1024 -F quality=low \
        -F "image[]=@$work/a.png;type=image/png" -F "image[]=@$work/b.png;type=image/png" \
        "$gw_url/v1/images/edits" >>"$work/edit.status" &
    requests+=("$!")
done
wait_requests
check_statuses "$work/edit.status" "$EDITS"
edit_kb=$(peak_kb "$gw_pid")
stop_gateway

mb() { awk -v kb="$1" 'BEGIN { printf "%.1f MB", kb / 1024 }'; }
echo "gateway RSS after one warm-up generation: $(mb "$idle_kb")"
echo "$GENERATIONS x $GEN_SIZE generations (response body $body_bytes bytes each): peak RSS $(mb "$gen_kb")"
echo "$EDITS x edits with two $image_bytes-byte PNGs: peak RSS $(mb "$edit_kb")"
