package nvbootcmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvboot/nvboot/host/vm"
)

// bootFailed is the error of a boot that did not get its service to answer
// (err), m stopped: a kernel panic, which ended the boot at once, says so
// with its likely cause; the console's last lines follow either way.
func bootFailed(err error, m *vm.Machine) error {
	var pe *vm.PanicError
	if werr := m.Wait(context.Background()); errors.As(werr, &pe) {
		err = pe
	}
	return fmt.Errorf("%w; console:\n%s", err, m.ConsoleTail(25))
}
