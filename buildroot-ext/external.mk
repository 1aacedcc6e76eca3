include $(sort $(wildcard $(BR2_EXTERNAL_NVBOOT_PATH)/package/*/*.mk))
