package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/receipt"
	"github.com/spf13/cobra"
)

func init() { register(newVerifyCmd) }

// verifyOpts are the flags of countersign verify.
type verifyOpts struct {
	jwks, method, rawURL, bodyFile, ifMatch, aud, iss, at string
}

func newVerifyCmd(c *cli) *cobra.Command {
	var o verifyOpts
	cmd := &cobra.Command{
		Use:   "verify [RECEIPT|-]",
		Short: "Check a countersignature receipt, and the request it should cover",
		Long: `countersign verify checks a countersignature receipt (SPEC §9) against countersign's
public keys, and optionally that it covers a given HTTP write. The receipt is read
from the argument, or from standard input when it is absent or "-". It prints the
claims and the verdict; exit 0 when the receipt is valid (and covers the request,
if one is given), 1 otherwise.`,
		Example: `  countersign verify "$RECEIPT" --jwks https://countersign.example/.well-known/jwks.json
  countersign verify "$RECEIPT" --jwks jwks.json --method PATCH --url https://calendar.example/api/events/7 --body body.json`,
		Args: argsUsage(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.jwks == "" {
				return usagef("--jwks URL|FILE is required: countersign's JWKS (…/.well-known/jwks.json)")
			}
			if (o.method == "") != (o.rawURL == "") || (o.bodyFile != "" && o.method == "") {
				return usagef("--method and --url go together (and --body needs them)")
			}
			return verifyReceipt(c.ctx, o, args, c.stdin, c.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.jwks, "jwks", "", "countersign's JWKS: a URL (https://…/.well-known/jwks.json) or a file (required)")
	f.StringVar(&o.method, "method", "", "the request's method, to check that the receipt covers it")
	f.StringVar(&o.rawURL, "url", "", "the request's absolute URL, query included")
	f.StringVar(&o.bodyFile, "body", "", "a file holding the request's exact body (default: no body)")
	f.StringVar(&o.ifMatch, "if-match", "", "the request's If-Match header, to check it too")
	f.StringVar(&o.aud, "aud", "", "the audience the receipt must be for (a target name, email, slack, teams)")
	f.StringVar(&o.iss, "iss", "", "the issuer the receipt must come from (countersign's public URL)")
	f.StringVar(&o.at, "at", "", "check expiry as of this time (RFC 3339) instead of now, e.g. when the request was received")
	return cmd
}

// verifyReceipt checks one receipt. A refused receipt is an error (exit 1)
// after the verdict has been printed.
func verifyReceipt(ctx context.Context, o verifyOpts, pos []string, stdin io.Reader, stdout io.Writer) error {
	jwks, method, rawURL, bodyFile, ifMatch := &o.jwks, &o.method, &o.rawURL, &o.bodyFile, &o.ifMatch
	expect := receipt.Expect{Audience: o.aud, Issuer: o.iss, Now: time.Now()}
	var err error
	if o.at != "" {
		if expect.Now, err = time.Parse(time.RFC3339, o.at); err != nil {
			return usagef("--at must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
	}

	token := ""
	if len(pos) == 1 && pos[0] != "-" {
		token = pos[0]
	} else {
		b, err := io.ReadAll(io.LimitReader(stdin, receipt.MaxTokenBytes+1))
		if err != nil {
			return fmt.Errorf("read the receipt from standard input: %w", err)
		}
		token = string(b)
	}
	token = withoutHeaderName(token)
	keys, err := verifyKeys(*jwks)
	if err != nil {
		return err
	}
	var req *receipt.Request
	if *method != "" {
		var body []byte
		if *bodyFile != "" {
			if body, err = readBounded(*bodyFile, 64<<20); err != nil {
				return err
			}
		}
		req = &receipt.Request{Method: strings.ToUpper(*method), URL: *rawURL, BodySHA256: receipt.BodySHA256(body),
			IfMatch: *ifMatch, CheckIfMatch: *ifMatch != ""}
	}

	vctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	claims, err := receipt.Verify(vctx, token, keys, expect)
	kid, peeked, _ := receipt.Peek(token)
	switch {
	case claims != nil:
		printClaims(stdout, kid, claims, "verified")
	case peeked != nil:
		printClaims(stdout, kid, peeked, "NOT VERIFIED: do not trust them")
	}
	if err != nil {
		fmt.Fprintf(stdout, "receipt: REFUSED: %s\n", err)
		return fmt.Errorf("the receipt is not valid: %w", errVerdictShown)
	}
	fmt.Fprintf(stdout, "receipt: valid (signed by key %s, expires %s)\n", kid, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	if req == nil {
		return nil
	}
	if err := receipt.Covers(claims, *req); err != nil {
		fmt.Fprintf(stdout, "covers %s %s: NO: %s\n", req.Method, req.URL, err)
		return fmt.Errorf("the receipt does not cover this request: %w", errVerdictShown)
	}
	fmt.Fprintf(stdout, "covers %s %s: yes\n", req.Method, req.URL)
	return nil
}

// verifyKeys reads the JWKS from a URL or a file.
func verifyKeys(src string) (receipt.KeySource, error) {
	if strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://") {
		return receipt.NewRemoteKeys(src, receipt.RemoteOptions{}), nil
	}
	keys, err := receipt.LoadJWKS(src)
	if err != nil {
		return nil, fmt.Errorf("--jwks %s: %w", src, err)
	}
	return keys, nil
}

func printClaims(w io.Writer, kid string, c *receipt.Claims, note string) {
	b, _ := json.MarshalIndent(c, "", "  ")
	fmt.Fprintf(w, "claims (%s; kid %s):\n%s\n", note, kid, b)
	fmt.Fprintf(w, "issued %s, expires %s\n", time.Unix(c.IssuedAt, 0).UTC().Format(time.RFC3339), time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
}

// readBounded reads a whole file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// withoutHeaderName drops the name of a pasted header line
// ("Countersign-Receipt: eyJ…", as an email or HTTP request carries it):
// the docs say a header can be pasted as it is.
func withoutHeaderName(s string) string {
	t := strings.TrimSpace(s)
	const name = "countersign-receipt:"
	if len(t) >= len(name) && strings.EqualFold(t[:len(name)], name) {
		return t[len(name):]
	}
	return s
}
