module gokrazy/build/breakglass

go 1.24.0

require (
	github.com/creack/pty v1.1.18 // indirect
	github.com/gokrazy/breakglass v0.0.0-20251229072214-9dbc0478d486 // indirect
	github.com/gokrazy/gokapi v0.0.0-20250222071133-506fdb322775 // indirect
	github.com/gokrazy/gokrazy v0.0.0-20250222061409-bd0bb5f1d0b5 // indirect
	github.com/gokrazy/internal v0.0.0-20251208203110-3c1aa9087c82 // indirect
	github.com/google/renameio/v2 v2.0.0 // indirect
	github.com/google/shlex v0.0.0-20191202100458-e7afc7fbc510 // indirect
	github.com/kenshaw/evdev v0.1.0 // indirect
	github.com/kr/fs v0.1.0 // indirect
	github.com/kr/pty v1.1.8 // indirect
	github.com/mdlayher/watchdog v0.0.0-20221003142519-49be0df7b3b5 // indirect
	github.com/pkg/sftp v1.13.5 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	golang.org/x/crypto v0.45.0 // indirect
	golang.org/x/oauth2 v0.27.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
)
