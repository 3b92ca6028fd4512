package webui

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
)

// The proposals offered in the tunnel form, in strongSwan syntax. Each is
// checked with config's own proposal check when the catalog is built, so the
// form never offers what a commit would refuse. Interoperable defaults come
// first; legacy ones are there for old peers.
var (
	ikeProposals = []string{
		config.DefaultIKEProposal,
		"aes256gcm16-prfsha384-ecp384",
		"aes128gcm16-prfsha256-curve25519",
		"chacha20poly1305-prfsha256-curve25519",
		"aes128-sha256-ecp256",
		"aes256-sha256-modp2048",
		"aes128-sha256-modp2048",
		"aes128-sha1-modp2048",
	}
	espProposals = []string{
		config.DefaultESPProposal,
		"aes128gcm16",
		"aes256gcm16-ecp384",
		"chacha20poly1305",
		"aes128-sha256",
		"aes256-sha256",
		"aes128-sha256-modp2048",
		"aes128-sha1",
	}
)

// proposalChoice is one catalog entry with what the board's engine does
// for it.
type proposalChoice struct {
	Proposal    string `json:"proposal"`
	Accelerated bool   `json:"accelerated"`
	Engine      string `json:"engine,omitempty"`
}

type proposalCatalog struct {
	IKE    []proposalChoice `json:"ike"`
	ESP    []proposalChoice `json:"esp"`
	Engine string           `json:"engine,omitempty"` // the usable engine, if any
}

// newProposalCatalog builds the catalog, marking what the detected crypto
// engines accelerate (report may be nil: nothing is marked).
func newProposalCatalog(report *hwcrypto.Report) proposalCatalog {
	var c proposalCatalog
	mark := func(p string) proposalChoice {
		ch := proposalChoice{Proposal: p}
		if report != nil {
			ch.Accelerated, ch.Engine = report.Accelerated(p)
		}
		return ch
	}
	for _, p := range ikeProposals {
		if config.CheckIKEProposal(p) == nil {
			c.IKE = append(c.IKE, mark(p))
		}
	}
	for _, p := range espProposals {
		if config.CheckESPProposal(p) == nil {
			c.ESP = append(c.ESP, mark(p))
		}
	}
	if report != nil {
		if u := report.Usable(); len(u) > 0 {
			c.Engine = u[0].Name
		}
	}
	return c
}

// generatePSK returns 32 random bytes as base64: 43 characters, 256 bits,
// typeable into a strongSwan ipsec.secrets or swanctl.conf.
func generatePSK() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("webui: no randomness: " + err.Error())
	}
	defer clear(b[:])
	return base64.RawStdEncoding.EncodeToString(b[:])
}
