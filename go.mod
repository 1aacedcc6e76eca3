module github.com/nvboot/nvboot

go 1.26.0

require golang.org/x/sys v0.50.0

require (
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	github.com/u-root/u-root v0.16.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/crypto v0.59.0
	oras.land/oras-go/v2 v2.7.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
