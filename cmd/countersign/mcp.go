package main

import (
	"context"
	"errors"
	"io"
)

func runMCP(ctx context.Context, env func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}
