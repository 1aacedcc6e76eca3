package appliance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/fsdax"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
)

// storeCluster is the text store's ext4 cluster (bigalloc): every file
// starts on a 2 MiB boundary of the device.
const storeCluster = 2 << 20

// textStore is the fourth phase: pmem0, the text store, a bigalloc ext4 so
// text lands 2 MiB-aligned; in the layouts that use it, its image is also
// the provisioning source on the root tree, which nvinit copies onto a
// blank or stale store.
func (b *builder) textStore(ctx context.Context, st staging) error {
	img := filepath.Join(b.work, "textstore.ext4")
	size, err := b.storeSize(st.store)
	if err != nil {
		return err
	}
	size = pmemSize(size) - fsdax.Align // the rest of the image is room to grow
	b.logf("text store: %d MiB ext4 (2 MiB clusters)", size>>20)
	if err := mkExt4(ctx, st.store, img, size, uuidFor(b.seed(), "text"), "-O", "bigalloc", "-C", strconv.Itoa(storeCluster)); err != nil {
		return fmt.Errorf("text store: %w", err)
	}
	if b.useStore() {
		if err := os.MkdirAll(filepath.Join(st.root, filepath.Dir(contract.StoreImage)[1:]), 0o755); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(st.root, contract.StoreImage[1:]), img, 0o444); err != nil {
			return err
		}
	}
	return b.pmemImage(outdir.TextPmemFile, img, size)
}

// storeSize is the text store filesystem's size: TextStoreMiB, or fitted to
// the files (the 2 MiB clusters they take) with 16 MiB and a quarter to
// spare. Clusters over bytes plus a cluster a file: a text laid out with 2
// MiB spans (off2f.FlagHugeSpan) is bytes up to its clusters' end, and the
// looser count put the big appliance's store over a 128 MiB step of pmem,
// whose struct pages cost the kernel 1.4 ms at every boot.
func (b *builder) storeSize(dir string) (int64, error) {
	n, files, err := treeSize(dir, storeCluster)
	if err != nil {
		return 0, err
	}
	need := n + 16<<20
	if b.Config.TextStoreMiB > 0 {
		size := int64(b.Config.TextStoreMiB) << 20
		if size < need {
			return 0, fmt.Errorf("TextStoreMiB %d: the text store needs at least %d MiB (%d files in %d MiB of 2 MiB clusters): make it larger or 0 (fitted)",
				b.Config.TextStoreMiB, (need+(1<<20)-1)>>20, files, n>>20)
		}
		return size, nil
	}
	return (need + need/4 + (2<<20 - 1)) &^ (2<<20 - 1), nil
}

// pmemSize is the size of a pmem image holding a filesystem of fsSize: the
// 2 MiB of fsdax metadata added, rounded up to 128 MiB. The text store's
// filesystem takes the rest (textStore): its room for deploys, a new
// program's text and a 2 MiB cluster for each file and link it adds. The
// kernel adds pmem in 2 MiB subsections and makes a struct page for every
// page at boot (about 2 ms for 128 MiB on the device clock), so the
// regions that need no room are sized to fit: the kernel region
// (kernelRegionSize) and the disk's pmem copy (diskPmem).
func pmemSize(fsSize int64) int64 {
	const section = config.PmemUnitMiB << 20
	return (fsSize + fsdax.Align + section - 1) / section * section
}

// pmemImage writes out/name: the PFN info block and the filesystem image.
func (b *builder) pmemImage(name, fsImg string, fsSize int64) error {
	return fsdax.WriteImage(filepath.Join(b.dir, name), pmemSize(fsSize), fsImg)
}
