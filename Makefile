# nvboot: `make test` runs every test (installing what it needs); `make build`
# puts the tools in bin/ (make loader-arm64: the aarch64 loader in bin/arm64/); `make kernel` builds (or finds cached) the appliance kernels, x86-64 and arm64;
# `make lint` runs the lint gate (ci/lint.sh), which both test targets run before their tests.
SHELL := /bin/bash
GO ?= go
BIN := bin
CMDS := off2f nvinit nvboot poold poolctl

.PHONY: all build loader-arm64 deps demo demo-exec lint test test-short kernel fuzz powercuts docs clean
all: build

deps:
	@bash ci/deps.sh

build: $(BIN)/ld-off2f $(addprefix $(BIN)/,$(CMDS))

$(BIN)/ld-off2f: loader/ld-off2f.c loader/sys.h loader/off2f.h loader/crc32c.h loader/Makefile
	@$(MAKE) -s -C loader OUT=$(CURDIR)/$(BIN)/ld-off2f

# The aarch64 loader an arm64 image installs, cross-built (gcc-aarch64-linux-gnu).
loader-arm64: $(BIN)/arm64/ld-off2f
$(BIN)/arm64/ld-off2f: loader/ld-off2f.c loader/sys.h loader/off2f.h loader/crc32c.h loader/Makefile
	@$(MAKE) -s -C loader ARCH=arm64 OUT=$(CURDIR)/$(BIN)/arm64/ld-off2f

$(BIN)/%: FORCE
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $@ ./cmd/$*
FORCE:

kernel: deps
	@kernel-config/build.sh >/dev/null
	@kernel-config/build.sh -arch arm64 >/dev/null

# The appliance: build the demo image (kv) as OFF2F and as plain ELF, boot
# each in QEMU with emulated pmem on an SD-card storage model, and print
# power-on-to-service time side by side (see README.md).
# ARCH=arm64 does the same for the arm64 demo on QEMU's virt board.
DEMO_RUNS ?= 3
ARCH ?= amd64
demo: deps build kernel
ifeq ($(ARCH),arm64)
	NVBOOT_KERNEL_ARM64=$$(kernel-config/build.sh -arch arm64 2>/dev/null)/Image $(BIN)/nvboot measure -arch arm64 -layouts off2f,elf -runs $(DEMO_RUNS) -storage sd -charts out/charts-arm64
else
	NVBOOT_KERNEL=$$(kernel-config/build.sh 2>/dev/null)/bzImage $(BIN)/nvboot measure -layouts off2f,elf -runs $(DEMO_RUNS) -storage sd -charts out/charts
endif

# Program start alone (no appliance): ELF vs OFF2F vs whole ELF on DAX vs tmpfs.
demo-exec: deps build kernel
	NVBOOT_KERNEL=$$(kernel-config/build.sh 2>/dev/null)/bzImage $(GO) run ./bench/exec -host=false -storage sd

# Every test: unit, loader, fuzz corpora (as regression tests), QEMU/DAX end-to-end.
# One package at a time (-p 1): appliance boots on the device clock repeat
# whatever the host does, but the benchmarks' guests with virtio disks pass
# idle waits as the host's, and the QEMU tests' timeouts are the host's.
test: deps build kernel lint
	NVBOOT_KERNEL=$$(kernel-config/build.sh 2>/dev/null)/bzImage NVBOOT_KERNEL_ARM64=$$(kernel-config/build.sh -arch arm64 2>/dev/null)/Image \
	  $(GO) test -count=1 -p 1 -timeout 40m ./...

# -short boots nothing and builds no kernel: host/kernel refuses to while
# NVBOOT_NO_KERNEL_BUILD is set, so a test that would fails at once.
test-short: build lint
	NVBOOT_NO_KERNEL_BUILD=1 $(GO) test -short -count=1 ./...

# staticcheck and deadcode (pinned, installed by ci/deps.sh): see ci/lint.sh.
lint:
	@bash ci/lint.sh

# Power cuts at random instants of nvboot deploy and nvboot update (issue 16;
# CI runs 4 and 2 of them in 'make test'): CUTS each, the seeds and every cut
# logged (the env on its "cut instants drawn over" line replays it), with the
# downtime figures docs/BENCHMARKS.md quotes.
CUTS ?= 20
powercuts: deps build kernel
	NVBOOT_KERNEL=$$(kernel-config/build.sh 2>/dev/null)/bzImage NVBOOT_DEPLOY_CUTS=$(CUTS) NVBOOT_UPDATE_CUTS=$(CUTS) \
	  $(GO) test -count=1 -p 1 -timeout 60m -run '^(TestDeployPowerCuts|TestUpdatePowerCuts)$$' -v ./host/nvbootcmd/

# Fuzz each parser of untrusted input, and omf's and pager's access sequences
# against an in-memory reference, for FUZZTIME (corpus kept in testdata/fuzz).
FUZZTIME ?= 30s
fuzz: build
	$(GO) test ./off2f -run '^$$' -fuzz '^FuzzParseHeader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./off2f -run '^$$' -fuzz '^FuzzParseText$$' -fuzztime $(FUZZTIME)
	$(GO) test ./off2f -run '^$$' -fuzz '^FuzzConvert$$' -fuzztime $(FUZZTIME)
	$(GO) test ./off2f -run '^$$' -fuzz '^FuzzParseManifest$$' -fuzztime $(FUZZTIME)
	$(GO) test ./off2f -run '^$$' -fuzz '^FuzzTextFromHashed$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/contract -run '^$$' -fuzz '^FuzzParseSignature$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/pull -run '^$$' -fuzz '^FuzzParseImage$$' -fuzztime $(FUZZTIME)
	$(GO) test ./format/fsdax -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./host/image/config -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./format/bootmark -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pheap -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pool -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/update -run '^$$' -fuzz '^FuzzDeployUpload$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/update -run '^$$' -fuzz '^FuzzDeployUploadELF$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/update -run '^$$' -fuzz '^FuzzCheckStaticProgram$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/efivar -run '^$$' -fuzz '^FuzzParseLoadOption$$' -fuzztime $(FUZZTIME)
	$(GO) test ./device/sntp -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./format/mbr -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./format/tryboot -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./format/tryboot -run '^$$' -fuzz '^FuzzLocate$$' -fuzztime $(FUZZTIME)
	$(GO) test ./omf -run '^$$' -fuzz '^FuzzAccess$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pager -run '^$$' -fuzz '^FuzzAccess$$' -fuzztime $(FUZZTIME)

# docs/BENCHMARKS.md from docs/benchmarks.src.md and the result files in
# docs/results it cites (bench/benchdoc's test fails while the page is stale).
docs:
	$(GO) run ./bench/benchdoc

clean:
	rm -rf $(BIN)
