package vm

// QEMUEnv names the QEMU binary Start runs when Config.QEMU is empty; unset:
// qemu-system-x86_64 (from $PATH).
const QEMUEnv = "NVBOOT_QEMU"
