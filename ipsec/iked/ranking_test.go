package iked

import (
	"testing"

	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// On an ALIX the Geode engine does AES-128-CBC only, so that proposal moves
// to the front and the others keep their configured order.
func TestRankingGeode(t *testing.T) {
	rep, err := hwcrypto.Detect("../hwcrypto/testdata/alix")
	if err != nil {
		t.Fatal(err)
	}
	in := ike.MustParseProposals(ike.ProtoESP, "aes256gcm16,aes128-sha256,chacha20poly1305")
	got := RankingFrom(rep)(in)
	want := []string{"aes128-sha256", "aes256gcm16", "chacha20poly1305"}
	if len(got) != len(want) {
		t.Fatalf("got %d proposals, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("position %d: got %s, want %s (all: %v)", i, got[i], want[i], ike.ProposalsString(got))
		}
	}
	if RankingFrom(nil) != nil {
		t.Error("a nil report must leave the order alone (nil ranking)")
	}
}
