package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

var from = mail.Address{Name: "Countersign", Address: "agent@corp.example"}

func newAction(t *testing.T, s mailer.Sender, limits email.Limits) *email.Action {
	t.Helper()
	if s == nil {
		s = mailer.NewDevMailbox(10)
	}
	a, err := email.New(s, from, limits)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func prepare(t *testing.T, a *email.Action, input string) (*approval.Prepared, error) {
	t.Helper()
	return a.Prepare(context.Background(), approval.PrepareRequest{
		Principal: &approval.Principal{ID: "agent"}, Input: json.RawMessage(input)})
}

func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	var e *approval.Error
	if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput {
		t.Fatalf("error %v is not invalid_input", err)
	}
	var names []string
	for _, f := range e.Details["fields"].([]approval.FieldError) {
		names = append(names, f.Field)
	}
	return names
}

var sender = email.Address{Name: "Countersign", Address: "agent@corp.example"}

func TestNormalize(t *testing.T) {
	long := strings.Repeat("x", 998)
	tests := []struct {
		name  string
		input string
		want  email.Input
	}{
		{
			name:  "minimal",
			input: `{"to":["ann@client.example"],"subject":"Hi","text":"Hello"}`,
			want: email.Input{From: sender, To: []email.Address{{Address: "ann@client.example"}},
				Subject: "Hi", Text: "Hello\n"},
		},
		{
			name:  "display name kept",
			input: `{"to":["Ann Lee <ann@client.example>"],"subject":"Hi","text":"x\n"}`,
			want: email.Input{From: sender, To: []email.Address{{Name: "Ann Lee", Address: "ann@client.example"}},
				Subject: "Hi", Text: "x\n"},
		},
		{
			name:  "quoted display name with comma",
			input: `{"to":["\"Lee, Ann\" <ann@client.example>"],"subject":"Hi","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Name: "Lee, Ann", Address: "ann@client.example"}},
				Subject: "Hi", Text: "x\n"},
		},
		{
			// Encoded words are refused (TestEncodedWordsRefusedInEveryHeader):
			// a name is written as the text itself.
			name:  "non-ASCII display name",
			input: `{"to":["Jörg <j@client.example>"],"subject":"Hi","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Name: "Jörg", Address: "j@client.example"}},
				Subject: "Hi", Text: "x\n"},
		},
		{
			name:  "uppercase domain lowered, local part kept",
			input: `{"to":["Ann.Lee@CLIENT.Example"],"subject":"Hi","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Address: "Ann.Lee@client.example"}},
				Subject: "Hi", Text: "x\n"},
		},
		{
			name:  "IDN domain to punycode",
			input: `{"to":["Bob <bob@BÜCHER.example>"],"cc":["x@XN--MNCHEN-3YA.example"],"subject":"Hi","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Name: "Bob", Address: "bob@xn--bcher-kva.example"}},
				Cc: []email.Address{{Address: "x@xn--mnchen-3ya.example"}}, Subject: "Hi", Text: "x\n"},
		},
		{
			name:  "whitespace trimmed",
			input: `{"to":["  ann@client.example  "],"subject":"  Hi there  ","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Address: "ann@client.example"}},
				Subject: "Hi there", Text: "x\n"},
		},
		{
			name:  "line ends normalized",
			input: `{"to":["ann@client.example"],"subject":"Hi","text":"a\r\nb\rc","html":"<p>a</p>\r\n<p>b</p>"}`,
			want: email.Input{From: sender, To: []email.Address{{Address: "ann@client.example"}},
				Subject: "Hi", Text: "a\nb\nc\n", HTML: "<p>a</p>\n<p>b</p>\n"},
		},
		{
			name: "all fields",
			input: `{"to":["a@client.example","b@client.example"],"cc":["c@client.example"],"bcc":["d@corp.example"],` +
				`"reply_to":"Support <Support@Corp.Example>","subject":"S","text":"t\n","html":"<b>h</b>\n"}`,
			want: email.Input{From: sender,
				To:      []email.Address{{Address: "a@client.example"}, {Address: "b@client.example"}},
				Cc:      []email.Address{{Address: "c@client.example"}},
				Bcc:     []email.Address{{Address: "d@corp.example"}},
				ReplyTo: &email.Address{Name: "Support", Address: "Support@corp.example"},
				Subject: "S", Text: "t\n", HTML: "<b>h</b>\n"},
		},
		{
			name:  "only bcc, null lists",
			input: `{"to":null,"cc":[],"bcc":["d@corp.example"],"subject":"S","text":"t"}`,
			want: email.Input{From: sender, Bcc: []email.Address{{Address: "d@corp.example"}},
				Subject: "S", Text: "t\n"},
		},
		{
			name:  "subject of 998 characters",
			input: `{"to":["ann@client.example"],"subject":"` + long + `","text":"x"}`,
			want: email.Input{From: sender, To: []email.Address{{Address: "ann@client.example"}},
				Subject: long, Text: "x\n"},
		},
	}
	a := newAction(t, nil, email.Limits{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := prepare(t, a, tt.input)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := p.Input.(email.Input)
			if !ok {
				t.Fatalf("Input is %T, want email.Input", p.Input)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("normalized\n got %+v\nwant %+v", got, tt.want)
			}
			if got, want := p.Scope, "email.send"; got != want {
				t.Errorf("Scope = %q, want %q", got, want)
			}
			if got, want := p.Attrs["action"], "email.send"; got != want {
				t.Errorf("Attrs[action] = %q, want %q", got, want)
			}
		})
	}
}

func TestNormalizeRejects(t *testing.T) {
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf(`"r%d@client.example"`, i)
	}
	tests := []struct {
		name   string
		input  string
		fields []string
	}{
		{"not an object", `["ann@client.example"]`, []string{"input"}},
		{"null", `null`, []string{"input"}},
		{"two objects", `{} {}`, []string{"input"}},
		{"empty object", `{}`, []string{"to", "subject", "text"}},
		{"no recipients", `{"to":[],"cc":[],"bcc":[],"subject":"S","text":"t"}`, []string{"to"}},
		{"unknown field", `{"to":["a@client.example"],"subject":"S","text":"t","priority":"high"}`, []string{"priority"}},
		{"from is not agent input", `{"from":"ceo@corp.example","to":["a@client.example"],"subject":"S","text":"t"}`, []string{"from"}},
		{"to is a string", `{"to":"a@client.example","subject":"S","text":"t"}`, []string{"to"}},
		{"subject is a number", `{"to":["a@client.example"],"subject":3,"text":"t"}`, []string{"subject"}},
		{"invalid address", `{"to":["not-an-address"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"empty address", `{"to":["a@client.example",""],"subject":"S","text":"t"}`, []string{"to[1]"}},
		{"two addresses in one string", `{"to":["a@client.example, b@client.example"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"duplicate across to and cc", `{"to":["ann@client.example"],"cc":["Ann <ANN@CLIENT.EXAMPLE>"],"subject":"S","text":"t"}`, []string{"cc[0]"}},
		{"duplicate in bcc via IDN", `{"to":["b@bücher.example"],"bcc":["b@xn--bcher-kva.example"],"subject":"S","text":"t"}`, []string{"bcc[0]"}},
		{"CRLF in subject", `{"to":["a@client.example"],"subject":"Hi\r\nBcc: evil@x.example","text":"t"}`, []string{"subject"}},
		{"LF in subject", `{"to":["a@client.example"],"subject":"Hi\nX-Evil: 1","text":"t"}`, []string{"subject"}},
		{"control character in subject", `{"to":["a@client.example"],"subject":"Hi\u0007","text":"t"}`, []string{"subject"}},
		{"CRLF in display name", `{"to":["Ann\r\nBcc: evil@x.example <a@client.example>"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"encoded CRLF in display name", `{"to":["=?utf-8?q?Ann=0D=0ABcc:_evil@x.example?= <a@client.example>"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"CRLF in reply_to", `{"to":["a@client.example"],"reply_to":"x@client.example\r\nBcc: e@x.example","subject":"S","text":"t"}`, []string{"reply_to"}},
		{"subject too long", `{"to":["a@client.example"],"subject":"` + strings.Repeat("é", 999) + `","text":"t"}`, []string{"subject"}},
		{"blank subject", `{"to":["a@client.example"],"subject":"   ","text":"t"}`, []string{"subject"}},
		{"blank text", `{"to":["a@client.example"],"subject":"S","text":" \n "}`, []string{"text"}},
		{"html without text", `{"to":["a@client.example"],"subject":"S","html":"<p>x</p>"}`, []string{"text"}},
		{"blank html", `{"to":["a@client.example"],"subject":"S","text":"t","html":"  "}`, []string{"html"}},
		{"NUL in text", `{"to":["a@client.example"],"subject":"S","text":"a\u0000b"}`, []string{"text"}},
		{"body too large", `{"to":["a@client.example"],"subject":"S","text":"` + strings.Repeat("a", 150<<10) + `","html":"` + strings.Repeat("b", 60<<10) + `"}`, []string{"html"}},
		{"non-ASCII local part", `{"to":["jörg@client.example"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"single-label domain", `{"to":["root@localhost"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"IP literal", `{"to":["root@[127.0.0.1]"],"subject":"S","text":"t"}`, []string{"to[0]"}},
		{"more than 100 recipients", `{"to":[` + strings.Join(many, ",") + `],"subject":"S","text":"t"}`, []string{"to"}},
		{"every problem at once", `{"to":["bad"],"cc":["x@client.example","X@Client.Example"],"subject":"a\nb","text":"","color":"red"}`,
			[]string{"color", "to[0]", "cc[1]", "subject", "text"}},
	}
	a := newAction(t, nil, email.Limits{MaxRecipients: 1, AllowedDomains: []string{"nowhere.example"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prepare(t, a, tt.input)
			if err == nil {
				t.Fatal("Prepare succeeded, want invalid_input")
			}
			if got, want := strings.Join(fieldsOf(t, err), ","), strings.Join(tt.fields, ","); got != want {
				t.Errorf("fields = %s, want %s (%v)", got, want, err)
			}
		})
	}
}

func TestPolicy(t *testing.T) {
	tests := []struct {
		name    string
		limits  email.Limits
		input   string
		rule    string // "" when allowed
		message string // a substring of the error message
	}{
		{"within max", email.Limits{MaxRecipients: 2}, `{"to":["a@x.example"],"cc":["b@x.example"],"subject":"S","text":"t"}`, "", ""},
		{"too many recipients", email.Limits{MaxRecipients: 2}, `{"to":["a@x.example"],"cc":["b@x.example"],"bcc":["c@x.example"],"subject":"S","text":"t"}`,
			"max_recipients", "3 recipients"},
		{"allowed exact domain", email.Limits{AllowedDomains: []string{"client.example"}}, `{"to":["a@CLIENT.example"],"subject":"S","text":"t"}`, "", ""},
		{"disallowed domain named", email.Limits{AllowedDomains: []string{"client.example"}}, `{"to":["a@client.example"],"bcc":["spy@evil.example"],"subject":"S","text":"t"}`,
			"allowed_domains", "spy@evil.example"},
		{"subdomain not allowed by exact entry", email.Limits{AllowedDomains: []string{"client.example"}}, `{"to":["a@eu.client.example"],"subject":"S","text":"t"}`,
			"allowed_domains", "a@eu.client.example"},
		{"look-alike suffix not allowed", email.Limits{AllowedDomains: []string{"client.example"}}, `{"to":["a@evilclient.example"],"subject":"S","text":"t"}`,
			"allowed_domains", "a@evilclient.example"},
		{"wildcard allows subdomain", email.Limits{AllowedDomains: []string{"*.client.example"}}, `{"to":["a@eu.client.example"],"subject":"S","text":"t"}`, "", ""},
		{"wildcard does not allow apex", email.Limits{AllowedDomains: []string{"*.client.example"}}, `{"to":["a@client.example"],"subject":"S","text":"t"}`,
			"allowed_domains", "a@client.example"},
		{"IDN allowed domain in Unicode", email.Limits{AllowedDomains: []string{"Bücher.example"}}, `{"to":["b@XN--BCHER-KVA.example"],"subject":"S","text":"t"}`, "", ""},
		{"homograph refused", email.Limits{AllowedDomains: []string{"paypal.example"}}, `{"to":["a@раураl.example"],"subject":"S","text":"t"}`,
			"allowed_domains", "xn--"},
		{"reply_to is not a recipient", email.Limits{AllowedDomains: []string{"client.example"}}, `{"to":["a@client.example"],"reply_to":"me@other.example","subject":"S","text":"t"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAction(t, nil, tt.limits)
			_, err := prepare(t, a, tt.input)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				return
			}
			var e *approval.Error
			if !errors.As(err, &e) || e.Code != approval.CodePolicyDenied {
				t.Fatalf("error %v is not policy_denied", err)
			}
			if got, want := e.Details["rule"], tt.rule; got != want {
				t.Errorf("rule = %v, want %q", got, want)
			}
			if !strings.Contains(e.Message, tt.message) {
				t.Errorf("message %q does not contain %q", e.Message, tt.message)
			}
		})
	}
}

func TestInvalidInputBeforePolicy(t *testing.T) {
	a := newAction(t, nil, email.Limits{MaxRecipients: 1, AllowedDomains: []string{"client.example"}})
	_, err := prepare(t, a, `{"to":["a@evil.example","b@evil.example"],"subject":"","text":"t"}`)
	if got, want := approval.ErrorCode(err), approval.CodeInvalidInput; got != want {
		t.Errorf("code = %q, want %q", got, want)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		from   mail.Address
		limits email.Limits
	}{
		{"bad allowed domain", from, email.Limits{AllowedDomains: []string{"client_example"}}},
		{"empty allowed domain", from, email.Limits{AllowedDomains: []string{""}}},
		{"negative max", from, email.Limits{MaxRecipients: -1}},
		{"bad from", mail.Address{Address: "nobody"}, email.Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := email.New(mailer.NewDevMailbox(1), tt.from, tt.limits); err == nil {
				t.Error("New succeeded, want an error")
			}
		})
	}
	if _, err := email.New(nil, from, email.Limits{}); err == nil {
		t.Error("New without sender succeeded")
	}
	if _, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "countersign@localhost"}, email.Limits{}); err != nil {
		t.Errorf("New with a localhost sender: %v", err)
	}
}

// The same request, however it is spelled, yields the same canonical
// input and so the same payload hash.
func TestCanonicalInputStable(t *testing.T) {
	variants := []string{
		`{"to":["Ann Lee <ann@client.example>"],"cc":["bob@bücher.example"],"subject":"Report","text":"Line 1\nLine 2\n","html":"<p>x</p>\n"}`,
		`{"html":"<p>x</p>","text":"Line 1\r\nLine 2","subject":"  Report ","cc":["bob@XN--BCHER-KVA.EXAMPLE"],"to":["  \"Ann Lee\" <ann@CLIENT.example>"]}`,
		"{\n  \"subject\": \"Report\",\n  \"to\": [\"Ann   Lee <ann@Client.Example>\"],\n  \"bcc\": [],\n  \"cc\": [\"bob@BÜCHER.example\"],\n  \"text\": \"Line 1\\rLine 2\\n\",\n  \"html\": \"<p>x</p>\\r\\n\"\n}",
	}
	a := newAction(t, nil, email.Limits{})
	var firstCanon, firstHash string
	for i, v := range variants {
		p, err := prepare(t, a, v)
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		canon, err := approval.Canonical(p.Input)
		if err != nil {
			t.Fatal(err)
		}
		hash, err := approval.PayloadHash(email.Name, canon, "agent")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstCanon, firstHash = string(canon), hash
			continue
		}
		if got, want := string(canon), firstCanon; got != want {
			t.Errorf("variant %d canonical\n got %s\nwant %s", i, got, want)
		}
		if got, want := hash, firstHash; got != want {
			t.Errorf("variant %d hash = %s, want %s", i, got, want)
		}
	}
	if got, want := firstCanon, `{"cc":[{"address":"bob@xn--bcher-kva.example"}],"from":{"address":"agent@corp.example","name":"Countersign"},"html":"<p>x</p>\n","subject":"Report","text":"Line 1\nLine 2\n","to":[{"address":"ann@client.example","name":"Ann Lee"}]}`; got != want {
		t.Errorf("canonical\n got %s\nwant %s", got, want)
	}

	// Anything that changes the email changes the hash.
	changed := []string{
		`{"to":["Ann Lee <ann@client.example>"],"cc":["bob@bücher.example"],"subject":"Report!","text":"Line 1\nLine 2\n","html":"<p>x</p>\n"}`,
		`{"to":["Ann Lee <ann@client.example>"],"bcc":["bob@bücher.example"],"subject":"Report","text":"Line 1\nLine 2\n","html":"<p>x</p>\n"}`,
		`{"to":["Ann Lea <ann@client.example>"],"cc":["bob@bücher.example"],"subject":"Report","text":"Line 1\nLine 2\n","html":"<p>x</p>\n"}`,
		`{"to":["Ann Lee <Ann@client.example>"],"cc":["bob@bücher.example"],"subject":"Report","text":"Line 1\nLine 2\n","html":"<p>x</p>\n"}`,
	}
	for i, v := range changed {
		p, err := prepare(t, a, v)
		if err != nil {
			t.Fatal(err)
		}
		canon, _ := approval.Canonical(p.Input)
		hash, _ := approval.PayloadHash(email.Name, canon, "agent")
		if hash == firstHash {
			t.Errorf("changed variant %d has the same hash", i)
		}
	}
}

func TestPreview(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	p, err := prepare(t, a, `{"to":["Ann Lee <ann@client.example>","b@corp.example"],"cc":["\"Doe, Jane\" <jane@bücher.example>"],`+
		`"bcc":["audit@corp.example"],"reply_to":"help@corp.example","subject":"Quarterly report","text":"Hi all","html":"<p>Hi all</p>"}`)
	if err != nil {
		t.Fatal(err)
	}
	pv := p.Preview
	if got, want := pv.Title, "Send an email to ann@client.example and 3 others"; got != want {
		t.Errorf("Title = %q, want %q", got, want)
	}
	if got, want := pv.Summary, `Email “Quarterly report” from agent@corp.example to 4 recipients (2 to, 1 cc, 1 bcc).`; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	want := []approval.Field{
		{Name: "to", Label: "To", Value: "Ann Lee <ann@client.example>, b@corp.example"},
		{Name: "cc", Label: "Cc", Value: `"Doe, Jane" <jane@xn--bcher-kva.example>`},
		{Name: "bcc", Label: "Bcc", Value: "audit@corp.example"},
		{Name: "reply_to", Label: "Reply-To", Value: "help@corp.example"},
		{Name: "subject", Label: "Subject", Value: "Quarterly report"},
		{Name: "text", Label: "Text", Value: "Hi all\n", Long: true},
		{Name: "html", Label: "HTML part", Value: "<p>Hi all</p>\n", Long: true, Format: approval.FormatHTML},
		{Name: "from", Label: "From", Value: "Countersign <agent@corp.example>"},
	}
	if !reflect.DeepEqual(pv.Fields, want) {
		t.Errorf("Fields\n got %+v\nwant %+v", pv.Fields, want)
	}
	wantWarnings := []string{
		"irreversible",
		"1 hidden (Bcc) recipient, not shown to the other recipients: audit@corp.example.",
		"Recipients outside corp.example: ann@client.example, jane@xn--bcher-kva.example.",
		"Internationalized domain shown in its ASCII form; check it is the one you expect: jane@xn--bcher-kva.example.",
	}
	if !reflect.DeepEqual(pv.Warnings, wantWarnings) {
		t.Errorf("Warnings\n got %q\nwant %q", pv.Warnings, wantWarnings)
	}

	// A plain internal email has only the irreversibility warning and no
	// optional fields.
	p, err = prepare(t, a, `{"to":["b@corp.example"],"subject":"S","text":"t"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Preview.Warnings, []string{"irreversible"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings = %q, want %q", got, want)
	}
	var names []string
	for _, f := range p.Preview.Fields {
		names = append(names, f.Name)
	}
	if got, want := strings.Join(names, ","), "to,subject,text,from"; got != want {
		t.Errorf("fields = %q, want %q", got, want)
	}
	if got, want := p.Preview.Title, "Send an email to b@corp.example"; got != want {
		t.Errorf("Title = %q, want %q", got, want)
	}
}

func TestRouteAttributes(t *testing.T) {
	box := mailer.NewDevMailbox(1)
	a, err := email.New(box, mail.Address{Address: "agent@corp.example"}, email.Limits{InternalDomains: []string{"Sub.Corp.Example"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Prepare(context.Background(), approval.PrepareRequest{Input: json.RawMessage(
		`{"to":["a@corp.example","b@sub.corp.example"],"cc":["c@Client.Example"],"subject":"s","text":"t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"action": "email.send", "recipients": "3", "domains": "client.example,corp.example,sub.corp.example", "external_recipients": "1"}
	for k, v := range want {
		if got := p.Attrs[k]; got != v {
			t.Errorf("attr %s = %q, want %q", k, got, v)
		}
	}
}

// domains covers where answers go too: an allowance for "emails to
// people at client.example" (domains ⊆ [client.example]), which no human
// reads before they go, must not approve one whose Reply-To sends the
// recipients' answers to another domain.
func TestRouteAttributeDomainsCoversReplyTo(t *testing.T) {
	a, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "agent@corp.example"}, email.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Prepare(context.Background(), approval.PrepareRequest{Input: json.RawMessage(
		`{"to":["ada@client.example"],"reply_to":"Billing <billing@Evil.Example>","subject":"s","text":"t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Attrs["domains"], "client.example,evil.example"; got != want {
		t.Errorf("attr domains = %q, want %q", got, want)
	}
	if got, want := p.Attrs["recipients"], "1"; got != want {
		t.Errorf("attr recipients = %q, want %q", got, want)
	}
}
