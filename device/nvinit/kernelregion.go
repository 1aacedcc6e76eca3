package nvinit

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/kernelpmem"
)

// writeKernelRegion writes the root's uncompressed kernel into the kernel
// region when the firmware booted the card's kernel (nvboot.kernel=card on
// cmdline): the region was blank (a flashed device's first boot), damaged,
// or held another image's kernel. The next boot's firmware then copies the
// kernel from pmem. It returns whether it wrote. Called once the services
// are ready: the 16 MiB it reads from the card would otherwise compete
// with their start.
func writeKernelRegion(kr *contract.KernelRegion, cmdline string) (bool, error) {
	from, err := contract.KernelFrom(cmdline)
	if err != nil || from != contract.KernelFromCard {
		return false, err
	}
	k, err := os.ReadFile(kr.Image)
	if err != nil {
		return false, fmt.Errorf("kernel region: %w", err)
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(k)); sum != kr.SHA256 {
		return false, fmt.Errorf("kernel region: %s hashes to %s, the config names %s: not written (a damaged root)", kr.Image, sum, kr.SHA256)
	}
	f, err := os.OpenFile(kr.Device, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("kernel region: %w", err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, fmt.Errorf("kernel region: size of %s: %w", kr.Device, err)
	}
	if err := kernelpmem.Write(f, size, k); err != nil {
		return false, fmt.Errorf("%s: %w", kr.Device, err)
	}
	return true, nil
}
