package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/client"
)

// A reconciler (netd, iked) applies the whole configuration when it
// connects and then only the sections a commit changed.
func ExampleClient_Watch() {
	ctx := context.Background()
	c := client.New(configd.DefaultSocket)
	for ch := range c.Watch(ctx) {
		cfg, rev, err := c.Running(ctx)
		if err != nil {
			log.Printf("read revision %d: %v", ch.Revision, err)
			continue
		}
		for _, section := range ch.Sections {
			if section == "tunnels" {
				fmt.Printf("revision %d: %d tunnels\n", rev, len(cfg.Tunnels))
			}
		}
	}
}

// An editor reads the candidate, edits it with the etag it read, and
// commits with a safety net: unless confirmed within five minutes, the
// change undoes itself.
func ExampleClient_Commit() {
	ctx := context.Background()
	c := client.New(configd.DefaultSocket)
	cand, err := c.Candidate(ctx)
	if err != nil {
		log.Fatal(err)
	}
	etag, err := c.Set(ctx, cand.Etag, "tunnels.branch.remote_address", "192.0.2.1")
	if errors.Is(err, config.ErrCandidateChanged) {
		log.Fatal("someone else is editing: read the candidate again")
	}
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.Commit(ctx, configd.CommitRequest{Etag: etag, Who: "admin", Message: "move branch", ConfirmTimeout: "5m"})
	var fields config.ValidationErrors
	if errors.As(err, &fields) {
		for _, f := range fields {
			fmt.Printf("%s: %s\n", f.Path, f.Message)
		}
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("revision %d committed; confirm within 5 minutes\n", info.Revision)
	if err := c.Confirm(ctx); err != nil {
		log.Fatal(err)
	}
}
