#!/usr/bin/env bash
# Installs what bucketfs needs on Debian/Ubuntu, if missing. Two modes:
#
#   deps.sh demo   what make demo needs: the system package fuse3
#                  (fusermount3, to mount). Nothing else.
#   deps.sh test   (the default) what make test and make bench need: fuse3,
#                  fio (for make bench), systemd (systemd-analyze, to check
#                  the unit file), util-linux and mount (the fstab test),
#                  attr (setfattr, getfattr), git, sqlite3, rsync and tar
#                  (the real programs integration/programs_test.go runs on
#                  the mount), and versitygw, the S3-compatible server the
#                  multipart tests of transfer/ run against.
#
# In test mode both steps run even if the other fails; the exit status is
# 1 if either did.
set -euo pipefail

# install_packages MODE installs the missing system packages of MODE
# with apt-get.
install_packages() {
  local need=() sudo
  command -v fusermount3 >/dev/null || need+=(fuse3)
  if [ "$1" = test ]; then
    test_packages
  fi
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; else
    echo "deps: please install: ${need[*]} (apt-get install ${need[*]})" >&2; return 1
  fi
  echo "deps: installing ${need[*]}" >&2
  $sudo apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}

# test_packages adds to need (install_packages's) the missing packages
# only the tests and the benchmarks use.
test_packages() {
  command -v fio >/dev/null || need+=(fio)
  # systemd-analyze verifies deploy/bucketfs@.service in the tests.
  command -v systemd-analyze >/dev/null || need+=(systemd)
  # unshare and mount run the fstab test in a mount namespace of its own.
  command -v unshare >/dev/null || need+=(util-linux)
  command -v mount >/dev/null || need+=(mount)
  # setfattr and getfattr: the extended-attribute test (integration/xattr_test.go).
  command -v setfattr >/dev/null || need+=(attr)
  local p
  for p in git sqlite3 rsync tar; do
    command -v "$p" >/dev/null || need+=("$p")
  done
}

# install_versitygw installs the server into $(go env GOPATH)/bin, where
# the tests look for it when it is not on PATH.
install_versitygw() {
  command -v versitygw >/dev/null && return 0
  if ! command -v go >/dev/null; then
    echo "deps: go not found: install Go, then run this again for versitygw" >&2; return 1
  fi
  local gopath bin
  gopath="$(go env GOPATH)" || return 1
  bin="${gopath%%:*}/bin"
  [ -x "$bin/versitygw" ] && return 0
  echo "deps: installing versitygw (S3-compatible server for the multipart tests)" >&2
  GOBIN="$bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
}

mode=${1:-test}
case "$mode" in
  demo)
    install_packages demo
    ;;
  test)
    status=0
    install_packages test || status=1
    install_versitygw || status=1
    exit $status
    ;;
  *)
    echo "usage: $0 [demo|test]" >&2
    exit 2
    ;;
esac
