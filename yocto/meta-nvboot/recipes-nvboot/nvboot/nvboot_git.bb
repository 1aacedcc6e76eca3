SUMMARY = "nvboot appliance programs: nvinit, poold, poolctl; host tools off2f and nvboot"
DESCRIPTION = "nvinit is the appliance's PID 1, poold its process pool. \
               The native variant provides off2f, which converts static executables to \
               OFF2F, and nvboot, whose assemble command writes the pmem images."
SECTION = "base"

require nvboot-src.inc

SRC_URI = "${NVBOOT_SRC_URI};destsuffix=${GO_SRCURI_DESTSUFFIX}"
require nvboot-go-mods.inc

GO_IMPORT = "github.com/nvboot/nvboot"
GO_INSTALL = "${GO_IMPORT}/cmd/nvinit ${GO_IMPORT}/cmd/poold ${GO_IMPORT}/cmd/poolctl"
GO_INSTALL:class-native = "${GO_IMPORT}/cmd/nvboot ${GO_IMPORT}/cmd/off2f"

inherit go-mod

# OFF2F converts static executables only: no cgo, no interpreter.
export CGO_ENABLED = "0"
GO_LINUXLOADER = ""
# -R 0x200000: each segment on a 2 MiB boundary, so OFF2F maps the text
# with 2 MiB pages (off2f.FlagHugeSpan), as nvboot build links them.
GO_EXTRA_LDFLAGS = "-s -w -buildid= -R=0x200000"

# nvinit and poold go where the appliance's nvinit config names them.
do_install() {
    install -d ${D}${base_sbindir} ${D}${base_bindir}
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/nvinit ${D}${base_sbindir}/nvinit
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/poold ${D}${base_bindir}/poold
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/poolctl ${D}${base_bindir}/poolctl
}

do_install:class-native() {
    install -d ${D}${bindir}
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/nvboot ${D}${bindir}/nvboot
    install -m 0755 ${B}/${GO_BUILD_BINDIR}/off2f ${D}${bindir}/off2f
}

BBCLASSEXTEND = "native"
