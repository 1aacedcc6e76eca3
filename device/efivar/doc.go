// Package efivar reads and writes the UEFI boot variables an A/B update
// switches slots with: Boot#### load options, BootOrder and BootNext, as
// Linux's efivarfs shows them. Byte layouts follow the UEFI specification
// (2.10: 3.1.3 "Load Options", 10.3 "Device Path Nodes"); efivarfs's file
// format follows the kernel's Documentation/filesystems/efivarfs.rst.
// device/nvinit uses it for the test boot and the commit; docs/UPDATE.md
// describes the update as a whole.
//
// # Design
//
// Pure Go over running efibootmgr: nvinit has no userland to run it in,
// and the encoding is small enough to test byte for byte on the host.
//
//   - A Boot#### load option is the attributes, the device path list's
//     length, the UTF-16 description, a hard-drive media path naming the
//     partition by number, start, size and GPT GUID, a file path, and the
//     end node.
//   - BootOrder and BootNext are little-endian 16-bit entry numbers.
//   - A variable on efivarfs is 4 bytes of attributes before the data. The
//     kernel makes most variables immutable (chattr +i) against stray
//     writes, so the flag is cleared before a write, as efibootmgr does.
//
// # Invariants
//
//   - What is written parses back the same: TestLoadOptionRoundTrip,
//     TestBootOrder.
//   - The bytes are the specification's, checked against layouts worked out
//     from it: TestLoadOptionBytes.
//   - A malformed load option is an error, never a panic:
//     TestParseLoadOptionRejects, FuzzParseLoadOption.
//   - Reading and writing through efivarfs (attributes, the immutable
//     flag) on a directory standing in for it: TestVarsOnEfivarfs.
//
// # Limits
//
//   - ParseLoadOption reads the shape Marshal writes (a GPT hard-drive
//     node, a file path, the end); the other shapes firmware writes for its
//     own entries are an error naming what differs, and callers leave such
//     entries alone.
//   - Tested on the host, and in QEMU on OVMF (TestUpdateOnUEFIBoard) and
//     on arm64's AAVMF (TestRunUEFIUpdateArm64), not on a real board's
//     firmware.
package efivar
