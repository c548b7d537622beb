#!/usr/bin/env bash
# make demo: start an emulated bucket with sample data on 127.0.0.1:4443 and
# mount it on ./mnt in the foreground. Ctrl-C unmounts and stops everything.
#
# Every run starts from a clean cache. The emulator keeps its bucket in
# memory, so each run has a new bucket holding only the sample data; a
# cache kept from an earlier run would show that run's names, and a file
# written again would be saved as a conflict copy (the version it was
# based on is gone with the old bucket). Nothing in the old cache can go
# anywhere: the earlier run's unmount sent its changes to its bucket, and
# whatever it could not send was for a bucket that no longer exists.
#
# Environment: DEMO_ADDR (host:port of the emulator; port 0 picks a free
# one), DEMO_BUCKET, DEMO_MNT (the mountpoint), DEMO_STATE (the cache and
# the emulator's log; .demo), DEMO_BIN (where bucketfs and
# bucketfs-emulator are; bin), DEMO_WAN=1, DEMO_HNS=1 (see README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

addr=${DEMO_ADDR:-127.0.0.1:4443}
bucket=${DEMO_BUCKET:-demo}
mnt=${DEMO_MNT:-$PWD/mnt}
state=${DEMO_STATE:-$PWD/.demo}
bin=${DEMO_BIN:-bin}

if ! command -v fusermount3 >/dev/null; then
  echo "demo: fusermount3 not found: install FUSE 3 first (apt-get install fuse3, or make deps-demo)" >&2
  exit 1
fi

# is_mounted DIR: whether DIR is a mount point now (from the mount table:
# a stat of a mount whose process died fails).
is_mounted() {
  local want
  want=$(realpath -m "$1")
  want=${want// /\\040} # the mount table escapes spaces
  awk -v m="$want" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# The previous run's cache goes only once nothing of that run is left: no
# mount on the mountpoint, no process holding the cache's index.
if is_mounted "$mnt"; then
  echo "demo: $mnt is still mounted (is another 'make demo' running?): stop it with Ctrl-C, or unmount it with 'fusermount3 -u $mnt'" >&2
  exit 1
fi
if [ -e "$state/cache/index.db" ] && command -v flock >/dev/null &&
  ! flock -n "$state/cache/index.db" true; then
  echo "demo: $state/cache is in use by another process (an earlier run still unmounting?); try again once it has exited" >&2
  exit 1
fi
if [ -e "$state/cache" ]; then
  echo "demo: removing the previous run's cache ($state/cache): its bucket went away with its emulator"
  rm -rf "$state/cache"
fi
mkdir -p "$mnt" "$state"

fifo=$(mktemp -u); mkfifo "$fifo"
# The emulator runs in a session of its own, so that Ctrl-C (sent to the
# terminal's foreground process group) reaches only the mount: the mount
# flushes its changes into the emulator, exits, and then the trap below
# stops the emulator.
# DEMO_WAN=1: the WAN profile, over TLS (h2 offered by ALPN) as GCS is
# reached; the mount trusts the emulator's certificate with --ca-file.
# DEMO_FLEET=1: the emulator publishes the bucket's changes to a Pub/Sub
# fake, and the bucket is mounted twice, on $mnt and on ${mnt}2 (DEMO_MNT2),
# both with --notify-topic: a change made in one shows in the other at
# once (the second mount runs in the background, stopped with the first).
tls_addr=${DEMO_TLS_ADDR:-127.0.0.1:4444}
wan_args=()
mount_args=()
if [ -n "${DEMO_WAN:-}" ]; then
  wan_args=(--wan --tls-addr "$tls_addr" --ca-out "$state/ca.pem")
  mount_args=(--ca-file "$state/ca.pem")
fi
fleet_topic=projects/demo/topics/changes
mnt2=${DEMO_MNT2:-${mnt}2}
if [ -n "${DEMO_FLEET:-}" ]; then
  wan_args+=(--pubsub-addr 127.0.0.1:0 --pubsub-topic "$fleet_topic")
  if is_mounted "$mnt2"; then
    echo "demo: $mnt2 is still mounted: unmount it with 'fusermount3 -u $mnt2'" >&2
    exit 1
  fi
  rm -rf "$state/cache2"
  mkdir -p "$mnt2"
fi
setsid "$bin/bucketfs-emulator" --addr "$addr" --bucket "$bucket" --seed "${wan_args[@]}" ${DEMO_HNS:+--hierarchical} >"$fifo" 2>"$state/emulator.log" &
emu=$!
echo "$emu" >"$state/emulator.pid"
trap 'kill $emu 2>/dev/null; wait $emu 2>/dev/null; rm -f "$fifo" "$state/emulator.pid"' EXIT
# Wait for the emulator's "listening" line (or its exit).
if ! read -r line <"$fifo"; then
  echo "demo: the emulator did not start; its log:" >&2
  cat "$state/emulator.log" >&2
  exit 1
fi
echo "demo: $line"
# "emulator listening on http://ADDR bucket=NAME": the address it took;
# with DEMO_WAN, a second line gives the TLS one, which the mount uses.
url=${line#*listening on }
url=${url%% *}
if [ -n "${DEMO_WAN:-}" ] && read -r line <"$fifo"; then
  echo "demo: $line"
  url=${line#*listening on }
  url=${url%% *}
fi
if [ -n "${DEMO_FLEET:-}" ]; then
  # "pubsub emulator listening on ADDR topic=T"
  if ! read -r line <"$fifo"; then
    echo "demo: the emulator did not start its Pub/Sub fake; its log:" >&2
    cat "$state/emulator.log" >&2
    exit 1
  fi
  echo "demo: $line"
  ps_addr=${line#*listening on }
  export PUBSUB_EMULATOR_HOST=${ps_addr%% *}
  mount_args+=(--notify-topic "$fleet_topic")
  "$bin/bucketfs" mount "$bucket" "$mnt2" --endpoint "$url" --anonymous "${mount_args[@]}" \
    --cache-dir "$state/cache2" --cache-max-size 1GiB "$@" 2>"$state/mount2.log" &
  mount2=$!
  trap 'kill $mount2 2>/dev/null; wait $mount2 2>/dev/null; kill $emu 2>/dev/null; wait $emu 2>/dev/null; rm -f "$fifo" "$state/emulator.pid"' EXIT
  echo "demo: also mounted on $mnt2 (log in $state/mount2.log): a change in one shows in the other at once"
fi
echo "demo: mounting gs://$bucket on $mnt (cache in $state/cache); browse it from another terminal, Ctrl-C to stop"
"$bin/bucketfs" mount "$bucket" "$mnt" --endpoint "$url" --anonymous "${mount_args[@]}" \
  --cache-dir "$state/cache" --cache-max-size 1GiB "$@"
