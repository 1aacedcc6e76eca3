# nvboot's kernel options, with DISTRO = "nvboot-appliance": the fragments of the
# nvboot checkout's kernel-config/ (nvboot.cfg is generated from them and
# held to them by a test) and the built-in command line the
# removable-media boot needs.
FILESEXTRAPATHS:prepend:nvboot-appliance := "${THISDIR}/linux-yocto:"
SRC_URI:append:nvboot-appliance = " file://nvboot.cfg file://nvboot-cmdline.cfg"
# A fragment option the final .config lost is an error, not a warning.
KMETA_AUDIT_WERROR:nvboot-appliance = "1"
