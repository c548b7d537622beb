#!/usr/bin/env bash
# Installs the system packages bucketfs needs on Debian/Ubuntu, if missing:
# fuse3 (fusermount3, to mount) and fio (for make bench).
set -euo pipefail
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v fio >/dev/null || need+=(fio)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; else
  echo "deps: please install: ${need[*]} (apt-get install ${need[*]})" >&2; exit 1
fi
echo "deps: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
