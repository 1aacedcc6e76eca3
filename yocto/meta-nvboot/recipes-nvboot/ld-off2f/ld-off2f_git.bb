SUMMARY = "ld-off2f: the loader of OFF2F programs"
DESCRIPTION = "The interpreter of every OFF2F program: it maps the \
               program's text from the text store on pmem. Freestanding C without libc, \
               a static-pie without relocations."
SECTION = "base"

require recipes-nvboot/nvboot/nvboot-src.inc

SRC_URI = "${NVBOOT_SRC_URI}"

S = "${UNPACKDIR}/${BP}/loader"

# The loader's Makefile sets its own flags (freestanding, static-pie) and
# refuses a build with relocations; only the compiler comes from here.
do_compile() {
    oe_runmake CC="${CC}" OUT=${B}/ld-off2f
}

do_install() {
    install -d ${D}${base_libdir}
    install -m 0755 ${B}/ld-off2f ${D}${base_libdir}/ld-off2f.so.1
}

# It is linked without libc and stripped by its Makefile, by design: it
# runs before anything could relocate it (docs/OFF2F.md).
# nooelint: oelint.vars.insaneskip
INSANE_SKIP:${PN} = "ldflags already-stripped"
COMPATIBLE_HOST = "x86_64.*-linux"
