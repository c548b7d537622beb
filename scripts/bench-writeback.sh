#!/bin/bash
# bench-writeback.sh: fio buffered and O_DIRECT writes, side by side in
# one run, on a native directory, on bucketfs with the defaults and on
# bucketfs with --writeback-cache, all on the filesystem of BASE (issue
# 24). Prints one line per job: rep, row, target, IOPS, MiB/s.
#
#   REPS=2 RT=8 SZ=256M BASE=/var/tmp/wbbench scripts/bench-writeback.sh
#
# Rows: new-4k and exist-4k (4 KiB random writes, psync, buffered),
# new-1m and exist-1m (1 MiB sequential, psync, buffered), exist-direct
# (4 KiB random, O_DIRECT, libaio, depth 16). "exist" is a file written
# through the mount, uploaded by its unmount, remounted and read once
# (cached and clean); the native one is written and synced. The mounts
# hold uploads back (--write-back-delay 1h) during the jobs.
set -eu
REPS=${REPS:-1}; RT=${RT:-8}; SZ=${SZ:-256M}; B=${BASE:-/var/tmp/wbbench}
W=$(mktemp -d)
go build -o "$W/bucketfs" ./cmd/bucketfs
go build -o "$W/emu" ./cmd/bucketfs-emulator
rm -rf "$B"; mkdir -p "$B/native" "$B/cA" "$B/cB" "$B/mA" "$B/mB"
"$W/emu" --addr 127.0.0.1:0 --bucket bench >"$W/emu.out" 2>"$W/emu.err" &
EPID=$!
for _ in $(seq 50); do grep -q listening "$W/emu.out" && break; sleep 0.1; done
URL=$(sed -n 's/^emulator listening on \(http:[^ ]*\) .*/\1/p' "$W/emu.out")
declare -A PIDS
mnt() { # mountpoint cachedir flags...
	local d=$1 c=$2; shift 2
	"$W/bucketfs" mount bench "$d" --endpoint "$URL" --anonymous --cache-dir "$c" "$@" >>"$W/mount.log" 2>&1 &
	PIDS[$d]=$!
	for _ in $(seq 100); do mountpoint -q "$d" && return; sleep 0.1; done
	echo "mounting $d failed; see $W/mount.log" >&2; exit 1
}
umnt() { fusermount3 -u "$1"; wait "${PIDS[$1]}"; } # the daemon exits once it has flushed
dd if=/dev/urandom of="$B/native/exist" bs=1M count="${SZ%M}" status=none; sync
mnt "$B/mA" "$B/cA" --write-back-delay 0; dd if="$B/native/exist" of="$B/mA/existA" bs=1M status=none; umnt "$B/mA"
mnt "$B/mB" "$B/cB" --write-back-delay 0; dd if="$B/native/exist" of="$B/mB/existB" bs=1M status=none; umnt "$B/mB"
mnt "$B/mA" "$B/cA" --write-back-delay 1h
mnt "$B/mB" "$B/cB" --write-back-delay 1h --writeback-cache
cat "$B/mA/existA" "$B/mB/existB" >/dev/null
declare -A EX=([native]=exist [mA]=existA [mB]=existB)
job() { # row target file fio-flags...
	local row=$1 t=$2 f=$3; shift 3
	fio --name="$row" --filename="$B/$t/$f" --size="$SZ" --time_based --runtime="$RT" --fallocate=none \
		--output-format=json "$@" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["write"]; print("%.0f %.0f" % (j["iops"], j["bw_bytes"]/2**20))'
}
for r in $(seq "$REPS"); do
	for row in new-4k exist-4k new-1m exist-1m exist-direct; do
		for t in native mA mB; do
			case $row in
			new-4k) out=$(job $row $t "new4k-$r" --rw=randwrite --bs=4k --ioengine=psync) ;;
			exist-4k) out=$(job $row $t "${EX[$t]}" --rw=randwrite --bs=4k --ioengine=psync) ;;
			new-1m) out=$(job $row $t "new1m-$r" --rw=write --bs=1M --ioengine=psync) ;;
			exist-1m) out=$(job $row $t "${EX[$t]}" --rw=write --bs=1M --ioengine=psync) ;;
			exist-direct) out=$(job $row $t "${EX[$t]}" --rw=randwrite --bs=4k --ioengine=libaio --iodepth=16 --direct=1) ;;
			esac
			name=$t; [ $t = mA ] && name=bucketfs; [ $t = mB ] && name=bucketfs-wb
			echo "rep=$r row=$row target=$name iops_mibps=$out"
		done
	done
done
umnt "$B/mA"; umnt "$B/mB"; kill "$EPID"; rm -rf "$B" "$W"
