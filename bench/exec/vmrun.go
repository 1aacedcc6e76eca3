package main

import (
	"context"
	"errors"
)

func runVM(ctx context.Context, c *config, p *programs, ram, profile string, log *progress) (*place, error) {
	return nil, errors.New("vm package not ready")
}
