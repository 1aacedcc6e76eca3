// Package config is the nvboot image configuration: what nvboot build, run
// and measure read. Its schema is gokrazy's instance config (Hostname,
// Packages, PackageConfig with GoBuildFlags, Environment,
// CommandLineFlags, WaitFor, DontStart...), so a gokrazy user reads it
// without a manual and nvboot builds a gokrazy instance's config.json
// unchanged; nvboot's own parts have their own fields: ForwardPort, Pool,
// Checker (for nvboot powercut), KernelPath, NoBootTrims, KernelCmdline,
// TextStoreMiB, StateMiB, Interfaces, Nameservers, NTP, RootFS, Userland, Slots,
// TestBootDeadline and Version. gokrazy's Update (HTTPPort, HTTPPassword,
// HTTPSPort, UseTLS) sets the endpoint nvboot deploy and nvboot update
// talk to (docs/UPDATE.md); the key nvboot push signs with is kept beside
// the config (SigningDir). nvboot's Update.Registry (registry.go:
// Repository, Tag, PollInterval, Credentials, CACert, AllowDowngrade)
// makes the appliance pull its updates from an OCI registry
// (docs/UPDATE.md#pulling): checked at load, the credentials a Docker
// config file with an auths entry for the registry and the CA file a PEM
// certificate (CheckPaths); the device's side is GuestPull.
//
// # Design
//
//   - gokrazy's schema over one of our own: no manual to read for gokrazy
//     users, and their configs build as they are.
//   - The target (Target: amd64-pc, arm64-virt, arm64-rpi) is chosen in one
//     place, ChooseTarget, and its reason is the build's first line: -arch
//     (a GOARCH or a target) over the Environment's last GOARCH, over the
//     default of the kind of config. A gokrazy instance config
//     (GokrazyInstance: gokrazy fields beyond Update, none of nvboot's own)
//     naming no GOARCH is arm64, because gokrazy builds it for the
//     Raspberry Pi; any other is amd64, so nvboot's own configs (the demo,
//     examples/*.json) stay x86-64. An arm64 image is the Pi's when the
//     config names a Pi part (PiParts: FirmwarePackage, which a gokrazy
//     config leaving it unset gets from gokrazy, EEPROMPackage,
//     BootloaderExtraLines), else the virt board's. The flag over the
//     config because it is the later, explicit word; a package's
//     GoBuildEnvironment GOARCH other than the image's is an error naming
//     both, as one loader and one text store serve every program.
//   - Unknown keys: in a config that sets one of nvboot's own fields
//     (NvbootOnly) they are errors, since a misspelt field must not pass
//     silently; in any other they are warnings naming the key by its path
//     (PackageConfig["x"].Nice), as gokrazy's json.Unmarshal ignores them.
//     Keys are matched as encoding/json matches them; null for a list or
//     map is an empty one.
//   - Every gokrazy field nvboot does not apply is named once, with the
//     reason (Ignored); build, run and measure print the warnings before
//     building (LoadWarn). The board's fields are warned about for the
//     image's target (IgnoredFor; Retarget when -arch chose another): a
//     Raspberry Pi image applies the Pi's parts and reads SerialConsole as
//     the Pi does, so its warnings name neither x86-64 nor ttyS0.
//   - Nameservers is nvboot's own: gokrazy has no such field (its DHCP
//     client writes /etc/resolv.conf, a link into /tmp), and nvboot's
//     network is static, so the servers come from the config and the file
//     is written at build time. Its default follows the network's: QEMU's
//     10.0.2.3 with the default Interfaces, none with one's own.
//   - Load runs every check that needs no compiling: the fields (named by
//     their path in every error), the paths (each local package a
//     directory, KernelPath a file, each extra file found; relative to the
//     config file), and the host tools every build runs, each listed once
//     with its Debian package (Tools, CheckTools). Defaults come from
//     XOrDefault methods.
//   - A pmem size the build rounds up (StateMiB, and TextStoreMiB whose
//     filesystem grows to fill its image) is warned about with what it
//     becomes (Rounded), rather than honoured: pmem images are whole
//     PmemUnitMiB (128 MiB) sections, since the default board gives pmem
//     as e820 regions, which the kernel takes in whole memory sections,
//     and one image must boot on either kind of pmem.
//
// # gokrazy fields
//
//	Hostname            the appliance's hostname
//	Packages            built and started in order; outside nvboot's module
//	                    built in the instance's builddir (its go.mod pins),
//	                    else fetched with go get; a pattern (.../cmd/...) is
//	                    an error: list each program
//	Environment         go build's environment; its GOARCH (amd64, arm64)
//	                    chooses the target; GOOS other than linux or another
//	                    GOARCH (riscv64) is an error naming it
//	SerialConsole       the board's first serial port at 115200 (ttyS0,
//	                    ttyAMA0 on virt) is there anyway; another is console=;
//	                    disabled/off warned (markers need the console); on
//	                    a Pi, gokrazy's reading (host/image/rpi: serial0,
//	                    enable_uart)
//	KernelExtraArgs     on the kernel command line, after KernelCmdline
//	MountDevices        /dev/... sources mounted by nvinit before the
//	                    services, gokrazy's option split; others warned
//	Update              the update endpoint; Hostname, NoPassword, CertPEM
//	                    and KeyPEM warned (no password, no endpoint; nvboot
//	                    makes and pins its own certificate)
//	KernelPackage, FirmwarePackage, EEPROMPackage, BootloaderExtraLines
//	                    a Raspberry Pi card's parts (host/image/rpi, with
//	                    gokrazy's defaults: KernelPackageOrDefault...);
//	                    FirmwarePackage (or a gokrazy config leaving it
//	                    unset), EEPROMPackage, BootloaderExtraLines and
//	                    BootloaderExtraEEPROM make an arm64 image the Pi's
//	                    (PiParts); on another target warned (IgnoredFor)
//	DeviceType, BootloaderExtraEEPROM, GokrazyPackages,
//	InternalCompatibilityFlags
//	                    warned: board parts and gokrazy's system services
//	                    (nvinit sets the network up and the clock, by
//	                    SNTP with NTP; the kernel seeds its random pool)
//	PackageConfig       per package: CommandLineFlags and Environment (the
//	                    service's), GoBuildFlags, GoBuildTags (after the
//	                    gokrazy tag, as gokrazy builds), GoBuildEnvironment
//	                    (its GOARCH the image's), ExtraFilePaths
//	                    (PATH_GOARCH.tar, PATH.tar, PATH, in gokrazy's order) and ExtraFileContents (never under
//	                    /perm or over nvboot's paths), Basename, DontStart,
//	                    WaitForClock, WaitFor (a list as in gokrazy, or
//	                    nvboot's "tcp:PORT"; clock, net-route, net-online
//	                    hold the first start); a key not in Packages is
//	                    warned, its extra files placed all the same
//
// gokrazy has no ForwardPort: nvboot run boots a gokrazy config as it is,
// but QEMU gives a guest with no forwarded port no network device, so
// forward one (-port); nvboot measure needs a service with ForwardPort.
//
// # Invariants
//
//   - The demo config is valid and round-trips: TestDemoIsValidAndRoundTrips.
//   - Validation names the field: TestValidateNamesTheField,
//     TestValidateInterfaces (a gateway on the interface's network, the
//     device's own rule), TestNameservers (and their default), TestValidateChecker, TestLoadUserland,
//     TestUpdateConfig, TestUpdateTLS, TestGokrazyValidateNamesTheField,
//     TestRegistryValidate, TestRegistryFiles.
//   - Unknown fields: errors in nvboot's configs, warnings in gokrazy's:
//     TestLoadRejectsUnknownFields, TestGokrazyUnknownKeysWarn.
//   - Paths and tools are checked at load, tools named with their package:
//     TestLoadChecksPaths, TestToolsNameTheirPackages.
//   - The target and its reason: TestChooseTarget (each kind of config,
//     -arch over the config's GOARCH), TestChooseTargetRefuses (an unknown
//     -arch, a package of another machine), TestExamplesAreAmd64,
//     TestGokrazyArm64Validates (what gok new writes), TestTargetNames.
//   - gokrazy: TestGokrazyArchIsAnErrorNamingIt, TestGokNewConfig (what gok
//     new writes for amd64), TestGokrazyEveryField (every field of the
//     schema, each warning once), TestGokrazyWritesAndReadsBack,
//     TestWaitForForms, TestGokrazyNullsAreEmpty, TestExtraFileSource (the
//     image's GOARCH's tarball first).
//   - The board's warnings name the image's board, the Pi's none of
//     another's: TestIgnoredForTarget, TestGokNewPiWarnings.
//   - Rounded sizes are warned about, with the size built:
//     TestParseWarnsOfRoundedSizes.
//   - Parse never panics on any input: FuzzParse.
//
// # Limits
//
//   - amd64 and arm64 only: another GOARCH is refused, naming it.
//   - gokrazy's boards other than the Raspberry Pi (DeviceType), its web
//     interface, update protocol and system services are not built; their
//     fields are warned about.
package config
