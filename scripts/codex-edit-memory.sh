#!/usr/bin/env bash
# The gateway's peak memory for edits on the subscription (codex) path: CONCURRENCY concurrent edits,
# each with two ~20 MB noise PNGs, through one codex account on imagegate-sim.
#
# Usage: scripts/codex-edit-memory.sh [BIN_DIR]   (default: target/release; build first with
#        `cargo build --release -p imagegate -p imagegate-sim --bins`)
#   env: CONCURRENCY (8)
# Prints the answers' statuses, then the gateway's VmHWM. Needs bash and python3.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin=${1:-$root/target/release}
concurrency=${CONCURRENCY:-8}
sim_port=${SIM_PORT:-18190}
gateway_port=${GATEWAY_PORT:-18191}

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Two 2600x2560 RGB PNGs of random pixels, stored uncompressed: 19,972,153 bytes each.
python3 - "$work" <<'PY'
import os, struct, sys, zlib
def png(path, w, h):
    rows = os.urandom(w * 3 * h)
    raw = b"".join(b"\0" + rows[y * w * 3:(y + 1) * w * 3] for y in range(h))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b""))
for name in ("a.png", "b.png"):
    png(os.path.join(sys.argv[1], name), 2600, 2560)
PY

"$bin/imagegate-sim" --listen "127.0.0.1:$sim_port" --refresh-token rt-unused >"$work/sim.log" 2>&1 &
pids+=($!)
"$bin/imagegate" --data-dir "$work" users add alice >/dev/null 2>&1
expires=$(($(date +%s) + 3600))
echo "{\"access_token\":\"at-memory\",\"refresh_token\":\"rt-unused\",\"expires_at\":$expires,\"account_id\":\"acct\"}" |
    "$bin/imagegate" --data-dir "$work" accounts add --name sub --kind codex --tier pro \
        --concurrency-standard "$concurrency" --base-url "http://127.0.0.1:$sim_port/v1" \
        --main-models gpt-5.5 >/dev/null 2>&1
key=$("$bin/imagegate" --data-dir "$work" keys create --user alice --name memory 2>/dev/null | tail -1)
printf '[codex]\ntoken_url = "http://127.0.0.1:%s/oauth/token"\nclient_id = "memory"\n' "$sim_port" >"$work/gateway.toml"
"$bin/imagegate" --data-dir "$work" --config "$work/gateway.toml" serve --listen "127.0.0.1:$gateway_port" \
    >"$work/gateway.log" 2>&1 &
gateway=$!
pids+=("$gateway")
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $gateway_port), 1)" 2>/dev/null && break
    sleep 0.1
done

python3 - "$work" "$key" "$gateway_port" "$concurrency" <<'PY'
import concurrent.futures, os, sys, urllib.request, uuid
work, key, port, concurrency = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
files = [open(os.path.join(work, name), "rb").read() for name in ("a.png", "b.png")]
def edit(_):
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
             for name, value in (("model", "gpt-image-2"), ("prompt", "add a hat"), ("size", "1024x1024"),
                                 ("quality", "low"))]
    for index, data in enumerate(files):
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="image[]"; filename="{index}.png"\r\n'
                     f'Content-Type: image/png\r\n\r\n'.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/images/edits", data=b"".join(parts),
        headers={"Authorization": f"Bearer {key}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return answer.status
with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
    print("statuses:", list(pool.map(edit, range(concurrency))))
PY
grep VmHWM "/proc/$gateway/status"
