package poold

import (
	"slices"
	"strings"
)

// Environment variables a dynamic loader or libc obeys only in a process
// that is not running setuid or setgid. The kernel marks a setuid exec
// (AT_SECURE) and glibc's ld.so then drops these (sysdeps/generic/
// unsecvars.h, UNSECURE_ENVVARS) and ignores every LD_ variable; a process
// poold starts with credentials other than its client's is no setuid exec,
// so nothing would. Written after glibc's list (2.39), with whole prefixes
// where glibc treats a family alike.
var (
	unsafeEnvNames = map[string]bool{
		"GCONV_PATH":       true, // iconv loads modules from it
		"GETCONF_DIR":      true,
		"GLIBC_TUNABLES":   true,
		"HOSTALIASES":      true, // the resolver reads files named here
		"LOCALDOMAIN":      true,
		"LOCPATH":          true, // locale files
		"NIS_PATH":         true,
		"NLSPATH":          true, // message catalogues (format strings)
		"RESOLV_HOST_CONF": true,
		"RES_OPTIONS":      true,
		"TMPDIR":           true,
		"TZDIR":            true,
	}
	unsafeEnvPrefixes = []string{
		"LD_",     // LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, LD_DEBUG_OUTPUT, ...
		"MALLOC_", // MALLOC_TRACE (a file written), MALLOC_CHECK_, ...
		poolEnvPrefix,
	}
)

// poolEnvPrefix starts poold's own variables (pool.EnvFD, pool.EnvExec,
// ...). A client's are always removed: a Go program that imports pool,
// started on a miss, would park on a descriptor of the client's choosing
// and exec what it is told.
const poolEnvPrefix = "NVBOOT_POOL_"

// withoutPoolEnv returns env without poold's own variables.
func withoutPoolEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, poolEnvPrefix) {
			return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, poolEnvPrefix) })
		}
	}
	return env
}

// secureEnv returns env without the variables above, for a process that
// runs with credentials other than its client's.
func secureEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if unsafeEnv(k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func unsafeEnv(k string) bool {
	if unsafeEnvNames[k] {
		return true
	}
	for _, p := range unsafeEnvPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
