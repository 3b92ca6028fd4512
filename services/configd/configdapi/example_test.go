package configdapi_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// A reconciler (netd, iked) applies the whole configuration when it
// connects and then again after every commit that changed its sections.
func ExampleFollow() {
	ctx := context.Background()
	configdapi.Follow(ctx, configdapi.New(configdapi.Socket), configdapi.Following{
		Name:     "tunneld",
		Sections: []config.Section{config.SectionTunnels},
		Apply: func(ctx context.Context, cfg *config.Config, rev uint64, ch config.Change) error {
			fmt.Printf("revision %d (%s): %d tunnels\n", rev, ch.Reason, len(cfg.Tunnels))
			return nil
		},
	})
}

// An editor reads the candidate, edits it with the etag it read, and
// commits with a safety net: unless confirmed within five minutes, the
// change undoes itself.
func ExampleClient_Commit() {
	ctx := context.Background()
	c := configdapi.New(configdapi.Socket)
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
	info, err := c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "admin", Message: "move branch", ConfirmTimeout: "5m"})
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
