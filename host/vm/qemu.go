package vm

import "os"

// QEMUEnv names the QEMU binary Start runs for the x86-64 board when
// Config.QEMU is empty; unset: qemu-system-x86_64 (from $PATH).
const QEMUEnv = "NVBOOT_QEMU"

// QEMUArm64Env is QEMUEnv for the arm64 board; unset: qemu-system-aarch64
// (Debian's qemu-system-arm).
const QEMUArm64Env = "NVBOOT_QEMU_ARM64"

// qemu is the QEMU binary that runs c.
func (c Config) qemu() string {
	if c.QEMU != "" {
		return c.QEMU
	}
	env, def := QEMUEnv, "qemu-system-x86_64"
	if c.Arch == ArchArm64 {
		env, def = QEMUArm64Env, "qemu-system-aarch64"
	}
	if q := os.Getenv(env); q != "" {
		return q
	}
	return def
}
