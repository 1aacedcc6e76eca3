// Package buildtest is what tests that build appliance images share: the
// host tools a build runs (NeedTools skips a test unless the list
// host/image/config checks is installed), and a stand-in kernel
// (FakeKernel: a file with the bzImage signature the build checks;
// FakeKernelFor arm64: the arm64 Image magic).
package buildtest
