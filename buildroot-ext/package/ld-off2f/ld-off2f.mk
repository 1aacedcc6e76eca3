################################################################################
#
# ld-off2f
#
################################################################################

LD_OFF2F_VERSION = custom
LD_OFF2F_SITE = $(BR2_EXTERNAL_NVBOOT_PATH)/../loader
LD_OFF2F_SITE_METHOD = local

# The loader's Makefile sets its own flags (freestanding, static-pie)
# and refuses a build with relocations; only the compiler is ours.
define LD_OFF2F_BUILD_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D) CC="$(TARGET_CC)" OUT=$(@D)/ld-off2f
endef

define LD_OFF2F_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(@D)/ld-off2f $(TARGET_DIR)/lib/ld-off2f.so.1
endef

$(eval $(generic-package))
