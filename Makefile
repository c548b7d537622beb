# bucketfs: see README.md.
GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)

# Where 'make install' puts things; DESTDIR stages them under another root.
PREFIX   ?= /usr/local
SBINDIR  ?= /sbin
UNITDIR  ?= /etc/systemd/system
DESTDIR  ?=

.PHONY: build deps deps-demo deps-test test bench demo vet fmt clean install uninstall

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/bucketfs ./cmd/bucketfs
	$(GO) build -o $(BIN)/bucketfs-emulator ./cmd/bucketfs-emulator

# bin/bucketfs to $(PREFIX)/bin, the mount helper /sbin/mount.fuse.bucketfs
# (a symlink to it, for mount(8) and /etc/fstab), the systemd unit
# bucketfs@.service, the README and the reference pages of docs/.
install: build
	install -D -m 0755 $(BIN)/bucketfs $(DESTDIR)$(PREFIX)/bin/bucketfs
	install -d $(DESTDIR)$(SBINDIR)
	ln -sf $(PREFIX)/bin/bucketfs $(DESTDIR)$(SBINDIR)/mount.fuse.bucketfs
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|/usr/local/|$(PREFIX)/|g' deploy/bucketfs@.service >$(DESTDIR)$(UNITDIR)/bucketfs@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/bucketfs@.service
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/bucketfs/README.md
	install -d $(DESTDIR)$(PREFIX)/share/doc/bucketfs/docs
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/bucketfs/docs/
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/bucketfs $(DESTDIR)$(SBINDIR)/mount.fuse.bucketfs \
		$(DESTDIR)$(UNITDIR)/bucketfs@.service $(DESTDIR)$(PREFIX)/share/doc/bucketfs/README.md
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/bucketfs/docs

# What the demo needs, if missing: fuse3 (apt, Debian/Ubuntu). Nothing else.
deps-demo:
	./scripts/deps.sh demo

# What the tests and the benchmarks need, if missing: fuse3, fio, attr,
# systemd, git, sqlite3, rsync and tar (apt, Debian/Ubuntu) and versitygw
# (go install; the S3-compatible server of the multipart tests). See
# scripts/deps.sh.
deps-test:
	./scripts/deps.sh test

deps: deps-test

# Unit and integration tests (real FUSE mounts; needs fuse3 and root or
# user_allow_other). Every test has a timeout; the race detector is on.
test: deps-test
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) test -race -timeout 26m -count=1 ./...

# Benchmarks against a native directory on the same disk, with the
# emulator behind a WAN profile. Needs fio. The fio-write section alone
# runs 21 minutes of fio jobs with the defaults (docs/testing.md).
bench: deps-test build
	BUCKETFS_BENCH=1 $(GO) test -run '^TestBench$$' -timeout 90m -count=1 -v ./integration/

# Starts an emulated bucket with sample data and mounts it on ./mnt, from
# a clean cache every run (see scripts/demo.sh). Ctrl-C unmounts and stops
# the emulator.
demo: deps-demo build
	./scripts/demo.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
