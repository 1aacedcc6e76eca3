package poold

import (
	"slices"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// TestRlimitNamesMatchContract: every limit the config contract accepts is
// one poold can set, and the other way round.
func TestRlimitNamesMatchContract(t *testing.T) {
	for _, n := range contract.RlimitNames {
		if _, ok := rlimitNames[n]; !ok {
			t.Errorf("contract.RlimitNames has %q, which poold cannot set", n)
		}
	}
	for n := range rlimitNames {
		if !slices.Contains(contract.RlimitNames, n) {
			t.Errorf("poold sets %q, which contract.RlimitNames lacks", n)
		}
	}
}
