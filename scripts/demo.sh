#!/usr/bin/env bash
# make demo: start an emulated bucket with sample data on 127.0.0.1:4443 and
# mount it on ./mnt in the foreground. Ctrl-C unmounts and stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

addr=${DEMO_ADDR:-127.0.0.1:4443}
bucket=${DEMO_BUCKET:-demo}
mnt=${DEMO_MNT:-$PWD/mnt}
state=$PWD/.demo
mkdir -p "$mnt" "$state"

if ! command -v fusermount3 >/dev/null; then
  echo "demo: fusermount3 not found: install FUSE 3 first (apt-get install fuse3)" >&2
  exit 1
fi

fifo=$(mktemp -u); mkfifo "$fifo"
# The emulator runs in a session of its own, so that Ctrl-C (sent to the
# terminal's foreground process group) reaches only the mount: the mount
# flushes its changes into the emulator, exits, and then the trap below
# stops the emulator.
# DEMO_WAN=1: the WAN profile, over TLS (h2 offered by ALPN) as GCS is
# reached; the mount trusts the emulator's certificate with --ca-file.
tls_addr=${DEMO_TLS_ADDR:-127.0.0.1:4444}
wan_args=()
endpoint="http://$addr"
mount_args=()
if [ -n "${DEMO_WAN:-}" ]; then
  wan_args=(--wan --tls-addr "$tls_addr" --ca-out "$state/ca.pem")
  endpoint="https://$tls_addr"
  mount_args=(--ca-file "$state/ca.pem")
fi
setsid bin/bucketfs-emulator --addr "$addr" --bucket "$bucket" --seed "${wan_args[@]}" ${DEMO_HNS:+--hierarchical} >"$fifo" 2>"$state/emulator.log" &
emu=$!
trap 'kill $emu 2>/dev/null; wait $emu 2>/dev/null; rm -f "$fifo"' EXIT
# Wait for the emulator's "listening" line (or its exit).
if ! read -r line <"$fifo"; then
  echo "demo: the emulator did not start; its log:" >&2
  cat "$state/emulator.log" >&2
  exit 1
fi
echo "demo: $line"
if [ -n "${DEMO_WAN:-}" ] && read -r line <"$fifo"; then
  echo "demo: $line"
fi
echo "demo: mounting gs://$bucket on $mnt (cache in $state/cache); browse it from another terminal, Ctrl-C to stop"
bin/bucketfs mount "$bucket" "$mnt" --endpoint "$endpoint" --anonymous "${mount_args[@]}" \
  --cache-dir "$state/cache" --cache-max-size 1GiB "$@"
