package outdir

// The files of an output directory.
const (
	ManifestFile  = "image.json"
	DiskFile      = "disk.img"
	KernelFile    = "bzImage" // an amd64 image's kernel (KernelFileOf)
	InitrdFile    = "initrd.cpio"
	TextPmemFile  = "pmem-text.img"
	StatePmemFile = "pmem-state.img"
	// KernelPmemFile is the kernel region (format/kernelpmem), pmem2, and
	// UncompressedFile the uncompressed kernel it holds in an amd64 image
	// whose kernel came with its PVH vmlinux (kernel-config/build.sh); an
	// arm64 image's region holds its Image (UncompressedFileOf).
	KernelPmemFile   = "pmem-kernel.img"
	UncompressedFile = "vmlinux"
	// StampFile marks a directory as an nvboot build output, which the next
	// build into it replaces whole.
	StampFile = ".nvboot-image"
	// UEFIVarsFile is the UEFI variable store of the board nvboot run
	// -firmware uefi plays (its NVRAM: BootOrder, BootNext, the slots'
	// entries), made on the first such run and kept from run to run
	// beside the disk it boots. A build does not write it, and a rebuild
	// into the directory drops it: the new disk starts on a new board.
	UEFIVarsFile = "uefi-vars.fd"
	// KernelFileArm64 is an arm64 image's kernel, an arm64 Image.
	KernelFileArm64 = "Image"
)

// KernelFileOf is the kernel's file in an image of goarch: the bzImage,
// or an arm64 Image.
func KernelFileOf(goarch string) string {
	if goarch == "arm64" {
		return KernelFileArm64
	}
	return KernelFile
}

// UncompressedFileOf is the file of an image of goarch that its kernel
// region holds: the PVH vmlinux beside an amd64 bzImage, or the arm64
// Image itself, which is already the uncompressed kernel.
func UncompressedFileOf(goarch string) string {
	if goarch == "arm64" {
		return KernelFileArm64
	}
	return UncompressedFile
}

// OutputFiles are the names a build writes into its output directory (an
// initrd only in the initramfs layout), and the one a run adds
// (UEFIVarsFile).
var OutputFiles = []string{StampFile, ManifestFile, DiskFile, KernelFile, KernelFileArm64, InitrdFile, TextPmemFile, StatePmemFile, KernelPmemFile, UncompressedFile, UEFIVarsFile}
