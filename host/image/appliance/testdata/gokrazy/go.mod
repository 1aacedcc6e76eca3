module nvboot.test/gokrazy

go 1.24

require github.com/gokrazy/gokrazy v0.0.0-20260418085648-c38c3134b8a7

require (
	github.com/gokrazy/internal v0.0.0-20240629150625-a0f1dee26ef5 // indirect
	github.com/google/renameio/v2 v2.0.0 // indirect
	github.com/kenshaw/evdev v0.1.0 // indirect
	github.com/mdlayher/watchdog v0.0.0-20201005150459-8bdc4f41966b // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	github.com/vishvananda/netlink v1.1.0 // indirect
	github.com/vishvananda/netns v0.0.0-20211101163701-50045581ed74 // indirect
	golang.org/x/sys v0.31.0 // indirect
)
