SUMMARY = "kv: nvboot's demo service, a key-value store on a persistent heap"
DESCRIPTION = "An HTTP key-value store whose state is a persistent Go heap \
               on the appliance's pmem state filesystem (/nv/state)."
SECTION = "base"

require nvboot-src.inc

SRC_URI = "${NVBOOT_SRC_URI};destsuffix=${GO_SRCURI_DESTSUFFIX}"
require nvboot-go-mods.inc

GO_IMPORT = "github.com/nvboot/nvboot"
GO_INSTALL = "${GO_IMPORT}/examples/kv"

inherit go-mod

export CGO_ENABLED = "0"
GO_LINUXLOADER = ""
GO_EXTRA_LDFLAGS = "-s -w -buildid= -R=0x200000"

do_install() {
    install -d ${D}${base_bindir}
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/kv ${D}${base_bindir}/kv
}

