//go:build !bigbss

package main

var bss [4096]byte
