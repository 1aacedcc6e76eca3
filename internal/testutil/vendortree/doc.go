// Package vendortree gives tests the vendored release trees of Buildroot,
// OpenEmbedded-Core and BitBake (../shared/vendor beside the checkout, or
// $NVBOOT_VENDOR): each tarball is checked against SHA256SUMS and unpacked
// once into a cache outside the checkout, keyed by its hash, and never
// edited there. A test whose tree is not vendored skips. The builders'
// tests (buildroot-ext, yocto) use it: no network is needed to check the
// configuration, parsing and lint of the builders.
package vendortree
