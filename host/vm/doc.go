// Package vm boots the appliance kernel in QEMU, as an x86-64 pc or
// microvm board or an arm64 virt board, the way nvboot's tests,
// benchmarks and nvboot run, measure and powercut need it: pmem backed by
// files (their contents persist across boots: that is the pmem), virtio
// disks with storage speed models, the serial console captured line by line
// with the time since power-on, and SIGKILL of QEMU as a power cut. It
// also probes whether KVM really runs a guest, measures when the firmware
// hands over to the kernel (KernelEntry), and runs small busybox script
// guests for tests (Script, FsdaxShell). host/nvbootcmd drives it for the
// commands; docs/DEVICE-CLOCK.md describes the device clock.
//
// # The machine
//
// -machine pc,smm=off,vmport=off (nvdimm=on with NVDIMMs, acpi=off with
// NoACPI), -nodefaults, -no-reboot (a reboot ends QEMU; not with
// Config.Reboot, below), the serial console
// on QEMU's stdio, the kernel booted directly (-kernel, -append after
// console=ttyS0) by qboot where installed, else SeaBIOS, or another
// firmware (Config.Firmware); with Config.BootDisk no -kernel at all: the
// firmware boots the first disk (OVMF: the disk's UKI). A UEFI board
// (Config.FirmwareVars) has its firmware as two pflash chips, OVMFCode
// read-only and its own copy of OVMFVars (NewFirmwareVars; UEFIOf names
// each board's firmware) writable, so the boot variables persist from
// boot to boot; a store of another firmware's size is refused.
// Config.Watchdog adds an i6300esb. virtio-blk disks
// with the storage model's throttling, user networking with host ports
// forwarded on 127.0.0.1, virtio-rng (Go's runtime wants getrandom
// early). CPU model host under KVM and max under TCG, which emulates CLWB
// and CLFLUSHOPT for pheap. QEMU gets Pdeathsig SIGKILL and a process group
// of its own, so it never outlives the test or tool. Kill is the power cut:
// SIGKILL, nothing flushed. A guest kernel panic ends the boot at once
// (PanicError) instead of leaving QEMU running a guest that will never print
// again, its cause guessed from the console (an init that exited 127 after
// an ld-off2f line: that line, the loader's reason); a board that halts
// ("reboot: System halted") is ended cleanly.
//
// Config.Reboot runs a board through its resets instead (no -no-reboot):
// a reboot, the watchdog or a panic with panic=N starts the board again
// in the same QEMU, firmware first, its disks, pmem and variables as they
// are; only a power-off ends QEMU. nvboot run -firmware uefi runs an A/B
// image so, because an update's test boot is a reset and what comes
// after it. QEMU itself tells a reset from a power-off there; with
// -no-reboot both end QEMU with status 0, and a runner that started QEMU
// again would have to guess which it was from the console. A panic is
// then let through when the kernel says it reboots ("Rebooting in N
// seconds"), and ends QEMU at once only when the kernel stops there
// (its "end Kernel panic" line), reported as before.
//
// Each pmem image is a memory-backend-file with share=on, given to the
// guest one of three ways (Config.PmemAs, pmem.go):
//
//   - nvdimm: an emulated NVDIMM (ACPI NFIT; sizes a multiple of 2 MiB).
//     The way with BootDisk, whose command line has no memmap=.
//   - e820: RAM after the guest's RAM that the kernel is told is persistent
//     (memmap=SIZE!OFFSET, e820 type 12, CONFIG_X86_PMEM_LEGACY), as a board
//     with persistent RAM describes it. RAM a multiple of 128 MiB (a
//     memory section), regions of 2 MiB (a subsection: the kernel makes a
//     struct page for every page of a region at boot, about 2 ms of a 1-GIPS
//     boot for 128 MiB), RAM and regions under 3 GiB. The appliance's default: the NFIT driver spends
//     37 ms of a 1-GIPS boot evaluating QEMU's _FIT and _DSM AML, and the
//     kernel hands over about 40 ms sooner without it.
//   - virtio: a virtio-pmem-pci device each (Firecracker's and Cloud
//     Hypervisor's pmem), its memory at a fixed place (memaddr) in the pc
//     machine's device-memory area above 4 GiB (-m RAM,maxmem=RAM plus
//     the regions; no DIMM slots, which would add ACPI memory-hotplug
//     methods). The device is asynchronous: its persistence domain is the
//     host's file, reached by its flush request, which QEMU answers after
//     an fsync of the file; Linux serves DAX on it but refuses MAP_SYNC, so
//     pheap (mode msync) and omf (mode dax-msync) make writes durable with
//     msync, which ext4 turns into that flush request. On a board without
//     ACPI two things the firmware tables would say are said otherwise:
//     the area is reserved with memmap=SIZE$BASE (without ACPI's _CRS the
//     kernel put the devices' 64-bit BARs on it, their registers then read
//     as the pmem's zeros and the driver refused them), and the firmware
//     is SeaBIOS, whose MP table routes the device's INTx (QEMU 7.2 gives
//     virtio-pmem-pci no MSI-X; qboot's MP table lists no PCI slot, and
//     the first sync on the device never returned). Measured on the demo
//     (nvboot measure -clock device -pmem virtio, sd, off2f, five boots):
//     kv answers at 77.5 ms (73.1-81.4) against 57.4 on e820 regions:
//     SeaBIOS hands over 8 to 10 ms later than qboot, the kernel takes 3
//     ms more (the driver, its probes), init to the answer 6 ms more (the
//     state's mount and the host's fsyncs on the guest's clock, below).
//
// libnvdimm serves all three the same way: a label-less namespace per
// region, /dev/pmem0, pmem1 in order (virtio-pmem's regions in the order
// of their PCI slots, which is the order of Config.NVDIMMs), the fsdax
// personality from the PFN info block on the media: the images format/fsdax
// writes boot on any of them.
//
// An NVDIMM can be read-only (NVDIMM.ReadOnly, readonly.go): one file
// mapped into many guests, as a text store shared by many appliances is.
// QEMU opens it read-only and maps it as ROM (memory-backend-file
// readonly=on, share=on: every QEMU maps the same page-cache pages), and
// the DIMM is unarmed (unarmed=on, which QEMU 7.2 demands with a read-only
// backend): its NFIT flags say "not armed", for which Linux makes the
// region and /dev/pmemN read-only (a write fails with EPERM, a read-write
// mount with EACCES). A guest's root that sets the region's read_only back
// to 0 writes into the ROM, never the file. Only an NVDIMM: e820 and
// device-tree regions have no read-only kind, so the kernel would take
// writes that QEMU drops silently; vm refuses them.
//
// Many guests on one host (Config.TCGCacheMiB, Config.FreePageReporting,
// Config.SmallPageRAM): under TCG each QEMU's translation cache grew to
// 94 MiB in the big appliance's boot (kv's: 56), with metadata besides,
// more than the guest's own memory; tb-size caps it, at the price of translating again after each
// flush (wall-clock time only: the device clock counts guest
// instructions). A virtio-balloon with free page reporting (its kernel
// reports free 2 MiB blocks, QEMU drops their pages) makes a guest cost
// what it holds, not every page it ever touched; RAM in 4 KiB pages
// (SmallPageRAM, a memfd backend, while the host's shmem_enabled is never)
// over the transparent huge pages QEMU asks for its anonymous RAM, with
// which one page touched costs 2 MiB. The pc board's only: the arm64
// kernel has no virtio-balloon.
//
// A board without ACPI (Config.NoACPI, with e820 pmem and a direct kernel
// boot): QEMU builds no ACPI tables, vm adds acpi=off to the command line,
// and the kernel skips its ACPI interpreter, the PM timer's check and ACPI's
// PnP probe (about 17 ms of a 1-GIPS boot); the interrupt routing comes from
// the firmware's MP table and PCI devices use MSI-X. Such a machine cannot
// power off, so nvinit ends it with a reset, which -no-reboot turns into
// QEMU's exit. NVDIMMs (found through the NFIT) and BootDisk keep ACPI; vm
// refuses NoACPI with either. No ACPI PCI hotplug: ACPI init up to PCI
// probing went from about 500 ms to about 300 ms under TCG.
//
// # The microvm board
//
// Config.Board BoardMicrovm (microvm.go): QEMU's microvm machine, what a
// Firecracker guest looks like: no PCI devices, disks, network and entropy
// on virtio-mmio (virtio-blk-device ...), its own firmware
// (bios-microvm.bin, qboot's) entering -kernel at once (KernelEntry reads
// 0.0 ms), the console on the ISA serial port. Its pmem is e820 regions
// only: microvm has no device-memory area, so QEMU accepts an NVDIMM, a
// virtio-pmem-pci (even with pcie=on) or a virtio-pmem on virtio-mmio and
// maps it nowhere in the guest (info mtree shows no region; the guest sees
// no pmem), and vm refuses them. ACPI on, with an empty PCIe host bridge
// (pcie=on), over ACPI off: Linux 6.1 puts memmap= persistent ranges into
// its resource tree only from its PCI resource survey
// (e820__reserve_resources_late, which its Hyper-V code calls itself for
// the same reason), so without PCI no /dev/pmem0 appears, and microvm's
// PCI is described by ACPI alone (tried both: no pmem without the bridge).
// Its ACPI is hardware-reduced: a DSDT of the virtio-mmio devices (their
// interrupts ACPI's, so an image's acpi=noirq must go: appliance does
// that), power-off through the generic event device, and no PIT, HPET or
// PM timer for the kernel. So under TCG: the wall clock is refused (the
// kernel has nothing to calibrate the TSC against and stops there), the
// device clock's tsc_early_khz gives the TSC's rate, and the local APIC
// timer, calibrated against the TSC, is the one clock event device (no
// noapictimer): that calibration busy-waits 100 ms of guest time, which
// TCG alone costs (it has no TSC-deadline timer; KVM and every x86 core of
// the last decade have one, and Linux then skips it). Measured on the demo
// (nvboot measure -clock device -board microvm, sd, off2f, five boots): kv
// answers at 174.0 ms against 57.4 on the pc board; the kernel's early
// setup takes 113.8 ms against 5.2 (the calibration), acpi_init 6.0 ms.
// Without the calibration microvm would be about the pc board's time:
// its firmware hands over 0.1 ms sooner than qboot. NoACPI gives a
// microvm without ACPI (the devices on the command line as
// virtio_mmio.device=, which QEMU appends, the PIT as on the pc board)
// and no pmem, which vm refuses.
//
// # The arm64 board
//
// Config.Arch ArchArm64 (arm64.go): qemu-system-aarch64 (Debian's
// qemu-system-arm; $NVBOOT_QEMU_ARM64 overrides), -machine
// virt,gic-version=2 (GICv2: the GIC-400 of the Raspberry Pi 4 and 5),
// -cpu cortex-a76 under TCG only (an x86 host runs no arm64 guest with
// KVM), the console on the PL011 (console=ttyAMA0), and no firmware: QEMU's
// boot stub enters the Image at power-on (KernelEntry reads the virtual
// counter there: 0 ns), with a device tree; PSCI powers off and resets.
// With BootDisk it is a UEFI board instead (below).
// The Cortex-A76 (the Pi 5's core) over QEMU's max, which adds features no
// board of ours has and TCG emulates slowly (pointer authentication, SVE,
// MTE), and over the Pi 3's Cortex-A53, whose ARMv8.0 lacks DC CVAP: the
// A76 has DCPoP, so package pmem flushes with DC CVAP as on the board. The
// device clock is the x86 board's (-icount, -seed, -rtc; the counter
// counts guest time from power-on), the CRNG seeded from the device tree's
// rng-seed (QEMU's, from -seed) where x86 trusts RDRAND; disks, network
// and entropy are the same virtio-pci devices. Scripts need an arm64
// busybox (Script.Busybox): the one on the build machine is x86's.
//
// The arm64 board's pmem is PmemDeviceTree: each region is memory after
// the RAM, a NUMA node backed by its file (share=on), that the device
// tree describes as a "pmem-region" and the kernel's of_pmem driver
// serves; mem= keeps the page allocator to the RAM. QEMU makes the tree
// (-machine dumpdtb, a run that builds the machine and exits) and vm adds
// the nodes (fdt.go) and passes it with -dtb, on every arm64 boot: QEMU
// pads its own tree to 1 MiB, which the kernel checksums whole early in
// its boot, and with the compact tree init starts 8.6 ms sooner (35.3
// against 43.9 ms after power-on, 1 GIPS, no pmem). This over the two
// others:
//
//   - virtio-pmem-pci (Firecracker's and Cloud Hypervisor's pmem): Debian
//     12's QEMU 7.2 builds it for x86 only (qemu-system-aarch64 -device
//     help has no virtio-pmem), and it is asynchronous: Linux refuses
//     MAP_SYNC on it, so pheap and omf fall back to msync (a flush
//     request to the host per commit) instead of DC CVAP and DSB (the
//     x86 boards' PmemVirtio).
//   - NVDIMMs through ACPI's NFIT: QEMU's virt machine plugs an NVDIMM
//     only with its ACPI event device, which it creates only when it runs
//     firmware, so every boot would go through UEFI (Debian's
//     qemu-efi-aarch64) and the kernel through its EFI stub and ACPI.
//     Measured on the device clock at 1 GIPS (a 64 MiB region, init
//     mounting it dax=always, no disk or network): init starts 38.0 ms after power-on with the
//     device-tree region, 448.1 ms through UEFI with the NVDIMM (414.5 ms
//     through UEFI without pmem: 33.6 ms are the NFIT's). They are the
//     UEFI board's pmem (below), and refused on a direct boot.
//
// A device-tree region is synchronous, as the pc board's e820 regions are:
// MAP_SYNC is accepted, pheap runs in mode dax and flushes with DC CVAP.
// It is how a board without firmware tables describes persistent RAM.
// QEMU counts the regions as RAM when it places the initramfs and the
// tree (at half the RAM, at most 128 MiB in): vm refuses an initramfs
// that would reach the pmem.
//
// The arm64 UEFI board (BootDisk; Firmware AAVMFCode, the default, and
// FirmwareVars a copy of AAVMFVars) is what an A/B update needs, as the
// pc board with OVMF is: AAVMF (EDK II for the virt machine) from two 64
// MiB pflash chips boots the disk's EFI/BOOT/BOOTAA64.EFI or the Boot####
// entry its variables choose; no -kernel, no -dtb. The firmware hands the
// kernel ACPI tables and no device tree, so its pmem are NVDIMMs
// (PmemNVDIMM, virt's nvdimm=on; device-tree regions are refused there):
// the kernel's NFIT driver finds them, /dev/pmem0 and pmem1 in order with
// the fsdax personality from format/fsdax's info blocks, MAP_SYNC is
// accepted, pheap runs in mode dax (TestRunUEFIUpdateArm64, kv's /stats).
// -boot menu=on,splash-time=0, because without it AAVMF waits 5 s for a
// key before it boots a disk (QEMU 7.2 gives it the wait to use only with
// menu=on). Measured on the device clock at 1 GIPS: AAVMF enters the
// kernel's EFI stub 0.42 s after power-on (0.43 s at the first boot,
// which formats the blank store; 5.43 s with the wait: TestArm64UEFIEntry,
// the Image itself as BOOTAA64.EFI with the probe at its EFI entry), and
// the appliance's init starts 0.66 s after power-on, against 0.14 s
// booted directly (a Slots 2 image, nvboot run -clock device). The
// counter counts from power-on, firmware included, so the device clock
// places every mark as on the direct boot.
//
// Storage models (storage.go), QEMU block throttling: sd (UHS-I A1:
// 40 MiB/s and 1500 IOPS read, 15 MiB/s and 500 IOPS write), emmc, nvme,
// hdd (a 7200 rpm disk: 120 MiB/s, 150 IOPS) and host (unthrottled).
// Latency follows from the request ceiling: at 1500 IOPS each read waits at
// least about 0.7 ms.
//
// # KVM probe
//
// QEMU uses KVM only when KVM really runs a guest here (accel.go). An
// openable /dev/kvm is not enough, nor is a QEMU that starts with -accel
// kvm: a host may expose KVM for one paravirtual guest type only, where a
// VM and a vCPU can be created and a paused QEMU quits cleanly, but a real
// guest never executes an instruction. KVMUsable checks /dev/kvm as far as
// KVM_GET_API_VERSION, KVM_CREATE_VM and KVM_CREATE_VCPU, then boots a guest
// of its own: a 64 KiB firmware whose reset vector writes 0x31 to
// isa-debug-exit and halts. QEMU exits with status 99 only if the guest ran;
// any other end, or none within 15 s, means KVM is not usable, and the
// reason is kept. The answer is remembered per QEMU binary for the life of
// the process. ChooseAccel picks the accelerator when Config.Accel is
// empty: $NVBOOT_ACCEL when set (tcg; kvm, an error when the probe fails),
// else kvm when usable and tcg with the reason otherwise. A boot whose
// console stays empty says which accelerator ran it and how to choose the
// other (SilentHint).
//
// # Device clock
//
// With Config.CPURate QEMU runs with -icount shift=N,sleep=on: every guest
// instruction takes 2^N ns of guest time, the TSC counts guest nanoseconds
// from reset, and under TCG vm adds noapictimer (TCG has no TSC-deadline
// timer, and calibrating the APIC timer against the PIT would busy-wait
// 100 ms; not on microvm with ACPI, above). KernelEntry boots the same
// machine with a copy of the kernel whose first instruction reads the TSC
// and exits: the firmware's handover time, measured. A guest with
// virtio-pmem waits for the host at each flush request: with
// Deterministic (sleep=off) its clock jumps to its next timer while it
// waits, however soon the host's fsync ends (the demo's first answer came
// 85 to 981 ms after power-on over five boots), so appliance boots with
// virtio-pmem run with sleep=on, where the wait counts as the host's time
// (73 to 81 ms), and do not repeat exactly.
//
// # Invariants
//
//   - The QEMU command line for each board, pmem kind and firmware:
//     TestArgs, TestArgsE820, TestArgsVirtio (the device-memory area's
//     place for a RAM size, QEMU's own; its reservation and SeaBIOS
//     without ACPI), TestArgsMicrovm (and what microvm refuses, with the
//     reason), TestBootArgs (a UEFI board's flash, watchdog and resets
//     among them), TestFirmwareArgs, TestDeviceClockArgs,
//     TestICountShift, TestNewFirmwareVars.
//   - The probe: TestProbeFirmwareRunsUnderTCG (the firmware really runs
//     and exits through the port), TestProbeSilentGuestIsNotUsable (a
//     stand-in QEMU that never runs the guest),
//     TestProbeCleanExitWithoutGuestIsNotUsable, TestChooseAccelFromEnv,
//     TestSilentHint, TestKVMUsableAnswers.
//   - A read-only NVDIMM: its command line, and the refusal of a
//     read-only e820 or device-tree region, TestArgsReadOnlyPmem; two
//     guests map one file at once, neither can write it (EPERM, no
//     read-write mount, a forced write dropped), the file's bytes are
//     unchanged: TestReadOnlyPmem.
//   - The TCG cache, free page reporting and 4 KiB RAM on each board, a
//     negative cache and SmallPageRAM off the pc board refused:
//     TestArgsDensity. A guest that frees 96 MiB gives it back to the host
//     with free page reporting and keeps it without: TestFreePageReporting.
//   - A power cut keeps what the guest wrote to pmem, and the fsdax
//     namespace the guest set up is found again, with every pmem kind and
//     on microvm (its disk on virtio-mmio):
//     TestFsdaxPersistsAcrossPowerCut. virtio-pmem's flush requests reach
//     the host's fsync for every commit pheap reports:
//     TestDAXHeapSurvivesPowerCut (pheap). Scripts report their status and
//     console: TestScriptStatusAndConsole. A panic ends the boot:
//     TestKernelPanicEndsBoot; with Reboot only one the kernel stops at:
//     TestPanicWithReboot.
//   - The device clock: TestKernelEntryAndRate (a CPU-bound stretch doubles
//     when the rate halves), TestEntryKernelRefusesOtherFiles,
//     TestStorageModelUnderDeviceClock (how far QEMU's throttle alone is from
//     the model on guest time).
//   - The arm64 UEFI board: its command line and refusals,
//     TestArgsArm64UEFI; AAVMF boots the disk's EFI application and hands
//     over without its boot-menu wait, TestArm64UEFIEntry.
//   - The arm64 board: its command line and refusals, TestArgsArm64; the
//     device tree's pmem nodes, read back by dtc, TestFDTAddPmem,
//     TestFDTAddPmemRefuses, FuzzFDTAddPmem; the kernel mounts the
//     region's fsdax namespace dax=always, takes a MAP_SYNC mapping there,
//     flushes with DC CVAP, and what it wrote is in the backing file, and
//     pheap runs in mode dax: TestArm64PmemDAX; two boots on the device
//     clock are the same boot and the kernel is entered at power-on:
//     TestArm64DeviceClockRepeats, TestEntryImageArm64.
//
// Tests that boot QEMU get the kernel from vmtest.Kernel (arm64:
// vmtest.KernelArm64) and skip under -short or when $NVBOOT_KERNEL
// ($NVBOOT_KERNEL_ARM64) is unset.
//
// # Limits
//
//   - A power cut of QEMU loses no cache line (QEMU writes guest stores to
//     the backing file directly): flush and fence ordering is tested by
//     pheap's crash simulator, not here.
//   - QEMU's throttles count bytes and requests, not a card's latency curve,
//     and wait on the host's clock (docs/DEVICE-CLOCK.md for what that costs
//     under -icount).
//   - Timer and idle behaviour is QEMU's pc, microvm and virt machines',
//     not a board's. microvm's boot under TCG carries the 100 ms APIC
//     timer calibration no real core makes (above).
//   - virtio-pmem on the pc board only: microvm cannot carry it (QEMU
//     7.2), the virt board's QEMU has none.
//   - The arm64 board has no KVM; its UEFI firmware boots only the disk
//     (no -kernel handed to the firmware), so KernelEntry's probe measures
//     direct boots only (TestArm64UEFIEntry measures AAVMF's handover on a
//     disk of its own).
package vm
