package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/nvboot/nvboot/internal/benchjson"
)

// guestPlan returns the guest kernel, or "" when the guest part is skipped.
func guestPlan(c config, progress io.Writer) (string, error) {
	switch c.Guest {
	case "off":
		return "", nil
	case "auto", "on", "only":
	default:
		return "", fmt.Errorf("-guest %q: want auto, on, off or only", c.Guest)
	}
	kernel, err := guestReady(c)
	if err == nil && c.Guest == "auto" && c.Quick {
		err = errors.New("-quick (add -guest on to include it)")
	}
	if err != nil {
		if c.Guest != "auto" {
			return "", fmt.Errorf("-guest %s: %w", c.Guest, err)
		}
		fmt.Fprintf(progress, "bench/omf: skipping the guest (DAX) part: %v\n", err)
		return "", nil
	}
	return kernel, nil
}

func guestReady(c config) (string, error) { return "", errors.New("not built yet") }

func measureGuest(c config, kernel string, progress io.Writer) (benchjson.Output, string, error) {
	return benchjson.Output{}, "", errors.New("not built yet")
}
