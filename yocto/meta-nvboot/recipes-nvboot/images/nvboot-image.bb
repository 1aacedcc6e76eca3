SUMMARY = "nvboot appliance image: nvinit as PID 1, kv as an OFF2F program, state on pmem"
DESCRIPTION = "No shell and no init system: nvinit starts kv, whose text \
               is mapped from the pmem text store. Deploys the GPT disk (wic), \
               pmem-text.img and pmem-state.img."
HOMEPAGE = "https://github.com/nvboot/nvboot"
BUGTRACKER = "https://github.com/nvboot/nvboot/issues"
SECTION = "images"
LICENSE = "MIT"
CVE_PRODUCT = "nvboot"

IMAGE_INSTALL = "nvboot nvboot-kv ld-off2f"
IMAGE_LINGUAS = ""
IMAGE_FEATURES = ""
IMAGE_ROOTFS_EXTRA_SPACE = "0"

inherit core-image nvboot_image

IMAGE_FSTYPES = "erofs wic nvboot"
WKS_FILE = "nvboot.wks"
# The ESP holds the kernel as the removable-media boot file; its command
# line is built in (recipes-kernel/linux/linux-yocto/nvboot-cmdline.cfg).
IMAGE_BOOT_FILES = "${KERNEL_IMAGETYPE};EFI/BOOT/BOOTX64.EFI"
