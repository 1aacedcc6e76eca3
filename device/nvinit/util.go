package nvinit

import (
	"strconv"
	"strings"
)

func splitLines(s string) []string  { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
func splitFields(s string) []string { return strings.Fields(s) }

// unescapeMount undoes the kernel's \ooo escaping of spaces, tabs, newlines
// and backslashes in mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
