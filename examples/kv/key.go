package main

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// The key grammar. A key is the request path after "/kv/", as sent (not
// cleaned: no redirect, no other key than the one written), split at "/"
// into segments, each percent-decoded:
//
//	key     = segment *( "/" segment )     at most maxKey bytes, decoded
//	segment = 1*char, not "." or ".."
//	char    = any Unicode character but the controls U+0000-U+001F and
//	          U+007F-U+009F, in UTF-8, percent-encoded where URL syntax
//	          needs it (space %20, "?" %3F, "#" %23, "%" %25)
//
// so no key is empty, starts or ends with "/", holds "//", or has a
// segment a client or proxy would resolve away. "/" is only the separator:
// %2F is refused, else a%2Fb and a/b would be two keys listed alike. No
// control character (CR, LF, NUL...) and only valid UTF-8: GET /kv lists
// one key a line, as text. A request for a key carries no query: a "?" in
// a key is sent as %3F, and a query would be cut from the key unseen.
//
// README.md states the same grammar; keep the two alike.

// parseKey returns the key that rawPath (a request's escaped path after
// "/kv/") names, or an error that says which rule it breaks.
func parseKey(rawPath string) (string, error) {
	if rawPath == "" {
		return "", fmt.Errorf("empty key: want /kv/KEY")
	}
	segs := strings.Split(rawPath, "/")
	at := 0 // where seg starts in rawPath
	for i, seg := range segs {
		switch {
		case seg == "":
			return "", fmt.Errorf("key %q has an empty segment (a leading, trailing or double /)", rawPath)
		case strings.Contains(strings.ToUpper(seg), "%2F"):
			return "", fmt.Errorf("key %q has %%2F: / is the separator only, written as it is", rawPath)
		}
		if j := escapeError(seg); j >= 0 {
			return "", fmt.Errorf("key %q: %s", rawPath, escapeRule(at+j))
		}
		at += len(seg) + 1
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("key %q: %w", rawPath, err)
		}
		if dec == "." || dec == ".." {
			return "", fmt.Errorf("key %q has a segment %q (clients and proxies resolve it away)", rawPath, dec)
		}
		segs[i] = dec
	}
	key := strings.Join(segs, "/")
	if len(key) > maxKey {
		return "", fmt.Errorf("key of %d bytes: want at most %d (64 KiB)", len(key), maxKey)
	}
	if err := checkText(key); err != nil {
		return "", fmt.Errorf("key %q: %w", rawPath, err)
	}
	return key, nil
}

// checkText checks what a key or a prefix is made of: valid UTF-8 without
// control characters, so that each key is one line of text in GET /kv.
func checkText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("byte %d is not valid UTF-8", i)
		case r < 0x20, 0x7f <= r && r <= 0x9f:
			return fmt.Errorf("byte %d is the control character %U", i, r)
		}
	}
	return nil
}

// escapeError is the byte of s where a % starts no escape of two hex
// digits, -1 if there is none.
func escapeError(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return i
		}
	}
	return -1
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// escapeRule says what is wrong with the % at byte i.
func escapeRule(i int) string {
	return fmt.Sprintf("the %% at byte %d starts no escape of two hex digits (%%XX); a %% in a key is written %%25", i)
}
