package configd_test

import (
	"context"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// TestStatusSaysCandidateChanged: GET /v1/status's candidate_changed
// agrees with the candidate's Changed through edits, a revert by hand and
// a commit; GET /v1/running/system is the running system section, with
// the password hash as a mark on the restricted API.
func TestStatusSaysCandidateChanged(t *testing.T) {
	full := serve(t)
	web := serveRestricted(t, full)
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "first")
	check := func(what string, want bool) {
		t.Helper()
		st, err := web.c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cand, err := web.c.Candidate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.CandidateChanged != want || cand.Changed != want {
			t.Errorf("%s: status candidate_changed %v, candidate changed %v; want %v", what, st.CandidateChanged, cand.Changed, want)
		}
	}
	check("after a commit", false)
	if _, err := full.c.Set(ctx, "", "system.hostname", "hub"); err != nil {
		t.Fatal(err)
	}
	check("after an edit", true)
	sys, rev, err := web.c.RunningSystem(ctx)
	if err != nil || sys.Hostname == "hub" || len(sys.Admins) != 1 || rev == 0 {
		t.Fatalf("running system: %+v at %d, %v; want the committed one, one admin", sys, rev, err)
	}
	running, _, _ := full.c.Running(ctx)
	if h := sys.Admins[0].PasswordHash.Reveal(); h == running.System.Admins[0].PasswordHash.Reveal() {
		t.Errorf("the restricted API's system section hands out the password hash")
	}
	if webRunning, _, _ := web.c.Running(ctx); webRunning.System.Admins[0].PasswordHash != sys.Admins[0].PasswordHash {
		t.Errorf("the system section's mark differs from the running configuration's")
	}
	if _, err := full.c.Set(ctx, "", "system.hostname", running.System.Hostname); err != nil {
		t.Fatal(err)
	}
	check("after the edit is undone by hand", false)
	if _, err := full.c.Set(ctx, "", "system.hostname", "hub"); err != nil {
		t.Fatal(err)
	}
	if _, err := full.c.Commit(ctx, configdapi.CommitRequest{Who: "t", Message: "hub"}); err != nil {
		t.Fatal(err)
	}
	check("after the second commit", false)
	if sys, _, err := full.c.RunningSystem(ctx); err != nil || sys.Hostname != "hub" {
		t.Errorf("running system after the commit: %+v, %v", sys, err)
	}
}
