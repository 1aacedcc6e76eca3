// Package off2f implements the OFF2F program format on Linux: a static
// executable split into a header file (a valid ELF whose PT_INTERP is
// ld-off2f, holding the ELF header, the writable segments and an OFF2F note)
// and a text file (the read-only segments, stored in a text store on
// persistent memory, named by content hash). This package is the Go side:
// the byte formats, the converter, the parsers and the text store.
// docs/OFF2F.md describes the format, the loader (loader/ld-off2f.c) and
// the store on pmem; host/off2fcmd is the off2f command.
//
// # API
//
//   - Machine is what a program is built for: x86-64 (MachineAMD64) or
//     aarch64 (MachineARM64), named by String ("x86-64", "aarch64"), GOARCH
//     and ELF; MachineOfELF and MachineOfGOARCH go the other way. Convert
//     takes it from the input's e_machine and records it in the note and
//     the text header; the loader maps only its own machine's text, a
//     Store holds one machine's texts, and Options.Arch (what an image
//     builder sets) refuses a program of another machine than the image's.
//   - Convert splits a static executable (Options: loader path, store and
//     fallback directories, the device the loader may mount the store from,
//     prefault, CRC: the text's CRC-32C in the note, FlagCRC, which the
//     loader checks the whole text against at each start; TextCRC computes
//     it, Note.CheckCRC checks a text file against it). Install is the one install sequence (nvboot build, off2f
//     convert and bench/exec use it): convert, Store.Put the text into every
//     store, then write the header file last; when a step fails it removes
//     the text it added, so no header file names missing text and no new
//     text stays without its header file.
//   - ParseHeader and ParseText read and check the two files; Header.CheckText
//     ties a text to a header (what the loader checks); Unpack rebuilds the
//     original loadable segments from the pair; WithFallbackDir names
//     another fallback directory in a header file (the update endpoint
//     names a deployed text's clean copy so).
//   - Store is a directory of texts named by the 64 hex digits of their hash
//     (mode 0444); Put, List, GC; ReadManifest, ParseManifest and
//     WriteManifest handle the MANIFEST that lists, sorted, the hashes an
//     image needs.
//
// The byte layouts (note, text header, segment table) are field lists in
// format.go, shared with the loader's loader/off2f.h and pinned by
// TestFormatFrozen.
//
// # Converter design
//
//   - The data's image goes with the text (dataGoesToText) when the program
//     has exactly one writable segment, on a page boundary above its text,
//     with no program header holding file bytes inside it: Go's static
//     programs. It is the text file's last segment, rw-, page-aligned,
//     without bss; the header file's writable PT_LOAD keeps its memory size
//     with no file bytes, the kernel maps it anonymous, and the loader maps
//     the image over its start. Kept in the header file it is read from the
//     boot disk at every start (Caddy's 1.3 MiB: up to 33 ms on the sd
//     model); from the store it is mapped copy-on-write from pmem. On the
//     big appliance this made off2f 0.956× of dax-elf from power-on
//     (docs/BENCHMARKS.md). A static-pie (PT_DYNAMIC and RELRO in the data)
//     and gcc's static programs (data mid-page) keep their data in the
//     header file.
//   - The header segment (ELF header, program headers, interpreter path,
//     note) is one small read-only PT_LOAD with a PT_PHDR (placeHeader). On
//     x86-64: below the program for ET_EXEC, so the writable segment stays
//     the last PT_LOAD; above it for a static-pie, which starts at vaddr 0,
//     aligned to the program's largest alignment so 2 MiB text mappings
//     stay possible. On aarch64: in the gap between the text and the data
//     (Go's programs start at 0x10000, with no room below), else above. In
//     the gap it is the lowest PT_LOAD and the header file's span leaves
//     the text out, so qemu-user (which derives AT_PHDR from the lowest
//     PT_LOAD and reserves the span) runs the aarch64 tests; x86-64 keeps
//     its placement, so its files are unchanged.
//   - The machine is the upper u16 of the note's and text header's version
//     fields and of the hash's u32 after the program header count, x86-64
//     being 0: an x86-64 program's files and hash are the bytes they are
//     without the field.
//   - Segments of 2 MiB and more start at a file offset congruent to their
//     vaddr modulo 2 MiB, the rest modulo 4 KiB; padding is holes. DAX maps
//     a 2 MiB extent with one page-table entry only when offset and vaddr
//     agree modulo 2 MiB: 349 minor faults per start of a 22 MiB program
//     from the store against about 5260 from tmpfs (bench/exec).
//   - 2 MiB spans (FlagHugeSpan): when an x86-64 ET_EXEC program leaves
//     the 2 MiB around its read-only segments free (hugeSpans: Go's linked
//     -R 0x200000), each gets the next 2 MiB-aligned file range, filled
//     around it with 0xcc (a zero block would be a hole once mke2fs -d
//     copies the file, and DAX maps 2 MiB only over allocated blocks), and
//     the loader maps it whole (Segment.span), so every text fault is a
//     2 MiB one: nvinit's loader, reading all of its text for the CRC,
//     reaches main 2.6 ms sooner on the device clock (docs/OFF2F.md). A
//     flag over longer segments, so the CRC, the hash and Unpack stay over
//     the program's own bytes. Go's default layout converts byte for byte
//     as before; aarch64 is left out (its header segment's gap).
//   - The hash covers the original program header fields, the machine, the
//     FlagHugeSpan bit, the segment table and every segment's bytes (the
//     data image too), so the same bytes at other addresses, for another
//     machine, laid out with spans, or with other data, are a different
//     text; identical text is stored once.
//   - Static programs only: a dynamic program's text is spread over shared
//     libraries the kernel does not map for the loader. The error says how
//     to link statically.
//
// # Store design
//
//   - Writes are atomic (WriteFileAtomic, through internal/atomicfile): a
//     temporary file .NAME.off2f-tmp-<16 hex digits> in the same directory,
//     fsynced, renamed into place, the directory fsynced. A crash or a full
//     disk leaves the whole file or none. internal/atomicfile over
//     github.com/google/renameio/v2 because renameio does not fsync the
//     directory and names its temporary files .NAME<digits>, which GC could
//     not tell from a stranger's (IsLeftover).
//   - Put keeps an existing file with the right size and header page, and
//     refuses a text for another machine than the store's other texts.
//   - GC removes only what it knows: texts no manifest lists and the
//     leftovers of interrupted writes. It checks the whole directory first
//     and removes nothing when a manifest lists no hash, when every text
//     would go, when a file is neither a text named by its hash, MANIFEST
//     nor a leftover (not a store), or when a hash-named file lacks the text
//     magic.
//
// # Invariants
//
//   - The formats and the hash do not change by accident: TestFormatFrozen;
//     machines: TestMachineNames, TestHeaderMachineAgreesWithNote,
//     TestStorePutRefusesOtherMachine, TestConvertRefusesOtherArch.
//   - The parsers refuse what the loader refuses and never panic:
//     TestNoteRejects, FuzzParseHeader, FuzzParseText, FuzzConvert,
//     FuzzParseManifest, TestParseManifestLongLine (a long line is an error,
//     not the end of the manifest), TestNotELFSaysWhatItIs.
//   - A converted program behaves like its original (stdout, stderr, exit
//     status, signals, /proc/self/exe, args, environment, goroutines, TLS)
//     for Go ET_EXEC and static-pie, gcc -static and -static-pie, busybox
//     applets and a libc-less program, and sees its original program
//     headers: TestConvertedBehavesLikeOriginal, TestPrefaultRunsIdentically,
//     TestConvertedSeesOriginalProgramHeaders. These and the loader's tests
//     run for x86-64 on the host and for aarch64 under qemu-aarch64-static
//     (eachMachine: Go ET_EXEC, gcc -static, a libc-less program; the
//     aarch64 subtests skip, naming the missing tool, without
//     gcc-aarch64-linux-gnu or qemu-user-static).
//   - Dynamic executables, shared objects, other machines and converted
//     files are refused with the reason: TestRejectsDynamicAndOtherInputs.
//   - Unpack gives back every loadable segment byte for byte:
//     TestUnpackRoundTrip. The data image is in the text, the header has no
//     data bytes, two runs give the same text: TestDataImageInText.
//     TestIdenticalTextStoredOnce, TestLayoutAlignsHugeSegments. Spans:
//     TestLayoutSpans, TestHugeSpans (set for -R 0x200000, not for Go's
//     default layout; mapped whole; a flag the text and note disagree on
//     refused by loader and parser).
//   - The loader's failure paths (another machine's note or text among
//     them), size, relocations and robustness: TestLoaderFailurePaths,
//     TestLoaderRunDirectly, TestLoaderSurvivesCorruptNotes,
//     TestLoaderIsSmall. Its CRC-32C is hash/crc32's Castagnoli
//     (TestLoaderCRC32C); a FlagCRC text with a bit flipped anywhere is
//     refused and its fallback run (TestLoaderChecksCRC); a program run
//     from its fallback behaves as its original, OFF2F_FALLBACK added
//     (TestFallbackRunsLikeOriginal).
//   - Store writes are whole or absent: TestStorePutFullDisk,
//     TestStorePutKilled (SIGKILL at random moments), TestWriteFileAtomicErrors,
//     TestWriteFileAtomicLeftoverNames, TestStorePutRejectsBadName; GC:
//     TestStoreGC, TestStoreGCRefuses; Install: TestInstall.
//   - In the appliance kernel with an emulated NVDIMM the text is mapped
//     from the store mounted dax=always, its extents 2 MiB-aligned (FIEMAP),
//     and the page cache does not grow by it; a program with spans walks
//     all of its text with no more minor faults than 2 MiB pages:
//     TestTextMappedFromDAXPmem.
//
// # Limits
//
//   - Static executables only; x86-64 and aarch64 only. aarch64 with 4 KiB
//     pages: the text is laid out 4 KiB-congruent. An aarch64 static-pie
//     is converted and checked but not run in the tests: qemu-user 7.2
//     loads it at its link-time address, putting its text at 0.
//   - Section headers, symbols and debug info are not kept: Unpack restores
//     what runs.
//   - Nothing re-hashes a text on the hot path: the loader checks the header
//     page only, and the CRC of a FlagCRC text (nvboot's nvinit alone). A
//     text damaged in its body is found by off2f verify, or by nvinit when
//     a service fails in a way damaged text causes.
package off2f
