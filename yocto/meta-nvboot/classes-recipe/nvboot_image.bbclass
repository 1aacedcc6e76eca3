# nvboot-image: makes an image an nvboot appliance. At rootfs time it
# installs the appliance's skeleton and config (rootfs/ of the nvboot
# checkout, the one nvboot build and Buildroot's post-build script install),
# converts NVBOOT_OFF2F_PROGRAMS to OFF2F (header files in place, texts in
# /lib/off2f, /etc/nvboot/MANIFEST), and has nvboot assemble write the
# provisioning images into the rootfs and the pmem images beside it. The
# image type "nvboot" deploys pmem-text.img and pmem-state.img; the GPT disk
# comes from wic (files/wic/nvboot.wks).
#
# yocto/README.md (in the nvboot checkout) describes the layer.

# Target paths of the programs to convert, PID 1 first: its loader mounts
# the text store. Each must be a static executable.
NVBOOT_OFF2F_PROGRAMS ?= "/sbin/nvinit /bin/kv"
# Text store and state filesystem sizes in MiB (0: fitted, the default).
NVBOOT_TEXT_STORE_MIB ?= "0"
NVBOOT_STATE_MIB ?= "0"
# The nvboot checkout holding rootfs/: by default the one this layer is
# in (yocto/meta-nvboot/classes-recipe/ of it).
NVBOOT_SRCDIR ?= "${@os.path.normpath(os.path.join(os.path.dirname(bb.utils.which(d.getVar('BBPATH'), 'classes-recipe/nvboot_image.bbclass')), '../../..'))}"

# ca-certificates and netbase: the CA bundle and /etc/services every
# nvboot image has (nvboot build copies the build host's, from the same
# Debian sources).
IMAGE_INSTALL:append = " nvboot ld-off2f ca-certificates netbase"
# off2f and nvboot assemble, and the mke2fs and debugfs assemble runs.
do_rootfs[depends] += "nvboot-native:do_populate_sysroot e2fsprogs-native:do_populate_sysroot"

NVBOOT_PMEM_DIR = "${WORKDIR}/nvboot-pmem"

nvboot_rootfs_off2f() {
    ${NVBOOT_SRCDIR}/rootfs/install.sh ${IMAGE_ROOTFS}
    OFF2F=off2f ${NVBOOT_SRCDIR}/rootfs/off2f-programs.sh ${IMAGE_ROOTFS} ${NVBOOT_OFF2F_PROGRAMS}
    rm -rf ${NVBOOT_PMEM_DIR}
    nvboot assemble -in-place -root ${IMAGE_ROOTFS} -text-store-mib ${NVBOOT_TEXT_STORE_MIB} \
        -state-mib ${NVBOOT_STATE_MIB} -o ${NVBOOT_PMEM_DIR}
}
nvboot_rootfs_off2f[doc] = "Converts NVBOOT_OFF2F_PROGRAMS to OFF2F and writes the pmem images"
ROOTFS_POSTPROCESS_COMMAND += "nvboot_rootfs_off2f"

IMAGE_TYPES += "nvboot"
IMAGE_CMD:nvboot[doc] = "Deploys pmem-text.img and pmem-state.img beside the image"
IMAGE_CMD:nvboot() {
    for f in pmem-text.img pmem-state.img; do
        install -m 0644 ${NVBOOT_PMEM_DIR}/$f ${IMGDEPLOYDIR}/${IMAGE_NAME}.$f
        ln -sf ${IMAGE_NAME}.$f ${IMGDEPLOYDIR}/${IMAGE_LINK_NAME}.$f
    done
}
