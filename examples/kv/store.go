package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// store is what the HTTP handlers need from the state: heapStore (the
// default) or logStore (-state).
type store interface {
	// Put stores val under key; it returns once the change is durable.
	Put(key string, val []byte) error
	// Get returns the value of key, or errNotFound, or an error naming the
	// key (errDamaged if the stored value fails its checksum).
	Get(key string) ([]byte, error)
	// Delete removes key durably, or returns errNotFound.
	Delete(key string) error
	// Keys returns the keys starting with prefix, sorted, and how many
	// stored keys are damaged: they fail their checksum, so they can be
	// neither named nor compared with prefix, and each is counted
	// whatever prefix is. err: the listing could not be read at all.
	Keys(prefix string) (keys []string, damaged int, err error)
	// Stats describes the state for GET /stats.
	Stats() map[string]any
	Close() error
}

var errNotFound = errors.New("not found")

// errDamaged: the stored value fails its checksum, or its block does.
var errDamaged = errors.New("stored value is damaged")

// sizeFlag is a byte count with an optional KiB, MiB or GiB suffix.
type sizeFlag int64

func (s *sizeFlag) String() string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if *s != 0 && *s%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", *s>>u.shift, u.name)
		}
	}
	return strconv.FormatInt(int64(*s), 10)
}

func (s *sizeFlag) Set(v string) error {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(v, suffix) {
			v, mult = strings.TrimSuffix(v, suffix), m
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return fmt.Errorf("size %q: want a positive number of bytes, optionally with KiB, MiB or GiB", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}
