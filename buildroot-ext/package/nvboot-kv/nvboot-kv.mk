################################################################################
#
# nvboot-kv
#
################################################################################

NVBOOT_KV_VERSION = custom
NVBOOT_KV_SITE = $(BR2_EXTERNAL_NVBOOT_PATH)/..
NVBOOT_KV_SITE_METHOD = local
NVBOOT_KV_GOMOD = github.com/nvboot/nvboot
NVBOOT_KV_BUILD_TARGETS = examples/kv
NVBOOT_KV_GO_ENV = CGO_ENABLED=0
NVBOOT_KV_LDFLAGS = -s -w -buildid= -R=0x200000
NVBOOT_KV_PRE_CONFIGURE_HOOKS += NVBOOT_GO_VENDOR

define NVBOOT_KV_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(@D)/bin/kv $(TARGET_DIR)/bin/kv
endef

$(eval $(golang-package))
