// Package faults is countersign's fault suite: real redis-server processes
// (AOF, appendfsync always) on private ports, three `countersign serve`
// processes built from this tree, an SMTP sink and an HTTP target with
// ETags that count every notification and every write, and scenarios that
// break Redis, the network to it, the replicas and SMTP while a seeded
// driver runs operations through approval. Each scenario checks SPEC §3:
// at most one execution per operation, no acknowledged operation lost,
// terminal states never change, and every approved operation executes or
// is surfaced as stuck.
//
// The tests carry the build tag faults, so plain `go test ./...` skips
// them:
//
//	go test -tags faults -count=1 -short ./faults/   # short: CI
//	scripts/faults.sh                               # long, prints the table
//
// docs/reliability.md has the table of the last long run.
package faults
