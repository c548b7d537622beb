# bucketfs: see README.md.
GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)

.PHONY: build deps test bench demo vet fmt clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/bucketfs ./cmd/bucketfs
	$(GO) build -o $(BIN)/bucketfs-emulator ./cmd/bucketfs-emulator

# Unit and integration tests (real FUSE mounts; needs fuse3 and root or
# user_allow_other). Every test has a timeout; the race detector is on.
# What the tests need, if missing: fuse3 and fio (apt, Debian/Ubuntu) and
# versitygw (go install; the S3-compatible server of the multipart tests).
deps:
	./scripts/deps.sh

test: deps
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) test -race -timeout 20m -count=1 ./...

# Benchmarks against a native directory on the same disk, with the
# emulator behind a WAN profile. Needs fio.
bench: deps build
	BUCKETFS_BENCH=1 $(GO) test -run '^TestBench$$' -timeout 60m -count=1 -v ./integration/

# Starts an emulated bucket with sample data and mounts it on ./mnt.
# Ctrl-C unmounts and stops the emulator.
demo: deps build
	./scripts/demo.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
