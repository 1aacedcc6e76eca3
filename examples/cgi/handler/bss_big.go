//go:build bigbss

package main

// 800 pages, as in the Tender CGI study.
var bss [800 * 4096]byte
