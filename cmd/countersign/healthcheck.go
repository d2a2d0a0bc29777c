package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func init() { register(newHealthcheckCmd) }

// newHealthcheckCmd asks a running serve whether it is ready, for
// container healthchecks: the image has no shell and no curl.
func newHealthcheckCmd(c *cli) *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if a running serve is ready (its store reachable), 1 if not: for container healthchecks",
		Long: `countersign healthcheck asks GET /readyz of a running countersign serve and exits 0
when it answers 200 (the process is up and its Redis takes writes), 1 otherwise,
within 3 seconds. Without --url it asks the address of COUNTERSIGN_LISTEN on this
machine (127.0.0.1:8080 by default), which is what a container healthcheck needs.`,
		Example: `  countersign healthcheck --url http://127.0.0.1:8080`,
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				url = localURL(c.get("COUNTERSIGN_LISTEN"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/readyz", nil)
			if err != nil {
				return usagef("--url %q is not a URL", url)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("not healthy: %s does not answer: %w", url, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("not ready: %s/readyz answered %d (is Redis reachable?)", url, resp.StatusCode)
			}
			fmt.Fprintln(c.stdout, "ready")
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "base URL of the service (default: COUNTERSIGN_LISTEN on 127.0.0.1)")
	return cmd
}

// localURL is http:// and the listen address, with an unspecified host
// (0.0.0.0, [::], none) asked on the loopback address.
func localURL(listen string) string {
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
