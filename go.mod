module github.com/nvboot/nvboot

go 1.26.0

require golang.org/x/sys v0.49.0

require (
	github.com/u-root/u-root v0.16.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	github.com/u-root/uio v0.0.0-20240224005618-d2acac8f3701 // indirect
)
