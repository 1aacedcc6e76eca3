################################################################################
#
# nvboot
#
################################################################################

# The source is the nvboot checkout this br2-external tree is part of.
NVBOOT_VERSION = custom
NVBOOT_SITE = $(BR2_EXTERNAL_NVBOOT_PATH)/..
NVBOOT_SITE_METHOD = local
NVBOOT_GOMOD = github.com/nvboot/nvboot

NVBOOT_BUILD_TARGETS = cmd/nvinit cmd/poold cmd/poolctl
HOST_NVBOOT_BUILD_TARGETS = cmd/nvboot cmd/off2f

# The board scripts convert the target's programs with host-nvboot's
# off2f, which need the loader in the target; nvboot assemble makes the
# filesystems with the host tools below.
NVBOOT_DEPENDENCIES = host-nvboot
ifneq ($(call qstrip,$(BR2_PACKAGE_NVBOOT_OFF2F_PROGRAMS)),)
NVBOOT_DEPENDENCIES += ld-off2f
endif
HOST_NVBOOT_DEPENDENCIES = \
	host-dosfstools \
	host-e2fsprogs \
	host-erofs-utils \
	host-mtools

# OFF2F converts static executables only, and the appliance's programs
# are built the way nvboot build builds them: no cgo, no build id.
NVBOOT_GO_ENV = CGO_ENABLED=0
# -R 0x200000: each segment on a 2 MiB boundary, so OFF2F maps the text
# with 2 MiB pages (off2f.FlagHugeSpan), as nvboot build links them.
NVBOOT_LDFLAGS = -s -w -buildid= -R=0x200000
HOST_NVBOOT_GO_ENV = CGO_ENABLED=0

# A local site is not downloaded, so the golang infrastructure does not
# vendor the modules: do it before configuring, once host-go is built
# (the rsync step comes before the dependencies). This needs the network,
# as the download step of any Go package does.
define NVBOOT_GO_VENDOR
	cd $(@D) && $(HOST_GO_COMMON_ENV) GOFLAGS=-mod=mod GOPROXY=$(or $(BR2_GOPROXY),https://proxy.golang.org) \
		$(GO_BIN) mod vendor
endef
NVBOOT_PRE_CONFIGURE_HOOKS += NVBOOT_GO_VENDOR
HOST_NVBOOT_PRE_CONFIGURE_HOOKS += NVBOOT_GO_VENDOR

# nvinit and poold go where the appliance's configs name them.
define NVBOOT_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(@D)/bin/nvinit $(TARGET_DIR)/sbin/nvinit
	$(INSTALL) -D -m 0755 $(@D)/bin/poold $(TARGET_DIR)/bin/poold
	$(INSTALL) -D -m 0755 $(@D)/bin/poolctl $(TARGET_DIR)/bin/poolctl
endef

$(eval $(golang-package))
$(eval $(host-golang-package))
