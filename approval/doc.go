// Package approval is the domain of countersign: an operation an agent
// prepares, the states it moves through, the policy that routes it to
// approvers, the one rule of who may decide it now (eligibility.go), the
// capabilities in approval links, the canonical hash of what runs, the
// coded errors every edge translates, and the Service that prepares,
// sends, decides and executes. It imports no Redis, Slack, SMTP, MCP or
// HTTP package: it declares the small ports it needs (store.go: the store
// ports, Notifier, Action, Clock), and cmd/countersign fills them.
package approval
