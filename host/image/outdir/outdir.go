package outdir

// The files of an output directory.
const (
	ManifestFile  = "image.json"
	DiskFile      = "disk.img"
	KernelFile    = "bzImage"
	InitrdFile    = "initrd.cpio"
	TextPmemFile  = "pmem-text.img"
	StatePmemFile = "pmem-state.img"
	// KernelPmemFile is the kernel region (format/kernelpmem), pmem2, and
	// UncompressedFile the uncompressed kernel it holds: in images whose
	// kernel came with its PVH vmlinux (kernel-config/build.sh).
	KernelPmemFile   = "pmem-kernel.img"
	UncompressedFile = "vmlinux"
	// StampFile marks a directory as an nvboot build output, which the next
	// build into it replaces whole.
	StampFile = ".nvboot-image"
)

// OutputFiles are the names a build writes into its output directory (an
// initrd only in the initramfs layout).
var OutputFiles = []string{StampFile, ManifestFile, DiskFile, KernelFile, InitrdFile, TextPmemFile, StatePmemFile, KernelPmemFile, UncompressedFile}
