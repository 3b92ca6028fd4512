# flashgate: the Makefile is thin on purpose. The work is done by the host
# tool (cmd/flashgate) and by `go test`; this file only names the entry points
# and runs the machine set-up first (scripts/setup.sh: installs what is missing
# when run as root, and says exactly what is missing otherwise).

BOARD   ?= qemu
OUT     ?= out
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GO      ?= go
KEY     ?= $(FLASHGATE_SIGNING_KEY)
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin:/sbin

FLASHGATE = $(GO) run ./cmd/flashgate

.PHONY: all setup run image upgrade-image keygen upgrade flash test check-tidy test-unit bench fuzz clean

all: image

setup:
	@bash scripts/setup.sh

## run: build the qemu board image and boot it (serial console here, web UI on https://127.0.0.1:8443)
run: setup
	$(FLASHGATE) run -board $(BOARD) -out $(OUT) -version $(VERSION)

## image: build out/flashgate-$(BOARD)-$(VERSION).img and its upgrade file .fgup (signed with KEY=file from `flashgate keygen`)
image: setup
	$(FLASHGATE) image -board $(BOARD) -out $(OUT) -version $(VERSION) $(if $(KEY),-key $(KEY))

## upgrade-image: the same build; the .fgup next to the image is what a box takes
upgrade-image: image

## keygen: make the upgrade signing key pair upgrade.key and upgrade.key.pub (never overwrites)
keygen:
	$(FLASHGATE) keygen -out $(or $(KEY),upgrade.key)

## upgrade: send UPGRADE=out/....fgup to BOX=https://addr (FLASHGATE_FINGERPRINT, FLASHGATE_PASSWORD)
upgrade:
	@test -n "$(UPGRADE)" -a -n "$(BOX)" || { echo "usage: make upgrade BOX=https://192.168.1.1 UPGRADE=out/flashgate-<board>-<version>.fgup"; exit 2; }
	$(FLASHGATE) upgrade -box $(BOX) -image $(UPGRADE)

## flash: write IMAGE to the card DEV (asks first; refuses mounted and system disks)
flash:
	@test -n "$(IMAGE)" -a -n "$(DEV)" || { echo "usage: make flash IMAGE=out/flashgate-alix2d13-<version>.img DEV=/dev/sdX"; exit 2; }
	$(FLASHGATE) flash -image $(IMAGE) -dev $(DEV)

## test: everything: unit, fuzz seeds, namespace, VM and browser tests (as root)
test: setup check-tidy
	$(GO) vet ./...
	$(FLASHGATE) kernels
	FLASHGATE_VERSION=$(VERSION) $(GO) test -count=1 -timeout 60m -p 2 ./...

## check-tidy: fail when go.mod or go.sum is not what `go mod tidy` makes, or gofmt would change a file
check-tidy:
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy (go mod tidy -diff shows what changes)"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || echo .)); test -z "$$out" || { echo "gofmt would change these files (run gofmt -w):"; echo "$$out"; exit 1; }

## test-unit: the fast tests only (no qemu, no namespaces)
test-unit:
	$(GO) test -short -count=1 ./...

## bench: the side-by-side measurements of ../shared/bench.md, into out/bench/results.json
bench: setup
	$(FLASHGATE) bench -out $(OUT)

clean:
	rm -rf $(OUT)/*.img $(OUT)/run $(OUT)/test $(OUT)/bench
