package poold

import (
	"slices"
	"testing"

	"github.com/nvboot/nvboot/image/guest"
)

// TestRlimitNamesMatchContract: every limit the config contract accepts is
// one poold can set, and the other way round.
func TestRlimitNamesMatchContract(t *testing.T) {
	for _, n := range guest.RlimitNames {
		if _, ok := rlimitNames[n]; !ok {
			t.Errorf("guest.RlimitNames has %q, which poold cannot set", n)
		}
	}
	for n := range rlimitNames {
		if !slices.Contains(guest.RlimitNames, n) {
			t.Errorf("poold sets %q, which guest.RlimitNames lacks", n)
		}
	}
}
